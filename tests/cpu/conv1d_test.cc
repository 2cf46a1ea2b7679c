// The cpu provider's 1-D Conv (conv1d.cc: run as the 2-D Conv with a unit first spatial dim)
// against the reference kernel: awkward lengths, strides, dilations, pads, groups, a bias, the
// fused Relu and residual Add, and the STFT-as-Conv shape of audio front ends.
#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ops/cpu/families.h"
#include "ops/cpu/gemm_avx2.h"

namespace ferry::cpu_test {
namespace {

struct Case {
  int64_t n, c, k, len, ks, stride, dil, pad_b, pad_e, group;
  bool bias;
  PostOp post;
  bool residual;
};

void Check(const Case& c, uint32_t seed) {
  GraphBuilder b;
  b.Input("x", Rand({c.n, c.c, c.len}, seed));
  b.Const("w", Rand({c.k, c.c / c.group, c.ks}, seed + 1, -0.5f, 0.5f));
  std::vector<std::string> in = {"x", "w"};
  if (c.bias) {
    b.Const("b", Rand({c.k}, seed + 2));
    in.push_back("b");
  }
  ir::Node& conv = b.Node("Conv", in, {"y"});
  SetInts(conv, "kernel_shape", {c.ks});
  SetInts(conv, "strides", {c.stride});
  SetInts(conv, "dilations", {c.dil});
  SetInts(conv, "pads", {c.pad_b, c.pad_e});
  SetInt(conv, "group", c.group);
  std::string y = "y";
  if (c.residual) {
    const int64_t lo = (c.len + c.pad_b + c.pad_e - c.dil * (c.ks - 1) - 1) / c.stride + 1;
    b.Input("r", Rand({c.n, c.k, lo}, seed + 3));
    b.Node("Add", {"y", "r"}, {"s"});
    y = "s";
  }
  b.Output(AddPostOp(b, y, c.post));
  const auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
  EXPECT_EQ(ProviderOfOp(report, "Conv"), "cpu") << "len " << c.len << " k " << c.ks;
  if (c.post != PostOp::kNone || c.residual) {
    EXPECT_EQ(ProviderOfOp(report, c.residual                ? "Add"
                                   : c.post == PostOp::kClip ? "Clip"
                                                             : "Relu"),
              "fused");
  }
}

TEST(CpuConv1d, MatchesReferenceOnAwkwardShapes) {
  const Case cases[] = {
      {1, 3, 5, 13, 3, 1, 1, 1, 1, 1, true, PostOp::kNone, false},
      {2, 7, 4, 127, 5, 2, 1, 2, 1, 1, false, PostOp::kRelu, false},
      {1, 8, 8, 64, 3, 1, 2, 2, 2, 4, true, PostOp::kNone, false},       // grouped, dilated
      {1, 16, 16, 50, 3, 1, 1, 1, 1, 16, true, PostOp::kRelu, false},    // depthwise
      {3, 6, 6, 31, 3, 1, 1, 1, 1, 1, true, PostOp::kRelu, true},        // residual then Relu
      {1, 1, 34, 576, 64, 32, 1, 0, 0, 1, false, PostOp::kNone, false},  // STFT as a Conv
      {1, 4, 9, 1, 1, 1, 1, 0, 0, 1, true, PostOp::kNone, false},        // one sample
  };
  uint32_t seed = 10;
  for (const Case& c : cases) Check(c, seed += 7);
}

// Short outputs (N * Lo <= 16) run on the own GEMM path (im2col rows x W^T): silero-vad's
// STFT (1 -> 258 channels, k 256, stride 128, 4 positions) and encoder shapes, pads, strides,
// dilation, a batch of 2, no bias, Relu and Clip fused.
TEST(CpuConv1d, ShortOutputsOnTheOwnGemmMatchReference) {
  const Case cases[] = {
      {1, 1, 258, 640, 256, 128, 1, 0, 0, 1, false, PostOp::kNone, false},  // STFT, Lo 4
      {1, 129, 128, 4, 3, 1, 1, 1, 1, 1, true, PostOp::kRelu, false},       // encoder 0
      {1, 128, 64, 4, 3, 2, 1, 1, 1, 1, true, PostOp::kClip, false},        // stride 2, Clip
      {2, 5, 17, 9, 3, 2, 2, 2, 1, 1, false, PostOp::kNone, false},         // dilated, batch 2
      {1, 7, 3, 1, 1, 1, 1, 0, 0, 1, true, PostOp::kNone, false},           // one sample
      {4, 3, 33, 6, 5, 3, 1, 2, 3, 1, true, PostOp::kRelu, false},          // 4 x 3 rows
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    const uint64_t before = ops::cpu::OwnConv1dRuns();
    Check(c, seed += 7);
    if (ops::cpu::GemmAvx2Supported()) {
      EXPECT_EQ(ops::cpu::OwnConv1dRuns() - before, 2u) << "len " << c.len << " k " << c.ks;
    }
  }
}

// Without kernel_shape (taken from W) and with SAME_UPPER padding.
TEST(CpuConv1d, KernelShapeFromWeightsAndAutoPad) {
  GraphBuilder b;
  b.Input("x", Rand({2, 5, 23}, 3));
  b.Const("w", Rand({6, 5, 4}, 4));
  ir::Node& conv = b.Node("Conv", {"x", "w"}, {"y"});
  ir::Attribute a;
  a.name = "auto_pad";
  a.type = ir::AttrType::kString;
  a.s = "SAME_UPPER";
  conv.attributes.push_back(std::move(a));
  SetInts(conv, "strides", {2});
  b.Output("y");
  const auto report = ExpectMatchesReference(b);
  EXPECT_EQ(ProviderOfOp(report, "Conv"), "cpu");
}

}  // namespace
}  // namespace ferry::cpu_test
