// The own first-layer convolution (ops/cpu/stem.cc) against the reference Conv: 1, 3 and 4 input
// channels, output channels around the 16-channel vectors (8, 16, 24, 40, 64), kernels 1x1, 3x3,
// 3x5, 4x4, 7x7 and 11x11 with strides 1, 2, 4 and symmetric, asymmetric and no pads, images from
// 1x1 to 33x31 (border-only rows, tile remainders), batch 1 and 2, with and without bias, each
// post-op (none, Relu, Clip, SiLU, HardSwish), the output read by a conv (NHWC); every shape forced
// onto the kernel (run count checked), bit-identical at 1 and 2 threads, and the rule.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ops/cpu/stem.h"

namespace ferry {
namespace {

using namespace cpu_test;

struct Case {
  int64_t n, c, h, w, k, kh, kw, sh, sw;
  std::vector<int64_t> pads;
  bool bias;
  PostOp post;
};

const Case kCases[] = {
    {1, 3, 15, 17, 32, 3, 3, 2, 2, {1, 1, 1, 1}, true, PostOp::kSilu},
    {2, 3, 33, 31, 16, 3, 3, 2, 2, {1, 1, 1, 1}, false, PostOp::kHardSwish},
    {1, 1, 5, 7, 24, 3, 3, 1, 1, {1, 1, 1, 1}, true, PostOp::kRelu},
    {1, 4, 1, 1, 8, 3, 3, 2, 2, {1, 1, 1, 1}, true, PostOp::kClip},
    {1, 3, 29, 30, 64, 7, 7, 2, 2, {3, 3, 3, 3}, false, PostOp::kRelu},
    {1, 3, 33, 33, 40, 11, 11, 4, 4, {2, 2, 2, 2}, true, PostOp::kNone},
    {2, 3, 16, 16, 40, 4, 4, 4, 4, {0, 0, 0, 0}, true, PostOp::kNone},
    {1, 3, 13, 11, 24, 3, 5, 1, 2, {0, 2, 1, 1}, true, PostOp::kSilu},
    {1, 3, 9, 9, 16, 1, 1, 1, 1, {0, 0, 0, 0}, false, PostOp::kRelu},
};

GraphBuilder Build(const Case& c, uint32_t seed) {
  GraphBuilder b;
  b.Opset(14);
  b.Input("x", Rand({c.n, c.c, c.h, c.w}, seed++));
  b.Const("w", Rand({c.k, c.c, c.kh, c.kw}, seed++, -0.4f, 0.4f));
  std::vector<std::string> ins = {"x", "w"};
  if (c.bias) {
    b.Const("bias", Rand({c.k}, seed++));
    ins.push_back("bias");
  }
  ir::Node& conv = b.Node("Conv", ins, {"c0"});
  SetInts(conv, "pads", c.pads);
  SetInts(conv, "strides", {c.sh, c.sw});
  SetInts(conv, "kernel_shape", {c.kh, c.kw});
  const std::string y = AddPostOp(b, "c0", c.post);
  b.Const("wy", Rand({8, c.k, 1, 1}, seed++, -0.3f, 0.3f));  // a reader that takes NHWC
  b.Node("Conv", {y, "wy"}, {"out"});
  b.Output("out");
  return b;
}

class StemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::cpu::StemSupported()) GTEST_SKIP() << "no AVX-512F: oneDNN runs these";
    ops::cpu::SetStemModeForTesting(1);
  }
  void TearDown() override { ops::cpu::SetStemModeForTesting(-1); }
};

TEST_F(StemTest, MatchesReference) {
  uint32_t seed = 9500;
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message()
                 << "n=" << c.n << " c=" << c.c << " " << c.h << "x" << c.w << " k=" << c.k
                 << " kernel " << c.kh << "x" << c.kw << " stride " << c.sh << "x" << c.sw
                 << " post=" << static_cast<int>(c.post));
    GraphBuilder b = Build(c, seed);
    seed += 10;
    const uint64_t before = ops::cpu::StemRuns();
    ExpectMatchesReference(b, 1e-4, 1e-5, static_cast<int>(c.n));
    EXPECT_EQ(ops::cpu::StemRuns() - before, 2u);  // two runs
  }
}

TEST_F(StemTest, SameBitsAtOneAndTwoThreads) {
  for (const Case& c : {kCases[1], kCases[4], kCases[7]}) {
    GraphBuilder b = Build(c, 9700);
    ExpectSameBitsAtOneAndTwoThreads(b);
  }
}

// The rule (not forced): 3x3 first layers with 24+ channels or a SiLU / HardSwish; larger
// kernels, a Relu K 16, a residual, many input channels stay on oneDNN.
TEST(StemRule, SmallKernelsOnly) {
  if (!ops::cpu::StemSupported()) GTEST_SKIP() << "no AVX-512F";
  ops::cpu::StemShape s;
  s.n = 1;
  s.c = 3;
  s.h = s.w = 224;
  s.kh = s.kw = 3;
  s.sh = s.sw = 2;
  s.oh = s.ow = 112;
  s.k = 32;
  ops::cpu::Fusion relu, silu, sum;
  relu.act = ops::cpu::Fusion::Act::kRelu;
  silu.act = ops::cpu::Fusion::Act::kSwish;
  sum.sum = true;
  EXPECT_TRUE(ops::cpu::StemWanted(s, relu));
  EXPECT_FALSE(ops::cpu::StemWanted(s, sum));
  s.k = 16;
  EXPECT_FALSE(ops::cpu::StemWanted(s, relu));
  EXPECT_TRUE(ops::cpu::StemWanted(s, silu));
  s.k = 64;
  s.kh = s.kw = 7;
  EXPECT_FALSE(ops::cpu::StemWanted(s, relu));
  s.kh = s.kw = 3;
  s.c = 16;
  EXPECT_FALSE(ops::cpu::StemWanted(s, relu));
}

}  // namespace
}  // namespace ferry
