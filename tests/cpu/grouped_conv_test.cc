// Grouped (not depthwise) convolutions inside a model, where their input arrives channels-last,
// against the reference kernel: the own kernel (grouped.h: 4 / 8 / 16 channels per group, 3x3,
// stride 1 / 2), and oneDNN with NHWC in and out (no reorders to its blocked layouts and back)
// or with its own layout choice; 4 / 8 / 16 / 5 / 32 channels per group, stride 1 and 2, pads 1
// and 0, batch 1 and 2, widths that leave a partial 8-pixel tile, a fused residual and Relu.
// ResNeXt's and RegNet's blocks.
#include <cstdlib>
#include <string>

#include "cpu_harness.h"
#include "ops/cpu/grouped.h"
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
  int64_t pad = 1, batch = 1;
};

// x -> Conv 1x1 (channels-last from here on) -> Relu -> grouped Conv 3x3 (+ bias) [-> Add(the
// 1x1's output)] -> Relu -> Conv 1x1.
void Build(GraphBuilder& b, const GroupedCase& gc, uint32_t seed) {
  const int64_t ch = gc.groups * gc.per_group;
  b.Opset(13);
  b.Input("x", Rand({gc.batch, 8, gc.hw, gc.hw + 3}, seed));
  b.Const("w1", Rand({ch, 8, 1, 1}, seed + 1, -0.5f, 0.5f));
  b.Const("w2", Rand({ch, gc.per_group, 3, 3}, seed + 2, -0.3f, 0.3f));
  b.Const("b2", Rand({ch}, seed + 3));
  b.Const("w3", Rand({6, ch, 1, 1}, seed + 4, -0.5f, 0.5f));
  b.Node("Conv", {"x", "w1"}, {"c1"});
  b.Node("Relu", {"c1"}, {"r1"});
  ir::Node& g = b.Node("Conv", {"r1", "w2", "b2"}, {"c2"});
  SetInts(g, "pads", {gc.pad, gc.pad, gc.pad, gc.pad});
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
      {32, 4, 9, 1, true},                              // ResNeXt-50's 56x56 stage
      {32, 8, 7, 2, false},                             // its stride-2 block
      {8, 16, 6, 1, true},                              // 16 per group: broadcast loads
      {4, 16, 7, 2, false, 1, 2},                       // batch 2
      {4, 8, 5, 1, false, 0},                           // no pads
      {2, 8, 8, 2, false, 0},     {3, 5, 5, 1, false},  // 5 per group: oneDNN
      {2, 32, 4, 1, false},                             // 32 per group: oneDNN
  };
  uint32_t seed = 9100;
  for (int own : {1, 0}) {
    for (int nhwc : {1, 0}) {
      if (own && !nhwc) continue;
      ops::cpu::SetGroupedMode(own);
      ops::cpu::SetGroupedConvNhwc(nhwc);
      for (const GroupedCase& gc : cases) {
        SCOPED_TRACE("own " + std::to_string(own) + " nhwc " + std::to_string(nhwc) + " groups " +
                     std::to_string(gc.groups) + " x " + std::to_string(gc.per_group) + " stride " +
                     std::to_string(gc.stride) + " pad " + std::to_string(gc.pad));
        const uint64_t nhwc_before = ops::cpu::GroupedNhwcPrepares();
        const uint64_t own_before = ops::cpu::GroupedRuns();
        GraphBuilder b;
        Build(b, gc, seed);
        seed += 10;
        ExpectMatchesReference(b, 1e-4, 1e-5);
        // Each path taken exactly where it should be: the input is channels-last on an AVX-512
        // CPU with oneDNN uncapped (its convolutions write NHWC); capped at AVX2 they write
        // 8-channel blocks and oneDNN keeps its choice.
        const bool avx512 = ops::cpu::WinogradAvx512() && !std::getenv("ONEDNN_MAX_CPU_ISA");
        const bool kernel_takes = gc.per_group == 4 || gc.per_group == 8 || gc.per_group == 16;
        const bool own_ran = ops::cpu::GroupedRuns() > own_before;
        const bool nhwc_ran = ops::cpu::GroupedNhwcPrepares() > nhwc_before;
        if (avx512) {
          EXPECT_EQ(own_ran, own == 1 && kernel_takes);
          EXPECT_EQ(nhwc_ran, nhwc == 1 && !own_ran);
        } else {
          EXPECT_FALSE(nhwc_ran);
        }
      }
    }
  }
  ops::cpu::SetGroupedMode(-1);
  ops::cpu::SetGroupedConvNhwc(-1);
}

TEST(CpuGroupedConv, SameBitsAtOneAndTwoThreads) {
  for (const GroupedCase& gc : {GroupedCase{32, 4, 9, 1, true}, GroupedCase{16, 8, 7, 2, false}}) {
    GraphBuilder b;
    Build(b, gc, 9300);
    ExpectSameBitsAtOneAndTwoThreads(b);
  }
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

ops::cpu::DwShape Shape3x3(int64_t c, int64_t hw, int64_t stride) {
  ops::cpu::DwShape s;
  s.n = 1;
  s.c = c;
  s.h = s.w = hw;
  s.kh = s.kw = 3;
  s.sh = s.sw = stride;
  s.oh = s.ow = (hw + 2 - 3) / stride + 1;
  s.pad_t = s.pad_l = 1;
  return s;
}

// The rule: ResNeXt-50's 56x56 (4 per group) and 28x28 (8 per group, stride 1) stages; not its
// stride-2 8-per-group conv, its 16- and 32-per-group stages or RegNet-Y-400MF's 8-wide groups
// (104 / 208 / 440 channels); everything 4 / 8 / 16 per group when forced; nothing when off.
TEST(CpuGroupedConv, Rule) {
  if (!ops::cpu::WinogradAvx512()) GTEST_SKIP() << "needs AVX-512";
  using ops::cpu::GroupedWanted;
  EXPECT_TRUE(GroupedWanted(Shape3x3(128, 56, 1), 32, 128));
  EXPECT_TRUE(GroupedWanted(Shape3x3(256, 28, 1), 32, 256));
  EXPECT_FALSE(GroupedWanted(Shape3x3(256, 56, 2), 32, 256));
  EXPECT_FALSE(GroupedWanted(Shape3x3(512, 14, 1), 32, 512));
  EXPECT_FALSE(GroupedWanted(Shape3x3(1024, 7, 1), 32, 1024));
  EXPECT_FALSE(GroupedWanted(Shape3x3(104, 28, 1), 13, 104));
  EXPECT_FALSE(GroupedWanted(Shape3x3(208, 14, 1), 26, 208));
  EXPECT_FALSE(GroupedWanted(Shape3x3(128, 56, 1), 32, 64));  // K != C
  ops::cpu::SetGroupedMode(1);
  EXPECT_TRUE(GroupedWanted(Shape3x3(512, 14, 2), 32, 512));
  EXPECT_TRUE(GroupedWanted(Shape3x3(104, 28, 1), 13, 104));
  EXPECT_FALSE(GroupedWanted(Shape3x3(1024, 7, 1), 32, 1024));  // 32 per group
  ops::cpu::SetGroupedMode(0);
  EXPECT_FALSE(GroupedWanted(Shape3x3(128, 56, 1), 32, 128));
  ops::cpu::SetGroupedMode(-1);
}

}  // namespace
}  // namespace ferry
