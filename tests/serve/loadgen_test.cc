// The load generator's pure parts (serve/loadgen.h): argument parsing, percentiles, the
// client-side HTTP codec (checked against the server's own codec) and the answer checks.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "serve/codec.h"
#include "serve/loadgen.h"

namespace ferry::serve {
namespace {

TEST(Loadgen, HostPort) {
  auto a = ParseHostPort("--http", "127.0.0.1:8000");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8000);
  EXPECT_EQ(a->ToString(), "127.0.0.1:8000");
  auto b = ParseHostPort("--grpc", "[::1]:65535");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 65535);
  EXPECT_EQ(b->ToString(), "[::1]:65535");
  for (const char* bad : {"", "host", ":80", "h:", "h:0", "h:65536", "h:8a", "h:-1", "::1:80",
                          "[::1]80", "[::1]:", "[]:80", "h:99999999999999999999"}) {
    auto r = ParseHostPort("--http", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kUsage);
    EXPECT_NE(r.status().message().find("--http expects HOST:PORT"), std::string::npos)
        << r.status().message();
  }
}

TEST(Loadgen, ConcurrencyList) {
  auto a = ParseConcurrencyList("--concurrency", "1,4,16");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::vector<int>{1, 4, 16}));
  auto b = ParseConcurrencyList("--concurrency", "1024");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{1024}));
  for (const char* bad : {"", "0", "1025", "1,,4", "1,", ",1", "a", "4 ", "-1"}) {
    auto r = ParseConcurrencyList("--concurrency", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kUsage);
  }
}

// Expected values are numpy.percentile's (linear interpolation).
TEST(Loadgen, PercentileMatchesNumpy) {
  std::vector<int64_t> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 5.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 9.1);
  EXPECT_NEAR(Percentile(v, 99), 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 10.0);
  EXPECT_DOUBLE_EQ(Percentile({10, 20}, 25), 12.5);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7.0);
  std::vector<int64_t> w = {100, 100, 100, 5000};  // a tail of one
  EXPECT_DOUBLE_EQ(Percentile(w, 50), 100.0);
  EXPECT_NEAR(Percentile(w, 99), 4853.0, 1e-9);
}

TEST(Loadgen, EncodeInputRawBytes) {
  Tensor f = Tensor::FromVector<float>({1.0f, -2.5f}, {1, 2});
  auto a = EncodeLoadInput("x", f);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->datatype, "FP32");
  EXPECT_EQ(a->shape, (Shape{1, 2}));
  ASSERT_EQ(a->raw.size(), 8u);
  float back[2];
  std::memcpy(back, a->raw.data(), 8);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], -2.5f);
  Tensor s(DType::kString, {2});
  s.data<std::string>()[0] = "ab";
  s.data<std::string>()[1] = "";
  auto b = EncodeLoadInput("s", s);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->datatype, "BYTES");
  EXPECT_EQ(b->raw, std::string("\x02\0\0\0ab\0\0\0\0", 10));
}

LoadRequest TwoInputs() {
  LoadRequest r;
  r.model = "m";
  r.inputs.push_back(*EncodeLoadInput("x", Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2})));
  r.inputs.push_back(*EncodeLoadInput("ids", Tensor::FromVector<int64_t>({7, 8, 9}, {1, 3})));
  r.outputs = {{"y", "FP32", {-1, 2}}};
  return r;
}

// What the client sends is what the server's codec reads: names, types, shapes, values.
TEST(Loadgen, HttpRequestDecodesWithServerCodec) {
  LoadRequest req = TwoInputs();
  size_t hlen = 0;
  std::string body = EncodeHttpInferRequest(req, &hlen);
  ASSERT_LT(hlen, body.size());
  EXPECT_EQ(body.size() - hlen, 16u + 24u);
  EXPECT_NE(body.substr(0, hlen).find("\"binary_data_output\":true"), std::string::npos);
  InferRequest parsed;
  Error e = ParseInferRequest(std::to_string(hlen), body, RequestLimits{}, &parsed);
  ASSERT_TRUE(e.ok()) << e.message;
  EXPECT_TRUE(parsed.binary_output);
  ASSERT_EQ(parsed.inputs.size(), 2u);
  EXPECT_EQ(parsed.inputs[0].name, "x");
  EXPECT_EQ(parsed.inputs[0].tensor.shape(), (Shape{2, 2}));
  EXPECT_EQ(parsed.inputs[0].tensor.data<float>()[3], 4.0f);
  EXPECT_EQ(parsed.inputs[1].name, "ids");
  EXPECT_EQ(parsed.inputs[1].tensor.dtype(), DType::kInt64);
  EXPECT_EQ(parsed.inputs[1].tensor.data<int64_t>()[2], 9);
}

std::string ServerAnswer(const Tensor& y, size_t* hlen, const char* name = "y") {
  InferResponse res;
  res.model = "m";
  res.version = "1";
  res.outputs.push_back({name, y, true});
  std::string body;
  EncodeInferResponse(res, &body, hlen);
  return body;
}

TEST(Loadgen, HttpAnswerFromServerCodecPassesChecks) {
  size_t hlen = 0;
  std::string body = ServerAnswer(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2}), &hlen);
  std::vector<SeenOutput> seen;
  ASSERT_EQ(ParseHttpInferResponse(std::to_string(hlen), body, &seen), "");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].raw_bytes, 24u);
  EXPECT_EQ(CheckOutputs(seen, {{"y", "FP32", {-1, 2}}}), "");
  EXPECT_EQ(CheckOutputs(seen, {{"y", "INT64", {-1, 2}}}),
            "output 'y': datatype FP32, expected INT64");
  EXPECT_EQ(CheckOutputs(seen, {{"y", "FP32", {-1, 3}}}),
            "output 'y': shape [3,2], expected [-1,3]");
  EXPECT_EQ(CheckOutputs(seen, {{"z", "FP32", {-1, 2}}}), "output 'z' missing from the answer");
  EXPECT_EQ(CheckOutputs(seen, {{"y", "FP32", {-1, 2}}, {"z", "FP32", {1}}}),
            "output 'z' missing from the answer");
  seen[0].raw_bytes = 20;
  EXPECT_EQ(CheckOutputs(seen, {{"y", "FP32", {-1, 2}}}),
            "output 'y': 20 bytes for shape [3,2] of FP32");
  seen[0].raw_bytes = 24;
  seen.push_back(seen[0]);
  EXPECT_EQ(CheckOutputs(seen, {{"y", "FP32", {-1, 2}}}), "output 'y' answered twice");
}

TEST(Loadgen, HttpAnswerMalformed) {
  size_t hlen = 0;
  std::string body = ServerAnswer(Tensor::FromVector<float>({1, 2}, {1, 2}), &hlen);
  std::vector<SeenOutput> seen;
  // A body cut short: the binary sizes no longer add up.
  EXPECT_NE(ParseHttpInferResponse(std::to_string(hlen), body.substr(0, body.size() - 1), &seen)
                .find("binary outputs declare 8 bytes, the body holds 7"),
            std::string::npos);
  EXPECT_NE(ParseHttpInferResponse(std::to_string(body.size() + 1), body, &seen), "");
  EXPECT_NE(ParseHttpInferResponse("x", body, &seen), "");
  EXPECT_NE(ParseHttpInferResponse("", "{\"outputs\": 3}", &seen), "");
  EXPECT_NE(ParseHttpInferResponse("", "not json", &seen), "");
  // JSON data instead of binary: counted as if raw.
  ASSERT_EQ(
      ParseHttpInferResponse(
          "", R"({"outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"data":[1,2]}]})", &seen),
      "");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].raw_bytes, 8u);
}

TEST(Loadgen, HttpModelMetadata) {
  ModelMetadata md;
  ASSERT_EQ(ParseHttpModelMetadata(R"({"name":"m","versions":["2","1"],"platform":"onnx_onnxv1",)"
                                   R"("inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],)"
                                   R"("outputs":[{"name":"y","datatype":"INT64","shape":[-1]}]})",
                                   &md),
            "");
  EXPECT_EQ(md.name, "m");
  EXPECT_EQ(md.versions, (std::vector<std::string>{"2", "1"}));
  ASSERT_EQ(md.inputs.size(), 1u);
  EXPECT_EQ(md.inputs[0].shape, (std::vector<int64_t>{-1, 4}));
  ASSERT_EQ(md.outputs.size(), 1u);
  EXPECT_EQ(md.outputs[0].datatype, "INT64");
  ModelMetadata bad;
  EXPECT_EQ(ParseHttpModelMetadata(R"({"name":"m","inputs":[]})", &bad), "no \"outputs\" list");
  EXPECT_NE(ParseHttpModelMetadata(R"({"inputs":[{"name":"x"}],"outputs":[]})", &bad), "");
  EXPECT_NE(ParseHttpModelMetadata("[]", &bad), "");
}

// A transport without a server: metadata for one FP32 input [-1, 4] and one output; every
// `fail_every`-th answer (counted over all clients) fails.
class FakeClient : public LoadClient {
 public:
  FakeClient(std::atomic<int>* calls, int fail_every) : calls_(calls), fail_every_(fail_every) {}
  Status Metadata(const std::string& model, const std::string&, ModelMetadata* out) override {
    if (model != "m") return InvalidError("fake: unknown model '{}'", model);
    out->name = model;
    out->inputs = {{"x", "FP32", {-1, 4}}};
    out->outputs = {{"y", "FP32", {-1, 4}}};
    return Status::Ok();
  }
  void SetRequest(const LoadRequest& request) override { request_ = request; }
  bool Infer(std::string* error) override {
    int n = calls_->fetch_add(1) + 1;
    if (fail_every_ > 0 && n % fail_every_ == 0) {
      *error = "fake failure";
      return false;
    }
    return request_.inputs.size() == 1 && request_.inputs[0].raw.size() == 16;
  }

 private:
  std::atomic<int>* calls_;
  int fail_every_;
  LoadRequest request_;
};

LoadClientFactory FakeFactory(std::atomic<int>* calls, int fail_every) {
  return [calls, fail_every]() -> Result<std::unique_ptr<LoadClient>> {
    return std::unique_ptr<LoadClient>(std::make_unique<FakeClient>(calls, fail_every));
  };
}

TEST(Loadgen, CellsShareTheTicketBudget) {
  std::atomic<int> calls{0};
  LoadgenOptions o;
  o.model = "m";
  o.concurrency = {1, 3, 8};
  o.requests = 500;
  o.warmup = 2;
  auto r = RunLoadgen(o, FakeFactory(&calls, 0));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->cells.size(), 3u);
  for (const auto& c : r->cells) {
    EXPECT_EQ(c.completed, 500u);
    EXPECT_EQ(c.ok, 500u);
    EXPECT_EQ(c.errors, 0u);
    EXPECT_EQ(c.stopped_by, "requests");
    EXPECT_LE(c.p50_us, c.p99_us);
    EXPECT_LE(c.p99_us, c.max_us);
  }
  EXPECT_EQ(calls.load(), 3 * 500 + 2 * (1 + 3 + 8));
  EXPECT_EQ(r->failed(), 0u);
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].shape, (Shape{1, 4}));  // the dynamic dim generated as 1
  EXPECT_EQ(r->input_source, "generated (seed 0)");
}

TEST(Loadgen, FailedAnswersAreErrorsNotThroughput) {
  std::atomic<int> calls{0};
  LoadgenOptions o;
  o.model = "m";
  o.concurrency = {4};
  o.requests = 400;
  o.warmup = 0;
  auto r = RunLoadgen(o, FakeFactory(&calls, 4));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const LoadCell& c = r->cells[0];
  EXPECT_EQ(c.completed, 400u);
  EXPECT_EQ(c.errors, 100u);
  EXPECT_EQ(c.ok, 300u);
  EXPECT_EQ(c.first_error, "request: fake failure");
  EXPECT_EQ(r->failed(), 100u);
  auto all_fail = RunLoadgen(o, FakeFactory(&calls, 1));
  ASSERT_TRUE(all_fail.ok());
  EXPECT_EQ(all_fail->cells[0].ok, 0u);
  EXPECT_EQ(all_fail->cells[0].throughput, 0.0);
  EXPECT_EQ(all_fail->cells[0].p99_us, 0.0);
}

TEST(Loadgen, DurationEndsACell) {
  std::atomic<int> calls{0};
  LoadgenOptions o;
  o.model = "m";
  o.requests = kMaxRequests;
  o.duration_s = 0.05;
  auto r = RunLoadgen(o, FakeFactory(&calls, 0));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->cells[0].stopped_by, "duration");
  EXPECT_LT(r->cells[0].completed, kMaxRequests);
}

TEST(Loadgen, RefusesBadOptionsAndUnknownModels) {
  std::atomic<int> calls{0};
  LoadgenOptions o;
  o.model = "m";
  o.requests = 0;
  EXPECT_EQ(RunLoadgen(o, FakeFactory(&calls, 0)).status().code(), StatusCode::kUsage);
  o.requests = 10;
  o.duration_s = 0;
  EXPECT_EQ(RunLoadgen(o, FakeFactory(&calls, 0)).status().code(), StatusCode::kUsage);
  o.duration_s = 1;
  o.concurrency = {};
  EXPECT_EQ(RunLoadgen(o, FakeFactory(&calls, 0)).status().code(), StatusCode::kUsage);
  o.concurrency = {1};
  o.model = "other";
  auto r = RunLoadgen(o, FakeFactory(&calls, 0));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_EQ(r.status().message(), "fake: unknown model 'other'");
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace
}  // namespace ferry::serve
