// passes::ChooseSeedDims: the dims the equivalence check feeds where the graph tells them.
#include "passes/seed_dims.h"

#include <gtest/gtest.h>

#include "graph_builders.h"

namespace ferry::passes {
namespace {

using testing::MakeNode;

ir::Dim Sym(const std::string& s) {
  return ir::Dim{std::nullopt, s};
}
ir::Dim Fix(int64_t v) {
  return ir::Dim{v, ""};
}
ir::Attribute Ints(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}
ir::Attribute Str(const std::string& name, const std::string& v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kString;
  a.s = v;
  return a;
}
ir::Attribute AxisAttr(int64_t v) {
  ir::Attribute a;
  a.name = "axis";
  a.type = ir::AttrType::kInt;
  a.i = v;
  return a;
}
void Init(ir::Graph& g, const std::string& name, Tensor t) {
  g.initializers.push_back({name, std::move(t), ""});
}
Tensor I64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::FromVector<int64_t>(v, {n});
}
ir::Node Conv(const std::string& x, const std::string& w, const std::string& y,
              std::vector<int64_t> kernel, std::vector<int64_t> strides,
              std::vector<int64_t> pads) {
  ir::Node n = MakeNode("Conv", {x, w}, {y});
  n.attributes.push_back(Ints("kernel_shape", std::move(kernel)));
  n.attributes.push_back(Ints("strides", std::move(strides)));
  n.attributes.push_back(Ints("pads", std::move(pads)));
  return n;
}
SeedDims Choose(const ir::Graph& g, const std::map<std::string, Shape>& given = {}) {
  return ChooseSeedDims({&g}, given);
}

// An STFT front end: samples [1, ?] -> reflect Pad 64 each side -> Unsqueeze -> Conv (kernel
// 256, stride 128): the window needs 256 padded samples, the reflect pad 65.
TEST(SeedDims, ConvWindowThroughPadAndUnsqueeze) {
  ir::Graph g;
  g.inputs.push_back(testing::FloatValue("x", std::vector<ir::Dim>{Fix(1), Sym("")}));
  Init(g, "pads", I64({0, 64, 0, 64}));
  Init(g, "axes", I64({1}));
  Init(g, "w", Tensor(DType::kFloat, {4, 1, 256}));
  ir::Node pad = MakeNode("Pad", {"x", "pads"}, {"p"});
  pad.attributes.push_back(Str("mode", "reflect"));
  g.nodes.push_back(std::move(pad));
  g.nodes.push_back(MakeNode("Unsqueeze", {"p", "axes"}, {"u"}));
  g.nodes.push_back(Conv("u", "w", "y", {256}, {128}, {0, 0}));
  SeedDims d = Choose(g);
  EXPECT_EQ(d.shapes.at("x"), (Shape{1, 128}));
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("x axis 1 = 128"), std::string::npos) << d.notes[0];
  EXPECT_NE(d.notes[0].find("Conv 'y'"), std::string::npos) << d.notes[0];
  // With a shorter kernel the reflect pad decides (a pad of 64 needs 65 samples).
  g.initializers.back().tensor = Tensor(DType::kFloat, {4, 1, 8});
  g.nodes.back() = Conv("u", "w", "y", {8}, {1}, {0, 0});
  EXPECT_EQ(Choose(g).shapes.at("x"), (Shape{1, 65}));
}

// Two stride-2 convs then a 3-wide pool: the pool's input must be 3 high, so the image at least
// 9 (ceil(ceil(H / 2) / 2) >= 3). Height and width are "?" (paddle2onnx): separate dims.
TEST(SeedDims, WindowsChainThroughStridedConvs) {
  ir::Graph g;
  g.inputs.push_back(
      testing::FloatValue("x", std::vector<ir::Dim>{Fix(1), Fix(3), Sym("?"), Sym("?")}));
  Init(g, "w1", Tensor(DType::kFloat, {4, 3, 3, 3}));
  Init(g, "w2", Tensor(DType::kFloat, {4, 4, 3, 3}));
  g.nodes.push_back(Conv("x", "w1", "a", {3, 3}, {2, 2}, {1, 1, 1, 1}));
  g.nodes.push_back(MakeNode("Relu", {"a"}, {"r"}));
  g.nodes.push_back(Conv("r", "w2", "b", {3, 3}, {2, 2}, {1, 1, 1, 1}));
  ir::Node pool = MakeNode("AveragePool", {"b"}, {"y"});
  pool.attributes.push_back(Ints("kernel_shape", {3, 1}));
  g.nodes.push_back(std::move(pool));
  EXPECT_EQ(Choose(g).shapes.at("x"), (Shape{1, 3, 9, 1}));
}

// Exact sizes: a Reshape to a constant shape (here from a Constant node), a MatMul weight, a
// broadcast against a constant, a Conv weight's input channels.
TEST(SeedDims, ExactSizesFromReshapeMatMulBroadcastAndConvChannels) {
  ir::Graph g;
  g.inputs.push_back(testing::FloatValue("a", std::vector<ir::Dim>{Fix(1), Sym("")}));
  g.inputs.push_back(testing::FloatValue("b", std::vector<ir::Dim>{Sym(""), Sym("")}));
  g.inputs.push_back(testing::FloatValue("c", std::vector<ir::Dim>{Fix(2), Sym("k")}));
  g.inputs.push_back(
      testing::FloatValue("d", std::vector<ir::Dim>{Fix(1), Sym(""), Fix(8), Fix(8)}));
  ir::Node shape = MakeNode("Constant", {}, {"shape"});
  ir::Attribute value;
  value.name = "value";
  value.type = ir::AttrType::kTensor;
  value.t = I64({1, 4, 6});
  shape.attributes.push_back(std::move(value));
  g.nodes.push_back(std::move(shape));
  g.nodes.push_back(MakeNode("Reshape", {"a", "shape"}, {"ra"}));
  Init(g, "wm", Tensor(DType::kFloat, {12, 3}));
  g.nodes.push_back(MakeNode("MatMul", {"b", "wm"}, {"mb"}));
  Init(g, "bias", Tensor(DType::kFloat, {1, 16}));
  g.nodes.push_back(MakeNode("Add", {"c", "bias"}, {"ac"}));
  Init(g, "wc", Tensor(DType::kFloat, {2, 5, 3, 3}));
  g.nodes.push_back(Conv("d", "wc", "cd", {3, 3}, {1, 1}, {1, 1, 1, 1}));
  SeedDims d = Choose(g);
  EXPECT_EQ(d.shapes.at("a"), (Shape{1, 24}));
  EXPECT_EQ(d.shapes.at("b"), (Shape{1, 12}));  // the batch dim: nothing asks, 1
  EXPECT_EQ(d.shapes.at("c"), (Shape{2, 16}));
  EXPECT_EQ(d.shapes.at("d"), (Shape{1, 5, 8, 8}));
  EXPECT_EQ(d.notes.size(), 4u);
}

// A skip connection concatenated with an upsampled deeper branch (YOLO's neck): the size must
// be one where floor-strided convs and the x2 Resize agree. H = 5: 3 -> 2 -> 1, 1 x 2 = 2.
TEST(SeedDims, ConcatOfUpsampledBranchNeedsAgreeingSizes) {
  ir::Graph g;
  g.inputs.push_back(
      testing::FloatValue("x", std::vector<ir::Dim>{Fix(1), Fix(3), Sym("H"), Fix(8)}));
  Init(g, "w1", Tensor(DType::kFloat, {4, 3, 3, 3}));
  Init(g, "w2", Tensor(DType::kFloat, {4, 4, 3, 3}));
  Init(g, "w3", Tensor(DType::kFloat, {4, 4, 3, 3}));
  Init(g, "scales", Tensor::FromVector<float>({1, 1, 2, 1}, {4}));
  g.nodes.push_back(Conv("x", "w1", "a", {3, 3}, {2, 1}, {1, 1, 1, 1}));
  g.nodes.push_back(Conv("a", "w2", "b", {3, 3}, {2, 1}, {1, 1, 1, 1}));
  g.nodes.push_back(Conv("b", "w3", "c", {3, 3}, {2, 1}, {1, 1, 1, 1}));
  g.nodes.push_back(MakeNode("Resize", {"c", "", "scales"}, {"u"}));
  ir::Node cat = MakeNode("Concat", {"u", "b"}, {"y"});
  cat.attributes.push_back(AxisAttr(1));
  g.nodes.push_back(std::move(cat));
  SeedDims d = Choose(g);
  EXPECT_EQ(d.shapes.at("x"), (Shape{1, 3, 5, 8}));
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("Concat 'y' agrees"), std::string::npos) << d.notes[0];
}

// --shape fixes an input and the symbols it carries; a second graph (the rewritten model, with
// the pads folded into a constant inside an If branch) adds what the first cannot show.
TEST(SeedDims, GivenShapesBindSymbolsAndLaterGraphsAddNeeds) {
  ir::Graph g;
  g.inputs.push_back(testing::FloatValue("a", std::vector<ir::Dim>{Sym("batch"), Sym("seq")}));
  g.inputs.push_back(testing::FloatValue("b", std::vector<ir::Dim>{Sym("batch"), Sym("seq")}));
  g.nodes.push_back(MakeNode("Add", {"a", "b"}, {"y"}));
  SeedDims d = Choose(g, {{"a", {2, 5}}});
  EXPECT_EQ(d.shapes.at("a"), (Shape{2, 5}));
  EXPECT_EQ(d.shapes.at("b"), (Shape{2, 5}));
  EXPECT_TRUE(d.notes.empty());

  ir::Graph orig;  // samples [1, ?]; the pads are computed (not a constant here)
  orig.inputs.push_back(testing::FloatValue("x", std::vector<ir::Dim>{Fix(1), Sym("")}));
  orig.inputs.push_back(testing::FloatValue("pads", std::vector<int64_t>{4}));
  orig.nodes.push_back(MakeNode("Pad", {"x", "pads"}, {"y"}));
  ir::Graph folded;  // the same inputs; an If whose branch pads by a constant and convolves
  folded.inputs = orig.inputs;
  auto branch = std::make_unique<ir::Graph>();
  Init(*branch, "bp", I64({0, 2, 0, 2}));
  Init(*branch, "axes", I64({1}));
  Init(*branch, "w", Tensor(DType::kFloat, {1, 1, 32}));
  branch->nodes.push_back(MakeNode("Pad", {"x", "bp"}, {"p"}));
  branch->nodes.push_back(MakeNode("Unsqueeze", {"p", "axes"}, {"u"}));
  branch->nodes.push_back(Conv("u", "w", "bo", {32}, {16}, {0, 0}));
  ir::Node iff = MakeNode("If", {"cond"}, {"y"});
  ir::Attribute then_branch;
  then_branch.name = "then_branch";
  then_branch.type = ir::AttrType::kGraph;
  then_branch.g = std::move(branch);
  iff.attributes.push_back(std::move(then_branch));
  folded.nodes.push_back(std::move(iff));
  EXPECT_EQ(Choose(orig).shapes.at("x"), (Shape{1, 1}));
  EXPECT_EQ(ChooseSeedDims({&orig, &folded}, {}).shapes.at("x"), (Shape{1, 28}));
}

}  // namespace
}  // namespace ferry::passes
