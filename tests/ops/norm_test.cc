#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<double> Values(const Value& v) {
  std::vector<double> out;
  for (int64_t i = 0; i < v.tensor().size(); ++i) out.push_back(v.tensor().GetAsDouble(i));
  return out;
}

TEST(Norm, SoftmaxLegacyCoercesTo2D) {
  // Shape [1, 2, 2], axis 1: opset 11 normalizes over the 4 trailing values together,
  // opset 13 over axis 1 only.
  Tensor x = Tensor::FromVector<float>({0, 1, 2, 3}, {1, 2, 2});
  auto old_r =
      NodeTest("Softmax").Input("x", x).Output("y").Attr("axis", int64_t{1}).Opset(11).Run();
  auto new_r =
      NodeTest("Softmax").Input("x", x).Output("y").Attr("axis", int64_t{1}).Opset(13).Run();
  ASSERT_TRUE(old_r.ok()) << old_r.status().message();
  ASSERT_TRUE(new_r.ok()) << new_r.status().message();
  double s = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  std::vector<double> y_old = Values(old_r.value()[0]), y_new = Values(new_r.value()[0]);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y_old[i], std::exp(double(i)) / s, 1e-6) << i;
  double p = 1 / (1 + std::exp(2.0));
  std::vector<double> want_new = {p, p, 1 - p, 1 - p};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y_new[i], want_new[i], 1e-6) << i;
}

TEST(Norm, LayerNormStatsOutputs) {
  auto r = NodeTest("LayerNormalization")
               .Input("x", Tensor::FromVector<float>({1, 3, 2, 2, 4, 6}, {2, 3}))
               .Input("scale", Tensor::FromVector<float>({1, 2, 3}, {3}))
               .Output("y")
               .Output("mean")
               .Output("inv_std")
               .Attr("epsilon", 0.0f)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[1].tensor().shape(), (Shape{2, 1}));
  std::vector<double> mean = Values(r.value()[1]), inv = Values(r.value()[2]);
  EXPECT_NEAR(mean[0], 2, 1e-6);
  EXPECT_NEAR(mean[1], 4, 1e-6);
  EXPECT_NEAR(inv[0], 1 / std::sqrt(2.0 / 3), 1e-6);
  std::vector<double> y = Values(r.value()[0]);
  EXPECT_NEAR(y[1], 2 * 1 / std::sqrt(2.0 / 3), 1e-5);
  EXPECT_NEAR(y[2], 0, 1e-6);
}

TEST(Norm, BatchNormTrainingOutputsRunningStats) {
  // x [2, 1]: batch mean 2, var 1; running = 0.5 * input + 0.5 * batch.
  auto r = NodeTest("BatchNormalization")
               .Input("x", Tensor::FromVector<float>({1, 3}, {2, 1}))
               .Input("s", Tensor::FromVector<float>({1}, {1}))
               .Input("b", Tensor::FromVector<float>({0}, {1}))
               .Input("m", Tensor::FromVector<float>({0}, {1}))
               .Input("v", Tensor::FromVector<float>({3}, {1}))
               .Output("y")
               .Output("rm")
               .Output("rv")
               .Attr("training_mode", int64_t{1})
               .Attr("momentum", 0.5f)
               .Attr("epsilon", 0.0f)
               .Opset(15)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{-1, 1}));
  EXPECT_EQ(Values(r.value()[1]), (std::vector<double>{1}));
  EXPECT_EQ(Values(r.value()[2]), (std::vector<double>{2}));
}

TEST(Norm, InstanceNormScaleSizeMismatchIsInvalid) {
  auto r = NodeTest("InstanceNormalization")
               .Input("x", RandomTensor({1, 3, 4}, 1))
               .Input("s", RandomTensor({2}, 2))
               .Input("b", RandomTensor({3}, 3))
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("scale has shape [2]"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace ferry::testing
