// The own 1x1 convolution for large channels-last images (ops/cpu/pointwise.cc) against the
// reference Conv: input channels 3, 16, 17, 144, output channels around the 16-channel vectors and
// the 64-channel blocks (16, 24, 48, 50, 72, 100, 144, 256), images of 784 to 1750 pixels (tile
// remainders), batch 1 and 2, with and without bias, each fused post-op (residual Add, Add + Relu,
// Relu, Clip, SiLU, HardSwish) and none; the input, the residual and the reader are oneDNN 1x1
// convs (5 channels in, 8 out: not taken by the rule), so everything around it is NHWC. The rule's
// choice (run count), bit-identical results at 1 and 2 threads, and a plain input (the graph
// input) staying on oneDNN.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ops/cpu/pointwise.h"

namespace ferry {
namespace {

using namespace cpu_test;

enum class Post { kNone, kAdd, kAddRelu, kRelu, kClip, kSilu, kHardSwish };

struct Case {
  int64_t n, c, h, w, k;
  bool bias;
  Post post;
  bool nhwc_in;
};

const Case kCases[] = {
    {1, 16, 28, 28, 16, true, Post::kAdd, true},
    {2, 3, 29, 31, 24, false, Post::kRelu, true},
    {1, 17, 28, 30, 48, true, Post::kNone, true},
    {1, 144, 28, 28, 50, true, Post::kAddRelu, true},
    {1, 16, 35, 50, 72, true, Post::kSilu, true},
    {2, 24, 28, 29, 100, false, Post::kHardSwish, true},
    {1, 144, 31, 28, 144, true, Post::kClip, true},
    {1, 40, 28, 28, 256, true, Post::kSilu, true},
    {1, 16, 28, 28, 64, true, Post::kRelu, false},
};

GraphBuilder Build(const Case& c, uint32_t seed) {
  GraphBuilder b;
  b.Opset(14);
  const int64_t c0 = c.nhwc_in ? 5 : c.c;
  b.Input("x", Rand({c.n, c0, c.h, c.w}, seed++));
  std::string in = "x";
  if (c.nhwc_in) {
    b.Const("w0", Rand({c.c, c0, 1, 1}, seed++, -0.5f, 0.5f));
    b.Node("Conv", {"x", "w0"}, {"x0"});
    in = "x0";
  }
  const bool add = c.post == Post::kAdd || c.post == Post::kAddRelu;
  if (add) {  // computed first, as a residual is
    b.Input("r", Rand({c.n, 5, c.h, c.w}, seed++));
    b.Const("wr", Rand({c.k, 5, 1, 1}, seed++, -0.5f, 0.5f));
    b.Node("Conv", {"r", "wr"}, {"rr"});
  }
  b.Const("w", Rand({c.k, c.c, 1, 1}, seed++, -0.3f, 0.3f));
  std::vector<std::string> ins = {in, "w"};
  if (c.bias) {
    b.Const("bias", Rand({c.k}, seed++));
    ins.push_back("bias");
  }
  b.Node("Conv", ins, {"y0"});
  std::string y = "y0";
  if (add) {
    b.Node("Add", {"rr", y}, {"s"});
    y = "s";
  }
  const PostOp act = c.post == Post::kRelu || c.post == Post::kAddRelu ? PostOp::kRelu
                     : c.post == Post::kClip                           ? PostOp::kClip
                     : c.post == Post::kSilu                           ? PostOp::kSilu
                     : c.post == Post::kHardSwish                      ? PostOp::kHardSwish
                                                                       : PostOp::kNone;
  y = AddPostOp(b, y, act);
  b.Const("wy", Rand({8, c.k, 1, 1}, seed++, -0.2f, 0.2f));
  b.Node("Conv", {y, "wy"}, {"out"});
  b.Output("out");
  return b;
}

class PointwiseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::cpu::PointwiseSupported()) GTEST_SKIP() << "no AVX-512F: oneDNN runs these";
  }
};

TEST_F(PointwiseTest, MatchesReference) {
  uint32_t seed = 9100;
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message()
                 << "n=" << c.n << " c=" << c.c << " " << c.h << "x" << c.w << " k=" << c.k
                 << " post=" << static_cast<int>(c.post) << " nhwc_in=" << c.nhwc_in);
    GraphBuilder b = Build(c, seed);
    seed += 10;
    const uint64_t before = ops::cpu::PointwiseRuns();
    ExpectMatchesReference(b, 1e-4, 1e-5, static_cast<int>(c.n));
    EXPECT_EQ(ops::cpu::PointwiseRuns() - before, c.nhwc_in ? 2u : 0u);  // two runs
  }
}

TEST_F(PointwiseTest, SameBitsAtOneAndTwoThreads) {
  for (const Case& c : {kCases[1], kCases[3], kCases[4]}) {
    GraphBuilder b = Build(c, 9300);
    ExpectSameBitsAtOneAndTwoThreads(b);
  }
}

// The rule: large images with few channels (14x14: few input channels) and a post-op or 48+
// output channels.
TEST(PointwiseRule, LargeImagesFewChannels) {
  if (!ops::cpu::PointwiseSupported()) GTEST_SKIP() << "no AVX-512F";
  ops::cpu::Fusion relu;
  relu.act = ops::cpu::Fusion::Act::kRelu;
  EXPECT_TRUE(ops::cpu::PointwiseWanted(112 * 112, 16, 64, relu));
  EXPECT_TRUE(ops::cpu::PointwiseWanted(28 * 28, 144, 48, {}));
  EXPECT_FALSE(ops::cpu::PointwiseWanted(112 * 112, 32, 16, {}));   // plain projection to 16
  EXPECT_FALSE(ops::cpu::PointwiseWanted(55 * 55, 128, 16, relu));  // squeeze to 16 + Relu
  ops::cpu::Fusion sum;
  sum.sum = true;
  EXPECT_TRUE(ops::cpu::PointwiseWanted(112 * 112, 16, 16, sum));  // 16 + residual
  ops::cpu::Fusion silu;
  silu.act = ops::cpu::Fusion::Act::kSwish;
  EXPECT_TRUE(ops::cpu::PointwiseWanted(14 * 14, 112, 672, silu));   // 14x14 expand, SiLU
  EXPECT_FALSE(ops::cpu::PointwiseWanted(14 * 14, 64, 384, relu));   // 14x14 expand, Relu
  EXPECT_FALSE(ops::cpu::PointwiseWanted(14 * 14, 672, 112, silu));  // 14x14 projection
  EXPECT_FALSE(ops::cpu::PointwiseWanted(7 * 7, 112, 672, silu));    // small image
  EXPECT_FALSE(ops::cpu::PointwiseWanted(56 * 56, 512, 64, relu));   // many channels
}

}  // namespace
}  // namespace ferry
