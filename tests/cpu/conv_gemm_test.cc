// The own im2col GEMM convolution (ops/cpu/conv_gemm.cc, ConvAlgo::kGemm) against the reference
// Conv on seeded awkward shapes: channels 1, 3, 13, 127 (output channels around the 64-column
// panels), odd spatial sizes and pixel counts around the 6-pixel register tile, batch 1 and 3,
// pads 0/1/2 and asymmetric, with and without bias, fused residual Add + Relu / Clip and SiLU,
// inputs and residuals in oneDNN's layout and plain, weights that are not initializers, 1 and 2
// threads. With the AVX-512 kernels forced off (the AVX2 fallback), kGemm must run oneDNN instead.
#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "cpu/conv3x3_harness.h"
#include "graph_builders.h"
#include "ir/graph.h"
#include "ops/cpu/conv_gemm.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using namespace conv3x3_test;

using ops::cpu::ConvAlgo;
using runtime::Session;
using runtime::SessionOptions;

// Forces kGemm (and optionally the AVX-512 switch) for a test; restores both at the end.
struct Force {
  explicit Force(int avx512) {
    ops::cpu::SetConvAlgoOverride(ConvAlgo::kGemm);
    ops::cpu::SetWinogradAvx512(avx512);
  }
  ~Force() {
    ops::cpu::SetConvAlgoOverride(ConvAlgo::kAuto);
    ops::cpu::SetWinogradAvx512(-1);
  }
};

// Runs `feeds` on the reference and (twice, state reused) on the cpu provider; returns max |diff|
// relative to max |reference output| (at least 1), and the ConvGemm runs in *runs.
double Compare(const Model& md, int threads, uint64_t* runs,
               const std::vector<std::pair<std::string, Value>>* feeds = nullptr) {
  const auto& in = feeds ? *feeds : md.feeds;
  SessionOptions ro;
  ro.provider = "reference";
  ro.threads = threads;
  auto ref = Session::Create(md.m, ro);
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  if (!ref.ok()) return INFINITY;
  auto want = (*ref)->Run(in);
  EXPECT_TRUE(want.ok()) << want.status().message();
  if (!want.ok()) return INFINITY;
  SessionOptions co;
  co.threads = threads;
  auto cpu = Session::Create(md.m, co);
  EXPECT_TRUE(cpu.ok()) << cpu.status().message();
  if (!cpu.ok()) return INFINITY;
  const uint64_t before = ops::cpu::ConvGemmRuns();
  double worst = 0, scale = 1;
  for (int round = 0; round < 2; ++round) {
    auto got = (*cpu)->Run(in);
    EXPECT_TRUE(got.ok()) << got.status().message();
    if (!got.ok()) return INFINITY;
    EXPECT_EQ(got->size(), want->size());
    for (size_t k = 0; k < got->size() && k < want->size(); ++k) {
      const Tensor& g = (*got)[k].tensor();
      const Tensor& w = (*want)[k].tensor();
      EXPECT_EQ(g.shape(), w.shape());
      if (g.shape() != w.shape()) continue;
      for (int64_t i = 0; i < g.size(); ++i) {
        const double a = g.GetAsDouble(i), b = w.GetAsDouble(i);
        worst = std::max(worst, std::isnan(a) ? INFINITY : std::fabs(a - b));
        scale = std::max(scale, std::fabs(b));
      }
    }
  }
  *runs = ops::cpu::ConvGemmRuns() - before;
  for (const auto& r : (*cpu)->node_report())
    EXPECT_TRUE(r.provider == "cpu" || r.provider == "fused") << r.name << ": " << r.provider;
  return worst / scale;
}

// A direct sum in float in another order than the reference: ~1e-6 relative on these sizes; a
// wrong index or a missed tap is off by O(1).
constexpr double kTol = 1e-5;

struct Case {
  int64_t n, c, h, w, k;
  std::vector<int64_t> pads;
  bool bias;
};

const Case kCases[] = {
    {1, 1, 1, 1, 1, {1, 1, 1, 1}, true},      {1, 3, 2, 2, 5, {1, 1, 1, 1}, false},
    {1, 13, 5, 5, 13, {1, 1, 1, 1}, true},    {3, 13, 7, 7, 3, {1, 1, 1, 1}, true},
    {1, 3, 13, 13, 127, {1, 1, 1, 1}, true},  {1, 127, 13, 13, 1, {0, 0, 0, 0}, true},
    {1, 64, 7, 7, 64, {1, 1, 1, 1}, true},    {3, 64, 13, 5, 16, {0, 1, 2, 1}, true},
    {1, 8, 5, 7, 24, {2, 2, 2, 2}, false},    {1, 5, 3, 3, 7, {0, 0, 0, 0}, true},
    {1, 127, 7, 13, 65, {1, 0, 0, 1}, true},  {3, 7, 1, 2, 9, {1, 1, 1, 1}, true},
    {1, 128, 7, 7, 129, {1, 1, 1, 1}, false}, {2, 32, 11, 3, 200, {1, 2, 0, 1}, true},
    {1, 300, 7, 7, 64, {1, 1, 1, 1}, true},  // depth 2700: 22 chunks, the last one short
};

Model SingleConv(const Case& s, uint32_t& seed) {
  Model md;
  md.Input("x", Rand({s.n, s.c, s.h, s.w}, seed++));
  md.Const("w", Rand({s.k, s.c, 3, 3}, seed++));
  if (s.bias) md.Const("b", Rand({s.k}, seed++));
  md.Conv3x3("x", "w", s.bias ? "b" : "", "y", s.pads);
  md.m->graph.outputs.push_back({"y", {}, ""});
  return md;
}

class ConvGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512F: kGemm runs oneDNN";
  }
};

// One Conv node: plain input and output, every shape class, 1 and 2 threads.
TEST_F(ConvGemmTest, SingleConvMatchesReference) {
  Force force(1);
  uint32_t seed = 1000;
  for (const Case& s : kCases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "n=" << s.n << " c=" << s.c << " " << s.h << "x" << s.w
                                        << " k=" << s.k << " pads=" << s.pads[0] << s.pads[1]
                                        << s.pads[2] << s.pads[3] << " threads=" << threads);
      Model md = SingleConv(s, seed);
      uint64_t runs = 0;
      EXPECT_LE(Compare(md, threads, &runs), kTol);
      EXPECT_EQ(runs, 2u);
    }
  }
}

// conv1 + Relu -> conv2 + Add(residual) + Relu/Clip -> 1x1 conv (oneDNN, takes NHWC): conv2
// reads its input and residual in NHWC and writes NHWC; a plain residual (the graph input) too.
TEST_F(ConvGemmTest, FusedResidualBlocksMatchReference) {
  Force force(1);
  const BlockCase cases[] = {
      {1, 16, 7, false, false}, {3, 8, 5, true, false},  {1, 13, 5, false, false},
      {1, 24, 9, false, true},  {1, 3, 6, true, true},   {1, 64, 7, false, false},
      {2, 32, 2, false, false}, {1, 32, 1, true, false},
  };
  uint32_t seed = 2000;
  for (const BlockCase& bc : cases) {
    SCOPED_TRACE(::testing::Message() << "n=" << bc.n << " c=" << bc.c << " hw=" << bc.hw
                                      << " clip=" << bc.clip << " plain_res=" << bc.plain_residual);
    Model md;
    BuildResidualBlock(md, bc, seed);
    uint64_t runs = 0;
    const int threads = static_cast<int>(&bc - cases) % 2 + 1;
    EXPECT_LE(Compare(md, threads, &runs), kTol);
    EXPECT_EQ(runs, 4u);  // two 3x3 convs, two runs
  }
}

// Conv -> SiLU (x * Sigmoid(x)) -> 1x1 conv: the gate is fused and applied as a pass over
// ConvGemm's output.
TEST_F(ConvGemmTest, FusedSiluMatchesReference) {
  Force force(1);
  uint32_t seed = 6000;
  for (int64_t c : {13, 64}) {
    SCOPED_TRACE(::testing::Message() << "c=" << c);
    Model md;
    md.Input("x", Rand({1, c, 7, 7}, seed++));
    md.Const("w1", Rand({c, c, 3, 3}, seed++, -0.3f, 0.3f));
    md.Const("b1", Rand({c}, seed++));
    md.Const("w2", Rand({8, c, 1, 1}, seed++));
    md.Conv3x3("x", "w1", "b1", "c1", {1, 1, 1, 1});
    md.Node("Sigmoid", {"c1"}, {"g"});
    md.Node("Mul", {"c1", "g"}, {"s"});
    md.Node("Conv", {"s", "w2"}, {"y"});
    md.m->graph.outputs.push_back({"y", {}, ""});
    uint64_t runs = 0;
    EXPECT_LE(Compare(md, 1, &runs), kTol);
    EXPECT_EQ(runs, 2u);
  }
}

// 1x1 stride-1 convolutions on small images (PointwiseGemm): A read from the NHWC pixel rows in
// place, output channels around the 64-column panels (64, 256 + 14 with a short last panel),
// batch 2 and 3, fused residual Add, Relu / Clip / SiLU / HardSwish, 1 and 2 threads. The conv's
// input, residual and reader are oneDNN 1x1 convs (5 input channels, 8 output channels: not
// taken by the rule), so everything around it is NHWC; the rule must have picked the own GEMM
// (runs counted). A plain input (the graph input itself) stays on oneDNN.
TEST_F(ConvGemmTest, PointwiseMatchesReference) {
  struct Pw {
    int64_t n, c, hw, k;
    const char* act;  // "", Relu, Clip, Silu, HardSwish
    bool residual, nhwc_in;
  };
  const Pw cases[] = {
      {1, 64, 7, 64, "", false, true},          {2, 127, 3, 270, "Relu", false, true},
      {1, 192, 7, 1152, "Silu", false, true},   {1, 1152, 7, 192, "", true, true},
      {1, 96, 9, 320, "HardSwish", true, true}, {3, 65, 2, 128, "Clip", false, true},
      {1, 300, 5, 256, "Silu", true, true},     {1, 192, 7, 256, "Relu", true, false},
  };
  uint32_t seed = 7000;
  for (const Pw& pc : cases) {
    const int threads = static_cast<int>(&pc - cases) % 2 + 1;
    SCOPED_TRACE(::testing::Message()
                 << "n=" << pc.n << " c=" << pc.c << " hw=" << pc.hw << " k=" << pc.k
                 << " act=" << pc.act << " res=" << pc.residual << " nhwc_in=" << pc.nhwc_in);
    Model md;
    const int64_t c0 = pc.nhwc_in ? 5 : pc.c;
    md.Input("x", Rand({pc.n, c0, pc.hw, pc.hw}, seed++));
    std::string in = "x";
    if (pc.nhwc_in) {
      md.Const("w0", Rand({pc.c, c0, 1, 1}, seed++));
      md.Node("Conv", {"x", "w0"}, {"x0"});
      in = "x0";
    }
    md.Const("w", Rand({pc.k, pc.c, 1, 1}, seed++, -0.2f, 0.2f));
    md.Const("b", Rand({pc.k}, seed++));
    md.Node("Conv", {in, "w", "b"}, {"c"});
    std::string y = "c";
    if (pc.residual) {
      md.Input("r", Rand({pc.n, 5, pc.hw, pc.hw}, seed++));
      md.Const("wr", Rand({pc.k, 5, 1, 1}, seed++));
      md.Node("Conv", {"r", "wr"}, {"rr"});
      md.Node("Add", {y, "rr"}, {"s"});
      y = "s";
    }
    const std::string act = pc.act;
    if (act == "Relu" || act == "HardSwish") {
      md.Node(act, {y}, {"a"});
      y = "a";
    } else if (act == "Clip") {
      md.Const("lo", Tensor::FromVector<float>({-0.5f}, {}));
      md.Const("hi", Tensor::FromVector<float>({0.75f}, {}));
      md.Node("Clip", {y, "lo", "hi"}, {"a"});
      y = "a";
    } else if (act == "Silu") {
      md.Node("Sigmoid", {y}, {"g"});
      md.Node("Mul", {y, "g"}, {"a"});
      y = "a";
    }
    md.Const("wy", Rand({8, pc.k, 1, 1}, seed++, -0.1f, 0.1f));
    md.Node("Conv", {y, "wy"}, {"y"});
    md.m->graph.outputs.push_back({"y", {}, ""});
    uint64_t runs = 0;
    EXPECT_LE(Compare(md, threads, &runs), kTol);
    EXPECT_EQ(runs, pc.nhwc_in ? 2u : 0u);
  }
}

// The pointwise rule: small images with many channels only; 14x14 and few channels stay on
// oneDNN, as does every shape without the AVX-512 kernels.
TEST(ConvGemmRule, PicksGemmForSmallPointwiseConvs) {
  ops::cpu::WinogradShape s;
  s.n = 1;
  s.r = 1;
  s.c = 192;
  s.k = 1152;
  s.h = s.w = s.oh = s.ow = 7;
  EXPECT_EQ(ops::cpu::PointwiseGemm(s), ops::cpu::ConvGemmSupported());
  s.h = s.w = s.oh = s.ow = 14;
  EXPECT_FALSE(ops::cpu::PointwiseGemm(s));
  s.h = s.w = s.oh = s.ow = 7;
  s.k = 80;  // 48 of 128 panel columns wasted
  EXPECT_FALSE(ops::cpu::PointwiseGemm(s));
  s.k = 1152;
  s.c = 32;
  EXPECT_FALSE(ops::cpu::PointwiseGemm(s));
  s.c = 192;
  ops::cpu::SetWinogradAvx512(0);
  EXPECT_FALSE(ops::cpu::PointwiseGemm(s));
  ops::cpu::SetWinogradAvx512(-1);
}

// Inputs produced by oneDNN convolutions (in its layout on this CPU), channel counts that are
// and are not multiples of 8 and 16.
TEST_F(ConvGemmTest, ReadsOneDnnOutputs) {
  Force force(1);
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
    EXPECT_LE(Compare(md, 2, &runs), kTol);
    EXPECT_EQ(runs, 2u);
  }
}

// W computed at run time (a graph input): packed again on every run, new values are used.
TEST_F(ConvGemmTest, NonConstantWeightsArePackedEveryRun) {
  Force force(1);
  Model md;
  md.Input("x", Rand({1, 13, 9, 9}, 3000));
  md.Input("w", Rand({70, 13, 3, 3}, 3001));
  md.Const("b", Rand({70}, 3002));
  md.Conv3x3("x", "w", "b", "y", {1, 1, 1, 1});
  md.m->graph.outputs.push_back({"y", {}, ""});
  for (uint32_t seed : {3003u, 3004u}) {
    auto feeds = md.feeds;
    feeds[1].second = Value(Rand({70, 13, 3, 3}, seed));
    uint64_t runs = 0;
    EXPECT_LE(Compare(md, 1, &runs, &feeds), kTol) << "seed " << seed;
    EXPECT_EQ(runs, 2u);
  }
}

// The AVX2 fallback: with the AVX-512 kernels forced off, kGemm (forced or from the rule) runs
// oneDNN's convolution, with the same results.
TEST(ConvGemmFallback, Avx2RunsOneDnnInstead) {
  Force force(0);
  EXPECT_FALSE(ops::cpu::ConvGemmSupported());
  uint32_t seed = 5000;
  for (const Case& s : {kCases[2], kCases[4], kCases[6], kCases[12]}) {
    SCOPED_TRACE(::testing::Message() << "c=" << s.c << " k=" << s.k);
    Model md = SingleConv(s, seed);
    uint64_t runs = 0;
    EXPECT_LE(Compare(md, 2, &runs), kTol);
    EXPECT_EQ(runs, 0u);
  }
}

// The rule: ResNet-18's layer4 shape runs kGemm with AVX-512, direct without; few channels and
// larger images never do.
TEST(ConvGemmRule, PicksGemmForSmallImagesWithManyChannels) {
  ops::cpu::WinogradShape s;
  s.n = 1;
  s.c = s.k = 512;
  s.h = s.w = s.oh = s.ow = 7;
  s.pad_t = s.pad_l = 1;
  if (ops::cpu::WinogradAvx512()) {
    EXPECT_EQ(ops::cpu::ChooseConvAlgo(s, 1), ConvAlgo::kGemm);
  }
  ops::cpu::SetWinogradAvx512(0);
  EXPECT_NE(ops::cpu::ChooseConvAlgo(s, 1), ConvAlgo::kGemm);
  ops::cpu::SetWinogradAvx512(-1);
  s.c = s.k = 16;
  EXPECT_NE(ops::cpu::ChooseConvAlgo(s, 1), ConvAlgo::kGemm);
  s.c = s.k = 256;
  s.h = s.w = s.oh = s.ow = 14;
  EXPECT_NE(ops::cpu::ChooseConvAlgo(s, 1), ConvAlgo::kGemm);
}

}  // namespace
}  // namespace ferry
