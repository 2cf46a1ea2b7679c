// ops::Inspect: what `ferry inspect` reports, as a typed result and its three renderings.
#include "ops/inspect.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "verb_models.h"

namespace ferry::ops {
namespace {

TEST(Inspect, CountsOpsParametersAndUnsupportedOps) {
  auto m = testing::ClassifierModel();
  m->opset_imports.push_back({"com.acme", 1});
  m->metadata.emplace_back("author", "tests");
  ir::Node foo = testing::MakeNode("Foo", {"y"}, {"z"});
  foo.domain = "com.acme";
  m->graph.nodes.push_back(std::move(foo));
  m->graph.outputs[0] = testing::FloatValue("z", std::vector<int64_t>{1, 3});
  InspectResult r = Inspect(*m, "model.onnx");
  EXPECT_EQ(r.model, "model.onnx");
  EXPECT_EQ(r.node_count, 5);
  EXPECT_EQ(r.op_histogram.at("Gemm"), 1);
  EXPECT_EQ(r.op_histogram.at("com.acme.Foo"), 1);
  EXPECT_EQ(r.unsupported_ops, std::vector<std::string>{"com.acme.Foo"});
  EXPECT_EQ(r.custom_domains, std::set<std::string>{"com.acme"});
  EXPECT_FALSE(r.control_flow);
  EXPECT_EQ(r.initializer_count, 3);
  EXPECT_EQ(r.weights.parameters, 8 * 6 + 6 + 6 * 3);
  EXPECT_EQ(r.weights.bytes, 4 * (8 * 6 + 6 + 6 * 3));
  EXPECT_EQ(r.weights.sha256.size(), 64u);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].type.ToString(), "float32[n,8]");

  auto j = nlohmann::json::parse(FormatJson(r));
  EXPECT_EQ(j["node_count"], 5);
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::parse(R"(["n", 8])"));
  EXPECT_EQ(j["unsupported_ops"][0], "com.acme.Foo");
  EXPECT_EQ(j["metadata"]["author"], "tests");
  EXPECT_NE(FormatText(r).find("unsupported com.acme.Foo"), std::string::npos);
  std::string md = FormatMarkdown(r);
  EXPECT_NE(md.find("| Gemm | 1 |"), std::string::npos) << md;
  EXPECT_NE(md.find("not implemented by Ferry at the model's opset: com.acme.Foo"),
            std::string::npos);
}

TEST(Inspect, FileErrorsAreTheLoaders) {
  auto r = InspectFile("/nonexistent/model.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  std::string dir = testing::FreshDir();
  auto ok = InspectFile(testing::SaveTo(*testing::ClassifierModel(), dir, "m.onnx"));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->producer_name, "ferry-tests");
  EXPECT_TRUE(ok->unsupported_ops.empty());
}

}  // namespace
}  // namespace ferry::ops
