// The own depthwise convolution (ops/cpu/dwconv.cc) against the reference Conv on seeded awkward
// shapes: channels 1, 3, 13, 16, 17, 33, 144 (around the 16-channel vectors and the 64-channel
// passes), images from 1x1 to 23x29 (border-only rows and columns, pixel counts around the
// 8-pixel tile, rows of several tiles), kernels 3x3, 5x5, 3x5 and 1x1, strides 1 and 2 (also
// mixed), symmetric, asymmetric, oversized and SAME_UPPER pads, with and without bias, batch 1 and
// 2, each fused post-op (Relu, Clip, SiLU, HardSwish, residual Add), plain or NHWC input and output
// (a 1x1 conv around it), weights that are not initializers; bit-identical at 1 and 2 threads.
// Switched off, oneDNN runs instead.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ops/cpu/dwconv.h"

namespace ferry {
namespace {

using namespace cpu_test;
using ops::cpu::Fusion;

enum class Post { kNone, kRelu, kClip, kSilu, kHardSwish, kAdd, kAddRelu };

struct Case {
  int64_t n, c, h, w, kh, kw, sh, sw;
  std::vector<int64_t> pads;  // empty: auto_pad SAME_UPPER
  bool bias;
  Post post;
  bool nhwc;  // 1x1 convs before and after (NHWC in and out), else plain graph input / output
};

const Case kCases[] = {
    {1, 1, 1, 1, 3, 3, 1, 1, {1, 1, 1, 1}, true, Post::kNone, false},
    {2, 3, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, false, Post::kRelu, true},
    {1, 13, 13, 13, 3, 3, 2, 2, {1, 1, 1, 1}, true, Post::kSilu, true},
    {1, 16, 23, 29, 3, 3, 1, 1, {1, 1, 1, 1}, true, Post::kSilu, true},
    {2, 17, 7, 13, 5, 5, 1, 1, {2, 2, 2, 2}, true, Post::kHardSwish, true},
    {1, 33, 13, 7, 5, 5, 2, 2, {1, 2, 2, 1}, false, Post::kClip, false},
    {1, 144, 9, 9, 3, 3, 1, 1, {1, 1, 1, 1}, true, Post::kAddRelu, true},
    {1, 144, 7, 7, 5, 5, 1, 1, {2, 2, 2, 2}, true, Post::kSilu, true},
    {1, 144, 14, 14, 5, 5, 2, 2, {1, 1, 2, 2}, true, Post::kSilu, true},
    {2, 13, 3, 3, 5, 5, 1, 1, {2, 2, 2, 2}, true, Post::kAdd, false},
    {1, 17, 1, 7, 3, 5, 1, 1, {1, 2, 1, 2}, true, Post::kRelu, true},
    {1, 33, 12, 11, 3, 5, 2, 1, {0, 2, 1, 0}, true, Post::kNone, true},
    {1, 16, 13, 13, 3, 3, 2, 2, {}, true, Post::kHardSwish, true},
    {1, 3, 11, 10, 3, 3, 2, 2, {}, false, Post::kSilu, false},
    {2, 17, 6, 5, 3, 3, 1, 1, {3, 0, 1, 3}, true, Post::kRelu, true},  // oversized pads
    {1, 13, 5, 19, 5, 5, 2, 2, {0, 0, 0, 0}, true, Post::kClip, true},
    {1, 33, 8, 8, 1, 1, 1, 1, {0, 0, 0, 0}, true, Post::kRelu, true},
    {1, 144, 17, 17, 3, 3, 1, 1, {1, 1, 1, 1}, true, Post::kAdd, true},
    // Rows with several 8-pixel interior tiles (the register-reuse kernel), masked tails.
    {1, 33, 5, 40, 3, 3, 1, 1, {1, 1, 1, 1}, true, Post::kAddRelu, true},
    {1, 17, 6, 37, 5, 5, 2, 2, {2, 2, 2, 2}, false, Post::kSilu, true},
    {2, 24, 4, 21, 5, 5, 1, 1, {2, 2, 2, 2}, true, Post::kHardSwish, false},
    {1, 40, 3, 35, 3, 3, 2, 2, {0, 1, 1, 0}, true, Post::kClip, true},
};

// Adds the case's graph to b; returns the number of depthwise convs in it (1).
void Build(GraphBuilder& b, const Case& s, uint32_t& seed, bool w_input = false) {
  b.Opset(17);
  b.Input("x", Rand({s.n, s.c, s.h, s.w}, seed++));
  std::string in = "x";
  if (s.nhwc) {
    b.Const("w0", Rand({s.c, s.c, 1, 1}, seed++, -0.5f, 0.5f));
    b.Node("Conv", {"x", "w0"}, {"x1"});
    in = "x1";
  }
  if (w_input)
    b.Input("w", Rand({s.c, 1, s.kh, s.kw}, seed++));
  else
    b.Const("w", Rand({s.c, 1, s.kh, s.kw}, seed++));
  std::vector<std::string> ins = {in, "w"};
  if (s.bias) {
    b.Const("b", Rand({s.c}, seed++));
    ins.push_back("b");
  }
  ir::Node& conv = b.Node("Conv", ins, {"d"});
  SetInt(conv, "group", s.c);
  SetInts(conv, "kernel_shape", {s.kh, s.kw});
  SetInts(conv, "strides", {s.sh, s.sw});
  if (s.pads.empty()) {
    ir::Attribute a;
    a.name = "auto_pad";
    a.type = ir::AttrType::kString;
    a.s = "SAME_UPPER";
    conv.attributes.push_back(std::move(a));
  } else {
    SetInts(conv, "pads", s.pads);
  }
  std::string out = "d";
  if (s.post == Post::kAdd || s.post == Post::kAddRelu) {
    // The residual: the conv's input (same shape at stride 1 with "same" pads).
    b.Node("Add", {"d", in}, {"p"});
    out = AddPostOp(b, "p", s.post == Post::kAddRelu ? PostOp::kRelu : PostOp::kNone);
  } else {
    out = AddPostOp(b, "d",
                    s.post == Post::kRelu        ? PostOp::kRelu
                    : s.post == Post::kClip      ? PostOp::kClip
                    : s.post == Post::kSilu      ? PostOp::kSilu
                    : s.post == Post::kHardSwish ? PostOp::kHardSwish
                                                 : PostOp::kNone);
  }
  if (s.nhwc) {
    b.Const("w2", Rand({5, s.c, 1, 1}, seed++, -0.5f, 0.5f));
    b.Node("Conv", {out, "w2"}, {"y"});
    out = "y";
  }
  b.Output(out);
}

std::string Name(const Case& s) {
  std::string p;
  for (int64_t v : s.pads) p += std::to_string(v);
  return "n=" + std::to_string(s.n) + " c=" + std::to_string(s.c) + " " + std::to_string(s.h) +
         "x" + std::to_string(s.w) + " k=" + std::to_string(s.kh) + "x" + std::to_string(s.kw) +
         " s=" + std::to_string(s.sh) + std::to_string(s.sw) + " pads=" + (p.empty() ? "same" : p) +
         " bias=" + std::to_string(s.bias) + " post=" + std::to_string(static_cast<int>(s.post)) +
         " nhwc=" + std::to_string(s.nhwc);
}

class DwConvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512F: oneDNN runs";
    ops::cpu::SetDwConvMode(1);  // every case, 3x5 and 1x1 too
  }
  void TearDown() override { ops::cpu::SetDwConvMode(-1); }
};

TEST_F(DwConvTest, MatchesReferenceAndOneThread) {
  uint32_t seed = 7100;
  for (const Case& s : kCases) {
    SCOPED_TRACE(Name(s));
    GraphBuilder b;
    Build(b, s, seed);
    const uint64_t before = ops::cpu::DwConvRuns();
    auto report = ExpectMatchesReference(b, 1e-4, 1e-5, 2);
    EXPECT_EQ(ops::cpu::DwConvRuns() - before, 2u);  // the two cpu runs
    for (const auto& r : report)
      EXPECT_TRUE(r.provider == "cpu" || r.provider == "fused") << r.name << ": " << r.provider;
    ExpectSameBitsAtOneAndTwoThreads(b);
  }
}

// W a graph input: packed again on every run.
TEST_F(DwConvTest, NonConstantWeights) {
  uint32_t seed = 7300;
  for (const Case& s : {kCases[4], kCases[8]}) {
    SCOPED_TRACE(Name(s));
    GraphBuilder b;
    Build(b, s, seed, /*w_input=*/true);
    const uint64_t before = ops::cpu::DwConvRuns();
    ExpectMatchesReference(b, 1e-4, 1e-5, 1);
    EXPECT_EQ(ops::cpu::DwConvRuns() - before, 2u);
  }
}

// Switched off (FERRY_DWCONV=onednn does the same): oneDNN, the same results.
TEST_F(DwConvTest, OffRunsOneDnn) {
  ops::cpu::SetDwConvMode(0);
  EXPECT_FALSE(ops::cpu::DwConvSupported());
  uint32_t seed = 7500;
  for (const Case& s : {kCases[2], kCases[6], kCases[7]}) {
    SCOPED_TRACE(Name(s));
    GraphBuilder b;
    Build(b, s, seed);
    const uint64_t before = ops::cpu::DwConvRuns();
    ExpectMatchesReference(b, 1e-4, 1e-5, 2);
    EXPECT_EQ(ops::cpu::DwConvRuns() - before, 0u);
  }
}

// The default rule: 3x3 / 5x5 rows with a full interior tile; 3x3 at stride 2 only with a gate
// (SiLU / HardSwish); other kernels and strides on oneDNN.
TEST_F(DwConvTest, DefaultRule) {
  ops::cpu::SetDwConvMode(-1);
  const bool on = ops::cpu::DwConvSupported();
  Fusion relu, silu;
  relu.act = Fusion::Act::kRelu;
  silu.act = Fusion::Act::kSwish;
  ops::cpu::DwShape s;
  s.n = 1;
  s.c = 144;
  s.h = s.w = s.oh = s.ow = 56;
  s.pad_t = s.pad_l = 1;
  s.kh = s.kw = 3;
  EXPECT_EQ(ops::cpu::DwConvWanted(s, relu), on);
  EXPECT_EQ(ops::cpu::DwConvWanted(s, Fusion{}), on);
  s.sh = s.sw = 2;
  s.oh = s.ow = 28;
  EXPECT_EQ(ops::cpu::DwConvWanted(s, silu), on);
  EXPECT_FALSE(ops::cpu::DwConvWanted(s, relu));
  s.kh = s.kw = 5;
  s.pad_t = s.pad_l = 2;
  EXPECT_EQ(ops::cpu::DwConvWanted(s, relu), on);
  s.sh = s.sw = 3;
  EXPECT_FALSE(ops::cpu::DwConvWanted(s, silu));
  s.sh = s.sw = 1;
  s.h = s.w = s.oh = s.ow = 7;  // 5x5 on 7x7: 3 interior pixels
  EXPECT_FALSE(ops::cpu::DwConvWanted(s, silu));
  s.h = s.w = s.oh = s.ow = 56;
  s.kh = 3;
  EXPECT_FALSE(ops::cpu::DwConvWanted(s, silu));  // 3x5: oneDNN
}

}  // namespace
}  // namespace ferry
