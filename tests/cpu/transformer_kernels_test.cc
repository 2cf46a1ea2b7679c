// The cpu provider's transformer kernels against the reference: broadcast elementwise ops,
// unary math, Softmax, trailing-axis reductions, LayerNormalization, and the row kernels of
// both instruction sets against each other.
#include <cmath>
#include <limits>
#include <set>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ops/cpu/vec.h"

namespace ferry {
namespace {

using namespace cpu_test;

// The provider each node ran on in the last run, by op type (the last node of that type).
std::string ProviderOf(const std::vector<runtime::NodeReport>& report, const std::string& op) {
  std::string p;
  for (const auto& r : report)
    if (r.op_type == op) p = r.provider;
  return p;
}

TEST(CpuBroadcast, BinaryOpsMatchReferenceOnAnyBroadcast) {
  const std::pair<Shape, Shape> shapes[] = {
      {{2, 3, 127}, {2, 3, 127}},
      {{2, 3, 127}, {127}},
      {{4, 13}, {1, 13}},
      {{3, 5}, {}},
      {{127}, {2, 3, 127}},
      {{}, {4, 13}},
      {{}, {}},
      {{1}, {}},
      {{3, 1, 5}, {3, 4, 5}},        // middle broadcast of A
      {{13, 1, 27}, {13, 1, 1}},     // LayerNorm's x - mean
      {{4, 13, 13}, {4, 1, 13}},     // attention mask
      {{3, 1}, {1, 7}},              // both broadcast (outer product)
      {{2, 1, 3, 1}, {1, 5, 1, 4}},  // alternating
      {{1, 1, 1}, {1, 1}},           // all ones
      {{2, 300, 127}, {300, 1}},     // large: split over threads mid-row
      {{70001}, {}},                 // one long row split over threads
      {{5, 0, 3}, {1, 3}},           // empty
  };
  uint32_t seed = 1000;
  for (const std::string op : {"Add", "Sub", "Mul", "Div", "Pow"}) {
    for (const auto& [sa, sb] : shapes) {
      SCOPED_TRACE(op + " " + ShapeToString(sa) + " " + ShapeToString(sb));
      GraphBuilder b;
      // Pow: positive bases (a non-integer exponent of a negative base is NaN).
      const bool pow = op == "Pow";
      b.Input("a", Rand(sa, seed, pow ? 0.1f : -1.f, 2.f));
      b.Input("b", Rand(sb, seed + 1, pow ? -2.f : 0.25f, 2.f));  // Div: no zeros
      seed += 2;
      b.Node(op, {"a", "b"}, {"y"});
      b.Output("y");
      auto report = ExpectMatchesReference(b, 1e-6, 1e-7);
      if (NumElements(sa) > 0 && NumElements(sb) > 0) {
        EXPECT_EQ(ProviderOf(report, op), "cpu");
      }
    }
  }
}

TEST(CpuBroadcast, PowScalarExponentsMatchReference) {
  for (float e : {2.f, 0.5f, 1.f, 3.f, -1.f}) {
    SCOPED_TRACE(e);
    GraphBuilder b;
    Tensor x = Rand({3, 127}, 1100, 0.f, 3.f);
    x.data<float>()[0] = -0.f;
    x.data<float>()[1] = std::numeric_limits<float>::infinity();
    b.Input("x", std::move(x));
    Tensor t(DType::kFloat, {});
    t.data<float>()[0] = e;
    b.Const("e", std::move(t));
    b.Node("Pow", {"x", "e"}, {"y"});
    b.Output("y");
    auto report = ExpectMatchesReference(b, 1e-6, 0);
    EXPECT_EQ(ProviderOf(report, "Pow"), "cpu");
  }
}

TEST(CpuUnary, MathOpsMatchReference) {
  struct Case {
    std::string op;
    float lo, hi;
    double rtol, atol;
  };
  const Case cases[] = {
      {"Sqrt", 0.f, 10.f, 1e-6, 0},
      {"Exp", -90.f, 90.f, 4e-7, 1e-37},
      {"Neg", -5.f, 5.f, 0, 0},
      {"Reciprocal", 0.1f, 5.f, 1e-6, 0},
      {"Abs", -5.f, 5.f, 0, 0},
      {"Tanh", -9.f, 9.f, 2e-6, 1e-7},
      {"Sigmoid", -20.f, 20.f, 2e-6, 1e-12},
      {"Erf", -4.f, 4.f, 1e-6, 1e-7},
      {"Relu", -1.f, 1.f, 0, 0},
      {"Tanh", -0.1f, 0.1f, 2e-6, 1e-9},
  };
  uint32_t seed = 1200;
  for (const Case& c : cases) {
    for (const Shape& s : {Shape{13}, Shape{3, 127}, Shape{2, 200, 130}}) {
      SCOPED_TRACE(c.op + " " + ShapeToString(s));
      GraphBuilder b;
      b.Input("x", Rand(s, seed++, c.lo, c.hi));
      b.Node(c.op, {"x"}, {"y"});
      b.Output("y");
      auto report = ExpectMatchesReference(b, c.rtol, c.atol);
      EXPECT_EQ(ProviderOf(report, c.op), "cpu");
    }
  }
}

TEST(CpuSoftmax, BothSemanticsMatchReference) {
  struct Case {
    int64_t opset;
    Shape shape;
    int64_t axis;  // INT64_MIN: default
  };
  const Case cases[] = {
      {13, {4, 128, 128}, INT64_MIN},
      {13, {3, 127}, -1},
      {13, {2, 3, 13}, 1},
      {13, {2, 3, 13}, 0},
      {13, {1}, 0},
      {11, {2, 3, 13}, INT64_MIN},
      {11, {2, 3, 13}, 0},
      {11, {2, 3, 13}, 2},
      {11, {2, 3, 13}, 3},
      {1, {5, 7}, INT64_MIN},
  };
  uint32_t seed = 1300;
  for (const Case& c : cases) {
    SCOPED_TRACE("opset " + std::to_string(c.opset) + " " + ShapeToString(c.shape) + " axis " +
                 std::to_string(c.axis));
    GraphBuilder b;
    b.Opset(c.opset);
    b.Input("x", Rand(c.shape, seed++, -8.f, 8.f));
    ir::Node& n = b.Node("Softmax", {"x"}, {"y"});
    if (c.axis != INT64_MIN) SetInt(n, "axis", c.axis);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 1e-5, 1e-7);
    EXPECT_EQ(ProviderOf(report, "Softmax"), "cpu");
  }
}

TEST(CpuReduce, ContiguousAxesMatchReferenceAndOthersDecline) {
  struct Case {
    std::string op;
    int64_t opset;
    Shape shape;
    std::vector<int64_t> axes;
    int64_t keepdims;
    bool cpu;
  };
  const Case cases[] = {
      {"ReduceMean", 14, {13, 1, 256}, {-1}, 1, true},
      {"ReduceMean", 14, {3, 5, 127}, {1, 2}, 0, true},
      {"ReduceMean", 14, {3, 5, 7}, {}, 1, true},  // all axes
      {"ReduceMean", 18, {3, 5, 7}, {-1}, 1, true},
      {"ReduceMean", 14, {3, 5, 7}, {0}, 1, true},         // leading axis: inner block 35
      {"ReduceMean", 14, {2, 3, 5, 16}, {1, 2}, 0, true},  // middle block, inner 16
      {"ReduceMean", 14, {3, 5, 7}, {0, 2}, 1, false},     // a kept axis between
      {"ReduceSum", 11, {300, 130}, {1}, 0, true},
      {"ReduceSum", 13, {3, 5, 7}, {2}, 1, true},
      {"ReduceSum", 13, {3, 5, 7}, {1}, 1, true},
      {"ReduceSum", 13, {1, 128, 256}, {1}, 0, true},  // BERT's masked-mean pooling
      {"ReduceSum", 13, {2, 127, 8}, {-2}, 0, true},   // inner 8
      {"ReduceSum", 13, {3, 1, 13}, {0, 1}, 1, true},
  };
  uint32_t seed = 1400;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " " + std::to_string(c.opset) + " " + ShapeToString(c.shape));
    GraphBuilder b;
    b.Opset(c.opset);
    b.Input("x", Rand(c.shape, seed++));
    const bool axes_input = c.opset >= (c.op == "ReduceSum" ? 13 : 18);
    std::vector<std::string> ins = {"x"};
    if (axes_input && !c.axes.empty()) {
      Tensor t(DType::kInt64, {static_cast<int64_t>(c.axes.size())});
      for (size_t i = 0; i < c.axes.size(); ++i) t.data<int64_t>()[i] = c.axes[i];
      b.Const("axes", std::move(t));
      ins.push_back("axes");
    }
    ir::Node& n = b.Node(c.op, ins, {"y"});
    if (!axes_input && !c.axes.empty()) SetInts(n, "axes", c.axes);
    SetInt(n, "keepdims", c.keepdims);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 1e-5, 1e-6);
    EXPECT_EQ(ProviderOf(report, c.op), c.cpu ? "cpu" : "reference (cpu declined)");
  }
}

TEST(CpuLayerNorm, MatchesReference) {
  struct Case {
    Shape shape, scale;
    int64_t axis;
    bool bias;
  };
  const Case cases[] = {
      {{3, 127}, {127}, -1, true},
      {{2, 3, 13}, {3, 13}, 1, true},
      {{1, 5, 256}, {256}, -1, false},
      {{2, 7}, {1}, -1, true},
  };
  uint32_t seed = 1500;
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape));
    GraphBuilder b;
    b.Input("x", Rand(c.shape, seed, -3.f, 5.f));
    b.Const("g", Rand(c.scale, seed + 1));
    std::vector<std::string> ins = {"x", "g"};
    if (c.bias) {
      b.Const("b", Rand(c.scale, seed + 2));
      ins.push_back("b");
    }
    seed += 3;
    ir::Node& n = b.Node("LayerNormalization", ins, {"y"});
    SetInt(n, "axis", c.axis);
    SetFloat(n, "epsilon", 1e-3f);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
    EXPECT_EQ(ProviderOf(report, "LayerNormalization"), "cpu");
  }
}

// The AVX2 and AVX-512 tables against the baseline one (same math, maybe contracted to FMA,
// reductions in wider lanes).
class CpuVec : public ::testing::TestWithParam<int> {};

TEST_P(CpuVec, InstructionSetsAgree) {
  const ops::cpu::VecOps& base = ops::cpu::BaselineVec();
  const ops::cpu::VecOps* avx = GetParam() == 2 ? ops::cpu::Avx2Vec() : ops::cpu::Avx512Vec();
  if (!avx) GTEST_SKIP() << "this CPU lacks the instruction set";
  Tensor x = Rand({1037}, 1600, -20.f, 20.f);
  Tensor z = Rand({1037}, 1601, 0.5f, 2.f);
  const float* px = x.data<float>();
  const float* pz = z.data<float>();
  std::vector<float> y1(1037), y2(1037);
  auto close = [&](double rtol, double atol) {
    for (size_t i = 0; i < y1.size(); ++i)
      ASSERT_NEAR(y1[i], y2[i], atol + rtol * std::fabs(y1[i])) << "at " << i;
  };
  for (int op = 0; op < static_cast<int>(ops::cpu::BinOp::kCount); ++op)
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE("binary " + std::to_string(op) + " kind " + std::to_string(k));
      base.binary[op][k](pz, pz + 1, y1.data(), 1036);
      avx->binary[op][k](pz, pz + 1, y2.data(), 1036);
      close(1e-6, 0);
    }
  for (int op = 0; op < static_cast<int>(ops::cpu::UnOp::kCount); ++op) {
    SCOPED_TRACE("unary " + std::to_string(op));
    const float* in = op == static_cast<int>(ops::cpu::UnOp::kSqrt) ||
                              op == static_cast<int>(ops::cpu::UnOp::kPowHalf)
                          ? pz
                          : px;
    base.unary[op](in, y1.data(), 1037, -1.f, 1.f);
    avx->unary[op](in, y2.data(), 1037, -1.f, 1.f);
    close(1e-6, 1e-30);
  }
  EXPECT_NEAR(base.sum(px, 1037), avx->sum(px, 1037), 1e-3);
  for (int64_t blk : {8, 16, 3}) {  // per-lane sums over n = 1037 / blk pixels (odd counts)
    SCOPED_TRACE("sum_lanes " + std::to_string(blk));
    const int64_t n = 1037 / blk;
    float l1[16], l2[16];
    base.sum_lanes(px, n, blk, l1);
    avx->sum_lanes(px, n, blk, l2);
    for (int64_t j = 0; j < blk; ++j) {
      double want = 0;
      for (int64_t p = 0; p < n; ++p) want += px[p * blk + j];
      EXPECT_NEAR(l1[j], want, 1e-3);
      EXPECT_NEAR(l2[j], want, 1e-3);
    }
  }
  base.softmax(px, y1.data(), 1037);
  avx->softmax(px, y2.data(), 1037);
  close(1e-6, 1e-30);
  base.layer_norm(px, y1.data(), 1037, 1e-5f, pz, 1, px, 1);
  avx->layer_norm(px, y2.data(), 1037, 1e-5f, pz, 1, px, 1);
  close(1e-5, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuVec, ::testing::Values(2, 512),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param == 2 ? std::string("Avx2") : std::string("Avx512");
                         });

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

using namespace cpu_test;

Tensor Ints(std::vector<int64_t> v) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

TEST(CpuMovement, TransposeMatchesReference) {
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{13, 1, 27}, {1, 0, 2}},  // a size-1 dim moves: one memcpy
      {{13, 4, 9}, {1, 0, 2}},      {{13, 4, 9}, {1, 2, 0}}, {{2, 3, 5, 7}, {0, 2, 1, 3}},
      {{2, 3, 5, 7}, {3, 2, 1, 0}}, {{127, 300}, {}},        {{3}, {0}},
      {{4, 0, 3}, {2, 1, 0}},
  };
  uint32_t seed = 1700;
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape));
    GraphBuilder b;
    b.Input("x", Rand(c.shape, seed++));
    ir::Node& n = b.Node("Transpose", {"x"}, {"y"});
    if (!c.perm.empty()) SetInts(n, "perm", c.perm);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    EXPECT_EQ(ProviderOf(report, "Transpose"), "cpu");
  }
  // Another dtype: int64 through the same copy.
  GraphBuilder b;
  b.Input("x", Ints({1, 2, 3, 4, 5, 6}));
  b.Node("Reshape", {"x", "s"}, {"r"});
  b.Const("s", Ints({2, 3}));
  b.Node("Transpose", {"r"}, {"y"});
  b.Output("y");
  auto report = ExpectMatchesReference(b, 0, 0);
  EXPECT_EQ(ProviderOf(report, "Transpose"), "cpu");
}

// Pad with all-zero pads (torch's DenseNet transitions): a copy in the input's layout, after a
// Conv (its blocked / channels-last output) and before a pooling (a MaxPool: a Pad read only by an
// AveragePool runs inside the PadAvgPool pattern, tests/cpu/cnn_branches_test.cc); the attribute
// form (opset < 11) on a plain input; a Pad that really pads stays on the reference.
TEST(CpuMovement, ZeroPadIsACopyInAnyLayout) {
  for (int64_t c : {13, 32}) {
    SCOPED_TRACE("c=" + std::to_string(c));
    GraphBuilder b;
    b.Opset(13);
    b.Input("x", Rand({2, 5, 9, 7}, 1700));
    b.Const("w", Rand({c, 5, 1, 1}, 1701));
    b.Const("pads", Ints({0, 0, 0, 0, 0, 0, 0, 0}));
    b.Node("Conv", {"x", "w"}, {"c"});
    b.Node("Pad", {"c", "pads"}, {"p"});
    ir::Node& pool = b.Node("MaxPool", {"p"}, {"y"});
    SetInts(pool, "kernel_shape", {2, 2});
    SetInts(pool, "strides", {2, 2});
    b.Output("y");
    auto report = ExpectMatchesReference(b, 1e-5, 1e-6);  // the Conv and pooling round
    // 13 channels in nChw8c (AVX2 CPUs) are padded to 16: that Pad declines.
    if (c % 8 == 0) {
      EXPECT_EQ(ProviderOf(report, "Pad"), "cpu");
    }
  }
  {
    GraphBuilder b;
    b.Opset(10);
    b.Input("x", Rand({3, 4, 5}, 1702));
    ir::Node& n = b.Node("Pad", {"x"}, {"y"});
    SetInts(n, "pads", {0, 0, 0, 0, 0, 0});
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    EXPECT_EQ(ProviderOf(report, "Pad"), "cpu");
  }
  {
    GraphBuilder b;
    b.Opset(13);
    b.Input("x", Rand({1, 3, 4, 5}, 1703));
    b.Const("pads", Ints({0, 0, 1, 0, 0, 0, 0, 2}));
    b.Node("Pad", {"x", "pads"}, {"y"});
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    EXPECT_EQ(ProviderOf(report, "Pad"), "reference (cpu declined)");
  }
}

TEST(CpuMovement, SliceMatchesReference) {
  struct Case {
    Shape shape;
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const Case cases[] = {
      {{13, 1, 768}, {0}, {256}, {-1}, {}},
      {{13, 1, 768}, {256}, {512}, {2}, {1}},
      {{5, 7, 9}, {1, -5}, {kMax, -1}, {0, 2}, {}},
      {{5, 7, 9}, {-1, 6}, {-kMax, 0}, {0, 1}, {-1, -2}},
      {{5, 7, 9}, {0, 0, 0}, {5, 7, 9}, {}, {2, 3, 4}},
      {{5, 7}, {3}, {2}, {1}, {}},  // empty
      {{300, 130}, {1, 3}, {299, 128}, {0, 1}, {}},
  };
  uint32_t seed = 1800;
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape));
    GraphBuilder b;
    b.Opset(13);
    b.Input("x", Rand(c.shape, seed++));
    b.Const("st", Ints(c.starts)).Const("en", Ints(c.ends));
    std::vector<std::string> ins = {"x", "st", "en"};
    if (!c.axes.empty()) {
      b.Const("ax", Ints(c.axes));
      ins.push_back("ax");
    }
    if (!c.steps.empty()) {
      if (c.axes.empty()) {
        b.Const("ax", Ints({0, 1, 2}));
        ins.push_back("ax");
      }
      b.Const("sp", Ints(c.steps));
      ins.push_back("sp");
    }
    b.Node("Slice", ins, {"y"});
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    EXPECT_EQ(ProviderOf(report, "Slice"), "cpu");
  }
  GraphBuilder b;  // opset 9: attributes
  b.Opset(9);
  b.Input("x", Rand({6, 10}, 1850));
  ir::Node& n = b.Node("Slice", {"x"}, {"y"});
  SetInts(n, "starts", {1, -4});
  SetInts(n, "ends", {4, 1000});
  b.Output("y");
  auto report = ExpectMatchesReference(b, 0, 0);
  EXPECT_EQ(ProviderOf(report, "Slice"), "cpu");
}

// MatMul absorbs Add(bias) (either operand order), a residual Add of its output's shape, and
// Relu; an Identity of a weight is shared, not copied, and still constant for packing.
TEST(CpuMatMulFusion, BiasResidualReluMatchReference) {
  struct Case {
    Shape a;
    int64_t k, n;
    std::string add;  // "bias", "bias_first", "residual", "broadcast" (not fusable), ""
    bool relu;
    int fused;
  };
  const Case cases[] = {
      {{13, 1, 27}, 27, 70, "bias_first", true, 2}, {{13, 27}, 27, 70, "bias", false, 1},
      {{13, 27}, 27, 70, "residual", true, 2},      {{13, 27}, 27, 70, "", true, 1},
      {{2, 13, 27}, 27, 70, "broadcast", false, 0},
  };
  uint32_t seed = 1900;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.add + ShapeToString(c.a));
    GraphBuilder b;
    b.Input("x", Rand(c.a, seed));
    b.Const("w0", Rand({c.k, c.n}, seed + 1));
    b.Node("Identity", {"w0"}, {"w"});
    b.Node("MatMul", {"x", "w"}, {"m"});
    std::string v = "m";
    Shape out = c.a;
    out.back() = c.n;
    if (c.add == "bias" || c.add == "bias_first") {
      b.Const("bias", Rand({c.n}, seed + 2));
      b.Node("Add",
             c.add == "bias" ? std::vector<std::string>{"m", "bias"}
                             : std::vector<std::string>{"bias", "m"},
             {"s"});
      v = "s";
    } else if (c.add == "residual" || c.add == "broadcast") {
      Shape r = out;
      if (c.add == "broadcast") r[1] = 1;
      b.Input("r", Rand(r, seed + 3));
      b.Node("Add", {"r", "m"}, {"s"});
      v = "s";
    }
    if (c.relu) {
      b.Node("Relu", {v}, {"y"});
      v = "y";
    }
    b.Output(v);
    seed += 4;
    auto report = ExpectMatchesReference(b, 1e-5, 1e-5);
    int fused = 0;
    for (const auto& r : report) fused += r.provider == "fused";
    EXPECT_EQ(fused, c.fused);
    EXPECT_EQ(ProviderOf(report, "Identity"), "cpu");
  }
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

using namespace cpu_test;

ir::Node& ConstNode(GraphBuilder& b, const std::string& out, float v) {
  Tensor t(DType::kFloat, {});
  t.data<float>()[0] = v;
  ir::Node& n = b.Node("Constant", {}, {out});
  ir::Attribute a;
  a.name = "value";
  a.type = ir::AttrType::kTensor;
  a.t = std::move(t);
  n.attributes.push_back(std::move(a));
  return n;
}

// The decomposed LayerNorm as torch 1.13 exports it (Constant nodes for 2 and eps).
// `tail`: 0 no affine, 1 Mul(gamma), 2 Mul + Add(beta); `pow`: the exponent.
GraphBuilder TorchLayerNorm(const Shape& x, int tail, float pow, bool expose_div, uint32_t seed) {
  GraphBuilder b;
  b.Opset(14);
  b.Input("x", Rand(x, seed, -3.f, 5.f));
  // torch shares LayerNorm weights through Identity nodes at the top of the graph.
  b.Const("g0", Rand({x.back()}, seed + 1));
  b.Node("Identity", {"g0"}, {"g"});
  SetInts(b.Node("ReduceMean", {"x"}, {"m"}), "axes", {-1});
  b.Node("Sub", {"x", "m"}, {"d"});
  ConstNode(b, "two", pow);
  b.Node("Pow", {"d", "two"}, {"p"});
  SetInts(b.Node("ReduceMean", {"p"}, {"v"}), "axes", {-1});
  ConstNode(b, "eps", 1e-5f);
  b.Node("Add", {"v", "eps"}, {"ve"});
  b.Node("Sqrt", {"ve"}, {"s"});
  b.Node("Div", {"d", "s"}, {"n"});
  std::string out = "n";
  if (tail >= 1) {
    b.Node("Mul", {"n", "g"}, {"ng"});
    out = "ng";
  }
  if (tail >= 2) {
    b.Const("beta", Rand({x.back()}, seed + 2));
    b.Node("Add", {"ng", "beta"}, {"y"});
    out = "y";
  }
  b.Output(out);
  if (expose_div && out != "n") b.Output("n");
  return b;
}

int CountFused(const std::vector<runtime::NodeReport>& report) {
  int fused = 0;
  for (const auto& r : report) fused += r.provider == "fused";
  return fused;
}

TEST(CpuPatterns, DecomposedLayerNormIsOneKernel) {
  uint32_t seed = 2000;
  for (const Shape& x : {Shape{13, 1, 256}, Shape{3, 127}, Shape{1}, Shape{300, 130}}) {
    for (int tail = 0; tail <= 2; ++tail) {
      SCOPED_TRACE(ShapeToString(x) + " tail " + std::to_string(tail));
      GraphBuilder b = TorchLayerNorm(x, tail, 2.f, false, seed);
      seed += 3;
      auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
      EXPECT_EQ(CountFused(report), 6 + tail);
      EXPECT_EQ(ProviderOf(report, "Sqrt"), "fused");
      EXPECT_EQ(ProviderOf(report, "ReduceMean"), "fused");  // the second one
      EXPECT_EQ(report.size() > 1 ? report[1].provider : "", "cpu (LayerNorm)");
    }
  }
}

TEST(CpuPatterns, LayerNormPatternNeedsEveryIntermediatePrivate) {
  // The normalized value is also a graph output: no fusion (it must be materialized).
  GraphBuilder exposed = TorchLayerNorm({5, 64}, 2, 2.f, true, 2100);
  EXPECT_EQ(CountFused(ExpectMatchesReference(exposed, 1e-4, 1e-5)), 0);
  // Another exponent is not a LayerNorm.
  GraphBuilder cube = TorchLayerNorm({5, 64}, 2, 3.f, false, 2110);
  EXPECT_EQ(CountFused(ExpectMatchesReference(cube, 1e-4, 1e-5)), 0);
}

TEST(CpuPatterns, ObserverSeesEveryNodeOfThePattern) {
  GraphBuilder b = TorchLayerNorm({7, 32}, 2, 2.f, false, 2200);
  auto s = Session::Create(b.model(), {.threads = 1});
  ASSERT_TRUE(s.ok());
  std::set<std::string> seen;
  runtime::RunOptions ro;
  ro.observer = [&](const ir::Node& n, const std::string&, const Value&) { seen.insert(n.name); };
  auto with = (*s)->Run(b.feeds(), ro);
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_EQ(seen.size(), b.model()->graph.nodes.size());
  for (const auto& r : (*s)->node_report()) EXPECT_NE(r.provider, "fused") << r.name;
  auto without = (*s)->Run(b.feeds());
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(CountFused((*s)->node_report()), 8);
  for (int64_t i = 0; i < (*with)[0].tensor().size(); ++i)
    EXPECT_NEAR((*with)[0].tensor().data<float>()[i], (*without)[0].tensor().data<float>()[i],
                1e-5);
}

}  // namespace
}  // namespace ferry
