// The models of a tokenizer.json (the `tokenizers` library's models/{bpe,wordpiece,wordlevel}):
// one pre-tokenized word to ids.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "prep/tokenizer_steps.h"
#include "prep/unicode.h"

namespace ferry::prep::tok {
namespace {

namespace u = ::ferry::prep::unicode;
using Vocab = std::unordered_map<std::string, int64_t>;

Result<Vocab> ParseVocab(const Json& j, const std::string& where) {
  auto it = j.find("vocab");
  if (it == j.end() || !it->is_object()) return Invalid(where + ".vocab", "expected an object");
  Vocab v;
  v.reserve(it->size());
  for (auto e = it->begin(); e != it->end(); ++e) {
    if (!e.value().is_number_integer() || e.value().get<int64_t>() < 0 ||
        e.value().get<int64_t>() > UINT32_MAX)
      return Invalid(where + ".vocab." + e.key(), "expected an id (an integer in 0..2^32-1)");
    v.emplace(e.key(), e.value().get<int64_t>());
  }
  return v;
}

int64_t Find(const Vocab& v, const std::string& token) {
  auto it = v.find(token);
  return it == v.end() ? -1 : it->second;
}

class WordPiece : public Model {
 public:
  Vocab vocab;
  std::string unk, prefix = "##";
  int64_t max_chars = 100;

  Status Tokenize(const std::u32string& word, std::vector<int64_t>* ids) const override {
    auto unk_id = [&]() -> Result<int64_t> {
      int64_t id = Find(vocab, unk);
      if (id < 0)
        return Invalid("WordPiece", "the unknown token '" + unk + "' is not in the vocabulary");
      return id;
    };
    if (static_cast<int64_t>(word.size()) > max_chars) {
      FERRY_ASSIGN_OR_RETURN(int64_t id, unk_id());
      ids->push_back(id);
      return Status::Ok();
    }
    std::vector<int64_t> sub;
    size_t start = 0;
    while (start < word.size()) {
      size_t end = word.size();
      int64_t found = -1;
      while (start < end) {
        std::string piece = start > 0 ? prefix : std::string();
        piece += u::EncodeUtf8(std::u32string_view(word).substr(start, end - start));
        found = Find(vocab, piece);
        if (found >= 0) break;
        --end;
      }
      if (found < 0) {
        FERRY_ASSIGN_OR_RETURN(int64_t id, unk_id());
        ids->push_back(id);
        return Status::Ok();
      }
      sub.push_back(found);
      start = end;
    }
    ids->insert(ids->end(), sub.begin(), sub.end());
    return Status::Ok();
  }
  int64_t TokenToId(const std::string& t) const override { return Find(vocab, t); }
};

class WordLevel : public Model {
 public:
  Vocab vocab;
  std::string unk;
  Status Tokenize(const std::u32string& word, std::vector<int64_t>* ids) const override {
    int64_t id = Find(vocab, u::EncodeUtf8(word));
    if (id < 0) id = Find(vocab, unk);
    if (id < 0)
      return Invalid("WordLevel", "the unknown token '" + unk + "' is not in the vocabulary");
    ids->push_back(id);
    return Status::Ok();
  }
  int64_t TokenToId(const std::string& t) const override { return Find(vocab, t); }
};

class Bpe : public Model {
 public:
  Vocab vocab;
  bool has_unk = false;
  std::string unk, prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  struct MergeTo {
    int64_t rank, new_id;
  };
  std::unordered_map<uint64_t, MergeTo> merges;
  static uint64_t Key(int64_t a, int64_t b) {
    return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b);
  }
  const MergeTo* GetMerge(int64_t a, int64_t b) const {
    auto it = merges.find(Key(a, b));
    return it == merges.end() ? nullptr : &it->second;
  }

  Status Tokenize(const std::u32string& word, std::vector<int64_t>* ids) const override {
    if (ignore_merges) {
      int64_t id = Find(vocab, u::EncodeUtf8(word));
      if (id >= 0) {
        ids->push_back(id);
        return Status::Ok();
      }
    }
    // BPE::merge_word: one symbol per character (prefix / suffix added), byte fallback, unknowns.
    std::vector<int64_t> sym;
    int64_t pending_unk = -1;  // a fused unknown not yet added
    for (size_t i = 0; i < word.size(); ++i) {
      std::string s;
      if (i > 0) s = prefix;
      u::AppendUtf8(word[i], &s);
      if (i + 1 == word.size()) s += suffix;
      int64_t id = Find(vocab, s);
      if (id >= 0) {
        if (pending_unk >= 0) sym.push_back(pending_unk), pending_unk = -1;
        sym.push_back(id);
        continue;
      }
      if (byte_fallback) {
        std::vector<int64_t> bytes;
        for (char b : s) {
          char name[8];
          std::snprintf(name, sizeof name, "<0x%02X>",
                        static_cast<unsigned>(static_cast<uint8_t>(b)));
          int64_t bid = Find(vocab, name);
          if (bid < 0) {
            bytes.clear();
            break;
          }
          bytes.push_back(bid);
        }
        if (!bytes.empty()) {
          sym.insert(sym.end(), bytes.begin(), bytes.end());
          continue;
        }
      }
      if (has_unk) {
        int64_t unk_id = Find(vocab, unk);
        if (unk_id < 0)
          return Invalid("BPE", "the unknown token '" + unk + "' is not in the vocabulary");
        if (pending_unk >= 0 && !fuse_unk) sym.push_back(pending_unk);
        pending_unk = unk_id;
      }
    }
    if (pending_unk >= 0) sym.push_back(pending_unk);
    // Word::merge_all: the lowest-ranked pair first, the leftmost among equals.
    struct Entry {
      int64_t rank;
      size_t pos;
      int64_t new_id;
      bool operator<(const Entry& o) const {  // priority_queue: top is the largest
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    size_t n = sym.size();
    std::vector<int64_t> prev(n), next(n);
    std::vector<bool> removed(n, false);
    for (size_t i = 0; i < n; ++i) {
      prev[i] = static_cast<int64_t>(i) - 1;
      next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : -1;
    }
    std::priority_queue<Entry> queue;
    for (size_t i = 0; i + 1 < n; ++i)
      if (const MergeTo* m = GetMerge(sym[i], sym[i + 1])) queue.push({m->rank, i, m->new_id});
    while (!queue.empty()) {
      Entry top = queue.top();
      queue.pop();
      if (removed[top.pos] || next[top.pos] < 0) continue;
      auto right = static_cast<size_t>(next[top.pos]);
      const MergeTo* m = GetMerge(sym[top.pos], sym[right]);
      if (m == nullptr || m->new_id != top.new_id) continue;
      sym[top.pos] = top.new_id;
      removed[right] = true;
      next[top.pos] = next[right];
      if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = static_cast<int64_t>(top.pos);
      if (prev[top.pos] >= 0) {
        auto p = static_cast<size_t>(prev[top.pos]);
        if (const MergeTo* pm = GetMerge(sym[p], sym[top.pos]))
          queue.push({pm->rank, p, pm->new_id});
      }
      if (next[top.pos] >= 0) {
        auto q = static_cast<size_t>(next[top.pos]);
        if (const MergeTo* nm = GetMerge(sym[top.pos], sym[q]))
          queue.push({nm->rank, top.pos, nm->new_id});
      }
    }
    for (size_t i = 0; i < n; ++i)
      if (!removed[i]) ids->push_back(sym[i]);
    return Status::Ok();
  }
  int64_t TokenToId(const std::string& t) const override { return Find(vocab, t); }
};

Result<std::unique_ptr<Model>> ParseBpe(const Json& j, const std::string& where) {
  auto m = std::make_unique<Bpe>();
  FERRY_ASSIGN_OR_RETURN(m->vocab, ParseVocab(j, where));
  auto unk = j.find("unk_token");
  m->has_unk = unk != j.end() && !unk->is_null();
  FERRY_ASSIGN_OR_RETURN(m->unk, GetString(j, "unk_token", where, ""));
  FERRY_ASSIGN_OR_RETURN(m->prefix, GetString(j, "continuing_subword_prefix", where, ""));
  FERRY_ASSIGN_OR_RETURN(m->suffix, GetString(j, "end_of_word_suffix", where, ""));
  FERRY_ASSIGN_OR_RETURN(m->fuse_unk, GetBool(j, "fuse_unk", where, false));
  FERRY_ASSIGN_OR_RETURN(m->byte_fallback, GetBool(j, "byte_fallback", where, false));
  FERRY_ASSIGN_OR_RETURN(m->ignore_merges, GetBool(j, "ignore_merges", where, false));
  auto dropout = j.find("dropout");
  if (dropout != j.end() && !dropout->is_null()) {
    if (!dropout->is_number()) return Invalid(where + ".dropout", "expected a number or null");
    if (dropout->get<double>() != 0.0)
      return Unsupported(where + ".dropout", "BPE dropout (random merges) is not supported");
  }
  auto merges = j.find("merges");
  if (merges == j.end() || !merges->is_array())
    return Invalid(where + ".merges", "expected a list");
  m->merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const Json& e = (*merges)[i];
    std::string key = where + ".merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (e.is_string()) {  // "a b" (older files)
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return Invalid(key, "expected \"A B\" (two tokens and one space)");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    } else {
      return Invalid(key, "expected [\"A\", \"B\"] or \"A B\"");
    }
    int64_t ia = Find(m->vocab, a), ib = Find(m->vocab, b);
    if (ia < 0 || ib < 0)
      return Invalid(key, "token '" + (ia < 0 ? a : b) + "' is not in the vocabulary");
    std::string merged = a + (b.size() >= m->prefix.size() ? b.substr(m->prefix.size()) : b);
    int64_t id = Find(m->vocab, merged);
    if (id < 0) return Invalid(key, "the merged token '" + merged + "' is not in the vocabulary");
    m->merges.emplace(Bpe::Key(ia, ib), Bpe::MergeTo{static_cast<int64_t>(i), id});
  }
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace

Result<std::unique_ptr<Model>> ParseModel(const Json& j, const std::string& where) {
  if (!j.is_object()) return Invalid(where, "expected an object");
  std::string type;
  auto t = j.find("type");
  if (t != j.end() && t->is_string()) {
    type = t->get<std::string>();
  } else if (t != j.end() && !t->is_null()) {
    return Invalid(where + ".type", "expected a string");
  } else if (j.contains("merges")) {  // files without a type: the library's untagged forms
    type = "BPE";
  } else if (j.contains("max_input_chars_per_word")) {
    type = "WordPiece";
  } else {
    return Invalid(where + ".type", "missing");
  }
  if (type == "BPE") return ParseBpe(j, where);
  if (type == "WordPiece") {
    auto m = std::make_unique<WordPiece>();
    FERRY_ASSIGN_OR_RETURN(m->vocab, ParseVocab(j, where));
    FERRY_ASSIGN_OR_RETURN(m->unk, GetString(j, "unk_token", where, "[UNK]"));
    FERRY_ASSIGN_OR_RETURN(m->prefix, GetString(j, "continuing_subword_prefix", where, "##"));
    FERRY_ASSIGN_OR_RETURN(m->max_chars, GetInt(j, "max_input_chars_per_word", where, 100));
    return std::unique_ptr<Model>(std::move(m));
  }
  if (type == "WordLevel") {
    auto m = std::make_unique<WordLevel>();
    FERRY_ASSIGN_OR_RETURN(m->vocab, ParseVocab(j, where));
    FERRY_ASSIGN_OR_RETURN(m->unk, GetString(j, "unk_token", where, "<unk>"));
    return std::unique_ptr<Model>(std::move(m));
  }
  if (type == "Unigram")
    return Unsupported(where + ".type",
                       "model 'Unigram' is not supported (BPE, WordPiece, WordLevel)");
  return Invalid(where + ".type",
                 "unknown model type '" + type + "' (expected BPE, WordPiece or WordLevel)");
}

}  // namespace ferry::prep::tok
