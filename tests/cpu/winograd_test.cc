// Winograd convolution (ops/cpu/winograd.cc) against the reference Conv: F(2x2,3x3) and
// F(4x4,3x3) forced on seeded awkward shapes (channels 1..127, spatial 1..56, batch 1 and 3, pads
// 0/1/2 and asymmetric), with bias, fused residual Add + Relu / Clip, in chains so that inputs,
// residuals and outputs arrive in the blocked layout as well as plain, and with weights that are
// not initializers (transformed again on every run). The tolerance is relative to the output's
// magnitude: Winograd rounds differently from a direct sum, more so for the 6x6 transform.
#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "cpu/conv3x3_harness.h"
#include "graph_builders.h"
#include "ir/graph.h"
#include "ops/cpu/winograd.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using namespace conv3x3_test;

using ops::cpu::ConvAlgo;
using runtime::Session;
using runtime::SessionOptions;

// Restores the algorithm rule when a test ends (also on failure).
struct ForceAlgo {
  explicit ForceAlgo(ConvAlgo a) { ops::cpu::SetConvAlgoOverride(a); }
  ~ForceAlgo() { ops::cpu::SetConvAlgoOverride(ConvAlgo::kAuto); }
};

// Max |got - want| over all outputs, relative to max |want| (at least 1).
struct Diff {
  double worst = 0, scale = 0;
  double rel() const { return worst / std::max(1.0, scale); }
};

// Runs the model on the reference provider and (twice, state reused) on the cpu provider with
// `algo` forced; returns the worse of the two cpu runs, and how many Winograd runs happened.
Diff Compare(const Model& md, ConvAlgo algo, uint64_t* wino_runs, int threads = 2) {
  Diff d;
  SessionOptions ro;
  ro.provider = "reference";
  ro.threads = threads;
  auto ref = Session::Create(md.m, ro);
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  if (!ref.ok()) return d;
  auto want = (*ref)->Run(md.feeds);
  EXPECT_TRUE(want.ok()) << want.status().message();
  if (!want.ok()) return d;
  ForceAlgo force(algo);
  SessionOptions co;
  co.threads = threads;
  auto cpu = Session::Create(md.m, co);
  EXPECT_TRUE(cpu.ok()) << cpu.status().message();
  if (!cpu.ok()) return d;
  const uint64_t before = ops::cpu::WinogradRuns();
  for (int round = 0; round < 2; ++round) {
    auto got = (*cpu)->Run(md.feeds);
    EXPECT_TRUE(got.ok()) << got.status().message();
    if (!got.ok()) return d;
    EXPECT_EQ(got->size(), want->size());
    for (size_t k = 0; k < got->size() && k < want->size(); ++k) {
      const Tensor& g = (*got)[k].tensor();
      const Tensor& w = (*want)[k].tensor();
      EXPECT_EQ(g.shape(), w.shape());
      if (g.shape() != w.shape()) continue;
      for (int64_t i = 0; i < g.size(); ++i) {
        const double a = g.GetAsDouble(i), b = w.GetAsDouble(i);
        d.worst = std::max(d.worst, std::isnan(a) ? INFINITY : std::fabs(a - b));
        d.scale = std::max(d.scale, std::fabs(b));
      }
    }
  }
  *wino_runs = ops::cpu::WinogradRuns() - before;
  for (const auto& r : (*cpu)->node_report())
    EXPECT_TRUE(r.provider == "cpu" || r.provider == "fused") << r.name << ": " << r.provider;
  return d;
}

// Relative tolerances (error / max |output|): the largest errors these tests see are 1.3e-6
// (F(2x2,3x3)) and 6.7e-6 (F(4x4,3x3)); a wrong transform or index is off by O(1).
double Tolerance(ConvAlgo a) {
  return a == ConvAlgo::kWinograd4 ? 5e-5 : 1e-5;
}

struct Shape4 {
  int64_t n, c, h, w, k;
  std::vector<int64_t> pads;
  bool bias;
};

// Parameter: the tile size, the GEMM ISA (AVX2 everywhere, AVX-512 where the CPU has it) and the
// split (the three phases over the whole image, or chunks of tiles each run start to end on one
// thread). The ISA also picks the output layout (nChw8c with AVX2, NHWC with AVX-512), so both
// layouts' direct read and write paths run on an AVX-512 machine.
class WinogradConv : public ::testing::TestWithParam<std::tuple<ConvAlgo, bool, bool>> {
 protected:
  void SetUp() override {
    if (!ops::cpu::WinogradSupported()) GTEST_SKIP() << "no AVX2/FMA: Winograd is not used";
    if (std::get<1>(GetParam()) && !__builtin_cpu_supports("avx512f"))
      GTEST_SKIP() << "no AVX-512F";
    ops::cpu::SetWinogradAvx512(std::get<1>(GetParam()) ? 1 : 0);
    ops::cpu::SetWinogradSplit(std::get<2>(GetParam()) ? 1 : 0);
  }
  void TearDown() override {
    ops::cpu::SetWinogradAvx512(-1);
    ops::cpu::SetWinogradSplit(-1);
  }
  static ConvAlgo Algo() { return std::get<0>(GetParam()); }
};

// One Conv node: plain input and output, every shape class.
TEST_P(WinogradConv, SingleConvMatchesReference) {
  const Shape4 cases[] = {
      {1, 1, 1, 1, 1, {1, 1, 1, 1}, true},
      {1, 3, 2, 2, 5, {1, 1, 1, 1}, false},
      {1, 13, 5, 5, 13, {1, 1, 1, 1}, true},
      {3, 13, 7, 7, 3, {1, 1, 1, 1}, true},
      {1, 3, 13, 13, 127, {1, 1, 1, 1}, true},
      {1, 127, 13, 13, 1, {0, 0, 0, 0}, true},
      {1, 64, 7, 7, 64, {1, 1, 1, 1}, true},
      {3, 64, 13, 5, 16, {0, 1, 2, 1}, true},
      {1, 8, 5, 7, 24, {2, 2, 2, 2}, false},
      {1, 16, 56, 56, 8, {1, 1, 1, 1}, true},
      {1, 5, 3, 3, 7, {0, 0, 0, 0}, true},
      {1, 127, 7, 13, 64, {1, 0, 0, 1}, true},
      {3, 7, 1, 2, 9, {1, 1, 1, 1}, true},
      {1, 64, 56, 56, 64, {1, 1, 1, 1}, true},
      // 3 panels of 16 output channels (an AVX-512 step with one panel after a pair), tile
      // counts around multiples of the 14-row AVX-512 step.
      {1, 24, 20, 20, 48, {1, 1, 1, 1}, true},
      {2, 40, 27, 29, 80, {1, 1, 1, 1}, true},
  };
  uint32_t seed = 1000;
  for (const Shape4& s : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "n=" << s.n << " c=" << s.c << " " << s.h << "x" << s.w << " k=" << s.k
                 << " pads=" << s.pads[0] << s.pads[1] << s.pads[2] << s.pads[3]);
    Model md;
    md.Input("x", Rand({s.n, s.c, s.h, s.w}, seed++));
    md.Const("w", Rand({s.k, s.c, 3, 3}, seed++));
    if (s.bias) md.Const("b", Rand({s.k}, seed++));
    md.Conv3x3("x", "w", s.bias ? "b" : "", "y", s.pads);
    md.m->graph.outputs.push_back({"y", {}, ""});
    uint64_t runs = 0;
    Diff d = Compare(md, Algo(), &runs);
    EXPECT_EQ(runs, 2u);
    EXPECT_LE(d.rel(), Tolerance(Algo())) << "max abs diff " << d.worst << " scale " << d.scale;
  }
}

// A residual block: conv1 + Relu -> conv2 + Add(residual) + Relu -> 1x1 conv (a cpu reader
// that takes the blocked layout), and a Clip variant. With channels a multiple of 8, conv2
// reads its input and residual blocked and writes blocked; otherwise everything is plain.
TEST_P(WinogradConv, FusedResidualBlocksMatchReference) {
  const BlockCase cases[] = {
      {1, 16, 13, false, false}, {3, 8, 7, true, false},  {1, 13, 5, false, false},
      {1, 24, 9, false, true},   {1, 3, 6, true, true},   {1, 64, 14, false, false},
      {2, 32, 2, false, false},  {1, 32, 1, true, false},
  };
  uint32_t seed = 2000;
  for (const BlockCase& bc : cases) {
    SCOPED_TRACE(::testing::Message() << "n=" << bc.n << " c=" << bc.c << " hw=" << bc.hw
                                      << " clip=" << bc.clip << " plain_res=" << bc.plain_residual);
    Model md;
    BuildResidualBlock(md, bc, seed);
    uint64_t runs = 0;
    const int threads = static_cast<int>(&bc - cases) % 2 + 1;  // 1 and 2 threads
    Diff d = Compare(md, Algo(), &runs, threads);
    EXPECT_EQ(runs, 4u);  // two 3x3 convs, two runs
    EXPECT_LE(d.rel(), Tolerance(Algo())) << "max abs diff " << d.worst << " scale " << d.scale;
  }
}

// W computed at run time (a graph input): transformed on every run, new values are used.
TEST_P(WinogradConv, NonConstantWeightsAreTransformedEveryRun) {
  Model md;
  md.Input("x", Rand({1, 13, 9, 9}, 3000));
  md.Input("w", Rand({16, 13, 3, 3}, 3001));
  md.Const("b", Rand({16}, 3002));
  md.Conv3x3("x", "w", "b", "y", {1, 1, 1, 1});
  md.m->graph.outputs.push_back({"y", {}, ""});
  ForceAlgo force(Algo());
  SessionOptions ro;
  ro.provider = "reference";
  auto ref = Session::Create(md.m, ro);
  auto cpu = Session::Create(md.m, {});
  ASSERT_TRUE(ref.ok() && cpu.ok());
  for (uint32_t seed : {3003u, 3004u}) {
    auto feeds = md.feeds;
    feeds[1].second = Value(Rand({16, 13, 3, 3}, seed));
    auto want = (*ref)->Run(feeds);
    auto got = (*cpu)->Run(feeds);
    ASSERT_TRUE(want.ok() && got.ok());
    const Tensor& g = (*got)[0].tensor();
    const Tensor& w = (*want)[0].tensor();
    double worst = 0, scale = 1;
    for (int64_t i = 0; i < g.size(); ++i) {
      worst = std::max(worst, std::fabs(g.GetAsDouble(i) - w.GetAsDouble(i)));
      scale = std::max(scale, std::fabs(w.GetAsDouble(i)));
    }
    EXPECT_LE(worst / scale, Tolerance(Algo())) << "seed " << seed;
  }
}

// Inputs produced by oneDNN convolutions (in its layout: NHWC or nChw8c/16c, channel counts
// that are and are not multiples of 8), read directly or repacked.
TEST_P(WinogradConv, ReadsOneDnnOutputs) {
  uint32_t seed = 4000;
  for (int64_t mid : {13, 24, 64}) {
    SCOPED_TRACE(::testing::Message() << "mid=" << mid);
    Model md;
    md.Input("x", Rand({1, 5, 11, 12}, seed++));
    md.Const("w1", Rand({mid, 5, 1, 1}, seed++));
    md.Const("w2", Rand({32, mid, 3, 3}, seed++, -0.3f, 0.3f));
    md.Const("b2", Rand({32}, seed++));
    md.Const("w3", Rand({16, 32, 1, 1}, seed++));
    md.Node("Conv", {"x", "w1"}, {"c1"});
    md.Node("Relu", {"c1"}, {"r1"});
    md.Conv3x3("r1", "w2", "b2", "c2", {1, 1, 1, 1});
    md.Node("Relu", {"c2"}, {"r2"});
    md.Node("Conv", {"r2", "w3"}, {"y"});
    md.m->graph.outputs.push_back({"y", {}, ""});
    uint64_t runs = 0;
    Diff d = Compare(md, Algo(), &runs);
    EXPECT_EQ(runs, 2u);
    EXPECT_LE(d.rel(), Tolerance(Algo())) << "max abs diff " << d.worst << " scale " << d.scale;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiles, WinogradConv,
    ::testing::Combine(::testing::Values(ConvAlgo::kWinograd2, ConvAlgo::kWinograd4),
                       ::testing::Bool(), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<ConvAlgo, bool, bool>>& i) {
      return std::string(std::get<0>(i.param) == ConvAlgo::kWinograd2 ? "F2x2_3x3" : "F4x4_3x3") +
             (std::get<1>(i.param) ? "_avx512" : "_avx2") +
             (std::get<2>(i.param) ? "_chunks" : "_phases");
    });

// The rule never picks Winograd for shapes it cannot run, and the override is honoured.
TEST(WinogradRule, PicksAnAlgorithmPerShape) {
  ops::cpu::WinogradShape s;
  s.n = 1;
  s.c = s.k = 64;
  s.h = s.w = s.oh = s.ow = 56;
  s.pad_t = s.pad_l = 1;
  const ConvAlgo a = ops::cpu::ChooseConvAlgo(s, 1);
  EXPECT_TRUE(a == ConvAlgo::kDirect || a == ConvAlgo::kWinograd2 || a == ConvAlgo::kWinograd4);
  {
    ForceAlgo force(ConvAlgo::kDirect);
    EXPECT_EQ(ops::cpu::ConvAlgoOverride(), ConvAlgo::kDirect);
  }
  EXPECT_NE(ops::cpu::ConvAlgoOverride(), ConvAlgo::kDirect);
  // Few input channels: direct on a 14x14 image (GoogLeNet's branch convs), Winograd on 28x28.
  s.c = 16;
  s.k = 48;
  s.h = s.w = s.oh = s.ow = 14;
  EXPECT_EQ(ops::cpu::ChooseConvAlgo(s, 1), ConvAlgo::kDirect);
  s.h = s.w = s.oh = s.ow = 28;
  EXPECT_EQ(ops::cpu::ChooseConvAlgo(s, 1), ConvAlgo::kWinograd4);
  // At 2 threads, under 30 M multiply-adds (SqueezeNet's 3x3 convs): Winograd in chunks (the
  // phases' barriers cost more than oneDNN's direct convolution there); forced to the phases,
  // direct. Larger ones, and the same one at 1 thread, Winograd either way.
  s.c = 32;
  s.k = 128;
  s.h = s.w = s.oh = s.ow = 27;
  EXPECT_GT(ops::cpu::WinogradChunk(s, 4, 2), 0);
  EXPECT_EQ(ops::cpu::ChooseConvAlgo(s, 2), ConvAlgo::kWinograd4);
  EXPECT_EQ(ops::cpu::ChooseConvAlgo(s, 1), ConvAlgo::kWinograd4);
  ops::cpu::SetWinogradSplit(0);
  EXPECT_EQ(ops::cpu::WinogradChunk(s, 4, 2), 0);
  EXPECT_EQ(ops::cpu::ChooseConvAlgo(s, 2), ConvAlgo::kDirect);
  EXPECT_EQ(ops::cpu::ChooseConvAlgo(s, 1), ConvAlgo::kWinograd4);
  ops::cpu::SetWinogradSplit(-1);
  s.c = s.k = 64;
  s.h = s.w = s.oh = s.ow = 56;
  EXPECT_EQ(ops::cpu::ChooseConvAlgo(s, 2), ConvAlgo::kWinograd4);
}

// Chunks: about 28 tiles each, their count a multiple of the threads; none where the transformed
// weights would be read again from memory for every chunk (at one thread over 1.5 MB, at two
// over 12 MB).
TEST(WinogradRule, ChunksByWeightSize) {
  ops::cpu::WinogradShape s;
  s.n = 1;
  s.c = s.k = 64;
  s.h = s.w = s.oh = s.ow = 56;                     // F(4x4): 196 tiles, U 0.6 MB
  EXPECT_EQ(ops::cpu::WinogradChunk(s, 4, 1), 28);  // 7 chunks
  EXPECT_EQ(ops::cpu::WinogradChunk(s, 4, 2), 25);  // 8 chunks
  s.c = s.k = 128;                                  // U 2.4 MB
  s.h = s.w = s.oh = s.ow = 28;                     // 49 tiles
  EXPECT_EQ(ops::cpu::WinogradChunk(s, 4, 1), 0);
  EXPECT_EQ(ops::cpu::WinogradChunk(s, 4, 2), 25);
  s.c = s.k = 512;  // F(2x2) U 16.8 MB
  s.h = s.w = s.oh = s.ow = 14;
  EXPECT_EQ(ops::cpu::WinogradChunk(s, 2, 2), 0);
  s.c = s.k = 16;
  s.h = s.w = s.oh = s.ow = 3;  // 4 tiles: one chunk at one thread, two at two
  EXPECT_EQ(ops::cpu::WinogradChunk(s, 2, 1), 4);
  EXPECT_EQ(ops::cpu::WinogradChunk(s, 2, 2), 2);
}

}  // namespace
}  // namespace ferry
