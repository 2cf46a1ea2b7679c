// ShuffleNetV2's channel shuffle on channels-last activations: Concat -> Reshape [N,g,C/g,H,W]
// -> Transpose [0,2,1,3,4] -> Reshape [N,C,H,W] -> two channel Slices, between convolutions.
// With AVX-512 the convolutions write channels-last, the Reshapes are channels-last views, the
// Transpose interleaves each pixel's channel groups, and the Slices copy channel ranges, all
// without a conversion to plain. Each case against the reference kernels (2 and 1 threads),
// with the node report saying which way each node ran; a Shape of the concatenated value reads
// it in place, and readers that need plain (a graph output, a Reshape that flattens) still
// get it.
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry {
namespace {

using namespace cpu_test;

// Whether the convolutions write channels-last here (AVX-512, oneDNN not capped).
bool ChannelsLast() {
  return __builtin_cpu_supports("avx512f") && std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr;
}

void Conv1x1(GraphBuilder& b, const std::string& x, const std::string& y, int64_t c, int64_t k,
             uint32_t seed) {
  b.Const(y + "_w", Rand({k, c, 1, 1}, seed, -0.5f, 0.5f));
  b.Const(y + "_b", Rand({k}, seed + 1));
  b.Node("Conv", {x, y + "_w", y + "_b"}, {y});
}

void ShapeConst(GraphBuilder& b, const std::string& name, const std::vector<int64_t>& v) {
  b.Const(name, Int64s(v));
}

void ChannelSlice(GraphBuilder& b, const std::string& x, const std::string& y, int64_t from,
                  int64_t to) {
  ShapeConst(b, y + "_s", {from});
  ShapeConst(b, y + "_e", {to});
  ShapeConst(b, y + "_a", {1});
  b.Node("Slice", {x, y + "_s", y + "_e", y + "_a"}, {y});
}

struct Case {
  int64_t n, c, h, w, groups;  // c: channels of each half
  bool flatten_reader;         // the shuffled value also read by a flattening Reshape
};

// x -> conv -> [a | b] (Slices) ; b -> conv -> Relu -> y ; Concat(a, y) -> shuffle -> [a2 | b2]
// -> conv on b2 -> Concat(a2, z) (a graph output, plain).
void ShuffleUnit(GraphBuilder& b, const Case& k, uint32_t seed) {
  const int64_t c2 = 2 * k.c;
  b.Opset(13);
  b.Input("x", Rand({k.n, c2, k.h, k.w}, seed));
  Conv1x1(b, "x", "c0", c2, c2, seed + 1);
  ChannelSlice(b, "c0", "a", 0, k.c);
  ChannelSlice(b, "c0", "b", k.c, c2);
  Conv1x1(b, "b", "yb", k.c, k.c, seed + 3);
  b.Node("Relu", {"yb"}, {"y"});
  SetInt(b.Node("Concat", {"a", "y"}, {"cat"}), "axis", 1);
  b.Node("Shape", {"cat"}, {"cat_shape"});
  b.Output("cat_shape");
  ShapeConst(b, "split", {k.n, k.groups, c2 / k.groups, k.h, k.w});
  b.Node("Reshape", {"cat", "split"}, {"r5"});
  SetInts(b.Node("Transpose", {"r5"}, {"t5"}), "perm", {0, 2, 1, 3, 4});
  ShapeConst(b, "merge", {k.n, -1, k.h, k.w});
  b.Node("Reshape", {"t5", "merge"}, {"shuffled"});
  ChannelSlice(b, "shuffled", "a2", 0, k.c);
  ChannelSlice(b, "shuffled", "b2", k.c, c2);
  Conv1x1(b, "b2", "z", k.c, k.c, seed + 5);
  SetInt(b.Node("Concat", {"a2", "z"}, {"out"}), "axis", 1);
  b.Output("out");
  if (k.flatten_reader) {
    ShapeConst(b, "flat", {k.n, -1});
    b.Node("Reshape", {"shuffled", "flat"}, {"flattened"});
    b.Output("flattened");
  }
}

TEST(CpuChannelShuffle, ShuffleUnitMatchesReference) {
  const Case cases[] = {
      {1, 16, 5, 7, 2, false},  // 2 groups, whole 16-channel vectors
      {2, 13, 3, 5, 2, false},  // odd channels: the interleave's tail, two images
      {1, 58, 7, 7, 2, false},  // ShuffleNetV2 1.0x's first stage width
      {1, 16, 4, 3, 4, false},  // 4 groups (the scalar interleave)
      {1, 24, 6, 5, 2, true},   // a flattening reader: the shuffled value stays plain
  };
  uint32_t seed = 9100;
  for (const Case& k : cases) {
    for (int threads : {2, 1}) {
      SCOPED_TRACE("c " + std::to_string(k.c) + " n " + std::to_string(k.n) + " groups " +
                   std::to_string(k.groups) + " threads " + std::to_string(threads));
      GraphBuilder b;
      ShuffleUnit(b, k, seed);
      auto report = ExpectMatchesReference(b, 1e-4, 1e-5, threads);
      // Node names: op type and index in the graph.
      EXPECT_EQ(ProviderOfNode(report, "Transpose_8"), "cpu");
      const std::string split = ProviderOfNode(report, "Reshape_7");
      const std::string merge = ProviderOfNode(report, "Reshape_9");
      if (ChannelsLast() && !k.flatten_reader) {
        EXPECT_EQ(split, "cpu (channels-last view)");
        EXPECT_EQ(merge, "cpu (channels-last view)");
      } else {
        EXPECT_EQ(merge, "cpu (view)");  // plain: the shuffle on the plain layout
      }
      EXPECT_EQ(ProviderOfNode(report, "Slice_10"), "cpu");
      EXPECT_EQ(ProviderOfNode(report, "Slice_11"), "cpu");
    }
    seed += 10;
  }
}

// Slice of a convolution's output in its layout (channels-last; 8-channel blocks when oneDNN
// is capped at AVX2: converted first), on channels, rows and columns, with steps and a reversed
// range; the slice read by a Conv (it stays channels-last) or a graph output (plain).
TEST(CpuChannelShuffle, SliceOfConvOutputMatchesReference) {
  struct SliceCase {
    std::vector<int64_t> starts, ends, axes, steps;
    bool conv_reader;
  };
  const SliceCase cases[] = {
      {{3}, {11}, {1}, {1}, true},
      {{3}, {11}, {1}, {1}, false},
      {{1, 0}, {6, 7}, {2, 3}, {2, 3}, true},               // rows and columns, with steps
      {{14, 2}, {-100, 5}, {1, 3}, {-3, 1}, false},         // channels reversed, step 3
      {{0, 8, 1}, {1, 16, 4}, {0, 1, 2}, {1, 1, 1}, true},  // one image, whole blocks
  };
  uint32_t seed = 9300;
  for (const SliceCase& k : cases) {
    for (int threads : {2, 1}) {
      SCOPED_TRACE("case " + std::to_string(seed) + " threads " + std::to_string(threads));
      GraphBuilder b;
      b.Opset(13);
      b.Input("x", Rand({2, 8, 6, 7}, seed));
      b.Const("w", Rand({16, 8, 3, 3}, seed + 1, -0.5f, 0.5f));
      SetInts(b.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
      ShapeConst(b, "s", k.starts);
      ShapeConst(b, "e", k.ends);
      ShapeConst(b, "a", k.axes);
      ShapeConst(b, "p", k.steps);
      b.Node("Slice", {"c", "s", "e", "a", "p"}, {"sl"});
      if (k.conv_reader) {
        // The sliced channel count: the reader's weights follow it.
        int64_t ch = 16;
        for (size_t i = 0; i < k.axes.size(); ++i)
          if (k.axes[i] == 1) ch = (k.ends[i] - k.starts[i] + k.steps[i] - 1) / k.steps[i];
        Conv1x1(b, "sl", "y", ch, 5, seed + 2);
        b.Output("y");
      } else {
        b.Output("sl");
      }
      auto report = ExpectMatchesReference(b, 1e-4, 1e-5, threads);
      EXPECT_EQ(ProviderOfNode(report, "Slice_1"), "cpu");
    }
    ++seed;
  }
}

}  // namespace
}  // namespace ferry
