// The elementwise ops of EfficientNet / MobileNet-v3 / RegNet on the cpu provider: per-channel
// broadcasts (Squeeze-Excitation's x[N,C,H,W] * s[N,C,1,1], constant [1,C,1,1] / [C,1,1] and
// single-value operands, either operand order) on a convolution output in the convolution
// library's layout (channels 8 / 16) and plain (13), and HardSigmoid / HardSwish, each against the
// reference kernels, with the node report saying the node ran on cpu.
#include <string>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ir/graph.h"
#include "ops/cpu/gemm_avx2.h"
#include "ops/cpu/winograd.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using namespace cpu_test;

TEST(CpuCnnEltwise, HardSigmoidHardSwishPlain) {
  uint32_t seed = 900;
  for (const Shape& s : std::vector<Shape>{{1}, {3}, {13}, {127}, {2, 3, 5, 7}, {1, 0, 4}}) {
    SCOPED_TRACE(ShapeToString(s));
    GraphBuilder b;
    b.Opset(14);
    b.Input("x", Rand(s, seed++, -5.f, 5.f));
    b.Node("HardSwish", {"x"}, {"hs"});
    b.Node("HardSigmoid", {"x"}, {"hg"});
    ir::Node& n = b.Node("HardSigmoid", {"x"}, {"hg2"});
    SetFloat(n, "alpha", 0.3f);
    SetFloat(n, "beta", 0.4f);
    b.Output("hs").Output("hg").Output("hg2");
    auto report = ExpectMatchesReference(b, 1e-6, 1e-6);
    ASSERT_EQ(report.size(), 3u);
    for (const auto& r : report) {
      EXPECT_EQ(r.provider, "cpu") << r.op_type;
    }
  }
}

// GlobalAveragePool of a large channels-last image (pixel chunks of 512 summed on every thread,
// then in order): the reference's values, and the same bits at 1 and 2 threads.
TEST(CpuCnnEltwise, GlobalAveragePoolOfLargeImagesIsThreadIndependent) {
  uint32_t seed = 990;
  for (int64_t ch : {70, 119, 136}) {  // 119: 64 + 3 x 16 + 7 (each block width of the sums)
    for (int64_t n : {1, 2}) {
      SCOPED_TRACE("channels " + std::to_string(ch) + " batch " + std::to_string(n));
      GraphBuilder b;
      b.Input("x", Rand({n, 5, 45, 47}, seed++));  // 2115 pixels: 5 chunks, the last of 67
      b.Const("w", Rand({ch, 5, 1, 1}, seed++, -0.5f, 0.5f));
      b.Node("Conv", {"x", "w"}, {"c"});
      b.Node("GlobalAveragePool", {"c"}, {"y"});
      b.Output("y");
      for (int threads : {1, 2}) {
        auto report = ExpectMatchesReference(b, 1e-4, 1e-6, threads);
        for (const auto& r : report) {
          if (r.op_type == "GlobalAveragePool") {
            EXPECT_EQ(r.provider, "cpu");
          }
        }
      }
      ExpectSameBitsAtOneAndTwoThreads(b);
    }
  }
}

// conv -> HardSwish -> SE (GAP -> conv -> Relu -> conv -> HardSigmoid / Sigmoid -> Mul) ->
// per-channel Add / Sub / Div against constants, SiLU x * Sigmoid(x), a final conv reading the
// result (so the chain may stay channel-blocked).
TEST(CpuCnnEltwise, PerChannelBroadcastInEveryLayout) {
  uint32_t seed = 950;
  for (int64_t ch : {8, 16, 13, 136}) {  // 136: two 64-channel blocks + a tail (NHWC sums)
    for (int64_t n : {1, 2}) {
      SCOPED_TRACE("channels " + std::to_string(ch) + " batch " + std::to_string(n));
      GraphBuilder b;
      b.Opset(14);
      b.Input("x", Rand({n, 5, 11, 9}, seed++));
      b.Const("w0", Rand({ch, 5, 3, 3}, seed++, -0.4f, 0.4f));
      SetInts(b.Node("Conv", {"x", "w0"}, {"c0"}), "pads", {1, 1, 1, 1});
      b.Node("HardSwish", {"c0"}, {"h0"});
      // Squeeze-Excitation, both gates.
      b.Node("GlobalAveragePool", {"h0"}, {"g"});
      b.Const("ws1", Rand({4, ch, 1, 1}, seed++, -0.5f, 0.5f));
      b.Const("ws2", Rand({ch, 4, 1, 1}, seed++, -0.5f, 0.5f));
      b.Node("Conv", {"g", "ws1"}, {"s1"});
      b.Node("Relu", {"s1"}, {"s1r"});
      b.Node("Conv", {"s1r", "ws2"}, {"s2"});
      b.Node("HardSigmoid", {"s2"}, {"gate"});
      b.Node("Sigmoid", {"s2"}, {"gate2"});
      b.Node("Mul", {"h0", "gate"}, {"m1"});
      b.Node("Mul", {"gate2", "m1"}, {"m2"});  // small operand first
      // Constant per-channel and single-value operands, both orders.
      b.Const("k4", Rand({1, ch, 1, 1}, seed++, 0.5f, 1.5f));
      b.Const("k3", Rand({ch, 1, 1}, seed++, 0.5f, 1.5f));
      b.Const("k1", Rand({1}, seed++, 0.5f, 1.5f));
      b.Node("Add", {"m2", "k4"}, {"a1"});
      b.Node("Sub", {"k3", "a1"}, {"a2"});
      b.Node("Div", {"a2", "k3"}, {"a3"});
      b.Node("Exp", {"a3"}, {"e3"});  // a positive divisor
      b.Node("Div", {"k4", "e3"}, {"a4"});
      b.Node("Mul", {"a4", "k1"}, {"a5"});
      b.Node("Sub", {"a5", "g"}, {"a6"});  // the pooled value (a computed [N,C,1,1])
      // SiLU.
      b.Node("Sigmoid", {"a6"}, {"sg"});
      b.Node("Mul", {"a6", "sg"}, {"silu0"});
      b.Node("HardSwish", {"silu0"}, {"silu"});  // on its own (blocked for 8 / 16)
      b.Const("w1", Rand({8, ch, 1, 1}, seed++, -0.4f, 0.4f));
      b.Node("Conv", {"silu", "w1"}, {"y"});
      b.Output("y");
      auto report = ExpectMatchesReference(b, 2e-4, 2e-5);
      ASSERT_FALSE(report.empty());
      int checked = 0;
      for (const auto& r : report) {
        if (r.op_type == "Conv" || r.op_type == "GlobalAveragePool" || r.op_type == "Relu")
          continue;
        // The first HardSwish is fused into its Conv; the SiLU Mul is not (its input is a Sub).
        if (r.name == "HardSwish_1") {
          EXPECT_EQ(r.provider, "fused") << r.name;
        } else {
          EXPECT_EQ(r.provider, "cpu") << r.name;
        }
        ++checked;
      }
      EXPECT_EQ(checked, 15);
    }
  }
}

// Squeeze-Excitation's FCs, 1x1 convs of a 1x1 image, run as GemvTransB (W read in place): with
// and without bias, Relu / Clip in the epilogue, SiLU / HardSwish after, 1 to 4 images (5: oneDNN),
// input from a GlobalAveragePool (plain) or a conv (its layout), output read by a conv and by a
// Mul; each against the reference, the GEMV run count checked.
TEST(CpuCnnEltwise, SqueezeExcitationFcsRunAsGemv) {
  struct Fc {
    int64_t n, c, k;
    PostOp act;
    bool bias, from_conv;
  };
  const Fc cases[] = {
      {1, 32, 8, PostOp::kSilu, true, false},   {1, 960, 240, PostOp::kRelu, true, false},
      {2, 13, 7, PostOp::kNone, false, true},   {4, 72, 24, PostOp::kHardSwish, true, true},
      {3, 40, 10, PostOp::kClip, false, false}, {5, 16, 8, PostOp::kRelu, true, false},
  };
  uint32_t seed = 1400;
  for (const Fc& c : cases) {
    SCOPED_TRACE(::testing::Message() << "n=" << c.n << " c=" << c.c << " k=" << c.k << " act="
                                      << static_cast<int>(c.act) << " from_conv=" << c.from_conv);
    GraphBuilder b;
    b.Opset(14);
    b.Input("x", Rand({c.n, c.c, 5, 4}, seed++));
    b.Node("GlobalAveragePool", {"x"}, {"g"});
    std::string in = "g";
    if (c.from_conv) {  // another 1x1-image conv first (its output in the conv layout)
      b.Const("w0", Rand({c.c, c.c, 1, 1}, seed++, -0.3f, 0.3f));
      b.Node("Conv", {"g", "w0"}, {"g0"});
      in = "g0";
    }
    b.Const("w", Rand({c.k, c.c, 1, 1}, seed++, -0.3f, 0.3f));
    std::vector<std::string> ins = {in, "w"};
    if (c.bias) {
      b.Const("bias", Rand({c.k}, seed++));
      ins.push_back("bias");
    }
    b.Node("Conv", ins, {"f"});
    const std::string y = AddPostOp(b, "f", c.act);
    b.Const("w2", Rand({c.c, c.k, 1, 1}, seed++, -0.3f, 0.3f));  // the second FC, then the gate
    b.Node("Conv", {y, "w2"}, {"f2"});
    b.Node("Sigmoid", {"f2"}, {"s"});
    b.Node("Mul", {"x", "s"}, {"out"});
    b.Output("out");
    const uint64_t before = ops::cpu::GemvRuns();
    ExpectMatchesReference(b, 1e-4, 1e-5, c.n % 2 + 1);
    // Two sessions' runs (ExpectMatchesReference runs the cpu provider twice) of every 1x1-image
    // conv, where the CPU has the GEMV and the batch fits it.
    const uint64_t convs = c.from_conv ? 3 : 2;
    if (ops::cpu::GemmAvx2Supported()) {
      EXPECT_EQ(ops::cpu::GemvRuns() - before, c.n <= ops::cpu::kGemvMaxRows ? 2 * convs : 0);
    }
  }
}

// A per-channel operand whose shape does not fit (C mismatch would be an error; a [1,1,H,W]
// spatial operand is not per channel) runs, on blocked input, through the runtime's conversion.
TEST(CpuCnnEltwise, NonChannelBroadcastStillMatches) {
  GraphBuilder b;
  b.Input("x", Rand({1, 8, 6, 7}, 990));
  b.Const("w", Rand({8, 8, 1, 1}, 991, -0.5f, 0.5f));
  b.Node("Conv", {"x", "w"}, {"c"});
  b.Const("sp", Rand({1, 1, 6, 7}, 992));
  b.Node("Mul", {"c", "sp"}, {"m"});
  b.Const("w2", Rand({8, 8, 1, 1}, 993, -0.5f, 0.5f));
  b.Node("Conv", {"m", "w2"}, {"y"});
  b.Output("y");
  ExpectMatchesReference(b);
}

// SiLU (x * Sigmoid(x)), torch's decomposed HardSwish (x * HardSigmoid(x; 1/6, 1/2)) and the
// HardSwish op fused into the preceding Conv (direct and Winograd, with and without a residual
// Add), the gate and Mul reported "fused"; gates that do not fit run as their own nodes.
TEST(CpuCnnEltwise, ConvFusesSiluAndHardSwish) {
  using ops::cpu::ConvAlgo;
  uint32_t seed = 1000;
  enum Gate { kSilu, kHardSig, kHardSwishOp, kOtherAlpha, kGateReadTwice };
  for (ConvAlgo algo : {ConvAlgo::kDirect, ConvAlgo::kWinograd2, ConvAlgo::kWinograd4}) {
    ops::cpu::SetConvAlgoOverride(algo);
    for (Gate gate : {kSilu, kHardSig, kHardSwishOp, kOtherAlpha, kGateReadTwice}) {
      for (int64_t k : {16, 13}) {
        for (bool residual : {false, true}) {
          SCOPED_TRACE("algo " + std::to_string(static_cast<int>(algo)) + " gate " +
                       std::to_string(gate) + " k " + std::to_string(k) + " residual " +
                       std::to_string(residual));
          const uint64_t wino_before = ops::cpu::WinogradRuns();
          GraphBuilder b;
          b.Opset(14);
          b.Input("x", Rand({1, 16, 9, 11}, seed++, -2.f, 2.f));
          b.Const("w", Rand({k, 16, 3, 3}, seed++, -0.3f, 0.3f));
          b.Const("bias", Rand({k}, seed++));
          SetInts(b.Node("Conv", {"x", "w", "bias"}, {"c"}), "pads", {1, 1, 1, 1});
          std::string v = "c";
          if (residual) {
            b.Input("r", Rand({1, k, 9, 11}, seed++));
            b.Node("Add", {"c", "r"}, {"cr"});
            v = "cr";
          }
          if (gate == kHardSwishOp) {
            b.Node("HardSwish", {v}, {"y"});
          } else {
            const bool sig = gate == kSilu || gate == kGateReadTwice;
            ir::Node& g = b.Node(sig ? "Sigmoid" : "HardSigmoid", {v}, {"g"});
            if (!sig) {
              SetFloat(g, "alpha", gate == kOtherAlpha ? 0.2f : 1.f / 6.f);
              SetFloat(g, "beta", 0.5f);
            }
            b.Node("Mul", {"g", v}, {"y"});
          }
          // A consumer that takes the convolution layout (a graph output must be plain).
          b.Const("w2", Rand({8, k, 1, 1}, seed++, -0.3f, 0.3f));
          b.Node("Conv", {"y", "w2"}, {"z"});
          b.Output("z");
          if (gate == kGateReadTwice) b.Output("g");
          auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
          const bool fusable = gate != kOtherAlpha && gate != kGateReadTwice;
          int fused = 0;
          for (const auto& r : report) {
            if (r.provider == "fused") {
              ++fused;
              EXPECT_EQ(r.fused_into, "Conv_0") << r.name;
            } else if (gate != kGateReadTwice) {
              // (There the Sigmoid writes a graph output, so it declines its blocked input,
              // and the Mul then meets two layouts and declines too.)
              EXPECT_EQ(r.provider, "cpu") << r.name;
            }
          }
          const int gate_nodes = gate == kHardSwishOp ? 1 : 2;
          EXPECT_EQ(fused, (residual ? 1 : 0) + (fusable ? gate_nodes : 0));
          if (algo != ConvAlgo::kDirect) {
            EXPECT_GT(ops::cpu::WinogradRuns(), wino_before);
          }
        }
      }
    }
  }
  ops::cpu::SetConvAlgoOverride(ConvAlgo::kAuto);
}

// The gates after a MatMul (which takes no SiLU / HardSwish post-op) still compute.
TEST(CpuCnnEltwise, MatMulFollowedBySiluUnfused) {
  GraphBuilder b;
  b.Input("x", Rand({5, 13}, 1100));
  b.Const("w", Rand({13, 7}, 1101));
  b.Node("MatMul", {"x", "w"}, {"m"});
  b.Node("Sigmoid", {"m"}, {"g"});
  b.Node("Mul", {"m", "g"}, {"y"});
  b.Output("y");
  auto report = ExpectMatchesReference(b);
  for (const auto& r : report) EXPECT_EQ(r.provider, "cpu") << r.name;
}

}  // namespace
}  // namespace ferry
