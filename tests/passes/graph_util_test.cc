#include "passes/graph_util.h"

#include <gtest/gtest.h>

#include "graph_builders.h"
#include "passes/check.h"
#include "passes/pass_manager.h"

namespace ferry::passes {
namespace {

using testing::MakeNode;
ir::ValueInfo FloatInfo(const std::string& name, const std::vector<int64_t>& dims) {
  return testing::FloatValue(name, dims);
}

TEST(GraphUtil, RenameReadsReachesSubgraphsUnlessShadowed) {
  ir::Graph g;
  g.nodes.push_back(MakeNode("Relu", {"x"}, {"a"}));
  ir::Node iff = MakeNode("If", {"c"}, {"y"});
  ir::Attribute then_b;
  then_b.name = "then_branch";
  then_b.type = ir::AttrType::kGraph;
  then_b.g = std::make_unique<ir::Graph>();
  then_b.g->nodes.push_back(MakeNode("Neg", {"a"}, {"t"}));
  then_b.g->outputs.push_back(FloatInfo("t", {}));
  ir::Attribute else_b;
  else_b.name = "else_branch";
  else_b.type = ir::AttrType::kGraph;
  else_b.g = std::make_unique<ir::Graph>();
  else_b.g->nodes.push_back(MakeNode("Relu", {"x"}, {"a"}));  // defines its own 'a'
  else_b.g->nodes.push_back(MakeNode("Neg", {"a"}, {"e"}));
  else_b.g->outputs.push_back(FloatInfo("e", {}));
  iff.attributes.push_back(std::move(then_b));
  iff.attributes.push_back(std::move(else_b));
  g.nodes.push_back(std::move(iff));

  UseIndex idx = BuildUseIndex(g);
  EXPECT_EQ(idx.NumReaders("a"), 1u);  // the If, through its then-branch
  RenameReads(g, "a", "b");
  EXPECT_EQ(g.nodes[1].attr("then_branch")->g->nodes[0].inputs[0], "b");
  EXPECT_EQ(g.nodes[1].attr("else_branch")->g->nodes[1].inputs[0], "a");  // shadowed: untouched
}

TEST(GraphUtil, TopoSortKeepsValidOrderAndFixesInvalid) {
  ir::Graph g;
  g.inputs.push_back(FloatInfo("x", {2}));
  g.nodes.push_back(MakeNode("Neg", {"b"}, {"c"}));
  g.nodes.push_back(MakeNode("Relu", {"x"}, {"a"}));
  g.nodes.push_back(MakeNode("Exp", {"a"}, {"b"}));
  TopoSort(g);
  EXPECT_EQ(g.nodes[0].op_type, "Relu");
  EXPECT_EQ(g.nodes[1].op_type, "Exp");
  EXPECT_EQ(g.nodes[2].op_type, "Neg");
}

TEST(GraphUtil, FreshNameAvoidsEveryUsedName) {
  ir::Graph g;
  g.inputs.push_back(FloatInfo("w", {1}));
  g.nodes.push_back(MakeNode("Relu", {"w"}, {"w_1"}));
  EXPECT_EQ(FreshName(g, "w"), "w_2");
  EXPECT_EQ(FreshName(g, "v"), "v");
}

// The numeric check fails when the candidate differs, and names the output.
TEST(Check, DetectsADifferentOutput) {
  auto make = [](const std::string& op) {
    ir::Model m;
    m.ir_version = 8;
    m.opset_imports.push_back({"", 13});
    m.graph.inputs.push_back(FloatInfo("x", {4}));
    m.graph.outputs.push_back(FloatInfo("y", {4}));
    m.graph.nodes.push_back(MakeNode(op, {"x"}, {"y"}));
    return m;
  };
  ir::Model a = make("Relu"), b = make("Relu"), c = make("Abs");
  CheckOptions o;
  auto same = CheckEquivalent(a, b, o);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_TRUE(same->ok);
  auto diff = CheckEquivalent(a, c, o);
  ASSERT_TRUE(diff.ok());
  EXPECT_FALSE(diff->ok);
  EXPECT_NE(diff->first_failure.find("output 'y'"), std::string::npos) << diff->first_failure;
  EXPECT_LT(diff->outputs[0].cosine, 1.0);
}

// The check's tolerance: atol + rtol |x| + scale_rtol max|x|. A small element that moved by
// rounding noise of the output's range passes (it failed the element-wise rule, and with
// scale_rtol 0 still does); a move beyond the range's 1e-4 fails.
TEST(Check, ToleranceScalesWithTheOutputsRange) {
  auto make = [](float small) {
    ir::Model m;
    m.ir_version = 8;
    m.opset_imports.push_back({"", 13});
    m.graph.inputs.push_back(FloatInfo("x", {2}));
    m.graph.outputs.push_back(FloatInfo("y", {2}));
    Tensor k(DType::kFloat, {2}), zero(DType::kFloat, {});
    k.data<float>()[0] = 1.f;
    k.data<float>()[1] = small;
    m.graph.initializers.push_back({"k", k, ""});
    m.graph.initializers.push_back({"zero", zero, ""});
    m.graph.nodes.push_back(MakeNode("Mul", {"x", "zero"}, {"x0"}));
    m.graph.nodes.push_back(MakeNode("Add", {"x0", "k"}, {"y"}));
    return m;
  };
  const ir::Model ref = make(1e-3f), noise = make(1e-3f + 5e-5f), wrong = make(1e-3f + 2e-4f);
  CheckOptions o;
  auto a = CheckEquivalent(ref, noise, o);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->ok) << a->first_failure;
  auto b = CheckEquivalent(ref, wrong, o);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->ok);
  EXPECT_NE(b->first_failure.find("scale-rtol"), std::string::npos) << b->first_failure;
  o.scale_rtol = 0;  // Polygraphy's element-wise rule
  auto c = CheckEquivalent(ref, noise, o);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->ok);
}

TEST(PassManager, UnknownPassIsAUsageError) {
  ir::Model m;
  OptimizeOptions o;
  o.only = {"no_such_pass"};
  auto r = Optimize(m, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUsage);
}

// A graph still changing in the last allowed round has no proven fixed point: an error naming
// the passes that rewrote it, not a silent stop (passes that undo each other would loop).
TEST(PassManager, NoFixedPointWithinTheRoundsIsAnErrorNamingThePasses) {
  auto make = [] {
    ir::Model m;
    m.ir_version = 8;
    m.opset_imports.push_back({"", 13});
    m.graph.inputs.push_back(FloatInfo("x", {4}));
    m.graph.outputs.push_back(FloatInfo("y", {4}));
    m.graph.nodes.push_back(MakeNode("Identity", {"x"}, {"i"}));
    m.graph.nodes.push_back(MakeNode("Relu", {"i"}, {"y"}));
    return m;
  };
  ir::Model m = make();
  OptimizeOptions o;
  o.max_rounds = 1;  // the Identity goes in round 1; only round 2 could show nothing changes
  auto r = Optimize(m, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("no fixed point in 1 rounds"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("eliminate_noop"), std::string::npos) << r.status().message();
  ir::Model m2 = make();
  o.max_rounds = 2;
  EXPECT_TRUE(Optimize(m2, o).ok());
}

}  // namespace
}  // namespace ferry::passes
