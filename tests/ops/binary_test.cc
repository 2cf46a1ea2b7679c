#include <cmath>

#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<double> Values(const Value& v) {
  std::vector<double> out;
  for (int64_t i = 0; i < v.tensor().size(); ++i) out.push_back(v.tensor().GetAsDouble(i));
  return out;
}

TEST(BinaryOps, ModIntegerTakesSignOfDivisor) {
  auto x =
      Tensor::FromVector<int32_t>({-4, 7, 5, 4, -7, 8, std::numeric_limits<int32_t>::min()}, {7});
  auto y = Tensor::FromVector<int32_t>({2, -3, 8, -2, 3, 5, -1}, {7});
  auto r = NodeTest("Mod").Input("x", x).Input("y", y).Output("z").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{0, -2, 5, 0, 2, 3, 0}));

  auto rf = NodeTest("Mod").Input("x", x).Input("y", y).Attr("fmod", int64_t{1}).Output("z").Run();
  ASSERT_TRUE(rf.ok()) << rf.status().message();
  EXPECT_EQ(rf.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{0, 1, 5, 0, -1, 3, 0}));
}

TEST(BinaryOps, FloatModFollowsNumpy) {
  auto x = Tensor::FromVector<float>({-4.5f, 4.5f, 3.f}, {3});
  auto y = Tensor::FromVector<float>({2.f, -2.f, -3.f}, {3});
  auto r = NodeTest("Mod").Input("x", x).Input("y", y).Output("z").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto z = Values(r.value()[0]);
  EXPECT_FLOAT_EQ(z[0], 1.5f);
  EXPECT_FLOAT_EQ(z[1], -1.5f);
  EXPECT_EQ(z[2], 0.0);
  EXPECT_TRUE(std::signbit(z[2]));  // numpy gives the zero the divisor's sign
}

TEST(BinaryOps, IntegerDivTruncatesAndBroadcasts) {
  auto a = Tensor::FromVector<int64_t>({7, -7, 9, -9}, {2, 2});
  auto b = Tensor::FromVector<int64_t>({2, -4}, {2});
  auto r = NodeTest("Div").Input("a", a).Input("b", b).Output("c").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{2, 2}));
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{3, 1, 4, 2}));
}

TEST(BinaryOps, IntegerDivisionByZeroIsInvalid) {
  auto a = Tensor::FromVector<int32_t>({1, 2}, {2});
  auto b = Tensor::FromVector<int32_t>({1, 0}, {2});
  auto r = NodeTest("Div").Input("a", a).Input("b", b).Output("c").Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("division by zero"), std::string::npos)
      << r.status().message();
}

TEST(BinaryOps, IncompatibleShapesNameBoth) {
  auto r = NodeTest("Add")
               .Input("a", Tensor(DType::kFloat, {2, 3}))
               .Input("b", Tensor(DType::kFloat, {4}))
               .Output("c")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("[2,3]"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("[4]"), std::string::npos) << r.status().message();
}

TEST(BinaryOps, LegacyBroadcastWithAxis) {
  // Opset 6: B [3] lines up with A's dim 1 when axis=1.
  auto a = Tensor::FromVector<float>({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 3, 2});
  auto b = Tensor::FromVector<float>({1, 2, 3}, {3});
  auto r = NodeTest("Add")
               .Input("a", a)
               .Input("b", b)
               .Attr("broadcast", int64_t{1})
               .Attr("axis", int64_t{1})
               .Output("c")
               .Opset(6)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));

  auto no_bcast = NodeTest("Add").Input("a", a).Input("b", b).Output("c").Opset(6).Run();
  ASSERT_FALSE(no_bcast.ok());
  EXPECT_EQ(no_bcast.status().code(), StatusCode::kInvalid);
}

TEST(BinaryOps, PowMixedTypes) {
  auto x = Tensor::FromVector<int32_t>({2, 3, -2}, {3});
  auto y = Tensor::FromVector<float>({0.5f, 2.f, 3.f}, {3});
  auto r = NodeTest("Pow").Input("x", x).Input("y", y).Output("z").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().dtype(), DType::kInt32);
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{1, 9, -8}));
}

TEST(BinaryOps, MaxPropagatesNaNAndBroadcasts) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto a = Tensor::FromVector<float>({1, nan, 3}, {3});
  auto b = Tensor::FromVector<float>({2}, {1});
  auto c = Tensor::FromVector<float>({0, 0, 5, 0, 0, 0}, {2, 3});
  auto r = NodeTest("Max").Input("a", a).Input("b", b).Input("c", c).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto y = Values(r.value()[0]);
  ASSERT_EQ(y.size(), 6u);
  EXPECT_EQ(y[0], 2);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], 5);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 3);
}

TEST(BinaryOps, WhereAndEqualOnStrings) {
  Tensor s(DType::kString, {3});
  s.data<std::string>()[0] = "a";
  s.data<std::string>()[1] = "b";
  s.data<std::string>()[2] = "c";
  Tensor t(DType::kString, {1});
  t.data<std::string>()[0] = "b";
  auto r = NodeTest("Equal").Input("s", s).Input("t", t).Output("e").Opset(19).Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{0, 1, 0}));

  auto cond = Tensor::FromVector<bool>({true, false, true}, {3});
  auto w = NodeTest("Where").Input("c", cond).Input("x", s).Input("y", t).Output("o").Run();
  ASSERT_TRUE(w.ok()) << w.status().message();
  const std::string* o = w.value()[0].tensor().data<std::string>();
  EXPECT_EQ(o[0], "a");
  EXPECT_EQ(o[1], "b");
  EXPECT_EQ(o[2], "c");
}

TEST(BinaryOps, PReluLegacyChannelSlope) {
  auto x = Tensor::FromVector<float>({-1, -1, 2, -2}, {1, 2, 2});
  auto slope = Tensor::FromVector<float>({0.5f, 0.25f}, {2});
  auto r = NodeTest("PRelu").Input("x", x).Input("s", slope).Output("y").Opset(6).Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{-0.5, -0.5, 2, -0.5}));
  // From opset 7 the same slope must broadcast unidirectionally, which [2] vs [1,2,2] does.
  auto r7 = NodeTest("PRelu").Input("x", x).Input("s", slope).Output("y").Opset(16).Run();
  ASSERT_TRUE(r7.ok()) << r7.status().message();
  EXPECT_EQ(Values(r7.value()[0]), (std::vector<double>{-0.5, -0.25, 2, -0.5}));
}

TEST(BinaryOps, BitShiftWideAmountGivesZero) {
  auto x = Tensor::FromVector<uint8_t>({1, 255, 16}, {3});
  auto y = Tensor::FromVector<uint8_t>({7, 8, 2}, {3});
  auto r = NodeTest("BitShift")
               .Input("x", x)
               .Input("y", y)
               .Attr("direction", std::string("LEFT"))
               .Output("z")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{128, 0, 64}));
}

}  // namespace
}  // namespace ferry::testing
