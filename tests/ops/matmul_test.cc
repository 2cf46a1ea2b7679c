#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<double> Values(const Value& v) {
  std::vector<double> out;
  for (int64_t i = 0; i < v.tensor().size(); ++i) out.push_back(v.tensor().GetAsDouble(i));
  return out;
}

TEST(MatMul, VectorTimesBatchedMatrix) {
  // [2] x [3, 2, 2] -> [3, 2]: the 1-D operand is promoted and its dim removed again.
  auto r = NodeTest("MatMul")
               .Input("a", Tensor::FromVector<int64_t>({1, 2}, {2}))
               .Input("b", Tensor::FromVector<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
                                                       {3, 2, 2}))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{3, 2}));
  EXPECT_EQ(r.value()[0].tensor().ToInt64Vector(), (std::vector<int64_t>{7, 10, 19, 22, 31, 34}));
}

TEST(MatMul, GemmInnerDimensionMismatchIsInvalid) {
  auto r = NodeTest("Gemm")
               .Input("a", RandomTensor({2, 3}, 1))
               .Input("b", RandomTensor({4, 5}, 2))
               .Output("y")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("inner dimensions differ"), std::string::npos)
      << r.status().message();
}

TEST(MatMul, GemmTransposedWithRowBias) {
  // A' = [[1,2],[3,4]] given transposed; B = I; C = [10, 20] broadcast over rows.
  auto r = NodeTest("Gemm")
               .Input("a", Tensor::FromVector<float>({1, 3, 2, 4}, {2, 2}))
               .Input("b", Tensor::FromVector<float>({1, 0, 0, 1}, {2, 2}))
               .Input("c", Tensor::FromVector<float>({10, 20}, {2}))
               .Output("y")
               .Attr("transA", int64_t{1})
               .Attr("alpha", 2.0f)
               .Attr("beta", 0.5f)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<double>{7, 14, 11, 18}));
}

TEST(MatMul, EinsumDiagonalEllipsisAndImplicitOutput) {
  Tensor x = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  auto diag = NodeTest("Einsum")
                  .Input("x", x)
                  .Output("y")
                  .Attr("equation", std::string("...ii ->...i"))
                  .Opset(12)
                  .Run();
  ASSERT_TRUE(diag.ok()) << diag.status().message();
  EXPECT_EQ(diag.value()[0].tensor().shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(diag.value()[0]), (std::vector<double>{1, 4, 5, 8}));
  // Implicit output: "ij,jk" is "ik"; "ii" is the trace (a scalar).
  auto mm = NodeTest("Einsum")
                .Input("a", Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}))
                .Input("b", Tensor::FromVector<float>({5, 6, 7, 8}, {2, 2}))
                .Output("y")
                .Attr("equation", std::string("ij,jk"))
                .Run();
  ASSERT_TRUE(mm.ok()) << mm.status().message();
  EXPECT_EQ(Values(mm.value()[0]), (std::vector<double>{19, 22, 43, 50}));
  auto tr = NodeTest("Einsum")
                .Input("a", Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}))
                .Output("y")
                .Attr("equation", std::string("ii"))
                .Run();
  ASSERT_TRUE(tr.ok()) << tr.status().message();
  EXPECT_EQ(tr.value()[0].tensor().shape(), Shape{});
  EXPECT_EQ(Values(tr.value()[0]), (std::vector<double>{5}));
  // Implicit output orders uppercase labels before lowercase ones (ASCII), like numpy.
  auto order = NodeTest("Einsum")
                   .Input("a", RandomTensor({2, 3}, 4))
                   .Output("y")
                   .Attr("equation", std::string("bA"))
                   .Run();
  ASSERT_TRUE(order.ok()) << order.status().message();
  EXPECT_EQ(order.value()[0].tensor().shape(), (Shape{3, 2}));
}

TEST(MatMul, DetOfBatch) {
  auto r = NodeTest("Det")
               .Input("x", Tensor::FromVector<double>({2, 1, 1, 3, 0, 1, 1, 0}, {2, 2, 2}))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<double> y = Values(r.value()[0]);
  EXPECT_NEAR(y[0], 5, 1e-12);
  EXPECT_NEAR(y[1], -1, 1e-12);
}

}  // namespace
}  // namespace ferry::testing
