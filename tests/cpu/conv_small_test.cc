// The cpu Conv kernel on small convolutions (an SE block's 1x1 convs on a 1x1 map, a depthwise
// 3x3 on 7x7; around 2^18 multiply-adds, where matmul switches to one thread) and larger ones,
// chained: at two threads against the reference kernels, and bit for bit against the cpu
// provider at one thread (results must not depend on the thread count).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry {
namespace {

using namespace cpu_test;

struct ConvSpec {
  int64_t c_out, k, group, stride;
};

TEST(CpuConvSmall, SerialAndParallelSizesMatchReferenceAndOneThread) {
  struct Case {
    Shape x;                      // N, C, H, W
    std::vector<ConvSpec> convs;  // applied in a chain, each with bias and Relu
  };
  const Case cases[] = {
      // SE block: 1x1 map, 96 -> 24 -> 96 (2.3 K multiply-adds each), then a parallel 1x1.
      {{1, 96, 1, 1}, {{24, 1, 1, 1}, {96, 1, 1, 1}}},
      // Depthwise 3x3 on 7x7 (serial), a 1x1 7x7 72 -> 576 (2 M, parallel), depthwise again.
      {{1, 72, 7, 7}, {{72, 3, 72, 1}, {576, 1, 1, 1}, {576, 3, 576, 1}}},
      // Just below and above 2^18: 1x1 on 8x8, 64 -> 63 (258048) and 64 -> 65 (266240).
      {{1, 64, 8, 8}, {{63, 1, 1, 1}, {65, 1, 1, 1}}},
      // Odd sizes, stride 2, two images.
      {{2, 13, 9, 11}, {{17, 3, 1, 2}, {17, 3, 17, 1}, {5, 1, 1, 1}}},
  };
  uint32_t seed = 9100;
  int case_index = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(case_index++));
    GraphBuilder b;
    b.Opset(17);
    b.Input("x", Rand(c.x, seed++));
    std::string prev = "x";
    int64_t c_in = c.x[1];
    for (size_t i = 0; i < c.convs.size(); ++i) {
      const ConvSpec& s = c.convs[i];
      const std::string id = std::to_string(i);
      b.Const("w" + id, Rand({s.c_out, c_in / s.group, s.k, s.k}, seed++));
      b.Const("b" + id, Rand({s.c_out}, seed++));
      ir::Node& conv = b.Node("Conv", {prev, "w" + id, "b" + id}, {"conv" + id});
      const int64_t p = s.k / 2;
      SetInts(conv, "pads", {p, p, p, p});
      SetInts(conv, "strides", {s.stride, s.stride});
      SetInt(conv, "group", s.group);
      b.Node("Relu", {"conv" + id}, {"relu" + id});
      prev = "relu" + id;
      c_in = s.c_out;
    }
    b.Output(prev);
    auto report = ExpectMatchesReference(b, 1e-4, 1e-4, 2);
    for (const auto& r : report) {
      if (r.op_type == "Conv") {
        EXPECT_EQ(r.provider, "cpu") << r.name;
      }
    }
    ExpectSameBitsAtOneAndTwoThreads(b);
  }
}

}  // namespace
}  // namespace ferry
