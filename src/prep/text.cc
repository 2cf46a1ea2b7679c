// Text inputs (prep/text.h).
#include "prep/text.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/utf8.h"
#include "prep/tokenizer.h"

namespace ferry::prep {

namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

Result<std::vector<std::string>> ReadTexts(std::string_view bytes, const std::string& what,
                                           const std::string& field) {
  const bool jsonl = EndsWith(what, ".jsonl") || EndsWith(what, ".ndjson");
  std::vector<std::string> out;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < bytes.size()) {
    size_t nl = bytes.find('\n', pos);
    size_t end = nl == std::string_view::npos ? bytes.size() : nl;
    std::string_view line = bytes.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = nl == std::string_view::npos ? bytes.size() : nl + 1;
    ++line_no;
    if (static_cast<int64_t>(out.size()) >= kMaxTextExamples)
      return InvalidError("{}: more than {} examples", what, kMaxTextExamples);
    if (!IsValidUtf8(line)) return InvalidError("{}:{}: not valid UTF-8", what, line_no);
    if (!jsonl) {
      out.emplace_back(line);
      continue;
    }
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded())
      return InvalidError("{}:{}: not a JSON value (JSON Lines: one string or object a line)", what,
                          line_no);
    if (j.is_object()) {
      auto it = j.find(field);
      if (it == j.end() || !it->is_string())
        return InvalidError("{}:{}: the object has no string field '{}'", what, line_no, field);
      out.push_back(it->get<std::string>());
    } else if (j.is_string()) {
      out.push_back(j.get<std::string>());
    } else {
      return InvalidError("{}:{}: expected a JSON string or an object with '{}'", what, line_no,
                          field);
    }
  }
  if (out.empty()) return InvalidError("{}: no examples (an empty file)", what);
  return out;
}

Result<Tensor> EncodeTexts(const TextSpec& spec, const std::vector<std::string>& texts,
                           const std::string& what) {
  const Tokenizer& tk = *spec.tokenizer;
  Truncation trunc = tk.truncation();
  if (spec.max_length > 0) {
    trunc.enabled = true;
    trunc.max_length = spec.max_length;
  }
  const bool error_if_longer = spec.truncation == TextSpec::Truncation::kError;
  Truncation applied = trunc;
  if (error_if_longer) applied.enabled = false;
  // Padding to a common length is done below, over the whole batch.
  Padding no_padding;
  const Padding& file_pad = tk.padding();
  std::vector<Encoding> encs;
  encs.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    auto e = tk.Encode(texts[i], spec.add_special_tokens, applied, no_padding);
    if (!e.ok()) return e.status().With(fmt::format("{}: example {}", what, i + 1));
    if (error_if_longer && static_cast<int64_t>(e->ids.size()) > trunc.max_length)
      return InvalidError(
          "{}: example {} has {} tokens, more than max_length {} (truncation: "
          "error)",
          what, i + 1, e->ids.size(), trunc.max_length);
    encs.push_back(std::move(*e));
  }
  // The padded length.
  int64_t longest = 0;
  for (const auto& e : encs) longest = std::max<int64_t>(longest, e.ids.size());
  int64_t target = -1, multiple = 0;  // -1: no padding
  switch (spec.padding) {
    case TextSpec::Padding::kMaxLength:
      target = trunc.max_length;
      break;
    case TextSpec::Padding::kLongest:
      target = longest;
      break;
    case TextSpec::Padding::kNone:
      break;
    case TextSpec::Padding::kFile:
      if (file_pad.enabled) {
        target = file_pad.length > 0 ? file_pad.length : longest;
        multiple = file_pad.multiple;
      }
      break;
  }
  if (target >= 0 && multiple > 0 && target % multiple != 0) target += multiple - target % multiple;
  const int64_t pad_id = spec.has_pad_id ? spec.pad_id : file_pad.enabled ? file_pad.pad_id : 0;
  const int64_t pad_type = file_pad.enabled ? file_pad.pad_type_id : 0;
  const bool pad_left = file_pad.enabled && file_pad.left;
  const int64_t width = std::max(target, longest);
  for (size_t i = 0; i < encs.size(); ++i)
    if (static_cast<int64_t>(encs[i].ids.size()) != width)
      if (target < 0 || static_cast<int64_t>(encs[i].ids.size()) > target)
        return InvalidError(
            "{}: example {} gives {} tokens and example {} gives {}; examples stack into one "
            "batch only with equal lengths (padding: max_length or longest)",
            what, i + 1, encs[i].ids.size(),
            std::max_element(
                encs.begin(), encs.end(),
                [](const Encoding& a, const Encoding& b) { return a.ids.size() < b.ids.size(); }) -
                encs.begin() + 1,
            longest);
  Tensor t(spec.dtype, Shape{static_cast<int64_t>(encs.size()), width});
  for (size_t i = 0; i < encs.size(); ++i) {
    const Encoding& e = encs[i];
    const std::vector<int64_t>& v = spec.output == TextSpec::Output::kIds ? e.ids
                                    : spec.output == TextSpec::Output::kAttentionMask
                                        ? e.attention_mask
                                        : e.type_ids;
    const int64_t pad_value = spec.output == TextSpec::Output::kIds             ? pad_id
                              : spec.output == TextSpec::Output::kAttentionMask ? 0
                                                                                : pad_type;
    std::vector<int64_t> row(static_cast<size_t>(width), pad_value);
    size_t off = pad_left ? static_cast<size_t>(width) - v.size() : 0;
    std::copy(v.begin(), v.end(), row.begin() + static_cast<std::ptrdiff_t>(off));
    for (int64_t k = 0; k < width; ++k) {
      int64_t x = row[static_cast<size_t>(k)];
      if (spec.dtype == DType::kInt64) {
        t.data<int64_t>()[static_cast<int64_t>(i) * width + k] = x;
      } else {
        if (x > INT32_MAX)
          return InvalidError("{}: example {}: id {} does not fit dtype int32", what, i + 1, x);
        t.data<int32_t>()[static_cast<int64_t>(i) * width + k] = static_cast<int32_t>(x);
      }
    }
  }
  return t;
}

Result<Tensor> PreprocessText(const TextSpec& spec, std::string_view bytes,
                              const std::string& what) {
  FERRY_ASSIGN_OR_RETURN(std::vector<std::string> texts, ReadTexts(bytes, what, spec.field));
  return EncodeTexts(spec, texts, what);
}

}  // namespace ferry::prep
