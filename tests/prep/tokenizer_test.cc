// The Unicode helpers behind the tokenizers (prep/unicode.h) and Tokenizer::FromJson on small
// hand-written tokenizer.json documents: the library's results for these inputs, and the
// errors for bad documents. Parity on trained tokenizers: tests/prep/test_text.py.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "prep/tokenizer.h"
#include "prep/unicode.h"

namespace ferry::prep {
namespace {

namespace u = unicode;

std::u32string U(const std::string& s) {
  std::u32string out;
  EXPECT_TRUE(u::DecodeUtf8(s, &out)) << s;
  return out;
}

TEST(Unicode, Utf8RoundTripAndRejects) {
  std::string s = "a\u00e9\u4e2d\U0001F600";
  EXPECT_EQ(U(s), (std::u32string{U'a', 0xE9, 0x4E2D, 0x1F600}));
  EXPECT_EQ(u::EncodeUtf8(U(s)), s);
  std::u32string out;
  size_t bad = 0;
  for (std::string b :
       {std::string("\xC3"), std::string("\xC0\x80"), std::string("\xED\xA0\x80"),
        std::string("\xF4\x90\x80\x80"), std::string("ab\x80"), std::string("\xFF")}) {
    out.clear();
    EXPECT_FALSE(u::DecodeUtf8(b, &out, &bad)) << b;
  }
  out.clear();
  EXPECT_FALSE(u::DecodeUtf8("ab\x80", &out, &bad));
  EXPECT_EQ(bad, 2u);
}

TEST(Unicode, Categories) {
  EXPECT_STREQ(u::Version(), "14.0.0");
  EXPECT_EQ(u::GetCategory(U'A'), u::Category::kLu);
  EXPECT_EQ(u::GetCategory(0x4E2D), u::Category::kLo);
  EXPECT_EQ(u::GetCategory(0x0301), u::Category::kMn);
  EXPECT_EQ(u::GetCategory(0x20E3), u::Category::kMe);
  EXPECT_EQ(u::GetCategory(U'5'), u::Category::kNd);
  EXPECT_EQ(u::GetCategory(0x00B2), u::Category::kNo);
  EXPECT_EQ(u::GetCategory(0x00AD), u::Category::kCf);
  EXPECT_EQ(u::GetCategory(0xE000), u::Category::kCo);
  EXPECT_EQ(u::GetCategory(0x0378), u::Category::kCn);  // unassigned
  EXPECT_EQ(u::GetCategory(0x110000), u::Category::kCn);
  EXPECT_TRUE(u::IsPunctuation(0x3002));  // 。
  EXPECT_TRUE(u::IsOther(0x200B));
  EXPECT_FALSE(u::IsOther(0x0378));
  EXPECT_TRUE(u::IsWhiteSpace(0x00A0));
  EXPECT_TRUE(u::IsWhiteSpace(0x3000));
  EXPECT_FALSE(u::IsWhiteSpace(0x200B));  // zero width space is Cf, not White_Space
  // \w as Oniguruma has it (the library's Whitespace pre-tokenizer): Ⓐ (So, Other_Alphabetic),
  // Ⅳ (Nl), ‿ (Pc) and combining marks are word characters; ① and ² (No) are not.
  for (char32_t c :
       {char32_t{0x24B6}, char32_t{0x2163}, char32_t{0x203F}, char32_t{0x0301}, char32_t{U'_'}})
    EXPECT_TRUE(u::IsWordChar(c)) << static_cast<uint32_t>(c);
  for (char32_t c : {char32_t{0x2460}, char32_t{0x00B2}, char32_t{U'-'}, char32_t{U' '}})
    EXPECT_FALSE(u::IsWordChar(c)) << static_cast<uint32_t>(c);
  EXPECT_EQ(u::CombiningClass(0x0301), 230);
  EXPECT_EQ(u::CombiningClass(0x0323), 220);
  EXPECT_EQ(u::CombiningClass(U'a'), 0);
}

TEST(Unicode, LibraryClasses) {
  // Where the library's crates predate Unicode 14.0: ⹃ (U+2E43, Po since 10.0) is not its
  // punctuation, U+1734 (Mn until 14.0) is still its Mn, U+0898 (Mn since 14.0) is not.
  EXPECT_TRUE(u::IsPunctuation(0x2E43));
  EXPECT_FALSE(u::IsLibraryPunctuation(0x2E43));
  EXPECT_TRUE(u::IsLibraryPunctuation(U'!'));
  EXPECT_TRUE(u::IsLibraryPunctuation(0x3002));
  EXPECT_TRUE(u::IsLibraryNonspacingMark(0x1734));
  EXPECT_FALSE(u::IsLibraryNonspacingMark(0x0898));
  EXPECT_TRUE(u::IsLibraryNonspacingMark(0x0301));
  EXPECT_TRUE(u::IsLibraryMark(0x20E3));  // StripAccents drops enclosing marks too
  EXPECT_FALSE(u::IsLibraryNonspacingMark(0x20E3));
  EXPECT_TRUE(u::IsLibraryOther(0x200B));
  EXPECT_TRUE(u::IsLibraryOther(0xE000));
  EXPECT_FALSE(u::IsLibraryOther(U'a'));
  EXPECT_TRUE(u::IsLibraryLetter(0x4E2D));
  EXPECT_FALSE(u::IsLibraryLetter(0x0301));
  EXPECT_TRUE(u::IsLibraryNumber(0x00B2));
  EXPECT_TRUE(u::IsLibraryNumeric(0x2163));
}

TEST(Unicode, Lowercase) {
  std::u32string out;
  for (char32_t c : U("A\u00c9\u0130\u03a3\u01c5")) u::AppendLowercase(c, &out);
  EXPECT_EQ(out, U("a\u00e9i\u0307\u03c3\u01c6"));  // İ -> i + combining dot; Σ -> σ always
}

TEST(Unicode, NormalizationForms) {
  // é precomposed / decomposed; marks reordered by combining class (dot below before acute).
  EXPECT_EQ(u::Normalize(U("\u00e9"), u::Form::kNfd), U("e\u0301"));
  EXPECT_EQ(u::Normalize(U("e\u0301"), u::Form::kNfc), U("\u00e9"));
  EXPECT_EQ(u::Normalize(U("e\u0301\u0323"), u::Form::kNfd), U("e\u0323\u0301"));
  EXPECT_EQ(u::Normalize(U("e\u0301\u0323"), u::Form::kNfc), U("\u1eb9\u0301"));
  // Hangul syllables, algorithmically.
  EXPECT_EQ(u::Normalize(U("\ud55c"), u::Form::kNfd), U("\u1112\u1161\u11ab"));
  EXPECT_EQ(u::Normalize(U("\u1112\u1161\u11ab"), u::Form::kNfc), U("\ud55c"));
  // Compatibility: ligature, full width, superscript; canonical forms keep them.
  EXPECT_EQ(u::Normalize(U("\ufb01\uff21\u00b2"), u::Form::kNfkc), U("fiA2"));
  EXPECT_EQ(u::Normalize(U("\ufb01\uff21\u00b2"), u::Form::kNfc), U("\ufb01\uff21\u00b2"));
  EXPECT_EQ(u::Normalize(U("\u1e9b\u0323"), u::Form::kNfkd), U("s\u0323\u0307"));
  // A composition exclusion stays decomposed under NFC (U+0958 DEVANAGARI QA).
  EXPECT_EQ(u::Normalize(U("\u0958"), u::Form::kNfc), U("\u0915\u093c"));
  // Blocked: a mark of the same class between the base and a composable mark.
  EXPECT_EQ(u::Normalize(U("a\u0301\u0301"), u::Form::kNfc), U("\u00e1\u0301"));
}

constexpr const char* kWordPiece = R"({
  "added_tokens": [
    {"id": 0, "content": "[PAD]", "special": true, "normalized": false,
     "single_word": false, "lstrip": false, "rstrip": false},
    {"id": 1, "content": "[UNK]", "special": true, "normalized": false,
     "single_word": false, "lstrip": false, "rstrip": false},
    {"id": 2, "content": "[CLS]", "special": true, "normalized": false,
     "single_word": false, "lstrip": false, "rstrip": false},
    {"id": 3, "content": "[SEP]", "special": true, "normalized": false,
     "single_word": false, "lstrip": false, "rstrip": false}],
  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                 "strip_accents": null, "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "cafe": 4, "un": 5,
                      "##able": 6, ",": 7, "中": 8}}
})";

TEST(Tokenizer, WordPieceBert) {
  auto tk = Tokenizer::FromJson(kWordPiece, "wp.json");
  ASSERT_TRUE(tk.ok()) << tk.status().message();
  auto e = (*tk)->Encode("CAFÉ,unable [SEP]中x");
  ASSERT_TRUE(e.ok()) << e.status().message();
  // café -> cafe (accent stripped, lowercased), unable -> un ##able, the literal [SEP] is the
  // special token, 中 is isolated, x is unknown.
  EXPECT_EQ(e->ids, (std::vector<int64_t>{2, 4, 7, 5, 6, 3, 8, 1, 3}));
  EXPECT_EQ(e->attention_mask, std::vector<int64_t>(9, 1));
  EXPECT_EQ(e->type_ids, std::vector<int64_t>(9, 0));
  EXPECT_EQ((*tk)->NumSpecialTokens(), 2);
  EXPECT_EQ((*tk)->TokenToId("##able"), 6);

  Truncation t;
  t.enabled = true;
  t.max_length = 4;
  Padding p;
  p.enabled = true;
  p.length = 6;
  auto f = (*tk)->Encode("cafe unable", true, t, p);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ids, (std::vector<int64_t>{2, 4, 5, 3, 0, 0}));
  EXPECT_EQ(f->attention_mask, (std::vector<int64_t>{1, 1, 1, 1, 0, 0}));
  auto empty = (*tk)->Encode("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->ids, (std::vector<int64_t>{2, 3}));
  EXPECT_FALSE((*tk)->Encode("caf\xC3").ok());  // not UTF-8
}

TEST(Tokenizer, ByteLevelBpeMerges) {
  // "Ġ" is the byte-level form of a space; merges in rank order.
  const char* json = R"({
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                      "use_regex": true},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ġa": 4, "Ġab": 5, "'": 6,
              "s": 7},
              "merges": [["a", "b"], ["Ġ", "a"], ["Ġa", "b"]]}
  })";
  auto tk = Tokenizer::FromJson(json, "bpe.json");
  ASSERT_TRUE(tk.ok()) << tk.status().message();
  auto e = (*tk)->Encode("ab ab's");
  ASSERT_TRUE(e.ok()) << e.status().message();
  // "ab" | " ab" | "'s": ab -> ab; Ġab: (a,b) ranks first -> Ġ ab (no (Ġ, ab) merge).
  EXPECT_EQ(e->ids, (std::vector<int64_t>{3, 2, 3, 6, 7}));
}

TEST(Tokenizer, BadDocumentsAreOneError) {
  struct Case {
    const char* json;
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {"{\"model\": {\"type\": \"Quantum\", \"vocab\": {}}}", StatusCode::kInvalid,
       "x.json: model.type: unknown model type 'Quantum'"},
      {"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", StatusCode::kUnsupported,
       "model.type: model 'Unigram' is not supported"},
      {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": -1}}}", StatusCode::kInvalid,
       "model.vocab.a"},
      {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}",
       StatusCode::kInvalid, "model.merges[0]: token 'b' is not in the vocabulary"},
      {"{\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Foo\"}]}, "
       "\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}",
       StatusCode::kInvalid, "normalizer.normalizers[0].type: unknown normalizer type 'Foo'"},
      {"{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a+\"}}, "
       "\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}",
       StatusCode::kUnsupported, "pre_tokenizer.pattern: Regex patterns are not supported"},
      {"{\"model\": {\"type\": \"BPE\", \"dropout\": 0.1, \"vocab\": {}, \"merges\": []}}",
       StatusCode::kUnsupported, "model.dropout"},
      {"{\"post_processor\": {\"type\": \"Magic\"}, \"model\": {\"type\": \"WordLevel\", "
       "\"vocab\": {}}}",
       StatusCode::kInvalid, "post_processor.type: unknown post-processor type 'Magic'"},
      {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}", StatusCode::kInvalid,
       "x.json: not valid JSON (line 1"},
      {"[1, 2]", StatusCode::kInvalid, "expected a JSON object"},
      {"{}", StatusCode::kInvalid, "x.json: model: missing"},
  };
  for (const Case& c : cases) {
    auto tk = Tokenizer::FromJson(c.json, "x.json");
    ASSERT_FALSE(tk.ok()) << c.json;
    EXPECT_EQ(tk.status().code(), c.code) << tk.status().message();
    EXPECT_NE(tk.status().message().find(c.needle), std::string::npos)
        << tk.status().message() << " lacks " << c.needle;
    EXPECT_EQ(tk.status().message().find('\n'), std::string::npos);
  }
}

TEST(Tokenizer, SharedAcrossThreads) {
  auto tk = Tokenizer::FromJson(kWordPiece, "wp.json");
  ASSERT_TRUE(tk.ok());
  const Tokenizer& shared = **tk;
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) {
        auto e = shared.Encode("cafe, unable 中");
        ok[static_cast<size_t>(i)] += e.ok() && e->ids.size() == 7;
      }
    });
  for (auto& t : threads) t.join();
  for (int v : ok) EXPECT_EQ(v, 200);
}

}  // namespace
}  // namespace ferry::prep
