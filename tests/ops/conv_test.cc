#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return v;
}

std::vector<float> Values(const Value& v) {
  auto s = v.tensor().span<float>();
  return {s.begin(), s.end()};
}

TEST(Conv, PaddedGolden) {
  auto r = NodeTest("Conv")
               .Input("x", Tensor::FromVector<float>(Iota(25), {1, 1, 5, 5}))
               .Const("w", Tensor::FromVector<float>(std::vector<float>(9, 1.f), {1, 1, 3, 3}))
               .Output("y")
               .Attr("kernel_shape", std::vector<int64_t>{3, 3})
               .Attr("pads", std::vector<int64_t>{1, 1, 1, 1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{1, 1, 5, 5}));
  EXPECT_EQ(Values(r.value()[0]),
            (std::vector<float>{12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
                                117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84}));
}

// Grouped, strided, dilated, asymmetrically padded 2-D conv against a naive loop nest.
TEST(Conv, GroupedMatchesNaive) {
  const int64_t n = 2, c = 4, h = 7, w = 6, m = 6, group = 2, kh = 3, kw = 2;
  const int64_t sh = 2, sw = 1, dh = 1, dw = 2, pt = 1, pl = 0, pb = 2, pr = 1;
  Tensor x = RandomTensor({n, c, h, w}, 1), wt = RandomTensor({m, c / group, kh, kw}, 2);
  Tensor b = RandomTensor({m}, 3);
  auto r = NodeTest("Conv")
               .Input("x", x)
               .Const("w", wt)
               .Const("b", b)
               .Output("y")
               .Attr("group", group)
               .Attr("strides", std::vector<int64_t>{sh, sw})
               .Attr("dilations", std::vector<int64_t>{dh, dw})
               .Attr("pads", std::vector<int64_t>{pt, pl, pb, pr})
               .Run(/*threads=*/2);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const int64_t oh = (h + pt + pb - ((kh - 1) * dh + 1)) / sh + 1;
  const int64_t ow = (w + pl + pr - ((kw - 1) * dw + 1)) / sw + 1;
  const Tensor& y = r.value()[0].tensor();
  ASSERT_EQ(y.shape(), (Shape{n, m, oh, ow}));
  const float *xd = x.data<float>(), *wd = wt.data<float>(), *bd = b.data<float>();
  const int64_t cg = c / group, mg = m / group;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t im = 0; im < m; ++im)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = bd[im];
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * sh - pt + ky * dh, ix = ox * sw - pl + kx * dw;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                const int64_t xc = (im / mg) * cg + ic;
                acc += xd[((in * c + xc) * h + iy) * w + ix] *
                       wd[((im * cg + ic) * kh + ky) * kw + kx];
              }
          EXPECT_NEAR(y.data<float>()[((in * m + im) * oh + oy) * ow + ox], acc, 1e-5)
              << in << " " << im << " " << oy << " " << ox;
        }
}

TEST(Conv, Float16ComputesInFloat) {
  Tensor x(DType::kFloat16, {1, 1, 3}), w(DType::kFloat16, {1, 1, 2});
  for (int i = 0; i < 3; ++i) x.data<Float16>()[i] = Float16(static_cast<float>(i + 1));
  w.data<Float16>()[0] = Float16(0.5f);
  w.data<Float16>()[1] = Float16(2.f);
  auto r = NodeTest("Conv")
               .Input("x", x)
               .Const("w", w)
               .Output("y")
               .Attr("auto_pad", std::string("SAME_UPPER"))
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor& y = r.value()[0].tensor();
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3}));
  // SAME_UPPER pads one at the end: [0.5*1+2*2, 0.5*2+2*3, 0.5*3+2*0]
  EXPECT_FLOAT_EQ(static_cast<float>(y.data<Float16>()[0]), 4.5f);
  EXPECT_FLOAT_EQ(static_cast<float>(y.data<Float16>()[1]), 7.f);
  EXPECT_FLOAT_EQ(static_cast<float>(y.data<Float16>()[2]), 1.5f);
}

TEST(Conv, ChannelMismatchIsInvalid) {
  auto r = NodeTest("Conv")
               .Input("x", Tensor(DType::kFloat, {1, 3, 5, 5}))
               .Const("w", Tensor(DType::kFloat, {2, 4, 3, 3}))
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(
      r.status().message().find("W has 4 input channels per group, X has 3 channels (group 1)"),
      std::string::npos)
      << r.status().message();
}

TEST(Conv, BiasShapeIsChecked) {
  auto r = NodeTest("Conv")
               .Input("x", Tensor(DType::kFloat, {1, 3, 5, 5}))
               .Const("w", Tensor(DType::kFloat, {2, 3, 3, 3}))
               .Const("b", Tensor(DType::kFloat, {3}))
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("B has shape [3], expected [2]"), std::string::npos)
      << r.status().message();
}

TEST(ConvTranspose, StridedPadsGolden) {
  auto r = NodeTest("ConvTranspose")
               .Input("x", Tensor::FromVector<float>(Iota(9), {1, 1, 3, 3}))
               .Const("w", Tensor::FromVector<float>(std::vector<float>(18, 1.f), {1, 2, 3, 3}))
               .Output("y")
               .Attr("strides", std::vector<int64_t>{3, 2})
               .Attr("pads", std::vector<int64_t>{1, 2, 1, 2})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r.value()[0].tensor().shape(), (Shape{1, 2, 7, 3}));
  const std::vector<float> plane = {1, 1, 3, 1, 1,  3, 7,  4,  9, 7, 4,
                                    9, 7, 4, 9, 13, 7, 15, 13, 7, 15};
  std::vector<float> want = plane;
  want.insert(want.end(), plane.begin(), plane.end());
  EXPECT_EQ(Values(r.value()[0]), want);
}

// Grouped, strided, dilated, padded 2-D ConvTranspose with output_padding against a naive scatter.
TEST(ConvTranspose, GroupedMatchesNaive) {
  const int64_t n = 1, c = 4, h = 3, w = 4, group = 2, mg = 3, kh = 2, kw = 3;
  const int64_t sh = 2, sw = 3, dh = 2, dw = 1, pt = 1, pl = 2, pb = 0, pr = 1, oph = 1, opw = 2;
  Tensor x = RandomTensor({n, c, h, w}, 4), wt = RandomTensor({c, mg, kh, kw}, 5);
  auto r = NodeTest("ConvTranspose")
               .Input("x", x)
               .Const("w", wt)
               .Output("y")
               .Attr("group", group)
               .Attr("strides", std::vector<int64_t>{sh, sw})
               .Attr("dilations", std::vector<int64_t>{dh, dw})
               .Attr("pads", std::vector<int64_t>{pt, pl, pb, pr})
               .Attr("output_padding", std::vector<int64_t>{oph, opw})
               .Run(/*threads=*/2);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const int64_t m = mg * group, cg = c / group;
  const int64_t oh = sh * (h - 1) + oph + (kh - 1) * dh + 1 - pt - pb;
  const int64_t ow = sw * (w - 1) + opw + (kw - 1) * dw + 1 - pl - pr;
  const Tensor& y = r.value()[0].tensor();
  ASSERT_EQ(y.shape(), (Shape{n, m, oh, ow}));
  std::vector<double> want(static_cast<size_t>(n * m * oh * ow), 0.0);
  const float *xd = x.data<float>(), *wd = wt.data<float>();
  for (int64_t ic = 0; ic < c; ++ic)
    for (int64_t mm = 0; mm < mg; ++mm)
      for (int64_t iy = 0; iy < h; ++iy)
        for (int64_t ix = 0; ix < w; ++ix)
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t oy = iy * sh - pt + ky * dh, ox = ix * sw - pl + kx * dw;
              if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
              const int64_t om = (ic / cg) * mg + mm;
              want[static_cast<size_t>((om * oh + oy) * ow + ox)] +=
                  xd[(ic * h + iy) * w + ix] * wd[((ic * mg + mm) * kh + ky) * kw + kx];
            }
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y.data<float>()[i], want[i], 1e-5) << i;
}

TEST(ConvTranspose, OutputShapeLargerThanFullPadsAtEnd) {
  auto r = NodeTest("ConvTranspose")
               .Input("x", Tensor::FromVector<float>({1, 2}, {1, 1, 2}))
               .Const("w", Tensor::FromVector<float>({1, 1}, {1, 1, 2}))
               .Output("y")
               .Attr("output_shape", std::vector<int64_t>{4})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<float>{1, 3, 2, 0}));
}

TEST(Col2Im, OverlappingBlocksSum) {
  // A 3x3 image cut into 2x2 blocks at stride 1: four blocks, each pixel summed once per block.
  auto r = NodeTest("Col2Im")
               .Input("x", Tensor::FromVector<float>(std::vector<float>(16, 1.f), {1, 4, 4}))
               .Const("image_shape", Tensor::FromVector<int64_t>({3, 3}, {2}))
               .Const("block_shape", Tensor::FromVector<int64_t>({2, 2}, {2}))
               .Output("y")
               .Opset(18)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r.value()[0].tensor().shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(Values(r.value()[0]), (std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TEST(Col2Im, BlockCountMismatchIsInvalid) {
  auto r = NodeTest("Col2Im")
               .Input("x", Tensor(DType::kFloat, {1, 4, 5}))
               .Const("image_shape", Tensor::FromVector<int64_t>({3, 3}, {2}))
               .Const("block_shape", Tensor::FromVector<int64_t>({2, 2}, {2}))
               .Output("y")
               .Opset(18)
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("input has 5 blocks"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace ferry::testing
