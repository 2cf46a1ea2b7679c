#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<float> Iota(int64_t n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

std::vector<float> Values(const Value& v) {
  auto s = v.tensor().span<float>();
  return {s.begin(), s.end()};
}

TEST(Pool, MaxPoolColumnMajorIndices) {
  auto r = NodeTest("MaxPool")
               .Input("x", Tensor::FromVector<float>(Iota(25, 1), {1, 1, 5, 5}))
               .Output("y")
               .Output("i")
               .Attr("kernel_shape", std::vector<int64_t>{2, 2})
               .Attr("strides", std::vector<int64_t>{2, 2})
               .Attr("storage_order", int64_t{1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<float>{7, 9, 17, 19}));
  EXPECT_EQ(r.value()[1].tensor().ToInt64Vector(), (std::vector<int64_t>{6, 16, 8, 18}));
}

TEST(Pool, MaxPoolCeilModeDropsWindowInEndPadding) {
  // in 4, kernel 2, stride 2, pads 0+1: ceil would give 3 windows, the last one starting in the
  // padding, so only 2 remain.
  auto r = NodeTest("MaxPool")
               .Input("x", Tensor::FromVector<float>({1, 5, 2, 3}, {1, 1, 4}))
               .Output("y")
               .Attr("kernel_shape", std::vector<int64_t>{2})
               .Attr("strides", std::vector<int64_t>{2})
               .Attr("pads", std::vector<int64_t>{0, 1})
               .Attr("ceil_mode", int64_t{1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<float>{5, 3}));
}

TEST(Pool, MaxPoolUint8) {
  auto r = NodeTest("MaxPool")
               .Input("x", Tensor::FromVector<uint8_t>({1, 200, 3, 4}, {1, 1, 2, 2}))
               .Output("y")
               .Attr("kernel_shape", std::vector<int64_t>{2, 2})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{200}));
}

TEST(Pool, AveragePoolCountIncludePad) {
  // 2x2 input of ones padded by 1: the 2x2 window at the corner holds one input and three pads.
  auto make = [](int64_t include) {
    return NodeTest("AveragePool")
        .Input("x", Tensor::FromVector<float>({1, 1, 1, 1}, {1, 1, 2, 2}))
        .Output("y")
        .Attr("kernel_shape", std::vector<int64_t>{2, 2})
        .Attr("pads", std::vector<int64_t>{1, 1, 1, 1})
        .Attr("count_include_pad", include)
        .Run();
  };
  auto with = make(1), without = make(0);
  ASSERT_TRUE(with.ok()) << with.status().message();
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_EQ(Values(with.value()[0]),
            (std::vector<float>{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25}));
  EXPECT_EQ(Values(without.value()[0]), std::vector<float>(9, 1.f));
}

TEST(Pool, LpPoolAndGlobalLpPool) {
  auto r = NodeTest("LpPool")
               .Input("x", Tensor::FromVector<float>({3, -4, 0, 5}, {1, 1, 4}))
               .Output("y")
               .Attr("kernel_shape", std::vector<int64_t>{2})
               .Attr("strides", std::vector<int64_t>{2})
               .Attr("p", int64_t{2})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<float>{5, 5}));
  auto g = NodeTest("GlobalLpPool")
               .Input("x", Tensor::FromVector<float>({3, -4}, {1, 1, 2}))
               .Output("y")
               .Run();
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g.value()[0].tensor().shape(), (Shape{1, 1, 1}));
  EXPECT_FLOAT_EQ(Values(g.value()[0])[0], 5.f);
}

TEST(Pool, GlobalAverageAndMax) {
  auto x = Tensor::FromVector<float>(Iota(8), {1, 2, 2, 2});
  auto a = NodeTest("GlobalAveragePool").Input("x", x).Output("y").Run();
  auto m = NodeTest("GlobalMaxPool").Input("x", x).Output("y").Run();
  ASSERT_TRUE(a.ok() && m.ok());
  EXPECT_EQ(a.value()[0].tensor().shape(), (Shape{1, 2, 1, 1}));
  EXPECT_EQ(Values(a.value()[0]), (std::vector<float>{1.5, 5.5}));
  EXPECT_EQ(Values(m.value()[0]), (std::vector<float>{3, 7}));
}

TEST(Pool, MaxUnpoolScatters) {
  auto r = NodeTest("MaxUnpool")
               .Input("x", Tensor::FromVector<float>({1, 2, 3, 4}, {1, 1, 2, 2}))
               .Input("i", Tensor::FromVector<int64_t>({5, 7, 13, 15}, {1, 1, 2, 2}))
               .Output("y")
               .Attr("kernel_shape", std::vector<int64_t>{2, 2})
               .Attr("strides", std::vector<int64_t>{2, 2})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]),
            (std::vector<float>{0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}));
}

TEST(Pool, MaxUnpoolIndexOutOfRangeIsInvalid) {
  auto r = NodeTest("MaxUnpool")
               .Input("x", Tensor::FromVector<float>({1, 2, 3, 4}, {1, 1, 2, 2}))
               .Input("i", Tensor::FromVector<int64_t>({5, 7, 13, 16}, {1, 1, 2, 2}))
               .Output("y")
               .Attr("kernel_shape", std::vector<int64_t>{2, 2})
               .Attr("strides", std::vector<int64_t>{2, 2})
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("I[3] = 16 is out of range"), std::string::npos)
      << r.status().message();
}

TEST(Pool, MaxRoiPoolGolden) {
  // One roi covering x in [0, 3], y in [0, 1] of a 4x4 image, pooled to 1x2.
  auto r = NodeTest("MaxRoiPool")
               .Input("x", Tensor::FromVector<float>(Iota(16), {1, 1, 4, 4}))
               .Input("rois", Tensor::FromVector<float>({0, 0, 0, 3, 1}, {1, 5}))
               .Output("y")
               .Attr("pooled_shape", std::vector<int64_t>{1, 2})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<float>{5, 7}));
}

TEST(Pool, MissingKernelShapeIsInvalid) {
  auto r =
      NodeTest("AveragePool").Input("x", Tensor(DType::kFloat, {1, 1, 4, 4})).Output("y").Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("kernel_shape [] has 0 values, expected 2"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace ferry::testing
