// Text inputs of a prep spec (`text:`, src/prep/README.md): examples read from a text file (one
// per line) or JSON Lines, tokenized by a tokenizer.json (prep/tokenizer.h) into [N, L] id,
// attention-mask or token-type-id tensors. Reentrant: a TextSpec (and its Tokenizer) may be
// shared read-only by any number of threads.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "prep/spec.h"

namespace ferry::prep {

// At most this many examples per file.
inline constexpr int64_t kMaxTextExamples = 1'000'000;

// The examples in a file's bytes: a JSON Lines document (a name ending in .jsonl or .ndjson;
// each non-blank line a JSON string or an object whose `field` is a string) or plain text (one
// example per line, LF or CRLF; a final newline does not start an empty example). kInvalid for
// bytes that are not UTF-8, a bad JSON line (named by line), more than kMaxTextExamples.
Result<std::vector<std::string>> ReadTexts(std::string_view bytes, const std::string& what,
                                           const std::string& field);

// The examples through one text input: [N, L] in the spec's dtype. Texts longer than the
// length are cut (truncation: true) or an error naming the example (truncation: error); rows of
// different lengths (padding: none) are an error.
Result<Tensor> EncodeTexts(const TextSpec& spec, const std::vector<std::string>& texts,
                           const std::string& what);

// ReadTexts then EncodeTexts.
Result<Tensor> PreprocessText(const TextSpec& spec, std::string_view bytes,
                              const std::string& what);

}  // namespace ferry::prep
