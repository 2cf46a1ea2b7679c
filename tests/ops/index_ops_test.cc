// Index and selection ops: Gather*, Scatter*, TopK, Unique, NonZero, OneHot, Compress.
#include "ops/test_util.h"

namespace ferry::testing {
namespace {

std::vector<int64_t> Ints(const Value& v) {
  return v.tensor().ToInt64Vector();
}

TEST(IndexOps, GatherNegativeIndicesOnStrings) {
  Tensor data(DType::kString, {3, 2});
  auto d = data.span<std::string>();
  for (size_t i = 0; i < d.size(); ++i) d[i] = "s" + std::to_string(i);
  auto r = NodeTest("Gather")
               .Input("data", data)
               .Input("idx", Tensor::FromVector<int64_t>({-1, 0}, {2}))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor& y = r.value()[0].tensor();
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  auto s = y.span<std::string>();
  EXPECT_EQ(std::vector<std::string>(s.begin(), s.end()),
            (std::vector<std::string>{"s4", "s5", "s0", "s1"}));
}

TEST(IndexOps, GatherOutOfRangeIndexIsInvalid) {
  auto r = NodeTest("Gather")
               .Input("data", Tensor(DType::kFloat, {3, 4}))
               .Input("idx", Tensor::FromVector<int32_t>({0, 7}, {2}))
               .Output("y")
               .Attr("axis", int64_t{1})
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("Gather 'n0'"), std::string::npos) << m;
  EXPECT_NE(m.find("value 7"), std::string::npos) << m;
  EXPECT_NE(m.find("[-4, 3]"), std::string::npos) << m;
}

TEST(IndexOps, GatherNDBatchDims) {
  // data [2,2,2], indices [2,1,1] with batch_dims=1 -> output [2,1,2].
  auto r = NodeTest("GatherND")
               .Input("data", Tensor::FromVector<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2}))
               .Input("idx", Tensor::FromVector<int64_t>({1, 0}, {2, 1, 1}))
               .Output("y")
               .Attr("batch_dims", int64_t{1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{2, 1, 2}));
  EXPECT_EQ(Ints(r.value()[0]), (std::vector<int64_t>{2, 3, 4, 5}));
}

TEST(IndexOps, ScatterElementsReductions) {
  auto run = [](const std::string& red, int opset) {
    return NodeTest("ScatterElements")
        .Input("data", Tensor::FromVector<float>({1, 2, 3, 4}, {4}))
        .Input("idx", Tensor::FromVector<int64_t>({1, 1, -1}, {3}))
        .Input("upd", Tensor::FromVector<float>({5, 10, 0.5f}, {3}))
        .Output("y")
        .Attr("reduction", red)
        .Opset(opset)
        .Run();
  };
  auto add = run("add", 16);
  ASSERT_TRUE(add.ok()) << add.status().message();
  auto a = add.value()[0].tensor().span<float>();
  EXPECT_EQ(std::vector<float>(a.begin(), a.end()), (std::vector<float>{1, 17, 3, 4.5f}));
  auto mx = run("max", 18);
  ASSERT_TRUE(mx.ok()) << mx.status().message();
  auto m = mx.value()[0].tensor().span<float>();
  EXPECT_EQ(std::vector<float>(m.begin(), m.end()), (std::vector<float>{1, 10, 3, 4}));
  auto bad = run("max", 16);  // max/min arrived in opset 18
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'max'"), std::string::npos);
}

TEST(IndexOps, ScatterNDMultiply) {
  auto r = NodeTest("ScatterND")
               .Input("data", Tensor::FromVector<int64_t>({1, 2, 3, 4}, {2, 2}))
               .Input("idx", Tensor::FromVector<int64_t>({1, 1}, {2, 1}))
               .Input("upd", Tensor::FromVector<int64_t>({2, 3, 5, 7}, {2, 2}))
               .Output("y")
               .Attr("reduction", std::string("mul"))
               .Opset(16)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Ints(r.value()[0]), (std::vector<int64_t>{1, 2, 30, 84}));
}

TEST(IndexOps, TopKTiesKeepLowerIndexFirst) {
  auto r = NodeTest("TopK")
               .Input("x", Tensor::FromVector<float>({1, 3, 3, 2, 3}, {5}))
               .Input("k", Tensor::FromVector<int64_t>({3}, {1}))
               .Output("v")
               .Output("i")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Ints(r.value()[0]), (std::vector<int64_t>{3, 3, 3}));
  EXPECT_EQ(Ints(r.value()[1]), (std::vector<int64_t>{1, 2, 4}));
}

TEST(IndexOps, TopKAttributeBeforeOpset10) {
  auto r = NodeTest("TopK")
               .Input("x", Tensor::FromVector<int32_t>({4, 1, 3, 2, 6, 5}, {2, 3}))
               .Output("v")
               .Output("i")
               .Attr("k", int64_t{2})
               .Opset(1)
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Ints(r.value()[0]), (std::vector<int64_t>{4, 3, 6, 5}));
  EXPECT_EQ(Ints(r.value()[1]), (std::vector<int64_t>{0, 2, 1, 2}));
}

TEST(IndexOps, TopKTooLargeKIsInvalid) {
  auto r = NodeTest("TopK")
               .Input("x", Tensor(DType::kFloat, {2, 3}))
               .Input("k", Tensor::FromVector<int64_t>({4}, {1}))
               .Output("v")
               .Output("i")
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("k is 4"), std::string::npos) << r.status().message();
}

TEST(IndexOps, UniqueUnsortedWithAxis) {
  // Rows: [2,1] [0,5] [2,1] [0,4]: first-occurrence order.
  auto r = NodeTest("Unique")
               .Input("x", Tensor::FromVector<int32_t>({2, 1, 0, 5, 2, 1, 0, 4}, {4, 2}))
               .Output("y")
               .Output("idx")
               .Output("inv")
               .Output("cnt")
               .Attr("axis", int64_t{0})
               .Attr("sorted", int64_t{0})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{3, 2}));
  EXPECT_EQ(Ints(r.value()[0]), (std::vector<int64_t>{2, 1, 0, 5, 0, 4}));
  EXPECT_EQ(Ints(r.value()[1]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(Ints(r.value()[2]), (std::vector<int64_t>{0, 1, 0, 2}));
  EXPECT_EQ(Ints(r.value()[3]), (std::vector<int64_t>{2, 1, 1}));
}

TEST(IndexOps, UniqueSortedStrings) {
  Tensor x(DType::kString, {4});
  auto d = x.span<std::string>();
  d[0] = "b";
  d[1] = "a";
  d[2] = "b";
  d[3] = "";
  auto r = NodeTest("Unique").Input("x", x).Output("y").Output("i").Output("inv").Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto y = r.value()[0].tensor().span<std::string>();
  EXPECT_EQ(std::vector<std::string>(y.begin(), y.end()), (std::vector<std::string>{"", "a", "b"}));
  EXPECT_EQ(Ints(r.value()[1]), (std::vector<int64_t>{3, 1, 0}));
  EXPECT_EQ(Ints(r.value()[2]), (std::vector<int64_t>{2, 1, 2, 0}));
}

TEST(IndexOps, NonZeroBool) {
  auto r = NodeTest("NonZero")
               .Input("x", Tensor::FromVector<bool>({true, false, false, true}, {2, 2}))
               .Output("y")
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{2, 2}));
  EXPECT_EQ(Ints(r.value()[0]), (std::vector<int64_t>{0, 1, 0, 1}));
}

TEST(IndexOps, OneHotNegativeAndOutOfRange) {
  auto r = NodeTest("OneHot")
               .Input("idx", Tensor::FromVector<int64_t>({-1, 5, 1}, {3}))
               .Input("depth", Tensor::FromVector<float>({3}, {}))
               .Input("values", Tensor::FromVector<int32_t>({0, 9}, {2}))
               .Output("y")
               .Attr("axis", int64_t{0})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].tensor().shape(), (Shape{3, 3}));
  EXPECT_EQ(Ints(r.value()[0]), (std::vector<int64_t>{0, 0, 0, 0, 0, 9, 9, 0, 0}));
}

TEST(IndexOps, CompressTrueBeyondAxisIsInvalid) {
  auto r = NodeTest("Compress")
               .Input("x", Tensor(DType::kFloat, {2, 2}))
               .Input("c", Tensor::FromVector<bool>({false, true, true}, {3}))
               .Output("y")
               .Attr("axis", int64_t{0})
               .Run();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r.status().message().find("condition[2]"), std::string::npos) << r.status().message();
}

TEST(IndexOps, ReverseSequenceBatchMajor) {
  auto r = NodeTest("ReverseSequence")
               .Input("x", Tensor::FromVector<int32_t>({0, 1, 2, 3, 4, 5}, {2, 3}))
               .Input("lens", Tensor::FromVector<int64_t>({3, 2}, {2}))
               .Output("y")
               .Attr("batch_axis", int64_t{0})
               .Attr("time_axis", int64_t{1})
               .Run();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Ints(r.value()[0]), (std::vector<int64_t>{2, 1, 0, 4, 3, 5}));
}

}  // namespace
}  // namespace ferry::testing
