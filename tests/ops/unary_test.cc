// Unary math/activation kernels (reference/unary.cc) and Cast/CastLike (reference/cast.cc).
#include <cmath>
#include <limits>

#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<float> Floats(const Tensor& t) {
  return {t.data<float>(), t.data<float>() + t.size()};
}

TEST(Unary, RoundHalfToEven) {
  auto x = Tensor::FromVector<float>({0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4f, -0.4f, 7.5f}, {8});
  auto r = NodeTest("Round").Input("x", x).Output("y").Opset(11).Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Floats(r.value()[0].tensor()), (std::vector<float>{0, 2, 2, -0.f, -2, 2, -0.f, 8}));
  EXPECT_TRUE(std::signbit(r.value()[0].tensor().data<float>()[6]));
}

TEST(Unary, GeluBothApproximations) {
  auto x = Tensor::FromVector<float>({1.0f, -2.0f}, {2});
  auto exact = NodeTest("Gelu").Input("x", x).Output("y").Opset(20).Run();
  ASSERT_TRUE(exact.ok()) << exact.status().message();
  EXPECT_NEAR(exact.value()[0].tensor().data<float>()[0], 0.8413447f, 1e-6);
  EXPECT_NEAR(exact.value()[0].tensor().data<float>()[1], -0.0455003f, 1e-6);
  auto tanh = NodeTest("Gelu")
                  .Input("x", x)
                  .Output("y")
                  .Attr("approximate", std::string("tanh"))
                  .Opset(20)
                  .Run();
  ASSERT_TRUE(tanh.ok()) << tanh.status().message();
  EXPECT_NEAR(tanh.value()[0].tensor().data<float>()[0], 0.8411920f, 1e-6);
}

TEST(Unary, GeluRejectsUnknownApproximation) {
  auto r = NodeTest("Gelu")
               .Input("x", Tensor(DType::kFloat, {2}))
               .Output("y")
               .Attr("approximate", std::string("fast"))
               .Opset(20)
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("'fast'"), std::string::npos) << r.status().message();
}

TEST(Unary, ExpRejectsIntegers) {
  auto r = NodeTest("Exp").Input("x", Tensor(DType::kInt32, {2})).Output("y").Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("int32"), std::string::npos) << r.status().message();
}

TEST(Unary, ClipIntegersWithMinAboveMaxGivesMax) {
  auto x = Tensor::FromVector<int32_t>({-5, 0, 5}, {3});
  auto r = NodeTest("Clip")
               .Input("x", x)
               .Const("min", Tensor::FromVector<int32_t>({3}, {}))
               .Const("max", Tensor::FromVector<int32_t>({1}, {}))
               .Opset(13)
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{1, 1, 1}));
}

TEST(Unary, ClipOpset6AttributesAndNaN) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto x = Tensor::FromVector<float>({-3, 0.25f, 9, nan}, {4});
  auto r = NodeTest("Clip")
               .Input("x", x)
               .Attr("min", -1.0f)
               .Attr("max", 2.0f)
               .Opset(6)
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto y = Floats(r.value()[0].tensor());
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], 0.25f);
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_TRUE(std::isnan(y[3]));
}

TEST(Unary, ClipRejectsNonScalarBound) {
  auto r = NodeTest("Clip")
               .Input("x", Tensor(DType::kFloat, {3}))
               .Input("min", Tensor(DType::kFloat, {2}))
               .Opset(13)
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("min has shape [2]"), std::string::npos)
      << r.status().message();
}

TEST(Unary, AbsAndNegWrapIntMin) {
  int8_t lo = std::numeric_limits<int8_t>::min();
  auto x = Tensor::FromVector<int8_t>({lo, -3, 4}, {3});
  auto abs = NodeTest("Abs").Input("x", x).Output("y").Run();
  ASSERT_TRUE(abs.ok()) << abs.status().message();
  EXPECT_EQ(abs.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{-128, 3, 4}));
  auto neg = NodeTest("Neg").Input("x", x).Output("y").Run();
  ASSERT_TRUE(neg.ok()) << neg.status().message();
  EXPECT_EQ(neg.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{-128, 3, -4}));
}

TEST(Unary, IsInfDetectsOneSide) {
  float inf = std::numeric_limits<float>::infinity();
  auto x = Tensor::FromVector<float>({inf, -inf, 1.0f}, {3});
  auto r = NodeTest("IsInf").Input("x", x).Attr("detect_positive", int64_t{0}).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{0, 1, 0}));
}

// ---- Cast ----

std::vector<std::string> Strings(const Tensor& t) {
  return {t.data<std::string>(), t.data<std::string>() + t.size()};
}

TEST(Cast, FloatToStringLikeNumpy) {
  float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto x = Tensor::FromVector<float>(
      {0.5f, 100.0f, 1e-5f, 1e16f, -0.0f, nan, -inf, 0.039187793f, 123456.7f, 1e-4f, 1e15f}, {11});
  auto r = NodeTest("Cast").Input("x", x).Attr("to", int64_t{8}).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Strings(r.value()[0].tensor()),
            (std::vector<std::string>{"0.5", "100.0", "1e-05", "1e+16", "-0.0", "nan", "-inf",
                                      "0.039187793", "123456.7", "1e-04", "1000000000000000.0"}));
}

TEST(Cast, Float16ToStringUsesShortestHalfDigits) {
  auto x = Tensor::FromVector<Float16>({Float16(0.1f), Float16(65504.0f)}, {2});
  auto r = NodeTest("Cast").Input("x", x).Attr("to", int64_t{8}).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Strings(r.value()[0].tensor()), (std::vector<std::string>{"0.1", "65500.0"}));
}

TEST(Cast, StringToNumbers) {
  auto x = Tensor::FromVector<std::string>({" 1.5 ", "NaN", "-INF", "+inf", "1e3"}, {5});
  auto r = NodeTest("Cast").Input("x", x).Attr("to", int64_t{1}).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto y = Floats(r.value()[0].tensor());
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(y[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(y[4], 1000.0f);

  auto big = Tensor::FromVector<std::string>({"12345678901234567", "-7", "2.9"}, {3});
  auto r64 = NodeTest("Cast").Input("x", big).Attr("to", int64_t{7}).Output("y").Run();
  ASSERT_TRUE(r64.ok()) << r64.status().message();
  EXPECT_EQ(r64.value()[0].tensor().ToInt64Vector(),
            (std::vector<int64_t>{12345678901234567, -7, 2}));
}

TEST(Cast, StringThatIsNotANumberIsInvalid) {
  auto x = Tensor::FromVector<std::string>({"1", "abc"}, {2});
  auto r = NodeTest("Cast").Input("x", x).Attr("to", int64_t{1}).Output("y").Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("'abc'"), std::string::npos) << r.status().message();
}

TEST(Cast, DoubleToFloat16RoundsOnce) {
  // 1 + 2^-11 + 2^-40 is just above the tie between two halves; via float it would be a tie.
  auto x =
      Tensor::FromVector<double>({1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 1e6}, {2});
  auto r = NodeTest("Cast").Input("x", x).Attr("to", int64_t{10}).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(static_cast<float>(r.value()[0].tensor().data<Float16>()[0]),
            1.0f + std::ldexp(1.0f, -10));
  EXPECT_TRUE(std::isinf(static_cast<float>(r.value()[0].tensor().data<Float16>()[1])));
}

TEST(Cast, FloatToIntegers) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto x = Tensor::FromVector<float>({-1.0f, 2.9f, -2.9f, nan, 1e30f}, {5});
  auto u8 = NodeTest("Cast").Input("x", x).Attr("to", int64_t{2}).Output("y").Run();
  ASSERT_TRUE(u8.ok()) << u8.status().message();
  EXPECT_EQ(u8.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{255, 2, 254, 0, 255}));
  auto i32 = NodeTest("Cast").Input("x", x).Attr("to", int64_t{6}).Output("y").Run();
  ASSERT_TRUE(i32.ok()) << i32.status().message();
  EXPECT_EQ(i32.value()[0].tensor().ToInt64Vector(),
            (std::vector<int64_t>{-1, 2, -2, 0, std::numeric_limits<int32_t>::max()}));
}

TEST(Cast, Opset1StringTargetAndCastLike) {
  auto x = Tensor::FromVector<int32_t>({3, 0}, {2});
  auto r =
      NodeTest("Cast").Input("x", x).Attr("to", std::string("BOOL")).Opset(1).Output("y").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().dtype(), DType::kBool);
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{1, 0}));
  auto like = NodeTest("CastLike")
                  .Input("x", x)
                  .Input("like", Tensor(DType::kDouble, {1}))
                  .Opset(15)
                  .Output("y")
                  .Run();
  ASSERT_TRUE(like.ok()) << like.status().message();
  EXPECT_EQ(like.value()[0].tensor().dtype(), DType::kDouble);
  EXPECT_EQ(like.value()[0].tensor().data<double>()[1], 0.0);
}

TEST(Cast, Float8TargetIsUnsupported) {
  auto r = NodeTest("Cast")
               .Input("x", Tensor(DType::kFloat, {2}))
               .Attr("to", int64_t{17})
               .Opset(19)
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("FLOAT8E4M3FN"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace ferry::testing
