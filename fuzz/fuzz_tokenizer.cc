// Tokenizers of untrusted documents and text (prep/tokenizer.h): a tokenizer.json a spec names,
// and the text `ferry serve` or `prep run` feeds it.
//   byte 0 even: the rest is a tokenizer.json. Accepted: it encodes a few fixed texts, each
//                result consistent (ids, attention mask and type ids of one length).
//                Refused: kInvalid or kUnsupported, one line starting with the document's name.
//   byte 0 odd:  the rest is text, encoded by one of kTokenizers fixed tokenizers chosen by
//                byte 0 >> 1 (WordPiece + BertNormalizer, byte-level BPE, BPE with byte fallback
//                and Metaspace, WordLevel with NFKC), with and without truncation and padding.
//                Accepted: a consistent encoding. Refused: kInvalid (text that is not UTF-8).
#include <string>
#include <string_view>

#include "core/status.h"
#include "fuzz_common.h"
#include "prep/tokenizer.h"

namespace {

using namespace ferry;

constexpr const char* kTokenizers[] = {
    R"({"added_tokens": [{"id": 2, "content": "[CLS]", "special": true},
                         {"id": 3, "content": "[SEP]", "special": true},
                         {"id": 5, "content": "mask", "single_word": true, "lstrip": true,
                          "rstrip": true, "normalized": true}],
        "normalizer": {"type": "BertNormalizer", "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "max_input_chars_per_word": 12,
                  "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "mask": 5,
                            "##a": 6, "##b": 7, "b": 8, "中": 9}}})",
    R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true},
        "post_processor": {"type": "RobertaProcessing", "sep": ["b", 1], "cls": ["a", 0]},
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ġa": 4, "Ġab": 5},
                  "merges": ["a b", "Ġ a", "Ġa b"]}})",
    R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"},
                      {"type": "StripAccents"}, {"type": "Replace", "pattern": {"String": "b"},
                      "content": "aa"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Metaspace",
                          "prepend_scheme": "first"}, {"type": "Digits", "individual_digits": true},
                          {"type": "Punctuation"}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true,
                  "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>",
                  "vocab": {"<unk>": 0, "<0x41>": 1, "a": 2, "##a": 3, "a</w>": 4, "##a</w>": 5,
                            "▁": 6, "▁</w>": 7, "aa": 8, "▁a": 9},
                  "merges": [["a", "##a"], ["▁", "##a"]]}})",
    R"({"normalizer": {"type": "NFKC"}, "pre_tokenizer": {"type": "Whitespace"},
        "model": {"type": "WordLevel", "unk_token": "?", "vocab": {"?": 0, "a": 1, "fi": 2}}})",
};
constexpr int kNumTokenizers = sizeof(kTokenizers) / sizeof(kTokenizers[0]);

void CheckEncoding(Result<prep::Encoding> e, const prep::Padding& p, const char* what) {
  if (!e.ok()) {
    if (e.status().code() != StatusCode::kInvalid)
      fuzz::Fail(std::string(what) +
                 ": refused with a code other than kInvalid: " + e.status().message());
    return;
  }
  if (e->attention_mask.size() != e->ids.size() || e->type_ids.size() != e->ids.size())
    fuzz::Fail(std::string(what) + ": ids, mask and type ids of different lengths");
  if (p.enabled && p.length > 0 && static_cast<int64_t>(e->ids.size()) < p.length)
    fuzz::Fail(std::string(what) + ": shorter than the padded length");
}

void CheckDocument(std::string_view json) {
  auto tk = prep::Tokenizer::FromJson(json, "fuzz.json");
  if (!tk.ok()) {
    const Status& s = tk.status();
    if (s.code() != StatusCode::kInvalid && s.code() != StatusCode::kUnsupported)
      fuzz::Fail("refused with an unexpected code: " + s.message());
    if (s.message().rfind("fuzz.json", 0) != 0 || s.message().find('\n') != std::string::npos)
      fuzz::Fail("the message is not one line naming the document: " + s.message());
    return;
  }
  for (const char* text : {"", "a b", "Hello, WORLD! ab a\u0301 中文 😀 \t\u00a0x"})
    CheckEncoding((*tk)->Encode(text), (*tk)->padding(), "document");
}

void CheckText(int index, std::string_view text) {
  auto tk = prep::Tokenizer::FromJson(kTokenizers[index], "fixed.json");
  if (!tk.ok()) fuzz::Fail("a fixed tokenizer does not load: " + tk.status().message());
  CheckEncoding((*tk)->Encode(text), prep::Padding(), "text");
  prep::Truncation t;
  t.enabled = true;
  t.max_length = 8;
  t.left = (text.size() & 1) != 0;
  prep::Padding p;
  p.enabled = true;
  p.length = 8;
  CheckEncoding((*tk)->Encode(text, true, t, p), p, "text, truncated and padded");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1)
    CheckText((data[0] >> 1) % kNumTokenizers, rest);
  else
    CheckDocument(rest);
  return 0;
}
