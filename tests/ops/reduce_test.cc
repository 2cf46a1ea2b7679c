#include <cmath>

#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<double> Values(const Value& v) {
  std::vector<double> out;
  for (int64_t i = 0; i < v.tensor().size(); ++i) out.push_back(v.tensor().GetAsDouble(i));
  return out;
}

TEST(ReduceOps, LogSumExpGolden) {
  // Large values would overflow exp without the max shift.
  auto x = Tensor::FromVector<float>({1000, 1000, 0, 0, 1, 2}, {3, 2});
  auto r = NodeTest("ReduceLogSumExp")
               .Input("x", x)
               .Attr("axes", std::vector<int64_t>{1})
               .Attr("keepdims", int64_t{0})
               .Output("y")
               .Opset(13)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto y = Values(r.value()[0]);
  ASSERT_EQ(r.value()[0].tensor().shape(), (Shape{3}));
  EXPECT_NEAR(y[0], 1000 + std::log(2.0), 1e-3);
  EXPECT_NEAR(y[1], std::log(2.0), 1e-6);
  EXPECT_NEAR(y[2], std::log(std::exp(1.0) + std::exp(2.0)), 1e-6);
}

TEST(ReduceOps, AxesInputAndEmptySet) {
  auto x = Tensor(DType::kFloat, {2, 0, 3});
  auto axes = Tensor::FromVector<int64_t>({1}, {1});
  auto r = NodeTest("ReduceMax").Input("x", x).Input("axes", axes).Output("y").Opset(18).Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{2, 1, 3}));
  for (double v : Values(r.value()[0])) EXPECT_EQ(v, -INFINITY);

  auto p = NodeTest("ReduceProd").Input("x", x).Input("axes", axes).Output("y").Opset(18).Run();
  ASSERT_TRUE(p.ok()) << p.status().message();
  for (double v : Values(p.value()[0])) EXPECT_EQ(v, 1.0);
}

TEST(ReduceOps, NoopWithEmptyAxesStillSquares) {
  auto x = Tensor::FromVector<float>({-2, 3}, {2});
  auto r = NodeTest("ReduceSumSquare")
               .Input("x", x)
               .Attr("noop_with_empty_axes", int64_t{1})
               .Output("y")
               .Opset(18)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{4, 9}));

  auto all =
      NodeTest("ReduceSum").Input("x", x).Attr("keepdims", int64_t{0}).Output("y").Opset(13).Run();
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all.value()[0].tensor().shape(), (Shape{}));
  EXPECT_EQ(Values(all.value()[0]), (std::vector<double>{1}));
}

TEST(ReduceOps, IntegerMeanOverMoreElementsThanTheTypeHolds) {
  // 128 elements: the count itself does not fit in int8.
  std::vector<int8_t> v(128, -1);
  auto r = NodeTest("ReduceMean")
               .Input("x", Tensor::FromVector<int8_t>(v, {128}))
               .Attr("keepdims", int64_t{0})
               .Output("y")
               .Opset(13)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{-1}));
}

TEST(ReduceOps, DuplicateAxesAreInvalid) {
  auto r = NodeTest("ReduceMean")
               .Input("x", Tensor(DType::kFloat, {2, 3}))
               .Attr("axes", std::vector<int64_t>{1, -1})
               .Output("y")
               .Opset(13)
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("twice"), std::string::npos) << r.status().message();
}

TEST(ReduceOps, ArgMaxSelectLastIndex) {
  auto x = Tensor::FromVector<int32_t>({2, 5, 5, 1, 7, 7}, {2, 3});
  auto first = NodeTest("ArgMax").Input("x", x).Attr("axis", int64_t{1}).Output("y").Run();
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first.value()[0].tensor().shape(), (Shape{2, 1}));
  EXPECT_EQ(first.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{1, 1}));
  auto last = NodeTest("ArgMax")
                  .Input("x", x)
                  .Attr("axis", int64_t{1})
                  .Attr("select_last_index", int64_t{1})
                  .Attr("keepdims", int64_t{0})
                  .Output("y")
                  .Run();
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_EQ(last.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{2, 2}));
}

TEST(ReduceOps, CumSumExclusiveReverse) {
  auto x = Tensor::FromVector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto axis = Tensor::FromVector<int32_t>({-1}, {});
  auto r = NodeTest("CumSum")
               .Input("x", x)
               .Input("axis", axis)
               .Attr("exclusive", int64_t{1})
               .Attr("reverse", int64_t{1})
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{5, 3, 0, 11, 6, 0}));
}

TEST(ReduceOps, CumSumAxisOutOfRange) {
  auto r = NodeTest("CumSum")
               .Input("x", Tensor(DType::kFloat, {2, 3}))
               .Input("axis", Tensor::FromVector<int64_t>({2}, {}))
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace ferry::testing
