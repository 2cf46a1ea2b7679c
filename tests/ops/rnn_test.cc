#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<double> Values(const Value& v) {
  std::vector<double> out;
  for (int64_t i = 0; i < v.tensor().size(); ++i) out.push_back(v.tensor().GetAsDouble(i));
  return out;
}

// One-unit GRU, reverse direction, two batch entries with sequence lengths 3 and 2.
// Expected values computed independently with numpy from the ONNX GRU equations.
Result<std::vector<Value>> RunTinyGru(int64_t linear_before_reset) {
  return NodeTest("GRU")
      .Input("X", Tensor::FromVector<float>({1.0f, -1.0f, 2.0f, 0.5f, -0.5f, 1.5f}, {3, 2, 1}))
      .Input("W", Tensor::FromVector<float>({0.5f, 0.2f, 1.0f}, {1, 3, 1}))
      .Input("R", Tensor::FromVector<float>({0.1f, 0.3f, 0.7f}, {1, 3, 1}))
      .Input("B", Tensor::FromVector<float>({0.05f, -0.1f, 0.2f, 0.0f, 0.1f, -0.3f}, {1, 6}))
      .Input("sequence_lens", Tensor::FromVector<int32_t>({3, 2}, {2}))
      .Output("Y")
      .Output("Y_h")
      .Attr("hidden_size", int64_t{1})
      .Attr("direction", std::string("reverse"))
      .Attr("linear_before_reset", linear_before_reset)
      .Opset(14)
      .Run();
}

TEST(Rnn, GruReverseWithSequenceLens) {
  const std::vector<std::vector<double>> want_y = {
      {0.2848885, -0.41026565, 0.03324716, 0.16169012, -0.29528811, 0.0},
      {0.34049246, -0.3420415, 0.08449126, 0.21060106, -0.22857683, 0.0}};
  for (int64_t lbr : {0, 1}) {
    auto r = RunTinyGru(lbr);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{3, 1, 2, 1}));
    std::vector<double> y = Values(r.value()[0]), y_h = Values(r.value()[1]);
    for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(y[i], want_y[lbr][i], 1e-6) << lbr << " " << i;
    EXPECT_NEAR(y_h[0], want_y[lbr][0], 1e-6);
    EXPECT_NEAR(y_h[1], want_y[lbr][1], 1e-6);
  }
}

TEST(Rnn, LayoutOneShapesWithoutYc) {
  // batch 2, seq 3, input 4, hidden 5; the trailing Y_c output is omitted.
  auto r = NodeTest("LSTM")
               .Input("X", RandomTensor({2, 3, 4}, 1))
               .Input("W", RandomTensor({1, 20, 4}, 2))
               .Input("R", RandomTensor({1, 20, 5}, 3))
               .Output("Y")
               .Output("Y_h")
               .Attr("hidden_size", int64_t{5})
               .Attr("layout", int64_t{1})
               .Opset(14)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{2, 3, 1, 5}));
  EXPECT_EQ(r.value()[1].tensor().shape(), (Shape{2, 1, 5}));
  // With full-length sequences Y_h is Y's last step.
  const Tensor& y = r.value()[0].tensor();
  const Tensor& y_h = r.value()[1].tensor();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(y_h.data<float>()[b * 5 + j], y.data<float>()[(b * 3 + 2) * 5 + j]);
}

TEST(Rnn, WrongWeightShapeIsInvalid) {
  auto r = NodeTest("RNN")
               .Input("X", RandomTensor({3, 2, 4}, 1))
               .Input("W", RandomTensor({1, 5, 3}, 2))
               .Input("R", RandomTensor({1, 5, 5}, 3))
               .Output("Y")
               .Attr("hidden_size", int64_t{5})
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("W has shape [1,5,3], expected [1,5,4]"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace ferry::testing
