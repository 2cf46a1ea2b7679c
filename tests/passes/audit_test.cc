// passes::Audit: per-target verdicts, providers, dynamic axes, custom domains, renderings.
#include "passes/audit.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "verb_models.h"

namespace ferry::passes {
namespace {

// ClassifierModel with a custom-domain op on its output: x -> ... -> y -> com.acme.Foo -> z.
std::unique_ptr<ir::Model> CustomModel() {
  auto m = testing::ClassifierModel();
  m->opset_imports.push_back({"com.acme", 1});
  ir::Node foo = testing::MakeNode("Foo", {"y"}, {"z"});
  foo.domain = "com.acme";
  m->graph.nodes.push_back(std::move(foo));
  ir::Dim n{std::nullopt, "n"};
  m->graph.outputs[0] = testing::FloatValue("z", std::vector<ir::Dim>{n, ir::Dim{3, ""}});
  return m;
}

TEST(Audit, TargetsGroupTheUnsupportedNodes) {
  std::string dir = testing::FreshDir();
  std::string ops = dir + "/ops.txt";
  std::ofstream(ops) << "# allowed\nai.onnx:Gemm:13\nai.onnx:Relu:13\nai.onnx:MatMul:13\n";
  auto m = CustomModel();
  AuditOptions o;
  o.targets = {"ferry", "ferry-cpu", "ops:" + ops};
  auto r = Audit(*m, "custom.onnx", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nodes, 5);
  ASSERT_EQ(r->targets.size(), 3u);
  const AuditTarget& ferry = r->targets[0];
  EXPECT_EQ(ferry.as_is, 4);
  EXPECT_EQ(ferry.application, 1);
  ASSERT_EQ(ferry.unsupported.size(), 1u);
  EXPECT_EQ(ferry.unsupported[0].reason, "custom domain 'com.acme'");
  EXPECT_EQ(ferry.unsupported[0].scope, AuditScope::kApplication);
  EXPECT_FALSE(ferry.has_providers);
  // The session cannot be planned with an unknown op: no provider table then.
  EXPECT_FALSE(r->targets[1].has_providers);
  const AuditTarget& list = r->targets[2];
  EXPECT_EQ(list.name, "ops:" + ops);
  EXPECT_EQ(list.as_is, 3);  // Identity and Foo are not listed
  EXPECT_EQ(list.application, 2);
  EXPECT_TRUE(r->anything_unsupported());
  EXPECT_EQ(r->custom_domains.at("com.acme"), 1);
  ASSERT_EQ(r->dynamic_axes.size(), 1u);
  EXPECT_EQ(r->dynamic_axes[0].input, "x");
  EXPECT_EQ(r->dynamic_axes[0].axis, 0);
  EXPECT_EQ(r->dynamic_axes[0].symbol, "n");
  EXPECT_EQ(r->dynamic_axes[0].outputs, std::set<std::string>{"z"});

  auto j = nlohmann::json::parse(FormatJson(*r));
  EXPECT_EQ(j["targets"][0]["unsupported"][0]["scope"], "application");
  EXPECT_EQ(j["targets"][0]["unsupported"][0]["nodes"][0], "com.acme.Foo 'z'");
  EXPECT_NE(FormatText(*r).find("[application] custom domain 'com.acme' x1"), std::string::npos);
  EXPECT_NE(FormatMarkdown(*r).find("| application | custom domain 'com.acme' | 1 |"),
            std::string::npos);
}

// A Shape at opset 17 reading a custom op's output: libonnx 1.12's data propagation for Shape-15
// read the untyped input and crashed (SIGSEGV in audit, optimize and convert; issue 19's
// black-box campaign: fuzz/corpus/audit_inspect/shape15-untyped-input-libonnx-segv.onnx).
TEST(Audit, ShapeOfAnUntypedValueAtOpset17) {
  auto m = CustomModel();
  m->opset_imports[0].version = 17;
  m->graph.nodes.push_back(testing::MakeNode("Shape", {"z"}, {"s"}));
  m->graph.outputs.push_back(testing::FloatValue("s", std::vector<ir::Dim>{}));
  m->graph.outputs.back().type.elem_type = DType::kInt64;
  m->graph.outputs.back().type.shape.reset();
  auto r = Audit(*m, "custom_shape.onnx", AuditOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->custom_domains.at("com.acme"), 1);
}

// LayerNormalization with axis -372 or 2^31 and its Mean / InvStdDev outputs: libonnx 1.12's
// inference indexed the outputs' dims at axis + rank < 0 (SIGSEGV in audit, optimize and convert;
// issue 19's black-box campaign:
// fuzz/corpus/audit_inspect/layernorm-axis-minus-372-libonnx-segv.onnx).
TEST(Audit, LayerNormWithAnAxisBelowMinusRank) {
  for (int64_t a : {int64_t{-372}, int64_t{1} << 31}) {
    auto m = std::make_unique<ir::Model>();
    m->ir_version = 8;
    m->opset_imports.push_back({"", 17});
    m->graph.name = "g";
    for (const char* name : {"x", "scale", "bias"})
      m->graph.inputs.push_back(testing::FloatValue(name, std::vector<int64_t>{2, 3, 5}));
    ir::Node ln = testing::MakeNode("LayerNormalization", {"x", "scale", "bias"}, {"y", "m", "v"});
    ir::Attribute axis;
    axis.name = "axis";
    axis.type = ir::AttrType::kInt;
    axis.i = a;
    ln.attributes.push_back(std::move(axis));
    m->graph.nodes.push_back(std::move(ln));
    for (const char* name : {"y", "m", "v"})
      m->graph.outputs.push_back(testing::FloatValue(name, std::vector<int64_t>{2, 3, 5}));
    auto r = Audit(*m, "layernorm.onnx", AuditOptions{});
    ASSERT_TRUE(r.ok()) << a << ": " << r.status().message();
    EXPECT_EQ(r->nodes, 1);
  }
}

// DepthToSpace with blocksize 2^32: libonnx 1.12's inference divided by blocksize * blocksize,
// 0 in int64 (SIGFPE in audit, optimize and convert on the session target's regression input
// fuzz/corpus/session/depthtospace-blocksize-2p32-ubsan.onnx; issue 19's black-box campaign).
TEST(Audit, DepthToSpaceWithABlocksizeOf2To32) {
  auto m = std::make_unique<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", 13});
  m->graph.name = "g";
  m->graph.inputs.push_back(testing::FloatValue("x", std::vector<int64_t>{1, 4, 2, 2}));
  ir::Node d2s = testing::MakeNode("DepthToSpace", {"x"}, {"y"});
  ir::Attribute blocksize;
  blocksize.name = "blocksize";
  blocksize.type = ir::AttrType::kInt;
  blocksize.i = int64_t{1} << 32;
  d2s.attributes.push_back(std::move(blocksize));
  m->graph.nodes.push_back(std::move(d2s));
  m->graph.outputs.push_back(testing::FloatValue("y", std::vector<ir::Dim>{}));
  m->graph.outputs.back().type.shape.reset();
  auto r = Audit(*m, "d2s.onnx", AuditOptions{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nodes, 1);
}

TEST(Audit, ProvidersOfAPlannableModel) {
  auto m = testing::ClassifierModel();
  AuditOptions o;
  o.targets = {"ferry-cpu", "opset:11"};
  auto r = Audit(*m, "cls.onnx", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const AuditTarget& cpu = r->targets[0];
  ASSERT_TRUE(cpu.has_providers);
  int64_t planned = 0;
  for (const auto& [p, n] : cpu.providers) planned += n;
  EXPECT_EQ(planned, 4);
  EXPECT_EQ(cpu.as_is, 4);
  EXPECT_EQ(cpu.rewrite + cpu.application, 0);
  EXPECT_EQ(r->targets[1].name, "opset:11");
}

TEST(Audit, MalformedTargetsAreUsageErrors) {
  auto m = testing::ClassifierModel();
  AuditOptions o;
  o.targets = {"gpu"};
  EXPECT_EQ(Audit(*m, "m", o).status().code(), StatusCode::kUsage);
  o.targets = {"opset:0"};
  EXPECT_EQ(Audit(*m, "m", o).status().code(), StatusCode::kUsage);
  o.targets = {"ops:/nonexistent/list.txt"};
  EXPECT_EQ(Audit(*m, "m", o).status().code(), StatusCode::kInvalid);
}

}  // namespace
}  // namespace ferry::passes
