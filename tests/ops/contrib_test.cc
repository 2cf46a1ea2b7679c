// com.microsoft (ONNX Runtime contrib) reference kernels: golden values worked out by hand and
// the validation errors (node, op, values seen and expected). ONNX Runtime itself is the peer
// in tests/models/ort_contrib.py.
#include <cmath>

#include "ops/test_util.h"

namespace ferry::testing {
namespace {

constexpr const char* kMs = "com.microsoft";

std::vector<double> Values(const Value& v) {
  std::vector<double> out;
  for (int64_t i = 0; i < v.tensor().size(); ++i) out.push_back(v.tensor().GetAsDouble(i));
  return out;
}

Tensor Floats(std::vector<float> v, Shape s) {
  return Tensor::FromVector<float>(v, std::move(s));
}

template <typename T>
Tensor Scalar(DType dt, T v) {
  Tensor t(dt, Shape{});
  t.data<T>()[0] = v;
  return t;
}

TEST(Contrib, SkipLayerNormAddsSkipAndBiasThenNormalizes) {
  // sum = x + skip + bias = [1, 3] and [2, 6]; LN: (s - mean) / sqrt(var + eps) * gamma + beta.
  auto r = NodeTest("SkipLayerNormalization", kMs)
               .Opset(1)
               .Input("x", Floats({0, 1, 1, 2}, {1, 2, 2}))
               .Input("skip", Floats({1, 1, 0, 3}, {1, 2, 2}))
               .Const("gamma", Floats({2, 1}, {2}))
               .Const("beta", Floats({0.5f, -0.5f}, {2}))
               .Const("bias", Floats({0, 1}, {2}))
               .Output("y")
               .Output("mean")
               .Output("inv_std")
               .Output("sum")
               .Attr("epsilon", 0.0f)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<double> y = Values(r.value()[0]), sum = Values(r.value()[3]);
  EXPECT_EQ(sum, (std::vector<double>{1, 3, 1, 6}));
  EXPECT_EQ(r.value()[1].tensor().shape(), (Shape{1, 2, 1}));
  EXPECT_EQ(Values(r.value()[1]), (std::vector<double>{2, 3.5}));
  EXPECT_NEAR(Values(r.value()[2])[0], 1, 1e-7);
  EXPECT_NEAR(Values(r.value()[2])[1], 1 / 2.5, 1e-7);
  // Each row of two values normalizes to [-1, 1].
  std::vector<double> want = {-1 * 2 + 0.5, 1 * 1 - 0.5, -1 * 2 + 0.5, 1 * 1 - 0.5};
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << i;
}

TEST(Contrib, SkipLayerNormRejectsWrongGamma) {
  auto r = NodeTest("SkipLayerNormalization", kMs)
               .Opset(1)
               .Input("x", Floats({0, 1, 1, 2}, {1, 2, 2}))
               .Input("skip", Floats({1, 1, 0, 3}, {1, 2, 2}))
               .Const("gamma", Floats({2, 1, 3}, {3}))
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find("SkipLayerNormalization 'n0': gamma has shape [3], expected [2]"),
      std::string::npos)
      << r.status().message();
}

TEST(Contrib, LayerNormalizationBeforeOpset17IsOrtsContribForm) {
  auto r = NodeTest("LayerNormalization")
               .Opset(14)
               .Input("x", Floats({1, 3, 2, 6}, {2, 2}))
               .Const("g", Floats({1, 1}, {2}))
               .Output("y")
               .Attr("epsilon", 0.0f)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{-1, 1, -1, 1}));
}

TEST(Contrib, EmbedLayerNormChecksIdsAndCountsTheMask) {
  Tensor ids(DType::kInt32, {1, 3});
  ids.data<int32_t>()[0] = 0;
  ids.data<int32_t>()[1] = 1;
  ids.data<int32_t>()[2] = 9;
  auto bad = NodeTest("EmbedLayerNormalization", kMs)
                 .Opset(1)
                 .Input("ids", ids)
                 .Omitted()
                 .Const("we", Floats({1, 2, 3, 4}, {2, 2}))
                 .Const("pe", Floats({0, 0, 0, 0, 0, 0}, {3, 2}))
                 .Omitted()
                 .Const("g", Floats({1, 1}, {2}))
                 .Const("b", Floats({0, 0}, {2}))
                 .Output("y")
                 .Run();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input_ids[2] is 9, outside the table's 2 rows"),
            std::string::npos)
      << bad.status().message();

  ids.data<int32_t>()[2] = 1;
  Tensor mask(DType::kInt32, {1, 3});
  mask.data<int32_t>()[0] = 1;
  mask.data<int32_t>()[1] = 1;
  mask.data<int32_t>()[2] = 0;
  auto r = NodeTest("EmbedLayerNormalization", kMs)
               .Opset(1)
               .Input("ids", ids)
               .Omitted()
               .Const("we", Floats({1, 2, 3, 5}, {2, 2}))
               .Const("pe", Floats({0, 0, 1, 0, 0, 0}, {3, 2}))
               .Omitted()
               .Const("g", Floats({1, 1}, {2}))
               .Const("b", Floats({0, 0}, {2}))
               .Input("mask", mask)
               .Output("y")
               .Output("mask_index")
               .Attr("epsilon", 0.0f)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Rows: [1, 2], [3 + 1, 5], [3, 5] -> each [-1, 1].
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{-1, 1, -1, 1, -1, 1}));
  EXPECT_EQ(Values(r.value()[1]), (std::vector<double>{2}));
}

TEST(Contrib, AttentionKeyLengthMask) {
  // One head of size 1, Q = K = V = x: the mask [1] hides key 1 from both queries.
  auto run = [](bool masked) {
    NodeTest t("Attention", kMs);
    t.Opset(1)
        .Input("x", Floats({1, 2}, {1, 2, 1}))
        .Const("w", Floats({1, 1, 1}, {1, 3}))
        .Const("bias", Floats({0, 0, 0}, {3}));
    if (masked) {
      Tensor m(DType::kInt32, {1});
      m.data<int32_t>()[0] = 1;
      t.Input("mask", m);
    }
    return t.Output("y").Attr("num_heads", int64_t{1}).Run();
  };
  auto plain = run(false), masked = run(true);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  ASSERT_TRUE(masked.ok()) << masked.status().message();
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e4 = std::exp(4.0);
  std::vector<double> y = Values(plain.value()[0]);
  EXPECT_NEAR(y[0], (e1 * 1 + e2 * 2) / (e1 + e2), 1e-6);
  EXPECT_NEAR(y[1], (e2 * 1 + e4 * 2) / (e2 + e4), 1e-6);
  EXPECT_EQ(Values(masked.value()[0]), (std::vector<double>{1, 1}));
}

TEST(Contrib, AttentionRejectsBadMaskAndMissingHeads) {
  Tensor m(DType::kInt32, {1});
  m.data<int32_t>()[0] = 5;
  auto r = NodeTest("Attention", kMs)
               .Opset(1)
               .Input("x", Floats({1, 2}, {1, 2, 1}))
               .Const("w", Floats({1, 1, 1}, {1, 3}))
               .Const("bias", Floats({0, 0, 0}, {3}))
               .Input("mask", m)
               .Output("y")
               .Attr("num_heads", int64_t{1})
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("mask_index[0] is 5, expected a position in [0, 2]"),
            std::string::npos)
      << r.status().message();
  auto h = NodeTest("Attention", kMs)
               .Opset(1)
               .Input("x", Floats({1, 2}, {1, 2, 1}))
               .Const("w", Floats({1, 1, 1}, {1, 3}))
               .Output("y")
               .Run();
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("attribute num_heads is missing"), std::string::npos);
}

TEST(Contrib, GeluFamilyValues) {
  const double x = 1.0;
  const double gelu = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  const double fast = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  auto g = NodeTest("Gelu", kMs).Opset(1).Input("x", Floats({1}, {1})).Output("y").Run();
  auto f = NodeTest("FastGelu", kMs)
               .Opset(1)
               .Input("x", Floats({0.5f}, {1}))
               .Const("b", Floats({0.5f}, {1}))
               .Output("y")
               .Run();
  auto q = NodeTest("QuickGelu", kMs).Opset(1).Input("x", Floats({1}, {1})).Output("y").Run();
  ASSERT_TRUE(g.ok() && f.ok() && q.ok());
  EXPECT_NEAR(Values(g.value()[0])[0], gelu, 1e-6);
  EXPECT_NEAR(Values(f.value()[0])[0], fast, 1e-6);
  EXPECT_NEAR(Values(q.value()[0])[0], 1 / (1 + std::exp(-1.702)), 1e-6);
}

TEST(Contrib, FusedMatMulTransposesAndScales) {
  // A' = [[1, 3], [2, 4]] (A transposed), B' = I: Y = 0.5 A'.
  auto r = NodeTest("FusedMatMul", kMs)
               .Opset(1)
               .Input("a", Floats({1, 2, 3, 4}, {2, 2}))
               .Input("b", Floats({1, 0, 0, 1}, {2, 2}))
               .Output("y")
               .Attr("alpha", 0.5f)
               .Attr("transA", int64_t{1})
               .Attr("transB", int64_t{1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{0.5, 1.5, 1, 2}));
}

TEST(Contrib, QLinearAddRoundsWithScaleRatios) {
  // ra = 0.5, rb = 0.25, c = 10 - (0.5 * 4 + 0.25 * 8) = 6: y = nearbyint(0.5 a + 0.25 b + 6).
  Tensor a = Tensor::FromVector<uint8_t>({0, 5, 200, 255}, {4});
  Tensor b = Tensor::FromVector<uint8_t>({0, 2, 10, 255}, {4});
  auto r = NodeTest("QLinearAdd", kMs)
               .Opset(1)
               .Input("a", a)
               .Const("sa", Scalar<float>(DType::kFloat, 0.1f))
               .Const("za", Scalar<uint8_t>(DType::kUint8, 4))
               .Input("b", b)
               .Const("sb", Scalar<float>(DType::kFloat, 0.05f))
               .Const("zb", Scalar<uint8_t>(DType::kUint8, 8))
               .Const("sc", Scalar<float>(DType::kFloat, 0.2f))
               .Const("zc", Scalar<uint8_t>(DType::kUint8, 10))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  // 6; 2.5 + 0.5 + 6 = 9; 100 + 2.5 + 6 = 108.5 -> 108 (ties to even); 127.5 + 63.75 + 6 -> 197.
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{6, 9, 108, 197}));
}

TEST(Contrib, QGemmAddsCThenRequantizes) {
  // A [1, 2] = [3, 4] - za 1 = [2, 3]; B [2, 2] int8 = [[1, 2], [3, 4]]; acc = [11, 16] + C [5,
  // -6].
  auto r = NodeTest("QGemm", kMs)
               .Opset(1)
               .Input("a", Tensor::FromVector<uint8_t>({3, 4}, {1, 2}))
               .Const("sa", Scalar<float>(DType::kFloat, 0.5f))
               .Const("za", Scalar<uint8_t>(DType::kUint8, 1))
               .Const("b", Tensor::FromVector<int8_t>({1, 2, 3, 4}, {2, 2}))
               .Const("sb", Scalar<float>(DType::kFloat, 1.f))
               .Const("zb", Scalar<int8_t>(DType::kInt8, 0))
               .Const("c", Tensor::FromVector<int32_t>({5, -6}, {2}))
               .Const("sy", Scalar<float>(DType::kFloat, 2.f))
               .Const("zy", Scalar<uint8_t>(DType::kUint8, 100))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  // [16, 10] * 0.5 / 2 = [4, 2.5 -> 2 (to even)] + 100.
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{104, 102}));
}

TEST(Contrib, QGemmRejectsZeroPointWithoutScale) {
  auto r = NodeTest("QGemm", kMs)
               .Opset(1)
               .Input("a", Tensor::FromVector<uint8_t>({3, 4}, {1, 2}))
               .Const("sa", Scalar<float>(DType::kFloat, 0.5f))
               .Const("za", Scalar<uint8_t>(DType::kUint8, 1))
               .Const("b", Tensor::FromVector<int8_t>({1, 2, 3, 4}, {2, 2}))
               .Const("sb", Scalar<float>(DType::kFloat, 1.f))
               .Const("zb", Scalar<int8_t>(DType::kInt8, 0))
               .Omitted()
               .Omitted()
               .Const("zy", Scalar<uint8_t>(DType::kUint8, 100))
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("y_zero_point is given without y_scale"), std::string::npos)
      << r.status().message();
}

TEST(Contrib, QLinearGlobalAveragePoolRequantizesTheSum) {
  // Channel sums 10 and 2 of 4 values, zx 1: (10 - 4) * (0.5 / (0.25 * 4)) = 3, (2 - 4) -> -1.
  auto r = NodeTest("QLinearGlobalAveragePool", kMs)
               .Opset(1)
               .Input("x", Tensor::FromVector<uint8_t>({1, 2, 3, 4, 0, 0, 1, 1}, {1, 2, 2, 2}))
               .Const("sx", Scalar<float>(DType::kFloat, 0.5f))
               .Const("zx", Scalar<uint8_t>(DType::kUint8, 1))
               .Const("sy", Scalar<float>(DType::kFloat, 0.25f))
               .Const("zy", Scalar<uint8_t>(DType::kUint8, 10))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{1, 2, 1, 1}));
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{13, 9}));
}

TEST(Contrib, DynamicQuantizeMatMulQuantizesTheWholeInput) {
  // A = [0, 2.55]: scale 0.01, zp 0; B = [[100]] (scale 0.02): y = a_q * 100 * 0.01 * 0.02.
  auto r = NodeTest("DynamicQuantizeMatMul", kMs)
               .Opset(1)
               .Input("a", Floats({0.f, 2.55f}, {2, 1}))
               .Const("b", Tensor::FromVector<int8_t>({100}, {1, 1}))
               .Const("bs", Scalar<float>(DType::kFloat, 0.02f))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<double> y = Values(r.value()[0]);
  EXPECT_NEAR(y[0], 0, 1e-7);
  EXPECT_NEAR(y[1], 255 * 100 * 0.01 * 0.02, 1e-4);
}

TEST(Contrib, RotaryEmbeddingRotatesHalves) {
  // One head of 2: (x0, x1) by the angle of position 1 (cos 0, sin 1): (-x1, x0).
  Tensor pos(DType::kInt64, {1, 1});
  pos.data<int64_t>()[0] = 1;
  auto r = NodeTest("RotaryEmbedding", kMs)
               .Opset(1)
               .Input("x", Floats({3, 5}, {1, 1, 2}))
               .Input("pos", pos)
               .Const("cos", Floats({1, 0}, {2, 1}))
               .Const("sin", Floats({0, 1}, {2, 1}))
               .Output("y")
               .Attr("num_heads", int64_t{1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{-5, 3}));
}

}  // namespace
}  // namespace ferry::testing
