#include "ops/test_util.h"

namespace ferry::testing {
namespace {

TEST(Quant, QuantizeLinearRoundsHalfToEvenAndSaturates) {
  auto r =
      NodeTest("QuantizeLinear")
          .Input("x", Tensor::FromVector<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300, -300}, {7}))
          .Const("s", Tensor::FromVector<float>({1}, {}))
          .Const("zp", Tensor::FromVector<int8_t>({0}, {}))
          .Output("y")
          .Opset(13)
          .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(),
            (std::vector<int64_t>{0, 2, 2, 0, -2, 127, -128}));
}

TEST(Quant, DequantizeLinearPerAxis) {
  auto r = NodeTest("DequantizeLinear")
               .Input("x", Tensor::FromVector<uint8_t>({10, 20, 30, 40}, {2, 2}))
               .Const("s", Tensor::FromVector<float>({0.5f, 2}, {2}))
               .Const("zp", Tensor::FromVector<uint8_t>({10, 0}, {2}))
               .Output("y")
               .Attr("axis", int64_t{0})
               .Opset(13)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const float* y = r.value()[0].tensor().data<float>();
  EXPECT_EQ((std::vector<float>(y, y + 4)), (std::vector<float>{0, 5, 60, 80}));
}

TEST(Quant, QLinearMatMulGolden) {
  // a - a_zp = [3, 2]; b - b_zp = [[1, 254], [3, 254]]; acc = [9, 1270]; multiplier 0.5.
  auto r = NodeTest("QLinearMatMul")
               .Input("a", Tensor::FromVector<uint8_t>({4, 3}, {1, 2}))
               .Const("a_scale", Tensor::FromVector<float>({0.5f}, {}))
               .Const("a_zp", Tensor::FromVector<uint8_t>({1}, {}))
               .Input("b", Tensor::FromVector<uint8_t>({2, 255, 4, 255}, {2, 2}))
               .Const("b_scale", Tensor::FromVector<float>({0.25f}, {}))
               .Const("b_zp", Tensor::FromVector<uint8_t>({1}, {}))
               .Const("y_scale", Tensor::FromVector<float>({0.25f}, {}))
               .Const("y_zp", Tensor::FromVector<uint8_t>({10}, {}))
               .Output("y")
               .Opset(10)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  // 9 * 0.5 = 4.5 rounds to even 4 (+10); 1270 * 0.5 saturates to 255.
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{14, 255}));
}

TEST(Quant, QLinearMatMulFloat16ScalesOpset21) {
  // The golden above with float16 scales (exact in half): the multiplier is the same.
  auto half = [](float v) { return Tensor::FromVector<Float16>({Float16(v)}, {}); };
  auto build = [&](Tensor y_scale) {
    return NodeTest("QLinearMatMul")
        .Input("a", Tensor::FromVector<uint8_t>({4, 3}, {1, 2}))
        .Const("a_scale", half(0.5f))
        .Const("a_zp", Tensor::FromVector<uint8_t>({1}, {}))
        .Input("b", Tensor::FromVector<uint8_t>({2, 255, 4, 255}, {2, 2}))
        .Const("b_scale", half(0.25f))
        .Const("b_zp", Tensor::FromVector<uint8_t>({1}, {}))
        .Const("y_scale", std::move(y_scale))
        .Const("y_zp", Tensor::FromVector<uint8_t>({10}, {}))
        .Output("y")
        .Opset(21)
        .Run();
  };
  auto r = build(half(0.25f));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{14, 255}));

  auto mixed = build(Tensor::FromVector<float>({0.25f}, {}));
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("expected one"), std::string::npos)
      << mixed.status().message();
}

TEST(Quant, ConvIntegerPerChannelZeroPoint) {
  // 1x1x2x2 input, two 1x1x1x1 filters with zero points 1 and 2, x_zp 1 and one pad of zeros.
  auto r = NodeTest("ConvInteger")
               .Input("x", Tensor::FromVector<uint8_t>({2, 3, 4, 5}, {1, 1, 2, 2}))
               .Const("w", Tensor::FromVector<uint8_t>({3, 4}, {2, 1, 1, 1}))
               .Const("x_zp", Tensor::FromVector<uint8_t>({1}, {}))
               .Const("w_zp", Tensor::FromVector<uint8_t>({1, 2}, {2}))
               .Output("y")
               .Attr("pads", std::vector<int64_t>{0, 0, 0, 1})
               .Opset(10)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{1, 2, 2, 3}));
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(),
            (std::vector<int64_t>{2, 4, 0, 6, 8, 0, 2, 4, 0, 6, 8, 0}));
}

TEST(Quant, RejectsPerAxisScaleOfWrongLength) {
  auto r = NodeTest("QuantizeLinear")
               .Input("x", Tensor(DType::kFloat, {2, 3}))
               .Const("s", Tensor::FromVector<float>({1, 1}, {2}))
               .Output("y")
               .Attr("axis", int64_t{1})
               .Opset(13)
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("per-axis scale has shape [2], expected [3]"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace ferry::testing
