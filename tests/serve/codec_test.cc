// The serve layer's parsers on bytes alone: the infer codec, serve.yaml, the keys file and
// version ordering.
#include <gtest/gtest.h>

#include <cstring>

#include "serve/auth.h"
#include "serve/codec.h"
#include "serve/source.h"

namespace ferry::serve {
namespace {

Error Parse(const std::string& body, InferRequest* r, const std::string& header_length = "",
            RequestLimits limits = {}) {
  return ParseInferRequest(header_length, body, limits, r);
}

TEST(ServeCodec, JsonTensorsFlatOrNested) {
  InferRequest r;
  Error e = Parse(R"({"id":"a","inputs":[{"name":"x","datatype":"FP32","shape":[2,2],)"
                  R"("data":[[1,2],[3,4.5]]},{"name":"b","datatype":"BOOL","shape":[2],)"
                  R"("data":[true,false]},{"name":"s","datatype":"BYTES","shape":[1],)"
                  R"("data":["hi"]}],"parameters":{"priority":2,"timeout":100}})",
                  &r);
  ASSERT_TRUE(e.ok()) << e.message;
  EXPECT_EQ(r.id, "a");
  EXPECT_EQ(r.priority, 2u);
  EXPECT_EQ(r.timeout_us, 100u);
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(r.inputs[0].tensor.shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(r.inputs[0].tensor.data<float>()[3], 4.5f);
  EXPECT_FALSE(r.inputs[1].tensor.data<bool>()[1]);
  EXPECT_EQ(r.inputs[2].tensor.data<std::string>()[0], "hi");
}

TEST(ServeCodec, BinaryTensorsAfterTheHeader) {
  std::string header =
      R"({"inputs":[{"name":"x","datatype":"INT32","shape":[3],"parameters":{"binary_data_size":12}},)"
      R"({"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":13}}],)"
      R"("outputs":[{"name":"y","parameters":{"binary_data":true,"classification":2}}]})";
  std::string body = header;
  int32_t v[3] = {1, -2, 3};
  body.append(reinterpret_cast<const char*>(v), 12);
  for (std::string s : {"ab", "cde"}) {
    uint32_t n = static_cast<uint32_t>(s.size());
    body.append(reinterpret_cast<const char*>(&n), 4);
    body += s;
  }
  InferRequest r;
  Error e = Parse(body, &r, std::to_string(header.size()));
  ASSERT_TRUE(e.ok()) << e.message;
  EXPECT_EQ(r.inputs[0].tensor.data<int32_t>()[1], -2);
  EXPECT_EQ(r.inputs[1].tensor.data<std::string>()[1], "cde");
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_TRUE(r.outputs[0].binary);
  EXPECT_EQ(r.outputs[0].classification, 2);
}

TEST(ServeCodec, RefusesWhatDoesNotAddUp) {
  struct Case {
    std::string body, header_length, words;
  };
  const Case cases[] = {
      {"{not json", "", "parse"},
      {R"({"inputs":[{"name":"x","datatype":"FP8","shape":[1],"data":[1]}]})", "", "FP8"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[3],"data":[1,2]}]})", "", "'x'"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[1,2,3]}]})", "", "'x'"},
      {R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[300]}]})", "", "range"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[-1],"data":[]}]})", "", "shape"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1000000,1000000],"data":[]}]})", "",
       "limit"},
      {R"({"inputs":[{"name":"x","datatype":"FP16","shape":[1],"data":[1]}]})", "", "binary"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]})",
       "", "left"},
      {R"({"inputs":[]})" + std::string("xx"), "13", "no input claims"},
      {R"({"inputs":[]})", "99", "Inference-Header-Content-Length"},
      {R"({"inputs":[]})", "-1", "Inference-Header-Content-Length"},
      {R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]})",
       "", "'x'"},
      {R"([1,2])", "", "object"},
  };
  for (const auto& c : cases) {
    InferRequest r;
    Error e = Parse(c.body, &r, c.header_length);
    EXPECT_EQ(e.kind, ErrorKind::kInvalidArg) << c.body;
    EXPECT_NE(e.message.find(c.words), std::string::npos) << c.body << " -> " << e.message;
  }
}

TEST(ServeCodec, BodyLimitBeforeParsing) {
  RequestLimits limits;
  limits.max_body_bytes = 10;
  InferRequest r;
  Error e = Parse(R"({"inputs":[]})", &r, "", limits);
  EXPECT_NE(e.message.find("exceeds the limit"), std::string::npos) << e.message;
}

TEST(ServeCodec, ResponseJsonAndBinary) {
  InferResponse resp;
  resp.model = "m";
  resp.version = "1";
  resp.id = "q";
  InferOutput a;
  a.name = "a";
  a.tensor = Tensor::FromVector<float>({1.5f, 2.f}, {2});
  InferOutput b;
  b.name = "b";
  b.tensor = Tensor::FromVector<int64_t>({7}, {1});
  b.binary = true;
  resp.outputs = {a, b};
  std::string body;
  size_t header = 0;
  EncodeInferResponse(resp, &body, &header);
  ASSERT_GT(header, 0u);
  EXPECT_EQ(body.size(), header + 8);
  std::string json = body.substr(0, header);
  EXPECT_NE(json.find(R"("data":[1.5,2.0])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("binary_data_size":8)"), std::string::npos) << json;
  int64_t v = 0;
  std::memcpy(&v, body.data() + header, 8);
  EXPECT_EQ(v, 7);
}

TEST(ServeConfig, KeysAndErrorsNameTheLine) {
  auto c = ParseServeConfig(
      "max_batch_size: 8\ndynamic_batching:\n  max_queue_delay_us: 100\n  "
      "preferred_batch_size: [4, 8]\ninstances: 2\nversion_policy: {latest: 2}\n",
      "serve.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->max_batch_size, 8);
  EXPECT_EQ(c->preferred_batch_sizes, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(c->latest, 2);
  auto bad = ParseServeConfig("instances: 2\nmax_batch_sise: 8\n", "serve.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("serve.yaml:2: max_batch_sise: unknown key"),
            std::string::npos)
      << bad.status().message();
  auto pref = ParseServeConfig("max_batch_size: 4\ndynamic_batching: {preferred_batch_size: [8]}\n",
                               "s.yaml");
  ASSERT_FALSE(pref.ok());
  EXPECT_NE(pref.status().message().find("exceeds max_batch_size"), std::string::npos);
  EXPECT_FALSE(ParseServeConfig("instances: -1\n", "s").ok());
  auto prep = ParseServeConfig("prep: ../other/prep.yaml\n", "s.yaml");
  ASSERT_FALSE(prep.ok());
  EXPECT_NE(prep.status().message().find("s.yaml:1: prep: must be a path inside the model folder"),
            std::string::npos)
      << prep.status().message();
  EXPECT_FALSE(ParseServeConfig("version_policy: newest\n", "s").ok());
}

TEST(ServeConfig, VersionOrder) {
  EXPECT_TRUE(VersionLess("2", "10"));
  EXPECT_TRUE(VersionLess("1.9.0", "1.10.0"));
  EXPECT_FALSE(VersionLess("10", "9"));
  EXPECT_TRUE(VersionLess("99999999999999999999999", "100000000000000000000000"));
}

TEST(ServeAuth, KeysFile) {
  auto keys = ParseKeys("keys:\n  - name: a\n    sha256: " + HashKey("secret") +
                            "\n    scopes: [infer:dig*, admin]\n",
                        "keys.yaml");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->at(0).infer_patterns, (std::vector<std::string>{"dig*"}));
  EXPECT_TRUE(keys->at(0).admin);
  auto bad = ParseKeys("keys:\n  - name: a\n    sha256: xyz\n", "keys.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("keys.yaml:3"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(
      ParseKeys("keys:\n  - sha256: " + HashKey("k") + "\n    scopes: [root]\n", "k").ok());
}

}  // namespace
}  // namespace ferry::serve
