// Normalizers and pre-tokenizers of a tokenizer.json, after the `tokenizers` library's
// definitions (normalizers/{bert,utils,unicode,strip,replace}.rs, pre_tokenizers/*.rs).
#include "prep/tokenizer_steps.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "prep/unicode.h"

namespace ferry::prep::tok {

namespace u = ::ferry::prep::unicode;

Status Invalid(const std::string& where, const std::string& problem) {
  return Status(StatusCode::kInvalid, where + ": " + problem);
}
Status Unsupported(const std::string& where, const std::string& problem) {
  return Status(StatusCode::kUnsupported, where + ": " + problem);
}

Result<bool> GetBool(const Json& j, const std::string& key, const std::string& where, bool dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) return Invalid(where + "." + key, "expected true or false");
  return it->get<bool>();
}

Result<int64_t> GetInt(const Json& j, const std::string& key, const std::string& where,
                       int64_t dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_number_integer()) return Invalid(where + "." + key, "expected an integer");
  return it->get<int64_t>();
}

Result<std::string> GetString(const Json& j, const std::string& key, const std::string& where,
                              const std::string& dflt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  if (!it->is_string()) return Invalid(where + "." + key, "expected a string");
  return it->get<std::string>();
}

namespace {

Result<std::u32string> ToU32(const std::string& s, const std::string& where) {
  std::u32string out;
  if (!u::DecodeUtf8(s, &out)) return Invalid(where, "not valid UTF-8");
  return out;
}

Result<std::string> TypeOf(const Json& j, const std::string& where) {
  if (!j.is_object()) return Invalid(where, "expected an object");
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) return Invalid(where + ".type", "missing (a string)");
  return it->get<std::string>();
}

// A Replace/Split `pattern`: {"String": "..."} (a regex is unsupported).
Result<std::u32string> ParsePattern(const Json& j, const std::string& where) {
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object())
    return Invalid(where + ".pattern", "missing (an object with String or Regex)");
  if (it->contains("Regex"))
    return Unsupported(where + ".pattern", "Regex patterns are not supported (String only)");
  auto s = it->find("String");
  if (s == it->end() || !s->is_string())
    return Invalid(where + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
  return ToU32(s->get<std::string>(), where + ".pattern.String");
}

bool IsChineseChar(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsBertWhitespace(char32_t c) {
  return c == '\t' || c == '\n' || c == '\r' || u::IsWhiteSpace(c);
}
bool IsBertControl(char32_t c) {
  return c != '\t' && c != '\n' && c != '\r' && u::IsLibraryOther(c);
}
bool IsAsciiPunct(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}
bool IsBertPunct(char32_t c) {
  return IsAsciiPunct(c) || u::IsLibraryPunctuation(c);
}
using u::IsWordChar;

void Lowercase(std::u32string* s) {
  std::u32string out;
  out.reserve(s->size());
  for (char32_t c : *s) u::AppendLowercase(c, &out);
  *s = std::move(out);
}

// Drops Mn (BertNormalizer's strip_accents) or every mark, Mn Mc Me (StripAccents: the
// library's is_combining_mark).
void StripMarks(std::u32string* s, bool all_marks) {
  std::u32string out;
  out.reserve(s->size());
  for (char32_t c : *s)
    if (!(all_marks ? u::IsLibraryMark(c) : u::IsLibraryNonspacingMark(c))) out.push_back(c);
  *s = std::move(out);
}

// Spans [start, end) of the delimiters, in order: the pieces of `s` per the library's
// NormalizedString::split. Empty pieces are dropped.
using Spans = std::vector<std::pair<size_t, size_t>>;
void SplitBySpans(const std::u32string& s, const Spans& matches, Behavior behavior,
                  std::vector<std::u32string>* out) {
  struct Part {
    size_t a, b;
    bool is_match;
  };
  std::vector<Part> parts;
  size_t pos = 0;
  for (auto [a, b] : matches) {
    if (a > pos) parts.push_back({pos, a, false});
    parts.push_back({a, b, true});
    pos = b;
  }
  if (pos < s.size()) parts.push_back({pos, s.size(), false});
  std::vector<Part> res;
  switch (behavior) {
    case Behavior::kRemoved:
      res = parts;
      break;
    case Behavior::kIsolated:
      for (Part p : parts) res.push_back({p.a, p.b, false});
      break;
    case Behavior::kContiguous:
      for (Part p : parts) {
        if (p.is_match && !res.empty() && res.back().is_match)
          res.back().b = p.b;
        else
          res.push_back(p);
      }
      for (Part& p : res) p.is_match = false;
      break;
    case Behavior::kMergedWithPrevious: {
      bool prev = false;
      for (Part p : parts) {
        if (p.is_match && !prev && !res.empty())
          res.back().b = p.b;
        else
          res.push_back({p.a, p.b, false});
        prev = p.is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool prev = false;
      for (size_t i = parts.size(); i-- > 0;) {
        Part p = parts[i];
        if (p.is_match && !prev && !res.empty())
          res.back().a = p.a;
        else
          res.push_back({p.a, p.b, false});
        prev = p.is_match;
      }
      std::reverse(res.begin(), res.end());
      break;
    }
  }
  for (const Part& p : res)
    if (!p.is_match && p.b > p.a) out->push_back(s.substr(p.a, p.b - p.a));
}

// Each character for which pred holds is one delimiter.
template <typename Pred>
void SplitChars(const std::u32string& s, Pred pred, Behavior behavior,
                std::vector<std::u32string>* out) {
  Spans spans;
  for (size_t i = 0; i < s.size(); ++i)
    if (pred(s[i])) spans.push_back({i, i + 1});
  SplitBySpans(s, spans, behavior, out);
}

// Pieces of the GPT-2 pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (every character belongs to one piece).
void SplitGpt2(const std::u32string& s, std::vector<std::u32string>* out) {
  using Pred = bool (*)(char32_t);
  static constexpr Pred kClasses[] = {
      [](char32_t c) { return u::IsLibraryLetter(c); },
      [](char32_t c) { return u::IsLibraryNumber(c); },
      [](char32_t c) {
        return !u::IsWhiteSpace(c) && !u::IsLibraryLetter(c) && !u::IsLibraryNumber(c);
      },
  };
  size_t n = s.size(), i = 0;
  while (i < n) {
    size_t j = i;
    if (s[i] == '\'' && i + 1 < n) {
      char32_t a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd')
        j = i + 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        j = i + 3;
    }
    for (Pred pred : kClasses) {
      if (j != i) break;
      size_t k = s[i] == ' ' && i + 1 < n && pred(s[i + 1]) ? i + 1 : i;
      if (!pred(s[k])) continue;
      j = k;
      while (j < n && pred(s[j])) ++j;
    }
    if (j == i) {  // s[i] is white space: \s+(?!\S) else \s+
      size_t e = i;
      while (e < n && u::IsWhiteSpace(s[e])) ++e;
      j = (e == n || e - i == 1) ? e : e - 1;
    }
    out->push_back(s.substr(i, j - i));
    i = j;
  }
}

Result<Behavior> ParseBehavior(const Json& j, const std::string& where, Behavior dflt) {
  FERRY_ASSIGN_OR_RETURN(std::string b, GetString(j, "behavior", where, ""));
  if (b.empty()) return dflt;
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return Invalid(where + ".behavior", "unknown behavior '" + b +
                                          "' (expected Removed, Isolated, MergedWithPrevious, "
                                          "MergedWithNext or Contiguous)");
}

}  // namespace

char32_t ByteToUnicode(uint8_t b) {
  if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
  // The other 68 bytes, in order, become 256, 257, ...
  int n = 0;
  for (int k = 0; k < b; ++k)
    if (!((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE))) ++n;
  return static_cast<char32_t>(256 + n);
}

// ---- normalizers ----

void Normalizer::Apply(std::u32string* s) const {
  switch (kind) {
    case Kind::kBert: {
      if (clean_text) {
        std::u32string out;
        out.reserve(s->size());
        for (char32_t c : *s) {
          if (c == 0 || c == 0xFFFD || IsBertControl(c)) continue;
          out.push_back(IsBertWhitespace(c) ? U' ' : c);
        }
        *s = std::move(out);
      }
      if (handle_chinese_chars) {
        std::u32string out;
        out.reserve(s->size());
        for (char32_t c : *s) {
          if (IsChineseChar(c)) {
            out.push_back(' ');
            out.push_back(c);
            out.push_back(' ');
          } else {
            out.push_back(c);
          }
        }
        *s = std::move(out);
      }
      if (strip_accents) {
        *s = u::Normalize(*s, u::Form::kNfd);
        StripMarks(s, false);
      }
      if (lowercase) Lowercase(s);
      return;
    }
    case Kind::kLowercase:
      Lowercase(s);
      return;
    case Kind::kNfd:
      *s = u::Normalize(*s, u::Form::kNfd);
      return;
    case Kind::kNfc:
      *s = u::Normalize(*s, u::Form::kNfc);
      return;
    case Kind::kNfkd:
      *s = u::Normalize(*s, u::Form::kNfkd);
      return;
    case Kind::kNfkc:
      *s = u::Normalize(*s, u::Form::kNfkc);
      return;
    case Kind::kStripAccents:
      StripMarks(s, true);
      return;
    case Kind::kStrip: {
      size_t a = 0, b = s->size();
      if (strip_left)
        while (a < b && u::IsWhiteSpace((*s)[a])) ++a;
      if (strip_right)
        while (b > a && u::IsWhiteSpace((*s)[b - 1])) --b;
      *s = s->substr(a, b - a);
      return;
    }
    case Kind::kReplace: {
      if (pattern.empty()) return;
      std::u32string out;
      size_t pos = 0;
      while (true) {
        size_t f = s->find(pattern, pos);
        if (f == std::u32string::npos) break;
        out.append(*s, pos, f - pos);
        out += content;
        pos = f + pattern.size();
      }
      out.append(*s, pos, std::u32string::npos);
      *s = std::move(out);
      return;
    }
    case Kind::kPrepend:
      if (!s->empty()) *s = content + *s;
      return;
    case Kind::kSequence:
      for (const Normalizer& n : children) n.Apply(s);
      return;
  }
}

Result<Normalizer> ParseNormalizer(const Json& j, const std::string& where) {
  FERRY_ASSIGN_OR_RETURN(std::string type, TypeOf(j, where));
  Normalizer n;
  using K = Normalizer::Kind;
  if (type == "BertNormalizer") {
    n.kind = K::kBert;
    FERRY_ASSIGN_OR_RETURN(n.clean_text, GetBool(j, "clean_text", where, true));
    FERRY_ASSIGN_OR_RETURN(n.handle_chinese_chars, GetBool(j, "handle_chinese_chars", where, true));
    FERRY_ASSIGN_OR_RETURN(n.lowercase, GetBool(j, "lowercase", where, true));
    // strip_accents: null follows lowercase.
    FERRY_ASSIGN_OR_RETURN(n.strip_accents, GetBool(j, "strip_accents", where, n.lowercase));
  } else if (type == "Lowercase") {
    n.kind = K::kLowercase;
  } else if (type == "NFD") {
    n.kind = K::kNfd;
  } else if (type == "NFC") {
    n.kind = K::kNfc;
  } else if (type == "NFKD") {
    n.kind = K::kNfkd;
  } else if (type == "NFKC") {
    n.kind = K::kNfkc;
  } else if (type == "StripAccents") {
    n.kind = K::kStripAccents;
  } else if (type == "Strip") {
    n.kind = K::kStrip;
    FERRY_ASSIGN_OR_RETURN(n.strip_left, GetBool(j, "strip_left", where, true));
    FERRY_ASSIGN_OR_RETURN(n.strip_right, GetBool(j, "strip_right", where, true));
  } else if (type == "Replace") {
    n.kind = K::kReplace;
    FERRY_ASSIGN_OR_RETURN(n.pattern, ParsePattern(j, where));
    FERRY_ASSIGN_OR_RETURN(std::string c, GetString(j, "content", where, ""));
    FERRY_ASSIGN_OR_RETURN(n.content, ToU32(c, where + ".content"));
  } else if (type == "Prepend") {
    n.kind = K::kPrepend;
    FERRY_ASSIGN_OR_RETURN(std::string c, GetString(j, "prepend", where, ""));
    FERRY_ASSIGN_OR_RETURN(n.content, ToU32(c, where + ".prepend"));
  } else if (type == "Sequence") {
    n.kind = K::kSequence;
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return Invalid(where + ".normalizers", "expected a list");
    for (size_t i = 0; i < it->size(); ++i) {
      FERRY_ASSIGN_OR_RETURN(Normalizer c, ParseNormalizer((*it)[i], where + ".normalizers[" +
                                                                         std::to_string(i) + "]"));
      n.children.push_back(std::move(c));
    }
  } else if (type == "Precompiled" || type == "Nmt" || type == "ByteLevel") {
    return Unsupported(where + ".type", "normalizer '" + type + "' is not supported");
  } else {
    return Invalid(where + ".type",
                   "unknown normalizer type '" + type +
                       "' (expected BertNormalizer, Lowercase, NFD, NFC, NFKD, NFKC, "
                       "StripAccents, Strip, Replace, Prepend or Sequence)");
  }
  return n;
}

// ---- pre-tokenizers ----

void PreTokenizer::Apply(std::vector<std::u32string>* pieces, bool first) const {
  if (kind == Kind::kSequence) {
    for (const PreTokenizer& p : children) p.Apply(pieces, first);
    return;
  }
  std::vector<std::u32string> out;
  for (size_t pi = 0; pi < pieces->size(); ++pi) {
    std::u32string& s = (*pieces)[pi];
    switch (kind) {
      case Kind::kBert: {
        std::vector<std::u32string> words;
        SplitChars(
            s, [](char32_t c) { return u::IsWhiteSpace(c); }, Behavior::kRemoved, &words);
        for (const auto& w : words) SplitChars(w, IsBertPunct, Behavior::kIsolated, &out);
        break;
      }
      case Kind::kWhitespace: {  // \w+|[^\w\s]+ kept, the rest removed
        size_t i = 0;
        while (i < s.size()) {
          size_t j = i;
          if (IsWordChar(s[i])) {
            while (j < s.size() && IsWordChar(s[j])) ++j;
          } else if (!u::IsWhiteSpace(s[i])) {
            while (j < s.size() && !IsWordChar(s[j]) && !u::IsWhiteSpace(s[j])) ++j;
          } else {
            ++i;
            continue;
          }
          out.push_back(s.substr(i, j - i));
          i = j;
        }
        break;
      }
      case Kind::kWhitespaceSplit:
        SplitChars(
            s, [](char32_t c) { return u::IsWhiteSpace(c); }, Behavior::kRemoved, &out);
        break;
      case Kind::kCharDelimiter:
        SplitChars(
            s, [this](char32_t c) { return c == pattern[0]; }, Behavior::kRemoved, &out);
        break;
      case Kind::kPunctuation:
        SplitChars(s, IsBertPunct, behavior, &out);
        break;
      case Kind::kDigits:
        SplitChars(
            s, [](char32_t c) { return u::IsLibraryNumeric(c); },
            individual_digits ? Behavior::kIsolated : Behavior::kContiguous, &out);
        break;
      case Kind::kSplit: {
        Spans spans;
        if (!pattern.empty()) {
          for (size_t f = s.find(pattern); f != std::u32string::npos;
               f = s.find(pattern, f + pattern.size()))
            spans.push_back({f, f + pattern.size()});
        }
        if (invert) {  // the matches are kept, what lies between them is the delimiter
          Spans inv;
          size_t pos = 0;
          for (auto [a, b] : spans) {
            if (a > pos) inv.push_back({pos, a});
            pos = b;
          }
          if (pos < s.size()) inv.push_back({pos, s.size()});
          spans = std::move(inv);
        }
        SplitBySpans(s, spans, behavior, &out);
        break;
      }
      case Kind::kMetaspace: {
        for (char32_t& c : s)
          if (c == ' ') c = replacement;
        bool prepend_here =
            prepend == Prepend::kAlways || (prepend == Prepend::kFirst && first && pi == 0);
        if (prepend_here && !(s.size() > 0 && s[0] == replacement))
          s.insert(s.begin(), replacement);
        if (split)
          SplitChars(
              s, [this](char32_t c) { return c == replacement; }, Behavior::kMergedWithNext, &out);
        else if (!s.empty())
          out.push_back(s);
        break;
      }
      case Kind::kByteLevel: {
        if (add_prefix_space && !(s.size() > 0 && s[0] == ' ')) s.insert(s.begin(), U' ');
        std::vector<std::u32string> words;
        if (use_regex)
          SplitGpt2(s, &words);
        else if (!s.empty())
          words.push_back(s);
        for (const auto& w : words) {
          std::string bytes = u::EncodeUtf8(w);
          std::u32string mapped;
          mapped.reserve(bytes.size());
          for (char b : bytes) mapped.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
          if (!mapped.empty()) out.push_back(std::move(mapped));
        }
        break;
      }
      case Kind::kSequence:
        break;
    }
  }
  *pieces = std::move(out);
}

Result<PreTokenizer> ParsePreTokenizer(const Json& j, const std::string& where) {
  FERRY_ASSIGN_OR_RETURN(std::string type, TypeOf(j, where));
  PreTokenizer p;
  using K = PreTokenizer::Kind;
  if (type == "BertPreTokenizer") {
    p.kind = K::kBert;
  } else if (type == "Whitespace") {
    p.kind = K::kWhitespace;
  } else if (type == "WhitespaceSplit") {
    p.kind = K::kWhitespaceSplit;
  } else if (type == "ByteLevel") {
    p.kind = K::kByteLevel;
    FERRY_ASSIGN_OR_RETURN(p.add_prefix_space, GetBool(j, "add_prefix_space", where, true));
    FERRY_ASSIGN_OR_RETURN(p.use_regex, GetBool(j, "use_regex", where, true));
  } else if (type == "Punctuation") {
    p.kind = K::kPunctuation;
    FERRY_ASSIGN_OR_RETURN(p.behavior, ParseBehavior(j, where, Behavior::kIsolated));
  } else if (type == "Digits") {
    p.kind = K::kDigits;
    FERRY_ASSIGN_OR_RETURN(p.individual_digits, GetBool(j, "individual_digits", where, false));
  } else if (type == "CharDelimiterSplit") {
    p.kind = K::kCharDelimiter;
    FERRY_ASSIGN_OR_RETURN(std::string d, GetString(j, "delimiter", where, ""));
    FERRY_ASSIGN_OR_RETURN(p.pattern, ToU32(d, where + ".delimiter"));
    if (p.pattern.size() != 1) return Invalid(where + ".delimiter", "expected one character");
  } else if (type == "Split") {
    p.kind = K::kSplit;
    FERRY_ASSIGN_OR_RETURN(p.pattern, ParsePattern(j, where));
    FERRY_ASSIGN_OR_RETURN(p.behavior, ParseBehavior(j, where, Behavior::kIsolated));
    FERRY_ASSIGN_OR_RETURN(p.invert, GetBool(j, "invert", where, false));
  } else if (type == "Metaspace") {
    p.kind = K::kMetaspace;
    FERRY_ASSIGN_OR_RETURN(std::string r, GetString(j, "replacement", where, "\u2581"));
    FERRY_ASSIGN_OR_RETURN(std::u32string r32, ToU32(r, where + ".replacement"));
    if (r32.size() != 1) return Invalid(where + ".replacement", "expected one character");
    p.replacement = r32[0];
    FERRY_ASSIGN_OR_RETURN(p.split, GetBool(j, "split", where, true));
    FERRY_ASSIGN_OR_RETURN(std::string scheme, GetString(j, "prepend_scheme", where, ""));
    if (scheme.empty()) {  // older files: add_prefix_space
      FERRY_ASSIGN_OR_RETURN(bool aps, GetBool(j, "add_prefix_space", where, true));
      p.prepend = aps ? PreTokenizer::Prepend::kAlways : PreTokenizer::Prepend::kNever;
    } else if (scheme == "always") {
      p.prepend = PreTokenizer::Prepend::kAlways;
    } else if (scheme == "first") {
      p.prepend = PreTokenizer::Prepend::kFirst;
    } else if (scheme == "never") {
      p.prepend = PreTokenizer::Prepend::kNever;
    } else {
      return Invalid(where + ".prepend_scheme",
                     "unknown scheme '" + scheme + "' (expected always, first or never)");
    }
  } else if (type == "Sequence") {
    p.kind = K::kSequence;
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array())
      return Invalid(where + ".pretokenizers", "expected a list");
    for (size_t i = 0; i < it->size(); ++i) {
      FERRY_ASSIGN_OR_RETURN(
          PreTokenizer c,
          ParsePreTokenizer((*it)[i], where + ".pretokenizers[" + std::to_string(i) + "]"));
      p.children.push_back(std::move(c));
    }
  } else if (type == "UnicodeScripts" || type == "FixedLength") {
    return Unsupported(where + ".type", "pre-tokenizer '" + type + "' is not supported");
  } else {
    return Invalid(where + ".type",
                   "unknown pre-tokenizer type '" + type +
                       "' (expected BertPreTokenizer, Whitespace, WhitespaceSplit, ByteLevel, "
                       "Punctuation, Digits, Metaspace, CharDelimiterSplit, Split or Sequence)");
  }
  return p;
}

}  // namespace ferry::prep::tok
