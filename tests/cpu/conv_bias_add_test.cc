// A Conv followed by an Add of one value per output channel ([1, K, 1, 1], [K, 1, 1], a
// scalar: paddle2onnx writes every conv's bias this way) fuses: the operand joins the conv's
// bias (ConvState::bias_from_sum) on every conv path — oneDNN, Winograd, the own GEMM, the
// depthwise and pointwise kernels, the 1-D conv — with or without a bias input, and an
// activation after it fuses too. Equal to the reference; the Add reported as fused. Likewise an
// inference BatchNormalization of constant statistics right after a Conv (paddle2onnx leaves
// them unfolded): the conv scales its weights and bias (Fusion::affine).
#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

// x -> Conv(w [, b]) -> "y", same-size pads; seeds taken from *seed.
ir::Node& AddConv(GraphBuilder& b, const Shape& x, const Shape& w, int64_t group, bool bias,
                  uint32_t* seed) {
  b.Input("x", Rand(x, (*seed)++));
  b.Const("w", Rand(w, (*seed)++, -0.3f, 0.3f));
  std::vector<std::string> in = {"x", "w"};
  if (bias) {
    b.Const("b", Rand({w[0]}, (*seed)++));
    in.push_back("b");
  }
  ir::Node& conv = b.Node("Conv", in, {"y"});
  SetInt(conv, "group", group);
  const int64_t pad = w.back() / 2;
  SetInts(
      conv, "pads",
      x.size() == 3 ? std::vector<int64_t>{pad, pad} : std::vector<int64_t>{pad, pad, pad, pad});
  return conv;
}

struct Case {
  const char* what;
  Shape x, w;
  int64_t group;
  bool bias;
  Shape add;  // the Add's constant operand
  bool relu;
};

TEST(CpuConvBiasAdd, PerChannelAddJoinsTheBias) {
  const Case cases[] = {
      {"3x3 (Winograd or oneDNN)", {1, 16, 20, 18}, {32, 16, 3, 3}, 1, false, {1, 32, 1, 1}, true},
      {"3x3 with a bias", {1, 16, 20, 18}, {32, 16, 3, 3}, 1, true, {32, 1, 1}, false},
      {"1x1 on a large image", {1, 32, 56, 56}, {64, 32, 1, 1}, 1, false, {1, 64, 1, 1}, true},
      {"depthwise", {1, 32, 28, 28}, {32, 1, 3, 3}, 32, true, {1, 32, 1, 1}, true},
      {"a scalar", {2, 8, 9, 11}, {12, 8, 3, 3}, 1, true, {1}, false},
      {"1x1 image", {2, 64, 1, 1}, {16, 64, 1, 1}, 1, false, {1, 16, 1, 1}, true},
      {"1-D", {1, 16, 40}, {24, 16, 3}, 1, true, {1, 24, 1}, true},
  };
  uint32_t seed = 8800;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    GraphBuilder b;
    AddConv(b, c.x, c.w, c.group, c.bias, &seed);
    b.Const("a", Rand(c.add, seed++));
    b.Node("Add", {"y", "a"}, {"s"}).name = "add";
    std::string out = "s";
    if (c.relu) {
      b.Node("Relu", {"s"}, {"r"}).name = "relu";
      out = "r";
    }
    b.Output(out);
    const auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
    EXPECT_EQ(ProviderOfNode(report, "add"), "fused");
    if (c.relu) {
      EXPECT_EQ(ProviderOfNode(report, "relu"), "fused");
    }
  }
}

// An Add whose operand is not per channel (a full residual of another shape broadcast along H)
// is not a bias: the Add runs on its own and the result is still right.
TEST(CpuConvBiasAdd, OtherBroadcastsStayAnAdd) {
  GraphBuilder b;
  b.Input("x", Rand({1, 8, 10, 10}, 8900));
  b.Const("w", Rand({8, 8, 3, 3}, 8901, -0.3f, 0.3f));
  SetInts(b.Node("Conv", {"x", "w"}, {"y"}), "pads", {1, 1, 1, 1});
  b.Const("a", Rand({1, 1, 10, 1}, 8902));
  b.Node("Add", {"y", "a"}, {"s"}).name = "add";
  b.Output("s");
  const auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
  EXPECT_NE(ProviderOfNode(report, "add"), "fused");
}

struct BnCase {
  const char* what;
  Shape x, w;
  int64_t group;
  bool bias;
  const char* act;  // "", "Relu", "HardSwish"
};

TEST(CpuConvBatchNorm, FoldsIntoTheConvOnEveryPath) {
  const BnCase cases[] = {
      {"3x3 + HardSwish (PP-LCNet)", {1, 16, 20, 18}, {32, 16, 3, 3}, 1, false, "HardSwish"},
      {"depthwise + HardSwish", {1, 32, 28, 28}, {32, 1, 3, 3}, 32, false, "HardSwish"},
      {"1x1 with a bias + Relu", {1, 32, 56, 56}, {64, 32, 1, 1}, 1, true, "Relu"},
      {"grouped", {1, 32, 14, 14}, {32, 8, 3, 3}, 4, false, ""},
      {"1x1 image", {2, 64, 1, 1}, {16, 64, 1, 1}, 1, false, "Relu"},
      {"1-D", {1, 16, 40}, {24, 16, 3}, 1, true, "Relu"},
      {"5x5 stride 2", {2, 8, 17, 15}, {12, 8, 5, 5}, 1, false, "HardSwish"},
  };
  uint32_t seed = 9100;
  for (const BnCase& c : cases) {
    SCOPED_TRACE(c.what);
    GraphBuilder b;
    b.Opset(14);
    ir::Node& conv = AddConv(b, c.x, c.w, c.group, c.bias, &seed);
    if (std::string(c.what) == "5x5 stride 2") SetInts(conv, "strides", {2, 2});
    AddBnStats(b, "", c.w[0], &seed);
    b.Node("BatchNormalization", {"y", "s", "bb", "m", "v"}, {"n"}).name = "bn";
    std::string out = "n";
    if (*c.act) {
      b.Node(c.act, {"n"}, {"a"}).name = "act";
      out = "a";
    }
    b.Output(out);
    const auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
    EXPECT_EQ(ProviderOfNode(report, "bn"), "fused");
    if (*c.act) {
      EXPECT_EQ(ProviderOfNode(report, "act"), "fused");
    }
  }
}

// Statistics computed at run time (a graph input) are not folded: the BatchNormalization runs on
// its own, and the conv is still right.
TEST(CpuConvBatchNorm, StatisticsThatChangeStayABatchNorm) {
  GraphBuilder b;
  b.Input("x", Rand({1, 8, 10, 10}, 9200));
  b.Const("w", Rand({8, 8, 3, 3}, 9201, -0.3f, 0.3f));
  SetInts(b.Node("Conv", {"x", "w"}, {"y"}), "pads", {1, 1, 1, 1});
  b.Input("s", Rand({8}, 9202, 0.5f, 1.5f));
  b.Const("bb", Rand({8}, 9203));
  b.Const("m", Rand({8}, 9204));
  b.Const("v", Rand({8}, 9205, 0.1f, 2.f));
  b.Node("BatchNormalization", {"y", "s", "bb", "m", "v"}, {"n"}).name = "bn";
  b.Output("n");
  const auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
  EXPECT_NE(ProviderOfNode(report, "bn"), "fused");
}

}  // namespace
}  // namespace ferry::cpu_test
