// CenterCropPad, AffineGrid, DeformConv, TensorScatter, Swish: what the conformance cases leave
// open (odd crops, other dtypes, DeformConv against plain Conv) and errors that name the node.
#include <cmath>
#include <limits>

#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<float> Floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.size()};
}

TEST(NewerOps, CenterCropPadOddDifferencesCutAndPadAtTheEnd) {
  // [5] -> [2]: crop offset (5 - 2) / 2 = 1; [2] -> [5]: pad 1 before, 2 after.
  auto crop = NodeTest("CenterCropPad")
                  .Opset(18)
                  .Input("x", Tensor::FromVector<int32_t>({0, 1, 2, 3, 4}, {5}))
                  .Input("s", Tensor::FromVector<int64_t>({2}, {1}))
                  .Output("y")
                  .Run();
  ASSERT_TRUE(crop.ok()) << crop.status().message();
  EXPECT_EQ(crop.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{1, 2}));

  auto pad = NodeTest("CenterCropPad")
                 .Opset(18)
                 .Input("x", Tensor::FromVector<std::string>({"a", "b"}, {1, 2}))
                 .Input("s", Tensor::FromVector<int32_t>({5}, {1}))
                 .Output("y")
                 .Attr("axes", std::vector<int64_t>{-1})
                 .Run();
  ASSERT_TRUE(pad.ok()) << pad.status().message();
  const std::string* y = pad.value()[0].tensor().data<std::string>();
  EXPECT_EQ(std::vector<std::string>(y, y + 5), (std::vector<std::string>{"", "a", "b", "", ""}));

  auto bad = NodeTest("CenterCropPad")
                 .Opset(18)
                 .Input("x", Tensor::FromVector<float>({0, 1}, {2}))
                 .Input("s", Tensor::FromVector<int64_t>({1, 1}, {2}))
                 .Output("y")
                 .Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("CenterCropPad 'n0': shape has shape [2], expected [1]"),
            std::string::npos)
      << bad.status().message();
}

TEST(NewerOps, AffineGridIdentityIsTheBaseGridAndChecksTheta) {
  auto r = NodeTest("AffineGrid")
               .Opset(20)
               .Input("theta", Tensor::FromVector<float>({1, 0, 0, 0, 1, 0}, {1, 2, 3}))
               .Input("size", Tensor::FromVector<int64_t>({1, 1, 1, 2}, {4}))
               .Output("grid")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{1, 1, 2, 2}));
  // Pixel centres: x = -0.5, 0.5 across W = 2; y = 0 for H = 1.
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{-0.5f, 0, 0.5f, 0}));

  // A zero dim beside a huge one: an empty grid, nothing computed.
  auto empty = NodeTest("AffineGrid")
                   .Opset(20)
                   .Input("theta", Tensor::FromVector<float>({1, 0, 0, 0, 1, 0}, {1, 2, 3}))
                   .Input("size", Tensor::FromVector<int64_t>({1, 1, 0, int64_t{1} << 40}, {4}))
                   .Output("grid")
                   .Run();
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty.value()[0].tensor().size(), 0);

  auto bad = NodeTest("AffineGrid")
                 .Opset(20)
                 .Input("theta", Tensor::FromVector<float>({1, 0, 0, 0, 1, 0}, {1, 2, 3}))
                 .Input("size", Tensor::FromVector<int64_t>({1, 1, 1, 2, 2}, {5}))
                 .Output("grid")
                 .Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("theta has shape [1,2,3], expected [1, 3, 4]"),
            std::string::npos)
      << bad.status().message();
}

TEST(NewerOps, DeformConvWithZeroOffsetsIsConv) {
  // Odd shapes, stride 2, dilation 2, two groups, a pad: zero offsets and no mask give Conv.
  const Tensor x = RandomTensor({1, 4, 7, 6}, 11), w = RandomTensor({6, 2, 2, 3}, 12),
               b = RandomTensor({6}, 13);
  auto attrs = [](NodeTest& t) -> NodeTest& {
    return t.Attr("strides", std::vector<int64_t>{2, 1})
        .Attr("dilations", std::vector<int64_t>{2, 1})
        .Attr("pads", std::vector<int64_t>{1, 0, 0, 1})
        .Attr("group", int64_t{2});
  };
  NodeTest conv("Conv");
  conv.Opset(17).Input("x", x).Input("w", w).Input("b", b).Output("y");
  auto ref = attrs(conv).Run();
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const Shape& ys = ref.value()[0].tensor().shape();  // [1, 6, oh, ow]
  Tensor off(DType::kFloat, {1, 2 * 2 * 3, ys[2], ys[3]});
  std::fill(off.data<float>(), off.data<float>() + off.size(), 0.f);
  NodeTest dc("DeformConv");
  dc.Opset(22).Input("x", x).Input("w", w).Input("off", off).Input("b", b).Output("y");
  auto got = attrs(dc).Run();
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got.value()[0].tensor().shape(), ys);
  std::vector<float> a = Floats(ref.value()[0].tensor()), g = Floats(got.value()[0].tensor());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], g[i], 1e-5) << i;

  NodeTest bad_t("DeformConv");
  bad_t.Opset(22)
      .Input("x", x)
      .Input("w", w)
      .Input("off", RandomTensor({1, 12, 1, 1}, 3))
      .Output("y");
  auto bad = attrs(bad_t).Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("DeformConv 'n0': offset has shape [1,12,1,1]"),
            std::string::npos)
      << bad.status().message();
}

TEST(NewerOps, TensorScatterLinearRejectsOverflowCircularWraps) {
  auto run = [](const std::string& mode, int64_t at) {
    return NodeTest("TensorScatter")
        .Opset(24)
        .Input("past", Tensor::FromVector<float>({0, 0, 0, 0}, {1, 4, 1}))
        .Input("upd", Tensor::FromVector<float>({7, 8}, {1, 2, 1}))
        .Input("at", Tensor::FromVector<int64_t>({at}, {1}))
        .Output("present")
        .Attr("mode", mode)
        .Run();
  };
  auto circ = run("circular", 3);
  ASSERT_TRUE(circ.ok()) << circ.status().message();
  EXPECT_EQ(Floats(circ.value()[0].tensor()), (std::vector<float>{8, 0, 0, 7}));

  // The write index reduces modulo the cache first: INT64_MAX % 4 = 3, no overflow.
  auto big = run("circular", std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(big.ok()) << big.status().message();
  EXPECT_EQ(Floats(big.value()[0].tensor()), (std::vector<float>{8, 0, 0, 7}));

  auto lin = run("linear", 3);
  ASSERT_FALSE(lin.ok());
  EXPECT_NE(lin.status().message().find("TensorScatter 'n0': write_indices[0] is 3"),
            std::string::npos)
      << lin.status().message();
}

TEST(NewerOps, SwishAlpha) {
  auto r = NodeTest("Swish")
               .Opset(24)
               .Input("x", Tensor::FromVector<double>({-1.0, 2.0}, {2}))
               .Output("y")
               .Attr("alpha", 0.5f)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double* y = r.value()[0].tensor().data<double>();
  EXPECT_NEAR(y[0], -1.0 / (1 + std::exp(0.5)), 1e-12);
  EXPECT_NEAR(y[1], 2.0 / (1 + std::exp(-1.0)), 1e-12);
}

}  // namespace
}  // namespace ferry::testing
