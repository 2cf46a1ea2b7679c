// Text inputs: a Hugging Face `tokenizer.json` loaded and run in C++, reproducing the
// `tokenizers` library's encode(text) (ids, attention mask, token type ids) for one sequence.
//
// Supported (src/prep/README.md "Text"): models WordPiece, BPE (merges, continuing subword
// prefix, end-of-word suffix, byte fallback, fuse_unk, ignore_merges), WordLevel; normalizers
// BertNormalizer, Lowercase, NFD/NFC/NFKD/NFKC, StripAccents, Strip, Replace (string pattern),
// Prepend, Sequence; pre-tokenizers BertPreTokenizer, Whitespace, WhitespaceSplit, ByteLevel,
// Punctuation, Digits, Metaspace, CharDelimiterSplit, Split (string pattern), Sequence;
// post-processors BertProcessing, RobertaProcessing, TemplateProcessing, ByteLevel, Sequence;
// added tokens (special or not, normalized or not, lstrip/rstrip/single_word); the file's
// truncation and padding. Anything else is refused when loading: a type the library does not
// have is kInvalid, one it has but Ferry does not run (Unigram, Precompiled, regex patterns,
// BPE dropout) kUnsupported; the message names the JSON key and the type.
//
// A loaded Tokenizer is immutable: Encode may run on any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ferry::prep {

struct Encoding {
  std::vector<int64_t> ids, attention_mask, type_ids;
};

struct Truncation {
  bool enabled = false;
  int64_t max_length = 0;  // the whole encoding's, special tokens included
  bool left = false;       // direction: drop from the start instead of the end
};

struct Padding {
  bool enabled = false;
  int64_t length = 0;    // > 0: pad to this length (Fixed); 0: to the encoding's own length
  int64_t multiple = 0;  // pad_to_multiple_of (0: none)
  int64_t pad_id = 0, pad_type_id = 0;
  std::string pad_token = "[PAD]";
  bool left = false;
};

// Bounds on what Encode accepts.
inline constexpr int64_t kMaxTextBytes = 1'000'000;             // one example
inline constexpr int64_t kMaxTokenizerJsonBytes = 512LL << 20;  // a tokenizer.json file

class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Parses a tokenizer.json document. `what` names it in messages ("PATH: KEY: problem").
  static Result<std::unique_ptr<Tokenizer>> FromJson(std::string_view json,
                                                     const std::string& what);
  static Result<std::unique_ptr<Tokenizer>> Load(const std::string& path);

  // encode(text, add_special_tokens) as the library computes it, with the truncation and
  // padding below. kInvalid for text that is not UTF-8 or longer than kMaxTextBytes, and for a
  // model without an unknown token meeting a word it cannot encode (the library errors too).
  Result<Encoding> Encode(std::string_view text, bool add_special_tokens = true) const;
  // The same with other truncation and padding than the tokenizer's own.
  Result<Encoding> Encode(std::string_view text, bool add_special_tokens,
                          const Truncation& truncation, const Padding& padding) const;

  // The file's `truncation` / `padding` (disabled when null); callers may replace them.
  const Truncation& truncation() const { return truncation_; }
  const Padding& padding() const { return padding_; }
  void set_truncation(const Truncation& t) { truncation_ = t; }
  void set_padding(const Padding& p) { padding_ = p; }

  // How many special tokens the post-processor adds to one sequence.
  int64_t NumSpecialTokens() const;
  // The id of a token in the model's vocabulary or the added tokens (-1: none).
  int64_t TokenToId(const std::string& token) const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  Truncation truncation_;
  Padding padding_;
};

}  // namespace ferry::prep
