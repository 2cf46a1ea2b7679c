// ConvTranspose (deconv.cc) and Resize (resize.cc) in the cpu provider against the reference
// kernels: seeded awkward shapes, every padding rule, groups, dilation, output_padding and
// output_shape; Resize modes and coordinate transformations, in plain and channels-last chains.
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry {
namespace {

using namespace cpu_test;

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

struct ResizeCase {
  std::string mode, ctm, nearest_mode;
  Shape in;
  std::vector<float> scales;   // empty: use sizes
  std::vector<int64_t> sizes;  // NCHW
  int64_t antialias = 0;
};

// Resize-13 / 19 with scales or sizes, every coordinate transformation on nearest, linear and
// cubic (up and down), plus antialiased linear down; each on a plain input and behind a Conv
// (channels-last / blocked input) feeding another Conv.
TEST(CpuResize, MatchesReferenceInPlainAndConvLayouts) {
  const ResizeCase cases[] = {
      {"nearest", "asymmetric", "floor", {1, 16, 7, 9}, {1, 1, 2, 2}, {}},  // torch Upsample
      {"nearest", "half_pixel", "round_prefer_floor", {2, 16, 5, 6}, {}, {2, 16, 13, 4}},
      {"nearest", "align_corners", "round_prefer_ceil", {1, 16, 8, 8}, {1, 1, 0.5f, 1.5f}, {}},
      {"nearest", "tf_half_pixel_for_nn", "floor", {1, 16, 3, 5}, {1, 1, 3, 2}, {}},
      {"linear", "half_pixel", "", {1, 16, 7, 7}, {1, 1, 2, 2}, {}},
      {"linear", "pytorch_half_pixel", "", {1, 16, 13, 6}, {}, {1, 16, 1, 17}},
      {"linear", "align_corners", "", {1, 16, 5, 9}, {}, {1, 16, 11, 4}},
      {"linear", "asymmetric", "", {1, 16, 6, 6}, {1, 1, 1.7f, 0.6f}, {}},
      {"linear", "half_pixel_symmetric", "", {1, 16, 6, 5}, {1, 1, 2.5f, 1.5f}, {}},
      {"linear", "half_pixel", "", {1, 16, 16, 12}, {1, 1, 0.3f, 0.5f}, {}, 1},  // antialias
      {"cubic", "half_pixel", "", {1, 16, 8, 6}, {1, 1, 1.5f, 2}, {}},
      {"cubic", "align_corners", "", {1, 16, 9, 9}, {}, {1, 16, 4, 5}},
  };
  uint32_t seed = 40;
  for (const ResizeCase& rc : cases) {
    for (bool behind_conv : {false, true}) {
      SCOPED_TRACE(testing::Message() << rc.mode << " " << rc.ctm << " " << rc.nearest_mode
                                      << " behind_conv=" << behind_conv);
      GraphBuilder b;
      b.Opset(19);
      b.Input("x", Rand(rc.in, seed++));
      std::string in = "x";
      if (behind_conv) {
        b.Const("w0", Rand({16, rc.in[1], 1, 1}, seed++));
        b.Node("Conv", {"x", "w0"}, {"c0"});
        in = "c0";
      }
      b.Const("roi", Tensor(DType::kFloat, {0}));
      std::vector<std::string> ins = {in, "roi"};
      if (!rc.scales.empty()) {
        b.Const("scales", Tensor::FromVector<float>(rc.scales, {4}));
        ins.push_back("scales");
      } else {
        b.Const("no_scales", Tensor(DType::kFloat, {0}));
        b.Const("sizes", Tensor::FromVector<int64_t>(rc.sizes, {4}));
        ins.push_back("no_scales");
        ins.push_back("sizes");
      }
      ir::Node& n = b.Node("Resize", ins, {behind_conv ? "r" : "y"});
      SetString(n, "mode", rc.mode);
      SetString(n, "coordinate_transformation_mode", rc.ctm);
      if (!rc.nearest_mode.empty()) SetString(n, "nearest_mode", rc.nearest_mode);
      if (rc.antialias) SetInt(n, "antialias", 1);
      if (behind_conv) {
        b.Const("w1", Rand({8, 16, 3, 3}, seed++));
        SetInts(b.Node("Conv", {"r", "w1"}, {"y"}), "pads", {1, 1, 1, 1});
      }
      b.Output("y");
      auto report = ExpectMatchesReference(b, 1e-4, behind_conv ? 1e-3 : 1e-5);
      for (const auto& r : report) {
        if (r.op_type == "Resize") {
          EXPECT_EQ(r.provider, "cpu");
        }
      }
    }
  }
}

// Nearest is a copy: the outputs equal the reference's bit for bit; and a Resize whose sizes
// are computed (from another input's shape) replans when they change with the same X shape.
TEST(CpuResize, NearestIsExactAndComputedSizesReplan) {
  GraphBuilder b;
  b.Opset(13);
  b.Input("x", Rand({1, 3, 5, 7}, 9));
  b.Input("like", Rand({1, 3, 10, 14}, 10));
  b.Const("roi", Tensor(DType::kFloat, {0})).Const("no_scales", Tensor(DType::kFloat, {0}));
  b.Node("Shape", {"like"}, {"sizes"});
  ir::Node& n = b.Node("Resize", {"x", "roi", "no_scales", "sizes"}, {"y"});
  SetString(n, "mode", "nearest");
  b.Output("y");
  runtime::SessionOptions ro;
  ro.provider = "reference";
  auto ref = Session::Create(b.model(), ro);
  auto cpu = Session::Create(b.model(), {});
  ASSERT_TRUE(ref.ok() && cpu.ok());
  for (const Shape& like : {Shape{1, 3, 10, 14}, Shape{1, 3, 4, 21}, Shape{1, 3, 10, 14}}) {
    b.feeds()[1].second = Value(Rand(like, 11));
    auto want = (*ref)->Run(b.feeds());
    auto got = (*cpu)->Run(b.feeds());
    ASSERT_TRUE(want.ok() && got.ok());
    const Tensor& g = (*got)[0].tensor();
    const Tensor& w = (*want)[0].tensor();
    ASSERT_EQ(g.shape(), w.shape());
    EXPECT_EQ(0, std::memcmp(g.raw(), w.raw(), g.nbytes())) << ShapeToString(like);
  }
  for (const auto& r : (*cpu)->node_report())
    if (r.op_type == "Resize") {
      EXPECT_EQ(r.provider, "cpu");
    }
}

// tf_crop_and_resize: outputs mapped outside the input take extrapolation_value.
TEST(CpuResize, CropAndResizeExtrapolates) {
  GraphBuilder b;
  b.Opset(13);
  b.Input("x", Rand({1, 5, 6, 7}, 12));
  b.Const("roi", Tensor::FromVector<float>({0, 0, -0.2f, 0.1f, 1, 1, 1.3f, 0.8f}, {8}));
  b.Const("scales", Tensor::FromVector<float>({1, 1, 1.5f, 2}, {4}));
  ir::Node& n = b.Node("Resize", {"x", "roi", "scales"}, {"y"});
  SetString(n, "mode", "linear");
  SetString(n, "coordinate_transformation_mode", "tf_crop_and_resize");
  SetFloat(n, "extrapolation_value", 7.f);
  b.Output("y");
  auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].provider, "cpu");
}

}  // namespace
}  // namespace ferry
