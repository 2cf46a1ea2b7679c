// The branchy CNNs' patterns on the cpu provider (Inception-v3, DenseNet-121, GoogLeNet), each
// against the reference kernels on seeded awkward shapes, inputs in the convolution library's
// layout (from a Conv) and plain, with the node report saying which kernel ran:
//  * PadAvgPool: torch's avg_pool2d(padding=p) exported as a zero Pad and an AveragePool;
//  * ConcatBn: DenseNet's Concat -> BatchNormalization -> Relu pre-activation;
//  * MaxPool on channel vectors (own loops when the layout stays NHWC / blocked): GoogLeNet's
//    3x3 stride-1 ceil-mode branch pools and the stride-2 ones (AveragePool cases: oneDNN);
//  * ReduceMean / ReduceSum of a conv's output in its layout (MnasNet's x.mean([2, 3])).
// ctest runs these also with oneDNN capped at AVX2 (8-channel blocked layouts).
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ir/graph.h"
#include "ops/cpu/families.h"
#include "ops/cpu/stem.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using namespace cpu_test;

struct PadPoolCase {
  int64_t opset;
  Shape x;
  bool from_conv;                  // x comes out of a Conv (the library's layout) or is plain
  std::vector<int64_t> pads;       // the Pad's, [N, C, H, W] begins then ends
  std::vector<int64_t> k, s, d;    // the AveragePool's kernel, strides, dilations (empty: none)
  std::vector<int64_t> pool_pads;  // the AveragePool's own pads (empty: none)
  int64_t include = -1;            // count_include_pad (-1: not set)
  float value = 0.f;               // the Pad's constant
  bool fuses;
};

TEST(CpuCnnBranches, PadAvgPoolMatchesReference) {
  const std::vector<PadPoolCase> cases = {
      // Inception-v3's pool branch: 3x3 stride 1 over a 1-padded image, 8/16/13 channels.
      {17, {1, 16, 9, 9}, true, {0, 0, 1, 1, 0, 0, 1, 1}, {3, 3}, {}, {}, {}, -1, 0.f, true},
      {17, {2, 13, 7, 11}, true, {0, 0, 1, 1, 0, 0, 1, 1}, {3, 3}, {}, {}, {}, -1, 0.f, true},
      {13, {1, 8, 10, 6}, false, {0, 0, 1, 1, 0, 0, 1, 1}, {3, 3}, {}, {}, {}, -1, 0.f, true},
      // Asymmetric pads, strides, a non-square kernel, dilation.
      {17, {1, 24, 11, 9}, true, {0, 0, 2, 0, 0, 0, 1, 3}, {3, 2}, {2, 1}, {}, {}, -1, 0.f, true},
      {17, {2, 16, 12, 12}, true, {0, 0, 2, 2, 0, 0, 2, 2}, {3, 3}, {}, {2, 2}, {}, -1, 0.f, true},
      // Pad-2 (pads as an attribute) and the pool's own counted pads on top.
      {10, {1, 16, 8, 8}, true, {0, 0, 1, 0, 0, 0, 0, 1}, {3, 3}, {}, {}, {}, -1, 0.f, true},
      {17,
       {1, 16, 8, 7},
       true,
       {0, 0, 1, 1, 0, 0, 1, 1},
       {3, 3},
       {},
       {},
       {1, 0, 0, 1},
       1,
       0.f,
       true},
      // Not the pattern: a nonzero constant, uncounted pool pads, a pad on C.
      {17, {1, 16, 9, 9}, true, {0, 0, 1, 1, 0, 0, 1, 1}, {3, 3}, {}, {}, {}, -1, 0.5f, false},
      {17,
       {1, 16, 9, 9},
       true,
       {0, 0, 1, 1, 0, 0, 1, 1},
       {3, 3},
       {},
       {},
       {1, 1, 1, 1},
       0,
       0.f,
       false},
      {17, {1, 16, 9, 9}, true, {0, 1, 1, 1, 0, 0, 1, 1}, {3, 3}, {}, {}, {}, -1, 0.f, false},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    uint32_t seed = 7100 + 10 * static_cast<uint32_t>(ci);
    const PadPoolCase& c = cases[ci];
    SCOPED_TRACE("case " + std::to_string(ci));
    GraphBuilder b;
    b.Opset(c.opset);
    std::string x = "x";
    if (c.from_conv) {
      b.Input("in", Rand({c.x[0], 5, c.x[2], c.x[3]}, seed++));
      b.Const("w", Rand({c.x[1], 5, 1, 1}, seed++, -0.5f, 0.5f));
      b.Node("Conv", {"in", "w"}, {"x"});
    } else {
      b.Input("x", Rand(c.x, seed++));
    }
    ir::Node* pad;
    if (c.opset < 11) {
      pad = &b.Node("Pad", {x}, {"p"});
      SetInts(*pad, "pads", c.pads);
      if (c.value != 0.f) SetFloat(*pad, "value", c.value);
    } else {
      b.Const("pads", Tensor::FromVector<int64_t>(c.pads, {8}));
      b.Const("cv", Tensor::FromVector<float>({c.value}, {}));
      pad = &b.Node("Pad", {x, "pads", "cv"}, {"p"});
    }
    ir::Node& pool = b.Node("AveragePool", {"p"}, {"ap"});
    SetInts(pool, "kernel_shape", c.k);
    if (!c.s.empty()) SetInts(pool, "strides", c.s);
    if (!c.d.empty()) SetInts(pool, "dilations", c.d);
    if (!c.pool_pads.empty()) SetInts(pool, "pads", c.pool_pads);
    if (c.include >= 0) SetInt(pool, "count_include_pad", c.include);
    // A 1x1 conv reads the result, as in Inception (the output may stay channels-last).
    b.Const("w2", Rand({7, c.x[1] + c.pads[1] + c.pads[5], 1, 1}, seed++, -0.5f, 0.5f));
    b.Node("Conv", {"ap", "w2"}, {"y"});
    b.Output("y");
    auto report = ExpectMatchesReference(b);
    EXPECT_EQ(ProviderOfOp(report, "Pad") == "cpu (PadAvgPool)", c.fuses)
        << ProviderOfOp(report, "Pad");
    if (c.fuses) {
      EXPECT_EQ(ProviderOfOp(report, "AveragePool"), "fused");
    }
  }
}

struct ConcatBnCase {
  int64_t n, hw;
  std::vector<int64_t> conv_ch;  // inputs made by a 1x1 Conv (the library's layout), channels
  int64_t plain_ch;              // and a plain graph input with this many channels (0: none)
  bool relu, conv_reader;        // Relu after the BN; a Conv reads the result (else an output)
};

TEST(CpuCnnBranches, ConcatBnMatchesReference) {
  const std::vector<ConcatBnCase> cases = {
      {1, 9, {16, 16, 8}, 0, true, true},  // DenseNet: the library's layout throughout
      {2, 7, {8, 24}, 16, true, true},     // a plain input among them (converted)
      {1, 5, {13, 8}, 0, true, true},      // 13 channels: no 8-channel blocks
      {1, 6, {16}, 0, true, true},         // one input (DenseNet's first layer)
      {2, 5, {16, 8}, 0, false, true},     // no Relu
      {1, 7, {16, 32}, 0, true, false},    // the result is a graph output (plain)
      {3, 4, {}, 11, true, true},          // plain only
  };
  uint32_t seed = 7300;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const ConcatBnCase& c = cases[ci];
    SCOPED_TRACE("case " + std::to_string(ci));
    GraphBuilder b;
    b.Input("in", Rand({c.n, 6, c.hw, c.hw}, seed++));
    std::vector<std::string> ins;
    int64_t total = 0;
    for (size_t k = 0; k < c.conv_ch.size(); ++k) {
      const std::string w = "w" + std::to_string(k), f = "f" + std::to_string(k);
      b.Const(w, Rand({c.conv_ch[k], 6, 1, 1}, seed++, -0.5f, 0.5f));
      b.Node("Conv", {"in", w}, {f});
      ins.push_back(f);
      total += c.conv_ch[k];
    }
    if (c.plain_ch > 0) {
      b.Input("pl", Rand({c.n, c.plain_ch, c.hw, c.hw}, seed++));
      ins.insert(ins.begin() + static_cast<std::ptrdiff_t>(ins.size() / 2), "pl");
      total += c.plain_ch;
    }
    SetInt(b.Node("Concat", ins, {"cat"}), "axis", 1);
    AddBnStats(b, "", total, &seed);
    SetFloat(b.Node("BatchNormalization", {"cat", "s", "bb", "m", "v"}, {"bn"}), "epsilon", 1e-3f);
    std::string out = "bn";
    if (c.relu) {
      b.Node("Relu", {"bn"}, {"r"});
      out = "r";
    }
    if (c.conv_reader) {
      b.Const("wout", Rand({5, total, 1, 1}, seed++, -0.3f, 0.3f));
      b.Node("Conv", {out, "wout"}, {"y"});
      b.Output("y");
    } else {
      b.Output(out);
    }
    auto report = ExpectMatchesReference(b);
    EXPECT_EQ(ProviderOfOp(report, "Concat"), "cpu (ConcatBn)");
    EXPECT_EQ(ProviderOfOp(report, "BatchNormalization"), "fused");
    if (c.relu) {
      EXPECT_EQ(ProviderOfOp(report, "Relu"), "fused");
    }
  }
}

// A Concat whose output has another reader besides the BN stays two steps.
TEST(CpuCnnBranches, ConcatBnNeedsTheBnToBeTheOnlyReader) {
  GraphBuilder b;
  b.Input("x", Rand({1, 8, 5, 5}, 7400));
  b.Const("w", Rand({8, 8, 1, 1}, 7401, -0.5f, 0.5f));
  b.Node("Conv", {"x", "w"}, {"f"});
  SetInt(b.Node("Concat", {"x", "f"}, {"cat"}), "axis", 1);
  uint32_t seed = 7402;
  AddBnStats(b, "", 16, &seed);
  b.Node("BatchNormalization", {"cat", "s", "bb", "m", "v"}, {"bn"});
  b.Node("Relu", {"bn"}, {"r"});
  b.Node("Add", {"r", "cat"}, {"y"});
  b.Output("y");
  auto report = ExpectMatchesReference(b);
  EXPECT_EQ(ProviderOfOp(report, "Concat"), "cpu");
  EXPECT_EQ(ProviderOfOp(report, "BatchNormalization"), "cpu");
}

struct MaxPoolCase {
  Shape x;  // the Conv's output
  std::vector<int64_t> k, s, d, pads;
  int64_t ceil;
  bool nan;          // a NaN pixel in the input (it must win where its window reaches)
  int64_t avg = -1;  // AveragePool with this count_include_pad (-1: MaxPool)
};

TEST(CpuCnnBranches, PoolOnChannelVectorsMatchesReference) {
  const std::vector<MaxPoolCase> cases = {
      {{1, 16, 9, 9}, {3, 3}, {1, 1}, {}, {1, 1, 1, 1}, 1, false},  // GoogLeNet's branch pool
      {{2, 24, 11, 10}, {3, 3}, {2, 2}, {}, {0, 0, 0, 0}, 1, false},
      {{1, 32, 8, 8}, {2, 2}, {2, 2}, {}, {0, 0, 0, 0}, 1, false},
      {{1, 13, 7, 9}, {3, 2}, {1, 2}, {}, {1, 0, 2, 1}, 0, false},  // odd C, asymmetric
      {{1, 16, 12, 12}, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, 0, false},
      {{1, 16, 6, 6}, {3, 3}, {1, 1}, {}, {1, 1, 1, 1}, 0, true},
      // AveragePool (oneDNN) after the same Conv: counted and uncounted pads, odd C, strides.
      {{1, 16, 9, 9}, {3, 3}, {1, 1}, {}, {1, 1, 1, 1}, 0, false, 1},
      {{2, 72, 7, 8}, {3, 3}, {1, 1}, {}, {1, 1, 1, 1}, 0, false, 0},
      {{1, 13, 9, 7}, {3, 2}, {2, 1}, {}, {1, 0, 2, 1}, 0, false, 1},
      {{1, 24, 8, 8}, {2, 2}, {2, 2}, {}, {0, 0, 0, 0}, 0, false, 0},
  };
  // The pools here run on their own (a 4-channel conv before them is a first-layer conv that
  // stem_test.cc's first conv + MaxPool pattern would otherwise take with the pool).
  ops::cpu::SetStemPoolModeForTesting(0);
  struct Guard {
    ~Guard() {
      ops::cpu::SetMaxPoolIsaForTesting(0);
      ops::cpu::SetStemPoolModeForTesting(-1);
    }
  } guard;
  for (int isa = 0; isa < 3; ++isa)  // the widest the CPU has, AVX2, scalar
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      ops::cpu::SetMaxPoolIsaForTesting(isa);
      uint32_t seed = 7500 + 10 * static_cast<uint32_t>(ci);
      const MaxPoolCase& c = cases[ci];
      SCOPED_TRACE("isa cap " + std::to_string(isa) + ", case " + std::to_string(ci));
      GraphBuilder b;
      Tensor in = Rand({c.x[0], 4, c.x[2], c.x[3]}, seed++);
      if (c.nan) in.data<float>()[2 * c.x[3] + 3] = std::nanf("");
      b.Input("in", std::move(in));
      b.Const("w", Rand({c.x[1], 4, 1, 1}, seed++, -0.5f, 0.5f));
      b.Node("Conv", {"in", "w"}, {"x"});
      ir::Node& mp = b.Node(c.avg < 0 ? "MaxPool" : "AveragePool", {"x"}, {"p"});
      if (c.avg >= 0) SetInt(mp, "count_include_pad", c.avg);
      SetInts(mp, "kernel_shape", c.k);
      SetInts(mp, "strides", c.s);
      if (!c.d.empty()) SetInts(mp, "dilations", c.d);
      SetInts(mp, "pads", c.pads);
      SetInt(mp, "ceil_mode", c.ceil);
      b.Const("w2", Rand({5, c.x[1], 1, 1}, seed++, -0.3f, 0.3f));
      b.Node("Conv", {"p", "w2"}, {"y"});
      b.Output("y");
      auto report = ExpectMatchesReference(b);
      EXPECT_EQ(ProviderOfOp(report, c.avg < 0 ? "MaxPool" : "AveragePool"), "cpu");
    }
}

// ReduceMean / ReduceSum reading a convolution's output in the convolution's layout: over H and W
// (torch's x.mean([2, 3]), keepdims 0 and 1: per-channel sums in that layout), and over other
// axes (a plain copy first); channels 8 / 16 / 13 / 136 (blocked, channels-last, plain), images
// below and above the 512-pixel chunk, batch 2; the reduction ran on cpu, and the conv kept its
// layout (when it is not plain the reduce read it so).
TEST(CpuCnnBranches, ReduceReadsConvLayouts) {
  uint32_t seed = 1700;
  struct Rc {
    const char* op;
    std::vector<int64_t> axes;
    int64_t keepdims;
  };
  const Rc reds[] = {{"ReduceMean", {2, 3}, 0},
                     {"ReduceMean", {-2, -1}, 1},
                     {"ReduceSum", {2, 3}, 0},
                     {"ReduceMean", {1}, 1},
                     {"ReduceSum", {1, 2, 3}, 0}};
  for (int64_t ch : {8, 16, 13, 136}) {
    for (int64_t hw : {7, 29}) {
      for (const Rc& rc : reds) {
        SCOPED_TRACE(std::string(rc.op) + " channels " + std::to_string(ch) + " hw " +
                     std::to_string(hw) + " axes " + std::to_string(rc.axes.size()));
        GraphBuilder b;
        b.Opset(13);
        b.Input("x", Rand({2, 5, hw, hw}, seed++));
        b.Const("w", Rand({ch, 5, 1, 1}, seed++, -0.5f, 0.5f));
        b.Node("Conv", {"x", "w"}, {"c"});
        b.Node("Relu", {"c"}, {"r"});
        ir::Node& n = rc.op == std::string("ReduceSum") ? b.Node(rc.op, {"r", "axes"}, {"y"})
                                                        : b.Node(rc.op, {"r"}, {"y"});
        if (rc.op == std::string("ReduceSum"))
          b.Const("axes",
                  Tensor::FromVector<int64_t>(rc.axes, {static_cast<int64_t>(rc.axes.size())}));
        else
          SetInts(n, "axes", rc.axes);
        SetInt(n, "keepdims", rc.keepdims);
        b.Output("y");
        for (int threads : {1, 2}) {
          auto report = ExpectMatchesReference(b, 1e-5, 1e-6, threads);
          EXPECT_EQ(ProviderOfOp(report, rc.op), "cpu");
        }
      }
    }
  }
}

}  // namespace
}  // namespace ferry
