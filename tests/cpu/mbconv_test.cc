// The fused inverted residual block (ops/cpu/mbconv.cc: 1x1 expand -> act -> depthwise -> act ->
// 1x1 project [-> + x] [-> act]) against the reference convolutions, on seeded awkward shapes:
// odd channel counts around the 16-channel vectors and 64-channel output blocks, non-square
// images, 3x3 and 5x5 windows at strides 1 and 2 with symmetric and asymmetric pads, Relu / Clip
// / SiLU / HardSwish (op and gate) / no activation, Squeeze-Excitation (EfficientNet's,
// MobileNetV3's), with and without the residual and biases, batch 1 and 2; strips of one output row
// (every strip reuses rows the previous one expanded) and of the default height; images up to 14x14
// by channel groups; the same bits at 1 and 2 threads. Blocks the kernel declines (a plain input)
// run as separate convolutions that still take their activations.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ops/cpu/families.h"
#include "ops/cpu/pointwise.h"

namespace ferry {
namespace {

using namespace cpu_test;

struct Block {
  int64_t n, c, e, k, h, w, kdw, s;
  std::vector<int64_t> pads;  // the depthwise conv's
  PostOp act1, act2;
  bool residual, bias;
  PostOp act3 = PostOp::kNone;  // after the projection (and the residual)
  int64_t se = 0;               // Squeeze-Excitation's squeezed channels (0: none)
  PostOp se_act = PostOp::kRelu;
  bool hard_gate = false;  // HardSigmoid (MobileNetV3), else Sigmoid (EfficientNet)
};

// The block on the output of a 1x1 conv (so its input is channels-last), followed by another
// 1x1 conv (so its output may be). `plain`: the block reads the graph input itself.
// `two_readers`: a second conv also reads the block's output (MobileNetV3's blocks feed the next
// block and its residual Add).
void Build(GraphBuilder& b, const Block& k, uint32_t seed, bool plain = false,
           bool two_readers = false) {
  b.Input("x", Rand({k.n, k.c, k.h, k.w}, seed++));
  std::string in = "x";
  if (!plain) {
    b.Const("w0", Rand({k.c, k.c, 1, 1}, seed++, -0.5f, 0.5f));
    b.Node("Conv", {"x", "w0"}, {"x1"});
    in = "x1";
  }
  auto conv = [&](const std::string& name, const std::string& from, Shape w) {
    b.Const(name + "_w", Rand(w, seed++, -0.5f, 0.5f));
    std::vector<std::string> ins = {from, name + "_w"};
    if (k.bias) {
      b.Const(name + "_b", Rand({w[0]}, seed++));
      ins.push_back(name + "_b");
    }
    return &b.Node("Conv", ins, {name});
  };
  conv("e", in, {k.e, k.c, 1, 1});
  const std::string a1 = AddPostOp(b, "e", k.act1, "act1");
  ir::Node* d = conv("d", a1, {k.e, 1, k.kdw, k.kdw});
  SetInt(*d, "group", k.e);
  SetInts(*d, "strides", {k.s, k.s});
  SetInts(*d, "pads", k.pads);
  std::string a2 = AddPostOp(b, "d", k.act2, "act2");
  if (k.se > 0) {
    b.Node("GlobalAveragePool", {a2}, {"pool"});
    conv("fc1", "pool", {k.se, k.e, 1, 1});
    const std::string h = AddPostOp(b, "fc1", k.se_act, "se_act");
    conv("fc2", h, {k.e, k.se, 1, 1});
    ir::Node& gate = b.Node(k.hard_gate ? "HardSigmoid" : "Sigmoid", {"fc2"}, {"gate"});
    if (k.hard_gate) {
      SetFloat(gate, "alpha", 1.f / 6.f);
      SetFloat(gate, "beta", 0.5f);
    }
    b.Node("Mul", {a2, "gate"}, {"scaled"});
    a2 = "scaled";
  }
  conv("p", a2, {k.k, k.e, 1, 1});
  std::string out = "p";
  if (k.residual) {
    b.Node("Add", {"p", in}, {"sum"});
    out = "sum";
  }
  out = AddPostOp(b, out, k.act3, "act3");
  b.Const("wz", Rand({3, k.k, 1, 1}, seed++, -0.5f, 0.5f));
  b.Node("Conv", {out, "wz"}, {"y"});
  b.Output("y");
  if (two_readers) {
    b.Const("wz2", Rand({5, k.k, 1, 1}, seed++, -0.5f, 0.5f));
    b.Node("Conv", {out, "wz2"}, {"y2"});
    b.Output("y2");
  }
}

int64_t OutPixels(const Block& k) {
  return ((k.h + k.pads[0] + k.pads[2] - k.kdw) / k.s + 1) *
         ((k.w + k.pads[1] + k.pads[3] - k.kdw) / k.s + 1);
}

// Node names as GraphBuilder gives them: op + "_" + index.
std::string ExpandName(bool plain) {
  return "Conv_" + std::to_string(plain ? 0 : 1);
}

const Block kBlocks[] = {
    {1, 16, 48, 16, 28, 28, 3, 1, {1, 1, 1, 1}, PostOp::kRelu, PostOp::kRelu, true, true},
    {2, 13, 37, 13, 17, 15, 5, 1, {2, 2, 2, 2}, PostOp::kClip, PostOp::kClip, true, true},
    {1, 8, 24, 20, 27, 27, 3, 2, {1, 1, 1, 1}, PostOp::kRelu, PostOp::kNone, false, true},
    {1, 24, 72, 40, 30, 26, 5, 2, {1, 1, 2, 2}, PostOp::kNone, PostOp::kRelu, false, false},
    {1, 40, 130, 40, 14, 14, 3, 1, {1, 1, 1, 1}, PostOp::kClip, PostOp::kRelu, true, true},
    {2, 17, 33, 70, 23, 21, 3, 2, {0, 1, 1, 0}, PostOp::kRelu, PostOp::kClip, false, true},
    {1, 3, 5, 3, 10, 12, 5, 1, {2, 2, 2, 2}, PostOp::kRelu, PostOp::kRelu, true, false},
    // MobileNetV3 / EfficientNet activations: SiLU, HardSwish (the op, and torch's gate).
    {1, 24, 72, 24, 16, 16, 5, 1, {2, 2, 2, 2}, PostOp::kSilu, PostOp::kHardSwishGate, true, true},
    {1,
     40,
     120,
     48,
     11,
     9,
     3,
     1,
     {1, 1, 1, 1},
     PostOp::kHardSwishGate,
     PostOp::kHardSwish,
     false,
     true},
    // Squeeze-Excitation: EfficientNet's (SiLU, Sigmoid gate), MobileNetV3's (Relu, HardSigmoid),
    // by strips and by channel groups, batch 2.
    {1,
     16,
     96,
     24,
     29,
     23,
     3,
     2,
     {1, 1, 1, 1},
     PostOp::kSilu,
     PostOp::kSilu,
     false,
     true,
     PostOp::kNone,
     4,
     PostOp::kSilu},
    {2,
     24,
     72,
     24,
     17,
     16,
     5,
     1,
     {2, 2, 2, 2},
     PostOp::kHardSwishGate,
     PostOp::kHardSwishGate,
     true,
     true,
     PostOp::kNone,
     18,
     PostOp::kRelu,
     true},
    {2,
     40,
     120,
     40,
     7,
     9,
     5,
     1,
     {2, 2, 2, 2},
     PostOp::kSilu,
     PostOp::kSilu,
     true,
     true,
     PostOp::kNone,
     10,
     PostOp::kSilu},
    {1,
     80,
     200,
     112,
     13,
     13,
     3,
     1,
     {1, 1, 1, 1},
     PostOp::kHardSwishGate,
     PostOp::kRelu,
     false,
     false,
     PostOp::kNone,
     48,
     PostOp::kRelu,
     true},
    {1,
     24,
     64,
     24,
     30,
     28,
     3,
     1,
     {1, 1, 1, 1},
     PostOp::kSilu,
     PostOp::kSilu,
     true,
     true,
     PostOp::kNone,
     8,
     PostOp::kSilu},
    // ShuffleNetV2's branch (no activation after the depthwise conv, Relu after the projection).
    {1,
     58,
     58,
     58,
     28,
     28,
     3,
     1,
     {1, 1, 1, 1},
     PostOp::kRelu,
     PostOp::kNone,
     false,
     true,
     PostOp::kRelu},
    {1,
     16,
     40,
     16,
     12,
     13,
     3,
     1,
     {1, 1, 1, 1},
     PostOp::kNone,
     PostOp::kClip,
     true,
     true,
     PostOp::kClip},
};

TEST(CpuMbConv, MatchesReference) {
  if (!ops::cpu::PointwiseSupported()) GTEST_SKIP() << "no AVX-512: the block runs unfused";
  uint32_t seed = 500;
  for (int64_t strip : {int64_t{1}, int64_t{0}}) {
    ops::cpu::SetMbConvStripBytesForTesting(strip);
    for (const Block& k : kBlocks) {
      SCOPED_TRACE("c " + std::to_string(k.c) + " e " + std::to_string(k.e) + " h " +
                   std::to_string(k.h) + " k" + std::to_string(k.kdw) + " s" + std::to_string(k.s) +
                   " strip " + std::to_string(strip));
      GraphBuilder b;
      Build(b, k, seed += 10);
      const auto report = ExpectMatchesReference(b, 1e-4, 1e-4);
      EXPECT_EQ(ProviderOfNode(report, ExpandName(false)), "cpu (MbConv)");
      // (Squeeze-Excitation under 28x28 runs as separate ops at one thread: other sums.)
      if (k.se == 0 || OutPixels(k) >= 784) ExpectSameBitsAtOneAndTwoThreads(b);
    }
  }
  ops::cpu::SetMbConvStripBytesForTesting(0);
}

// At one thread a block with Squeeze-Excitation on an image under 28x28 runs as separate ops; a
// larger one, or one without, stays fused.
TEST(CpuMbConv, OneThreadKeepsSmallSeBlocksSeparate) {
  if (!ops::cpu::PointwiseSupported()) GTEST_SKIP() << "no AVX-512: the block runs unfused";
  for (const Block& k : kBlocks) {
    GraphBuilder b;
    Build(b, k, 800);
    const auto report = ExpectMatchesReference(b, 1e-4, 1e-4, 1);
    const bool fused = k.se == 0 || OutPixels(k) >= 784;
    EXPECT_EQ(ProviderOfNode(report, ExpandName(false)), fused ? "cpu (MbConv)" : "cpu")
        << "h " << k.h << " se " << k.se;
  }
}

// The block's output read twice: no activation after it to take, the block still fused.
TEST(CpuMbConv, OutputWithTwoReaders) {
  if (!ops::cpu::PointwiseSupported()) GTEST_SKIP() << "no AVX-512: the block runs unfused";
  for (const Block& k : {kBlocks[0], kBlocks[2]}) {
    GraphBuilder b;
    Build(b, k, 700, false, true);
    const auto report = ExpectMatchesReference(b, 1e-4, 1e-4);
    EXPECT_EQ(ProviderOfNode(report, ExpandName(false)), "cpu (MbConv)");
  }
}

// A block the kernel declines (its input in plain NCHW: the graph input) runs as separate
// convolutions, each with its activation and the residual fused.
TEST(CpuMbConv, DeclinedBlocksKeepTheirFusions) {
  uint32_t seed = 900;
  for (const Block& k : {kBlocks[0], kBlocks[4]}) {
    GraphBuilder b;
    Build(b, k, seed += 10, true);
    const auto report = ExpectMatchesReference(b, 1e-4, 1e-4);
    EXPECT_EQ(ProviderOfNode(report, ExpandName(true)), "cpu");
    for (const auto& r : report) {
      if (r.op_type == "Relu" || r.op_type == "Clip" || r.op_type == "Add") {
        EXPECT_EQ(r.provider, "fused") << r.name;
      }
    }
  }
}

}  // namespace
}  // namespace ferry
