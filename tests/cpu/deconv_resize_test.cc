// ConvTranspose (deconv.cc) and Resize (resize.cc) in the cpu provider against the reference
// kernels: seeded awkward shapes, every padding rule, groups, dilation, output_padding and
// output_shape; Resize modes and coordinate transformations, in plain and channels-last chains.
#include <random>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry {
namespace {

using namespace cpu_test;

void SetString(ir::Node& n, const std::string& name, const std::string& v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kString;
  a.s = v;
  n.attributes.push_back(std::move(a));
}

struct DeconvCase {
  int64_t n, c, h, w, m, kh, kw, group;
  std::vector<int64_t> strides, pads, dilations, output_padding, output_shape;
  bool bias;
  std::string auto_pad;
};

TEST(CpuConvTranspose, MatchesReferenceOnAwkwardShapes) {
  const DeconvCase cases[] = {
      {1, 3, 7, 7, 5, 3, 3, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, {}, true, ""},  // x2 up
      {2, 8, 5, 9, 13, 4, 4, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, {}, {}, false, ""},    // DCGAN-like
      {1, 12, 6, 5, 6, 3, 2, 3, {1, 2}, {0, 1, 0, 0}, {1, 1}, {}, {}, true, ""},     // grouped
      {1, 16, 4, 4, 16, 3, 3, 16, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, {}, true, ""},  // dw
      {1, 5, 6, 6, 4, 3, 3, 1, {1, 1}, {2, 2, 2, 2}, {2, 2}, {}, {}, true, ""},         // dilated
      {1, 1, 1, 1, 3, 2, 2, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, {}, {}, true, ""},         // 1x1 in
      {1, 127, 3, 3, 13, 2, 2, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, {}, {}, true, ""},  // U-Net-like
      {1, 4, 5, 7, 3, 3, 3, 1, {2, 3}, {}, {1, 1}, {}, {10, 21}, true, ""},         // output_shape
      {1, 4, 5, 7, 3, 3, 3, 1, {2, 2}, {}, {1, 1}, {}, {}, true, "SAME_UPPER"},
      {1, 4, 5, 7, 3, 4, 3, 1, {2, 2}, {}, {1, 1}, {}, {}, true, "SAME_LOWER"},
      {2, 3, 4, 6, 2, 3, 5, 1, {1, 1}, {}, {1, 1}, {}, {}, false, "VALID"},
  };
  uint32_t seed = 11;
  for (const DeconvCase& cc : cases) {
    for (bool const_w : {true, false}) {
      SCOPED_TRACE(testing::Message() << "c=" << cc.c << " m=" << cc.m << " k=" << cc.kh << "x"
                                      << cc.kw << " group=" << cc.group << " auto_pad='"
                                      << cc.auto_pad << "' const_w=" << const_w);
      GraphBuilder b;
      b.Input("x", Rand({cc.n, cc.c, cc.h, cc.w}, seed++));
      Tensor w = Rand({cc.c, cc.m / cc.group, cc.kh, cc.kw}, seed++);
      if (const_w)
        b.Const("w", w);
      else
        b.Input("w", w);
      std::vector<std::string> in = {"x", "w"};
      if (cc.bias) {
        b.Const("b", Rand({cc.m}, seed++));
        in.push_back("b");
      }
      ir::Node& n = b.Node("ConvTranspose", in, {"y"});
      SetInts(n, "kernel_shape", {cc.kh, cc.kw});
      SetInts(n, "strides", cc.strides);
      if (!cc.pads.empty()) SetInts(n, "pads", cc.pads);
      SetInts(n, "dilations", cc.dilations);
      if (!cc.output_padding.empty()) SetInts(n, "output_padding", cc.output_padding);
      if (!cc.output_shape.empty()) SetInts(n, "output_shape", cc.output_shape);
      SetInt(n, "group", cc.group);
      if (!cc.auto_pad.empty()) SetString(n, "auto_pad", cc.auto_pad);
      b.Output("y");
      auto report = ExpectMatchesReference(b, 1e-4, 1e-4);
      ASSERT_EQ(report.size(), 1u);
      EXPECT_EQ(report[0].provider, "cpu");
    }
  }
}

// Conv -> ConvTranspose -> Relu (fused) -> Conv: the deconvolution between two channels-last
// convolutions, with its Relu absorbed.
TEST(CpuConvTranspose, BetweenConvsWithFusedRelu) {
  GraphBuilder b;
  b.Input("x", Rand({1, 16, 9, 9}, 3));
  b.Const("w0", Rand({32, 16, 3, 3}, 4)).Const("w1", Rand({32, 16, 2, 2}, 5));
  b.Const("b1", Rand({16}, 6)).Const("w2", Rand({8, 16, 3, 3}, 7));
  SetInts(b.Node("Conv", {"x", "w0"}, {"c0"}), "pads", {1, 1, 1, 1});
  ir::Node& d = b.Node("ConvTranspose", {"c0", "w1", "b1"}, {"d"});
  SetInts(d, "strides", {2, 2});
  b.Node("Relu", {"d"}, {"r"});
  SetInts(b.Node("Conv", {"r", "w2"}, {"y"}), "pads", {1, 1, 1, 1});
  b.Output("y");
  auto report = ExpectMatchesReference(b, 1e-4, 1e-3);
  for (const auto& r : report) {
    if (r.op_type == "ConvTranspose") {
      EXPECT_EQ(r.provider, "cpu");
    }
    if (r.op_type == "Relu") {
      EXPECT_EQ(r.provider, "fused");
    }
  }
}

}  // namespace
}  // namespace ferry
