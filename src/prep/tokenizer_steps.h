// Internal to prep/tokenizer.cc: the steps of a tokenizer.json, each parsed from its JSON
// object and run on code points. Immutable once parsed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace ferry::prep::tok {

using Json = nlohmann::json;

// Reading typed fields: a missing key or null gives the default; another type is kInvalid
// naming `where.key`.
Result<bool> GetBool(const Json& j, const std::string& key, const std::string& where, bool dflt);
Result<int64_t> GetInt(const Json& j, const std::string& key, const std::string& where,
                       int64_t dflt);
Result<std::string> GetString(const Json& j, const std::string& key, const std::string& where,
                              const std::string& dflt);
// "WHERE: problem" as kInvalid / kUnsupported.
Status Invalid(const std::string& where, const std::string& problem);
Status Unsupported(const std::string& where, const std::string& problem);

// ---- normalizers ----
struct Normalizer {
  enum class Kind {
    kBert,
    kLowercase,
    kNfd,
    kNfc,
    kNfkd,
    kNfkc,
    kStripAccents,
    kStrip,
    kReplace,
    kPrepend,
    kSequence
  } kind = Kind::kSequence;
  bool clean_text = true, handle_chinese_chars = true, strip_accents = true, lowercase = true;
  bool strip_left = true, strip_right = true;
  std::u32string pattern, content;  // Replace; content is also Prepend's text
  std::vector<Normalizer> children;
  void Apply(std::u32string* s) const;
};
// `where` is the JSON path ("normalizer"); `j` its object (not null).
Result<Normalizer> ParseNormalizer(const Json& j, const std::string& where);

// ---- pre-tokenizers ----
// What a split does with its delimiters (the library's SplitDelimiterBehavior).
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizer {
  enum class Kind {
    kBert,
    kWhitespace,
    kWhitespaceSplit,
    kByteLevel,
    kPunctuation,
    kDigits,
    kMetaspace,
    kCharDelimiter,
    kSplit,
    kSequence
  } kind = Kind::kSequence;
  bool add_prefix_space = false, use_regex = true;  // ByteLevel
  bool individual_digits = false;                   // Digits
  Behavior behavior = Behavior::kIsolated;          // Punctuation, Split
  bool invert = false;                              // Split
  std::u32string pattern;                           // Split (a string), CharDelimiterSplit
  char32_t replacement = U'\u2581';                 // Metaspace
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;  // Metaspace
  std::vector<PreTokenizer> children;
  // Splits each piece further. `first` is true when the pieces come from the start of the
  // input (Metaspace's prepend_scheme "first").
  void Apply(std::vector<std::u32string>* pieces, bool first) const;
};
Result<PreTokenizer> ParsePreTokenizer(const Json& j, const std::string& where);

// ---- models ----
class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized word. kInvalid when the word cannot be encoded and the
  // model has no unknown token.
  virtual Status Tokenize(const std::u32string& word, std::vector<int64_t>* ids) const = 0;
  virtual int64_t TokenToId(const std::string& token) const = 0;
};
Result<std::unique_ptr<Model>> ParseModel(const Json& j, const std::string& where);

// The GPT-2 byte-to-unicode map (ByteLevel): byte b is shown as this code point.
char32_t ByteToUnicode(uint8_t b);

}  // namespace ferry::prep::tok
