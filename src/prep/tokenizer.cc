// Tokenizer::Encode follows the `tokenizers` library's TokenizerImpl::encode for one sequence:
// added tokens split out of the raw text (AddedVocabulary::extract_and_normalize), each other
// piece normalized, added tokens matched again on the normalized pieces, pre-tokenized, run
// through the model; then truncation, the post-processor's special tokens, padding.
#include "prep/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prep/tokenizer_steps.h"
#include "prep/unicode.h"

namespace ferry::prep {

namespace u = ::ferry::prep::unicode;
using tok::GetBool;
using tok::GetInt;
using tok::GetString;
using tok::Invalid;
using tok::Json;

namespace {

struct AddedToken {
  std::u32string content;  // normalized tokens: the normalized content
  int64_t id = 0;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A post-processor reduced to what it does to one sequence: ids before and after it, with
// their type ids, and the type id the sequence's own tokens get.
struct SingleTemplate {
  std::vector<int64_t> prefix, prefix_types, suffix, suffix_types;
  int64_t sequence_type = 0;
  bool sets_type = false;
};

// One piece of the input: text still to tokenize, or an added token's id.
struct Piece {
  std::u32string text;
  int64_t id = -1;
  bool at_start = false;  // starts at offset 0 of the input
};

Result<std::pair<std::string, int64_t>> ParseTokenPair(const Json& j, const std::string& where) {
  auto it = j.find(where.substr(where.rfind('.') + 1));
  if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string() ||
      !(*it)[1].is_number_integer())
    return Invalid(where, "expected [\"TOKEN\", ID]");
  return std::pair((*it)[0].get<std::string>(), (*it)[1].get<int64_t>());
}

}  // namespace

struct Tokenizer::Impl {
  std::optional<tok::Normalizer> normalizer;
  std::optional<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::Model> model;
  SingleTemplate post;
  std::vector<AddedToken> raw_tokens, normalized_tokens;  // matched before / after normalizing
  // Per first character, the indices of the tokens that start with it.
  using FirstCharIndex = std::unordered_map<char32_t, std::vector<size_t>>;
  FirstCharIndex raw_index, normalized_index;

  Status ParsePostProcessor(const Json& j, const std::string& where);
  // Splits `text` on `tokens` (leftmost-longest, then single_word / lstrip / rstrip).
  void SplitAdded(const std::vector<AddedToken>& tokens, const FirstCharIndex& index, Piece piece,
                  std::vector<Piece>* out) const;
};

Status Tokenizer::Impl::ParsePostProcessor(const Json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return Invalid(where + ".type", "missing (a string)");
  std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return Status::Ok();  // offsets only
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    FERRY_ASSIGN_OR_RETURN(auto cls, ParseTokenPair(j, where + ".cls"));
    FERRY_ASSIGN_OR_RETURN(auto sep, ParseTokenPair(j, where + ".sep"));
    post.prefix.insert(post.prefix.begin(), cls.second);
    post.prefix_types.insert(post.prefix_types.begin(), 0);
    post.suffix.push_back(sep.second);
    post.suffix_types.push_back(0);
    post.sets_type = true;
    post.sequence_type = 0;
    return Status::Ok();
  }
  if (type == "TemplateProcessing") {
    auto single = j.find("single");
    if (single == j.end() || !single->is_array())
      return Invalid(where + ".single", "expected a list of SpecialToken / Sequence pieces");
    auto specials = j.find("special_tokens");
    if (specials != j.end() && !specials->is_object())
      return Invalid(where + ".special_tokens", "expected an object");
    SingleTemplate t;
    bool seen_sequence = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const Json& p = (*single)[i];
      std::string key = where + ".single[" + std::to_string(i) + "]";
      if (p.is_object() && p.contains("Sequence")) {
        const Json& s = p["Sequence"];
        FERRY_ASSIGN_OR_RETURN(std::string id, GetString(s, "id", key + ".Sequence", "A"));
        if (id != "A") return Invalid(key + ".Sequence.id", "a single template refers to A only");
        FERRY_ASSIGN_OR_RETURN(t.sequence_type, GetInt(s, "type_id", key + ".Sequence", 0));
        seen_sequence = true;
      } else if (p.is_object() && p.contains("SpecialToken")) {
        const Json& s = p["SpecialToken"];
        FERRY_ASSIGN_OR_RETURN(std::string id, GetString(s, "id", key + ".SpecialToken", ""));
        FERRY_ASSIGN_OR_RETURN(int64_t type_id, GetInt(s, "type_id", key + ".SpecialToken", 0));
        if (specials == j.end() || !specials->contains(id))
          return Invalid(key + ".SpecialToken.id",
                         "'" + id + "' is not in " + where + ".special_tokens");
        const Json& st = (*specials)[id];
        auto ids = st.find("ids");
        if (ids == st.end() || !ids->is_array())
          return Invalid(where + ".special_tokens." + id + ".ids", "expected a list of ids");
        for (const Json& x : *ids) {
          if (!x.is_number_integer())
            return Invalid(where + ".special_tokens." + id + ".ids", "expected integers");
          (seen_sequence ? t.suffix : t.prefix).push_back(x.get<int64_t>());
          (seen_sequence ? t.suffix_types : t.prefix_types).push_back(type_id);
        }
      } else {
        return Invalid(key, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      }
    }
    if (!seen_sequence) return Invalid(where + ".single", "no Sequence piece");
    t.sets_type = true;
    // Around what earlier processors produced.
    t.prefix.insert(t.prefix.end(), post.prefix.begin(), post.prefix.end());
    t.prefix_types.insert(t.prefix_types.end(), post.prefix.size(), t.sequence_type);
    t.suffix.insert(t.suffix.begin(), post.suffix.begin(), post.suffix.end());
    t.suffix_types.insert(t.suffix_types.begin(), post.suffix.size(), t.sequence_type);
    post = std::move(t);
    return Status::Ok();
  }
  if (type == "Sequence") {
    auto list = j.find("processors");
    if (list == j.end() || !list->is_array())
      return Invalid(where + ".processors", "expected a list");
    for (size_t i = 0; i < list->size(); ++i)
      FERRY_RETURN_IF_ERROR(
          ParsePostProcessor((*list)[i], where + ".processors[" + std::to_string(i) + "]"));
    return Status::Ok();
  }
  return Invalid(where + ".type", "unknown post-processor type '" + type +
                                      "' (expected BertProcessing, RobertaProcessing, "
                                      "TemplateProcessing, ByteLevel or Sequence)");
}

void Tokenizer::Impl::SplitAdded(const std::vector<AddedToken>& tokens, const FirstCharIndex& index,
                                 Piece piece, std::vector<Piece>* out) const {
  const std::u32string& s = piece.text;
  if (tokens.empty() || s.empty()) {
    if (!s.empty()) out->push_back(std::move(piece));
    return;
  }
  size_t pos = 0, start_offset = 0;
  auto emit_text = [&](size_t a, size_t b) {
    if (b > a) out->push_back({s.substr(a, b - a), -1, piece.at_start && a == 0});
  };
  while (pos < s.size()) {
    // Leftmost-longest: the first position where any token starts, its longest token.
    const AddedToken* best = nullptr;
    size_t at = pos;
    for (; at < s.size(); ++at) {
      auto candidates = index.find(s[at]);
      if (candidates == index.end()) continue;
      for (size_t k : candidates->second) {
        const AddedToken& t = tokens[k];
        if (s.compare(at, t.content.size(), t.content) != 0) continue;
        if (best == nullptr || t.content.size() > best->content.size()) best = &t;
      }
      if (best != nullptr) break;
    }
    if (best == nullptr) break;
    size_t start = at, stop = at + best->content.size();
    pos = stop;
    if (best->single_word) {
      bool start_ok = start == 0 || !u::IsWordChar(s[start - 1]);
      bool stop_ok = stop == s.size() || !u::IsWordChar(s[stop]);
      if (!start_ok || !stop_ok) continue;
    }
    if (best->lstrip) {
      size_t ns = start;
      while (ns > 0 && u::IsWhiteSpace(s[ns - 1])) --ns;
      start = std::max(ns, start_offset);
    }
    if (best->rstrip)
      while (stop < s.size() && u::IsWhiteSpace(s[stop])) ++stop;
    if (start_offset < start) emit_text(start_offset, start);
    out->push_back({std::u32string(), best->id, false});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  emit_text(start_offset, s.size());
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view text,
                                                       const std::string& what) {
  Json j;
  try {
    j = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    std::string m = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> from "line".
    size_t at = m.find("at line");
    return Status(StatusCode::kInvalid, what + ": not valid JSON (" +
                                            (at == std::string::npos ? m : m.substr(at + 3)) + ")");
  }
  if (!j.is_object()) return Invalid(what, "expected a JSON object (a tokenizer.json)");
  auto impl = std::make_unique<Impl>();
  auto section = [&](const char* key) -> const Json* {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  };
  const std::string w = what + ": ";
  const Json* model = section("model");
  if (model == nullptr) return Invalid(w + "model", "missing");
  FERRY_ASSIGN_OR_RETURN(impl->model, tok::ParseModel(*model, w + "model"));
  if (const Json* n = section("normalizer")) {
    FERRY_ASSIGN_OR_RETURN(impl->normalizer, tok::ParseNormalizer(*n, w + "normalizer"));
  }
  if (const Json* p = section("pre_tokenizer")) {
    FERRY_ASSIGN_OR_RETURN(impl->pre_tokenizer, tok::ParsePreTokenizer(*p, w + "pre_tokenizer"));
  }
  if (const Json* p = section("post_processor"))
    FERRY_RETURN_IF_ERROR(impl->ParsePostProcessor(*p, w + "post_processor"));

  if (const Json* added = section("added_tokens")) {
    if (!added->is_array()) return Invalid(w + "added_tokens", "expected a list");
    for (size_t i = 0; i < added->size(); ++i) {
      const Json& a = (*added)[i];
      std::string key = w + "added_tokens[" + std::to_string(i) + "]";
      if (!a.is_object()) return Invalid(key, "expected an object");
      AddedToken t;
      FERRY_ASSIGN_OR_RETURN(std::string content, GetString(a, "content", key, ""));
      if (content.empty()) return Invalid(key + ".content", "missing or empty");
      if (!u::DecodeUtf8(content, &t.content)) return Invalid(key + ".content", "not valid UTF-8");
      FERRY_ASSIGN_OR_RETURN(t.id, GetInt(a, "id", key, -1));
      if (t.id < 0) return Invalid(key + ".id", "missing (a non-negative integer)");
      FERRY_ASSIGN_OR_RETURN(t.single_word, GetBool(a, "single_word", key, false));
      FERRY_ASSIGN_OR_RETURN(t.lstrip, GetBool(a, "lstrip", key, false));
      FERRY_ASSIGN_OR_RETURN(t.rstrip, GetBool(a, "rstrip", key, false));
      FERRY_ASSIGN_OR_RETURN(t.special, GetBool(a, "special", key, false));
      FERRY_ASSIGN_OR_RETURN(t.normalized, GetBool(a, "normalized", key, !t.special));
      // The library gives a token the model's id when the model has it.
      int64_t model_id = impl->model->TokenToId(content);
      if (model_id >= 0) t.id = model_id;
      if (t.normalized) {
        if (impl->normalizer) impl->normalizer->Apply(&t.content);
        impl->normalized_tokens.push_back(std::move(t));
      } else {
        impl->raw_tokens.push_back(std::move(t));
      }
    }
  }

  for (size_t k = 0; k < impl->raw_tokens.size(); ++k)
    impl->raw_index[impl->raw_tokens[k].content[0]].push_back(k);
  for (size_t k = 0; k < impl->normalized_tokens.size(); ++k)  // normalizing may empty one
    if (!impl->normalized_tokens[k].content.empty())
      impl->normalized_index[impl->normalized_tokens[k].content[0]].push_back(k);
  std::unique_ptr<Tokenizer> tk(new Tokenizer(std::move(impl)));
  if (const Json* t = section("truncation")) {
    std::string key = w + "truncation";
    if (!t->is_object()) return Invalid(key, "expected an object or null");
    tk->truncation_.enabled = true;
    FERRY_ASSIGN_OR_RETURN(tk->truncation_.max_length, GetInt(*t, "max_length", key, 512));
    if (tk->truncation_.max_length < 0) return Invalid(key + ".max_length", "negative");
    FERRY_ASSIGN_OR_RETURN(std::string dir, GetString(*t, "direction", key, "Right"));
    if (dir != "Right" && dir != "Left")
      return Invalid(key + ".direction", "expected Right or Left, got '" + dir + "'");
    tk->truncation_.left = dir == "Left";
    FERRY_ASSIGN_OR_RETURN(int64_t stride, GetInt(*t, "stride", key, 0));
    (void)stride;  // overflowing windows are not returned
  }
  if (const Json* p = section("padding")) {
    std::string key = w + "padding";
    if (!p->is_object()) return Invalid(key, "expected an object or null");
    Padding& pad = tk->padding_;
    pad.enabled = true;
    auto strategy = p->find("strategy");
    if (strategy != p->end() && strategy->is_object() && strategy->contains("Fixed")) {
      if (!(*strategy)["Fixed"].is_number_integer() || (*strategy)["Fixed"].get<int64_t>() < 0)
        return Invalid(key + ".strategy.Fixed", "expected a non-negative integer");
      pad.length = (*strategy)["Fixed"].get<int64_t>();
    } else if (strategy != p->end() && !(strategy->is_string() && *strategy == "BatchLongest")) {
      return Invalid(key + ".strategy", "expected \"BatchLongest\" or {\"Fixed\": N}");
    }
    FERRY_ASSIGN_OR_RETURN(std::string dir, GetString(*p, "direction", key, "Right"));
    if (dir != "Right" && dir != "Left")
      return Invalid(key + ".direction", "expected Right or Left, got '" + dir + "'");
    pad.left = dir == "Left";
    FERRY_ASSIGN_OR_RETURN(pad.multiple, GetInt(*p, "pad_to_multiple_of", key, 0));
    FERRY_ASSIGN_OR_RETURN(pad.pad_id, GetInt(*p, "pad_id", key, 0));
    FERRY_ASSIGN_OR_RETURN(pad.pad_type_id, GetInt(*p, "pad_type_id", key, 0));
    FERRY_ASSIGN_OR_RETURN(pad.pad_token, GetString(*p, "pad_token", key, "[PAD]"));
  }
  return tk;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kInvalid, path + ": cannot read the tokenizer file");
  f.seekg(0, std::ios::end);
  auto size = static_cast<int64_t>(f.tellg());
  if (size > kMaxTokenizerJsonBytes)
    return Status(StatusCode::kInvalid,
                  path + ": " + std::to_string(size) + " bytes, more than the " +
                      std::to_string(kMaxTokenizerJsonBytes) + " a tokenizer.json may have");
  f.seekg(0);
  std::string text(static_cast<size_t>(std::max<int64_t>(size, 0)), '\0');
  f.read(text.data(), size);
  if (!f) return Status(StatusCode::kInvalid, path + ": cannot read the tokenizer file");
  return FromJson(text, path);
}

int64_t Tokenizer::NumSpecialTokens() const {
  return static_cast<int64_t>(impl_->post.prefix.size() + impl_->post.suffix.size());
}

int64_t Tokenizer::TokenToId(const std::string& token) const {
  std::u32string t;
  if (!u::DecodeUtf8(token, &t)) return -1;
  for (const auto* list : {&impl_->raw_tokens, &impl_->normalized_tokens})
    for (const AddedToken& a : *list)
      if (a.content == t) return a.id;
  return impl_->model->TokenToId(token);
}

Result<Encoding> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  return Encode(text, add_special_tokens, truncation_, padding_);
}

Result<Encoding> Tokenizer::Encode(std::string_view text, bool add_special_tokens,
                                   const Truncation& truncation_, const Padding& padding_) const {
  if (static_cast<int64_t>(text.size()) > kMaxTextBytes)
    return InvalidError("text of {} bytes, more than the {} one example may have", text.size(),
                        kMaxTextBytes);
  Piece whole;
  size_t bad = 0;
  if (!u::DecodeUtf8(text, &whole.text, &bad))
    return InvalidError("text is not valid UTF-8 (byte {})", bad);
  whole.at_start = true;
  const Impl& m = *impl_;
  std::vector<Piece> raw, pieces;
  m.SplitAdded(m.raw_tokens, m.raw_index, std::move(whole), &raw);
  for (Piece& p : raw) {
    if (p.id >= 0) {
      pieces.push_back(std::move(p));
      continue;
    }
    if (m.normalizer) m.normalizer->Apply(&p.text);
    m.SplitAdded(m.normalized_tokens, m.normalized_index, std::move(p), &pieces);
  }
  Encoding e;
  for (Piece& p : pieces) {
    if (p.id >= 0) {
      e.ids.push_back(p.id);
      continue;
    }
    std::vector<std::u32string> words{std::move(p.text)};
    if (m.pre_tokenizer) m.pre_tokenizer->Apply(&words, p.at_start);
    for (const auto& w : words) FERRY_RETURN_IF_ERROR(m.model->Tokenize(w, &e.ids));
  }
  // Truncation leaves room for the special tokens.
  if (truncation_.enabled) {
    int64_t max = truncation_.max_length;
    if (add_special_tokens) max -= NumSpecialTokens();
    if (max < 0)
      return InvalidError("truncation.max_length {} is less than the {} special tokens",
                          truncation_.max_length, NumSpecialTokens());
    if (static_cast<int64_t>(e.ids.size()) > max) {
      if (truncation_.left)
        e.ids.erase(e.ids.begin(), e.ids.end() - max);
      else
        e.ids.resize(static_cast<size_t>(max));
    }
  }
  e.type_ids.assign(e.ids.size(), 0);
  if (add_special_tokens) {
    const SingleTemplate& t = m.post;
    if (t.sets_type) std::fill(e.type_ids.begin(), e.type_ids.end(), t.sequence_type);
    e.ids.insert(e.ids.begin(), t.prefix.begin(), t.prefix.end());
    e.type_ids.insert(e.type_ids.begin(), t.prefix_types.begin(), t.prefix_types.end());
    e.ids.insert(e.ids.end(), t.suffix.begin(), t.suffix.end());
    e.type_ids.insert(e.type_ids.end(), t.suffix_types.begin(), t.suffix_types.end());
  }
  e.attention_mask.assign(e.ids.size(), 1);
  if (padding_.enabled) {
    auto target = static_cast<int64_t>(padding_.length > 0 ? padding_.length : e.ids.size());
    if (padding_.multiple > 0 && target % padding_.multiple != 0)
      target += padding_.multiple - target % padding_.multiple;
    auto n = static_cast<int64_t>(e.ids.size());
    if (target > n) {
      auto k = static_cast<size_t>(target - n);
      auto at_ids = padding_.left ? e.ids.begin() : e.ids.end();
      e.ids.insert(at_ids, k, padding_.pad_id);
      auto at_types = padding_.left ? e.type_ids.begin() : e.type_ids.end();
      e.type_ids.insert(at_types, k, padding_.pad_type_id);
      auto at_mask = padding_.left ? e.attention_mask.begin() : e.attention_mask.end();
      e.attention_mask.insert(at_mask, k, 0);
    }
  }
  return e;
}

}  // namespace ferry::prep
