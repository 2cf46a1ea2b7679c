// The branchy CNNs' patterns on the cpu provider (Inception-v3, DenseNet-121, GoogLeNet), each
// against the reference kernels on seeded awkward shapes, inputs in the convolution library's
// layout (from a Conv) and plain, with the node report saying which kernel ran:
//  * PadAvgPool: torch's avg_pool2d(padding=p) exported as a zero Pad and an AveragePool.
// ctest runs these also with oneDNN capped at AVX2 (8-channel blocked layouts).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using namespace cpu_test;

std::string ProviderOf(const std::vector<runtime::NodeReport>& report, const std::string& op) {
  for (const auto& r : report)
    if (r.op_type == op) return r.provider;
  return "";
}

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
  uint32_t seed = 7100;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
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
    EXPECT_EQ(ProviderOf(report, "Pad") == "cpu (PadAvgPool)", c.fuses)
        << ProviderOf(report, "Pad");
    if (c.fuses) {
      EXPECT_EQ(ProviderOf(report, "AveragePool"), "fused");
    }
  }
}

}  // namespace
}  // namespace ferry
