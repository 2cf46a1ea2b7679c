// The own first-layer convolution (ops/cpu/stem.cc) against the reference Conv: 1, 3 and 4 input
// channels, output channels around the 16-channel vectors (8, 16, 24, 40, 64), kernels 1x1, 3x3,
// 3x5, 4x4, 7x7 and 11x11 with strides 1, 2, 4 and symmetric, asymmetric and no pads, images from
// 1x1 to 33x31 (border-only rows, tile remainders), batch 1 and 2, with and without bias, each
// post-op (none, Relu, Clip, SiLU, HardSwish), the output read by a conv (NHWC); every shape forced
// onto the kernel (run count checked), bit-identical at 1 and 2 threads, and the rule. The first
// conv + [act] + MaxPool pattern on the same kernel: pools 3x3 / 2x2 / 3x2, strides 1 and 2, pads,
// ceil_mode (with a last window dropped), batch 2, strips of one pooled row (the overlapping conv
// rows carried between strips) and of many, a NaN that must win its windows, against the reference
// and bit-identical to the conv and pool run separately, at 1 and 2 threads; a MaxPool with an
// Indices output, or a conv output read twice, is not taken.
#include <cmath>
#include <cstring>
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

// With a MaxPool after it (the pattern): the 7x7 stems too, not 11x11, not K 16 with a Relu.
TEST(StemRule, PoolPatternTakesSevenBySeven) {
  if (!ops::cpu::StemSupported()) GTEST_SKIP() << "no AVX-512F";
  ops::cpu::StemShape s;
  s.n = 1;
  s.c = 3;
  s.h = s.w = 224;
  s.kh = s.kw = 7;
  s.sh = s.sw = 2;
  s.oh = s.ow = 112;
  s.k = 64;
  ops::cpu::Fusion relu;
  relu.act = ops::cpu::Fusion::Act::kRelu;
  EXPECT_TRUE(ops::cpu::StemPoolWanted(s, relu));
  s.kh = s.kw = 11;
  EXPECT_FALSE(ops::cpu::StemPoolWanted(s, relu));
  s.kh = s.kw = 3;
  s.k = 16;
  EXPECT_FALSE(ops::cpu::StemPoolWanted(s, relu));
  s.k = 96;  // SqueezeNet 1.0's: more than the kernel's 64 channels
  s.kh = s.kw = 7;
  EXPECT_FALSE(ops::cpu::StemPoolWanted(s, relu));
}

// ---- The first conv + [act] + MaxPool pattern ----

struct PoolWindow {
  std::vector<int64_t> k, s, pads;
  int64_t ceil;
};

struct PoolCase {
  Case conv;
  PoolWindow pool;
  bool nan;  // a NaN input pixel: it must win the windows its conv outputs reach
};

const PoolCase kPoolCases[] = {
    // SqueezeNet 1.1's stem (3x3 stride 2, no pads) and pool (3x3 stride 2, ceil_mode).
    {{1, 3, 31, 31, 64, 3, 3, 2, 2, {0, 0, 0, 0}, true, PostOp::kRelu},
     {{3, 3}, {2, 2}, {0, 0, 0, 0}, 1},
     false},
    // ResNet's / ShuffleNetV2's: 7x7 / 3x3 stride 2 padded, pool 3x3 stride 2 pad 1.
    {{2, 3, 29, 27, 64, 7, 7, 2, 2, {3, 3, 3, 3}, false, PostOp::kRelu},
     {{3, 3}, {2, 2}, {1, 1, 1, 1}, 0},
     false},
    {{1, 3, 24, 20, 24, 3, 3, 2, 2, {1, 1, 1, 1}, true, PostOp::kClip},
     {{3, 3}, {2, 2}, {1, 1, 1, 1}, 0},
     true},
    // 2x2 stride 2 after a SiLU; an asymmetric 3x2 window with stride 1 x 2 and odd K.
    {{1, 1, 17, 18, 40, 3, 3, 1, 1, {1, 1, 1, 1}, true, PostOp::kSilu},
     {{2, 2}, {2, 2}, {0, 0, 0, 0}, 0},
     false},
    {{2, 4, 13, 15, 13, 3, 5, 1, 2, {1, 2, 1, 2}, false, PostOp::kNone},
     {{3, 2}, {1, 2}, {1, 0, 2, 1}, 0},
     true},
    // ceil_mode: conv output 8x8, pool 2 stride 2 pad 1: ceil gives 5 windows, the last one
    // starts in the end pad and is dropped.
    {{1, 3, 8, 8, 16, 3, 3, 1, 1, {1, 1, 1, 1}, true, PostOp::kHardSwish},
     {{2, 2}, {2, 2}, {1, 1, 1, 1}, 1},
     false},
};

GraphBuilder BuildPool(const PoolCase& pc, uint32_t seed, bool indices = false,
                       bool second_reader = false) {
  const Case& c = pc.conv;
  GraphBuilder b;
  b.Opset(14);
  Tensor x = Rand({c.n, c.c, c.h, c.w}, seed++);
  if (pc.nan) x.data<float>()[c.w + 2] = std::nanf("");
  b.Input("x", std::move(x));
  b.Const("w", Rand({c.k, c.c, c.kh, c.kw}, seed++, -0.4f, 0.4f));
  std::vector<std::string> ins = {"x", "w"};
  if (c.bias) {
    b.Const("bias", Rand({c.k}, seed++));
    ins.push_back("bias");
  }
  ir::Node& conv = b.Node("Conv", ins, {"c0"});
  SetInts(conv, "pads", c.pads);
  SetInts(conv, "strides", {c.sh, c.sw});
  const std::string y = AddPostOp(b, "c0", c.post);
  std::vector<std::string> pool_outs = {"p"};
  if (indices) pool_outs.push_back("idx");
  ir::Node& mp = b.Node("MaxPool", {y}, pool_outs);
  SetInts(mp, "kernel_shape", pc.pool.k);
  SetInts(mp, "strides", pc.pool.s);
  SetInts(mp, "pads", pc.pool.pads);
  SetInt(mp, "ceil_mode", pc.pool.ceil);
  b.Const("wy", Rand({8, c.k, 1, 1}, seed++, -0.3f, 0.3f));  // a reader that takes NHWC
  b.Node("Conv", {"p", "wy"}, {"out"});
  b.Output("out");
  if (indices) b.Output("idx");
  if (second_reader) {
    b.Node("Relu", {y}, {"y2"});
    b.Output("y2");
  }
  return b;
}

class StemPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ops::cpu::StemSupported()) GTEST_SKIP() << "no AVX-512F: oneDNN runs these";
    ops::cpu::SetStemPoolModeForTesting(1);
  }
  void TearDown() override {
    ops::cpu::SetStemPoolModeForTesting(-1);
    ops::cpu::SetStemPoolStripBytesForTesting(0);
  }
};

TEST_F(StemPoolTest, MatchesReference) {
  uint32_t seed = 9800;
  for (int64_t strip_bytes : {int64_t{1}, int64_t{0}})  // one pooled row per strip; the default
    for (const PoolCase& pc : kPoolCases) {
      const Case& c = pc.conv;
      SCOPED_TRACE(::testing::Message()
                   << "n=" << c.n << " " << c.h << "x" << c.w << " k=" << c.k << " kernel " << c.kh
                   << "x" << c.kw << " pool " << pc.pool.k[0] << "x" << pc.pool.k[1] << " stride "
                   << pc.pool.s[0] << "x" << pc.pool.s[1] << " ceil " << pc.pool.ceil
                   << " strip bytes " << strip_bytes);
      ops::cpu::SetStemPoolStripBytesForTesting(strip_bytes);
      GraphBuilder b = BuildPool(pc, seed);
      seed += 10;
      const uint64_t before = ops::cpu::StemPoolRuns();
      auto report = ExpectMatchesReference(b, 1e-4, 1e-5, static_cast<int>(c.n));
      EXPECT_EQ(ops::cpu::StemPoolRuns() - before, 2u);  // two runs
      EXPECT_EQ(ProviderOfOp(report, "MaxPool"), "fused");
    }
}

// The pattern's output has the bits of the conv and the pool run separately (the same conv tiles
// and max order), at 1 and 2 threads.
TEST_F(StemPoolTest, SameBitsAsSeparateKernels) {
  ops::cpu::SetStemModeForTesting(1);  // the separate conv on the same kernel
  ops::cpu::SetStemPoolStripBytesForTesting(1);
  for (const PoolCase& pc : kPoolCases) {
    GraphBuilder b = BuildPool(pc, 9900);
    std::vector<std::vector<Value>> outs;
    for (int fused : {1, 0})
      for (int threads : {1, 2}) {
        ops::cpu::SetStemPoolModeForTesting(fused);
        std::vector<runtime::NodeReport> report;
        outs.push_back(RunOnCpu(b, threads, &report));
        ASSERT_FALSE(outs.back().empty());
        EXPECT_EQ(ProviderOfOp(report, "MaxPool"), fused ? "fused" : "cpu");
      }
    for (size_t i = 1; i < outs.size(); ++i) {
      const Tensor& a = outs[0][0].tensor();
      const Tensor& o = outs[i][0].tensor();
      ASSERT_EQ(a.shape(), o.shape());
      EXPECT_EQ(0, std::memcmp(a.raw(), o.raw(), a.nbytes())) << "variant " << i;
    }
  }
  ops::cpu::SetStemModeForTesting(-1);
}

// Not the pattern: a MaxPool that also writes Indices, a conv output read outside the match.
TEST_F(StemPoolTest, OtherReadersKeepTheStepsSeparate) {
  for (bool indices : {true, false}) {
    GraphBuilder b = BuildPool(kPoolCases[1], 9950, indices, !indices);
    const uint64_t before = ops::cpu::StemPoolRuns();
    SessionOptions ref_opts;
    ref_opts.provider = "reference";
    auto ref = Session::Create(b.model(), ref_opts);
    auto cpu = Session::Create(b.model(), {});
    ASSERT_TRUE(ref.ok() && cpu.ok());
    auto want = (*ref)->Run(b.feeds());
    auto got = (*cpu)->Run(b.feeds());
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_EQ(ops::cpu::StemPoolRuns(), before);
    EXPECT_NE(ProviderOfOp((*cpu)->node_report(), "MaxPool"), "fused");
  }
}

// A conv the reference rejects (stride 0) inside the pattern: the kernel declines and the Conv
// step reports the error (no crash, no division by the stride).
TEST_F(StemPoolTest, BadConvGeometryIsReportedByTheConv) {
  PoolCase bad = kPoolCases[0];
  bad.conv.sh = 0;
  GraphBuilder b = BuildPool(bad, 9990);
  auto cpu = Session::Create(b.model(), {});
  if (!cpu.ok()) {
    EXPECT_NE(cpu.status().message().find("Conv"), std::string::npos) << cpu.status().message();
    return;
  }
  auto got = (*cpu)->Run(b.feeds());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("strides"), std::string::npos) << got.status().message();
}

}  // namespace
}  // namespace ferry
