// Constants at Create (cpu provider): steps whose inputs are all constant are computed once and
// shared ("cpu (folded at create)"); weights held as Constant nodes (spox) and computed from
// them (torch's re-ordered LSTM gates: Slice -> Concat of a Constant), and a subgraph's reads
// of the enclosing graph's constants, count as constant, so kernels pack them once.
#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

void SetTensor(ir::Node& n, Tensor t) {
  ir::Attribute a;
  a.name = "value";
  a.type = ir::AttrType::kTensor;
  a.t = std::move(t);
  n.attributes.push_back(std::move(a));
}

// x [1,16,8,8] -> Conv(W) with W = Concat(Slice(C, 0..8), Slice(C, 8..16)) of a Constant C
// [16,16,3,3], channels swapped halves.
void ConvFromConstantChain(GraphBuilder& b) {
  b.Input("x", Rand({1, 16, 8, 8}, 1));
  SetTensor(b.Node("Constant", {}, {"C"}), Rand({16, 16, 3, 3}, 2, -0.2f, 0.2f));
  b.Const("s0", Int64s({0}));
  b.Const("s8", Int64s({8}));
  b.Const("s16", Int64s({16}));
  b.Node("Slice", {"C", "s8", "s16"}, {"hi"});
  b.Node("Slice", {"C", "s0", "s8"}, {"lo"});
  SetInt(b.Node("Concat", {"hi", "lo"}, {"W"}), "axis", 0);
  SetInts(b.Node("Conv", {"x", "W"}, {"y"}), "pads", {1, 1, 1, 1});
  b.Output("y");
}

TEST(FoldAtCreate, StepsOnConstantsRunOnceAndTheirResultIsPackedOnce) {
  GraphBuilder b;
  ConvFromConstantChain(b);
  const auto report = ExpectMatchesReference(b);
  EXPECT_EQ(ProviderOfOp(report, "Concat"), "cpu (folded at create)");
  EXPECT_EQ(ProviderOfOp(report, "Slice"), "cpu (folded at create)");
  EXPECT_EQ(ProviderOfOp(report, "Conv"), "cpu");
  auto s = Session::Create(b.model(), SessionOptions{.threads = 1});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Run(b.feeds()).ok());
  const size_t w = (*s)->weights_bytes();
  // No initializer holds W: what is counted is the folded Slices and Concat and the conv's
  // packed copy, made once (a W computed every run would be packed per run, uncounted).
  EXPECT_GE(w, 3 * 16 * 16 * 9 * sizeof(float));
  ASSERT_TRUE((*s)->Run(b.feeds()).ok());
  EXPECT_EQ((*s)->weights_bytes(), w);
}

// A step fed by a graph input is not folded; one over the size limit neither (and still runs).
TEST(FoldAtCreate, LeavesInputDependentAndHugeStepsToTheRun) {
  GraphBuilder b;
  b.Input("x", Rand({4}, 1));
  b.Const("c", Rand({4}, 2));
  b.Node("Add", {"x", "c"}, {"y"});
  b.Const("big", Int64s({5000, 5000}));  // 100 MB of float zeros: over the 64 MiB limit
  ir::Node& cs = b.Node("ConstantOfShape", {"big"}, {"z"});
  SetTensor(cs, Tensor::FromVector<float>({0.f}, {1}));
  b.Node("ReduceSum", {"z"}, {"t"});
  b.Output("y").Output("t");
  auto s = Session::Create(b.model(), SessionOptions{.threads = 1});
  ASSERT_TRUE(s.ok());
  auto out = (*s)->Run(b.feeds());
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto report = (*s)->node_report();
  EXPECT_EQ(ProviderOfOp(report, "Add"), "cpu");
  EXPECT_NE(ProviderOfOp(report, "ConstantOfShape"), "cpu (folded at create)");
  EXPECT_EQ((*out)[1].tensor().data<float>()[0], 0.f);
}

// An If whose then-branch convolves with the enclosing graph's Constant: the body's Conv packs
// it once (counted in weights_bytes), and the result matches the reference.
TEST(FoldAtCreate, SubgraphsTakeTheEnclosingGraphsConstants) {
  GraphBuilder b;
  b.Input("x", Rand({1, 8, 6, 6}, 1));
  b.Input("cond", Tensor::FromVector<bool>({true}, {}));
  SetTensor(b.Node("Constant", {}, {"W"}), Rand({8, 8, 3, 3}, 2, -0.3f, 0.3f));
  ir::Node& iff = b.Node("If", {"cond"}, {"y"});
  auto branch = [&](bool conv) {
    auto g = std::make_unique<ir::Graph>();
    ir::Node n;
    n.name = conv ? "body_conv" : "body_relu";
    n.op_type = conv ? "Conv" : "Relu";
    n.inputs = conv ? std::vector<std::string>{"x", "W"} : std::vector<std::string>{"x"};
    n.outputs = {conv ? "bc" : "br"};
    if (conv) SetInts(n, "pads", {1, 1, 1, 1});
    g->nodes.push_back(std::move(n));
    g->outputs.push_back({conv ? "bc" : "br", {}, ""});
    return g;
  };
  ir::Attribute then_a, else_a;
  then_a.name = "then_branch";
  then_a.type = ir::AttrType::kGraph;
  then_a.g = branch(true);
  else_a.name = "else_branch";
  else_a.type = ir::AttrType::kGraph;
  else_a.g = branch(false);
  iff.attributes.push_back(std::move(then_a));
  iff.attributes.push_back(std::move(else_a));
  b.Output("y");
  ExpectMatchesReference(b);
  auto s = Session::Create(b.model(), SessionOptions{.threads = 1});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Run(b.feeds()).ok());
  const size_t w = (*s)->weights_bytes();
  EXPECT_GE(w, 8 * 8 * 9 * sizeof(float));  // the body conv's packed copy of W
  ASSERT_TRUE((*s)->Run(b.feeds()).ok());
  EXPECT_EQ((*s)->weights_bytes(), w);
}

}  // namespace
}  // namespace ferry::cpu_test
