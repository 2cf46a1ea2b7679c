#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<float> Floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.size()};
}

TEST(Image, ResizeLinearHalfPixelGolden) {
  auto r = NodeTest("Resize")
               .Input("x", Tensor::FromVector<float>({1, 2, 3, 4}, {1, 1, 2, 2}))
               .Omitted()
               .Const("scales", Tensor::FromVector<float>({1, 1, 2, 2}, {4}))
               .Output("y")
               .Attr("mode", std::string("linear"))
               .Opset(13)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor& y = r.value()[0].tensor();
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  std::vector<float> want = {1,   1.25, 1.75, 2,   1.5, 1.75, 2.25, 2.5,
                             2.5, 2.75, 3.25, 3.5, 3,   3.25, 3.75, 4};
  EXPECT_EQ(Floats(y), want);
}

TEST(Image, ResizeCubicAsymmetricGolden) {
  // 1-D cubic (a = -0.75) at x = 0.5 between 4 samples: weights -0.09375, 0.59375 twice.
  auto r = NodeTest("Resize")
               .Input("x", Tensor::FromVector<float>({0, 10, 20, 40}, {4}))
               .Omitted()
               .Const("scales", Tensor::FromVector<float>({2}, {1}))
               .Output("y")
               .Attr("mode", std::string("cubic"))
               .Attr("coordinate_transformation_mode", std::string("asymmetric"))
               .Opset(13)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<float> y = Floats(r.value()[0].tensor());
  ASSERT_EQ(y.size(), 8u);
  EXPECT_FLOAT_EQ(y[2], 10.f);
  // x = 1.5: taps 0, 1, 2, 3 -> -0.09375*0 + 0.59375*10 + 0.59375*20 - 0.09375*40
  EXPECT_FLOAT_EQ(y[3], 0.59375f * 30 - 0.09375f * 40);
}

TEST(Image, ResizeAxesKeepAspectRatio) {
  auto r = NodeTest("Resize")
               .Input("x", Tensor(DType::kFloat, {1, 1, 2, 4}))
               .Omitted()
               .Omitted()
               .Const("sizes", Tensor::FromVector<int64_t>({3, 3}, {2}))
               .Output("y")
               .Attr("axes", std::vector<int64_t>{2, 3})
               .Attr("keep_aspect_ratio_policy", std::string("not_larger"))
               .Opset(18)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{1, 1, 2, 3}));
}

TEST(Image, ResizeRejectsWrongSizesLength) {
  auto r = NodeTest("Resize")
               .Input("x", Tensor(DType::kFloat, {1, 1, 2, 2}))
               .Omitted()
               .Omitted()
               .Const("sizes", Tensor::FromVector<int64_t>({4, 4}, {2}))
               .Output("y")
               .Opset(13)
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("sizes has 2 values, expected 4"), std::string::npos)
      << r.status().message();
}

TEST(Image, GridSampleVolumetricNearestRoundsHalfToEven) {
  // W = 5, align_corners: x = (g + 1) * 2, so g = -0.75 -> 0.5 and g = 0.25 -> 2.5, which round
  // to even (0 and 2), not away from zero.
  auto r = NodeTest("GridSample")
               .Input("x", Tensor::FromVector<float>({0, 1, 2, 3, 4}, {1, 1, 1, 1, 5}))
               .Input("grid",
                      Tensor::FromVector<float>({-0.75f, -1, -1, 0.25f, -1, -1}, {1, 1, 1, 2, 3}))
               .Output("y")
               .Attr("mode", std::string("nearest"))
               .Attr("align_corners", int64_t{1})
               .Opset(20)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const float* y = r.value()[0].tensor().data<float>();
  EXPECT_EQ((std::vector<float>(y, y + 2)), (std::vector<float>{0, 2}));
}

TEST(Image, NonMaxSuppressionSuppressesOverlap) {
  auto boxes = Tensor::FromVector<float>({0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3}, {1, 3, 4});
  auto scores = Tensor::FromVector<float>({0.9f, 0.95f, 0.5f}, {1, 1, 3});
  auto r = NodeTest("NonMaxSuppression")
               .Input("boxes", boxes)
               .Input("scores", scores)
               .Const("max", Tensor::FromVector<int64_t>({10}, {1}))
               .Const("iou", Tensor::FromVector<float>({0.5f}, {1}))
               .Output("selected")
               .Opset(11)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));
}

TEST(Image, RoiAlignRejectsBadBatchIndex) {
  auto r = NodeTest("RoiAlign")
               .Input("x", Tensor(DType::kFloat, {1, 1, 4, 4}))
               .Input("rois", Tensor::FromVector<float>({0, 0, 2, 2}, {1, 4}))
               .Input("bi", Tensor::FromVector<int64_t>({3}, {1}))
               .Output("y")
               .Opset(16)
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("batch_indices[0] is 3"), std::string::npos);
}

}  // namespace
}  // namespace ferry::testing
