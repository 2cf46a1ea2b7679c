// Grouped (not depthwise) convolutions inside a model, where their input arrives channels-last:
// oneDNN runs them with NHWC in and out (no reorders to its blocked layouts and back), against
// the reference kernel, with 4 / 8 / 16 / 5 channels per group, stride 1 and 2, a fused residual
// and Relu, and again with oneDNN's own layout choice. ResNeXt's and RegNet's blocks.
#include <cstdlib>
#include <string>

#include "cpu_harness.h"
#include "ops/cpu/winograd.h"

namespace ferry {
namespace {

using cpu_test::ExpectMatchesReference;
using cpu_test::ExpectSameBitsAtOneAndTwoThreads;
using cpu_test::GraphBuilder;
using cpu_test::Rand;
using cpu_test::SetInt;
using cpu_test::SetInts;

struct GroupedCase {
  int64_t groups, per_group, hw, stride;
  bool residual;
};

// x -> Conv 1x1 (channels-last from here on) -> Relu -> grouped Conv 3x3 (+ bias) [-> Add(the
// 1x1's output)] -> Relu -> Conv 1x1.
void Build(GraphBuilder& b, const GroupedCase& gc, uint32_t seed) {
  const int64_t ch = gc.groups * gc.per_group;
  b.Opset(13);
  b.Input("x", Rand({1, 8, gc.hw, gc.hw + 1}, seed));
  b.Const("w1", Rand({ch, 8, 1, 1}, seed + 1, -0.5f, 0.5f));
  b.Const("w2", Rand({ch, gc.per_group, 3, 3}, seed + 2, -0.3f, 0.3f));
  b.Const("b2", Rand({ch}, seed + 3));
  b.Const("w3", Rand({6, ch, 1, 1}, seed + 4, -0.5f, 0.5f));
  b.Node("Conv", {"x", "w1"}, {"c1"});
  b.Node("Relu", {"c1"}, {"r1"});
  ir::Node& g = b.Node("Conv", {"r1", "w2", "b2"}, {"c2"});
  SetInts(g, "pads", {1, 1, 1, 1});
  SetInts(g, "strides", {gc.stride, gc.stride});
  SetInt(g, "group", gc.groups);
  std::string last = "c2";
  if (gc.residual) {
    b.Node("Add", {"c2", "r1"}, {"s2"});
    last = "s2";
  }
  b.Node("Relu", {last}, {"r2"});
  b.Node("Conv", {"r2", "w3"}, {"y"});
  b.Output("y");
}

TEST(CpuGroupedConv, ChannelsLastMatchesReference) {
  const GroupedCase cases[] = {
      {32, 4, 9, 1, true},   // ResNeXt-50's 56x56 stage
      {32, 8, 7, 2, false},  // its stride-2 block
      {8, 16, 6, 1, true},   // RegNet-style
      {3, 5, 5, 1, false},   // channels per group not a multiple of 4
      {4, 8, 8, 2, false},
  };
  uint32_t seed = 9100;
  for (int nhwc : {1, 0}) {
    ops::cpu::SetGroupedConvNhwc(nhwc);
    for (const GroupedCase& gc : cases) {
      SCOPED_TRACE("nhwc " + std::to_string(nhwc) + " groups " + std::to_string(gc.groups) + " x " +
                   std::to_string(gc.per_group) + " stride " + std::to_string(gc.stride));
      const uint64_t before = ops::cpu::GroupedNhwcPrepares();
      GraphBuilder b;
      Build(b, gc, seed);
      seed += 10;
      ExpectMatchesReference(b, 1e-4, 1e-5);
      // Never when switched off; always when on and the input is channels-last (an AVX-512 CPU
      // with oneDNN uncapped, where its convolutions write NHWC; capped at AVX2 they write
      // 8-channel blocks and the grouped conv keeps oneDNN's choice).
      if (nhwc == 0) {
        EXPECT_EQ(ops::cpu::GroupedNhwcPrepares(), before);
      } else if (ops::cpu::WinogradAvx512() && !std::getenv("ONEDNN_MAX_CPU_ISA")) {
        EXPECT_GT(ops::cpu::GroupedNhwcPrepares(), before);
      }
    }
  }
  ops::cpu::SetGroupedConvNhwc(-1);
}

TEST(CpuGroupedConv, SameBitsAtOneAndTwoThreads) {
  GraphBuilder b;
  Build(b, {32, 4, 9, 1, true}, 9300);
  ExpectSameBitsAtOneAndTwoThreads(b);
}

}  // namespace
}  // namespace ferry
