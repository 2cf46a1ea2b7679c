// Statistics of ferry verify against hand-computed values.
#include "verify/compare.h"

#include <array>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ferry::verify {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(VerifyStats, HandComputed) {
  Tensor ref = Tensor::FromVector<float>({1, 2, 3, 4}, {4});
  Tensor cand = Tensor::FromVector<float>({1, 2.5f, 3, 3}, {4});
  Stats s;
  s.Add(ref, cand, Tolerance{0.1, 0.1});
  EXPECT_EQ(s.elements, 4);
  EXPECT_EQ(s.finite, 4);
  EXPECT_DOUBLE_EQ(s.max_abs, 1.0);
  EXPECT_DOUBLE_EQ(s.max_rel, 0.25);
  EXPECT_DOUBLE_EQ(s.mean_abs(), 0.375);
  EXPECT_DOUBLE_EQ(s.rmse(), std::sqrt(1.25 / 4));
  // dot 27, |ref|^2 30, |cand|^2 25.25
  EXPECT_NEAR(s.cosine(), 27 / std::sqrt(30 * 25.25), 1e-12);
  // thresholds 0.2 0.3 0.4 0.5 against differences 0 0.5 0 1: two out of tolerance.
  EXPECT_EQ(s.out_of_tolerance, 2);
  EXPECT_DOUBLE_EQ(s.out_share(), 0.5);
  EXPECT_FALSE(s.pass());
  // smallest atol at rtol 0.1: max(d - 0.1|r|) = 1 - 0.4; smallest rtol at atol 0.1: (1-0.1)/4.
  EXPECT_NEAR(s.min_atol, 0.6, 1e-12);
  EXPECT_NEAR(s.min_rtol, 0.225, 1e-12);
  // ... and those tolerances do pass.
  Stats a, r;
  a.Add(ref, cand, Tolerance{0.6 + 1e-9, 0.1});
  r.Add(ref, cand, Tolerance{0.1, 0.225 + 1e-9});
  EXPECT_TRUE(a.pass());
  EXPECT_TRUE(r.pass());
}

TEST(VerifyStats, AccumulatesOverPairs) {
  Stats s;
  double r1[] = {1, 0}, c1[] = {1, 1}, r2[] = {0, 2}, c2[] = {0, 2};
  s.AddDoubles(r1, c1, 2, Tolerance{0, 0});
  s.AddDoubles(r2, c2, 2, Tolerance{0, 0});
  EXPECT_EQ(s.elements, 4);
  EXPECT_EQ(s.out_of_tolerance, 1);
  EXPECT_DOUBLE_EQ(s.mean_abs(), 0.25);
  EXPECT_DOUBLE_EQ(s.rmse(), 0.5);
  EXPECT_DOUBLE_EQ(s.max_rel, 0);  // the only difference is where ref == 0
  EXPECT_EQ(s.min_rtol, kInf);     // ... so no rtol passes it at atol 0
  EXPECT_DOUBLE_EQ(s.min_atol, 1);
  EXPECT_NEAR(s.cosine(), 5 / (std::sqrt(5.0) * std::sqrt(6.0)), 1e-12);
}

TEST(VerifyStats, ErrorBuckets) {
  // Bound atol 0.1 + rtol 0 => q = d / 0.1.
  double r[] = {1, 1, 1, 1, 0, 1, 1, 1, kNaN, kNaN, 1};
  double c[] = {1, 1 + 5e-6, 1 + 5e-5, 1 + 0.05, 0.1, 1.5, 1 + 50, 1 + 1e3, kNaN, 1, kInf};
  Stats s;
  s.AddDoubles(r, c, 11, Tolerance{0.1, 0});
  // q: 0, 5e-5, 5e-4, 0.5, 1 (passes: d == bound), 5, 500, 1e4, NaN=NaN, NaN vs 1, Inf vs 1.
  std::array<int64_t, Stats::kErrorBuckets> want{};
  want[Stats::kExact] = 2;  // 1 == 1 and NaN == NaN
  want[Stats::kUpTo1e4] = 1;
  want[Stats::kUpTo1e3] = 1;
  want[Stats::kUpTo1] = 2;  // 0.5 and exactly 1
  want[Stats::kUpTo10] = 1;
  want[Stats::kOver100] = 2;
  want[Stats::kMismatch] = 2;
  EXPECT_EQ(s.error_buckets, want);
  int64_t failing = 0, all = 0;
  for (int b = 0; b < Stats::kErrorBuckets; ++b) {
    all += s.error_buckets[b];
    if (b >= Stats::kUpTo10) failing += s.error_buckets[b];
  }
  EXPECT_EQ(all, s.elements);
  EXPECT_EQ(failing, s.out_of_tolerance);
  EXPECT_STREQ(kErrorBucketNames[Stats::kUpTo1], "<=1");

  // A zero bound: any difference is infinitely far out; strings are equal or a mismatch.
  Stats z;
  double r0[] = {2, 2}, c0[] = {2, 2.5};
  z.AddDoubles(r0, c0, 2, Tolerance{0, 0});
  EXPECT_EQ(z.error_buckets[Stats::kExact], 1);
  EXPECT_EQ(z.error_buckets[Stats::kOver100], 1);
  Stats t;
  t.Add(Tensor::FromVector<std::string>({"a", "b"}, {2}),
        Tensor::FromVector<std::string>({"a", "c"}, {2}), Tolerance{});
  EXPECT_EQ(t.error_buckets[Stats::kExact], 1);
  EXPECT_EQ(t.error_buckets[Stats::kMismatch], 1);
}

TEST(VerifyStats, NanAndInf) {
  double r[] = {kNaN, 1, kInf, 2, -kInf}, c[] = {kNaN, kNaN, kInf, -kInf, -kInf};
  Stats s;
  s.AddDoubles(r, c, 5, Tolerance{});
  EXPECT_EQ(s.nan_ref, 1);
  EXPECT_EQ(s.nan_cand, 2);
  EXPECT_EQ(s.inf_ref, 2);
  EXPECT_EQ(s.inf_cand, 3);
  EXPECT_EQ(s.out_of_tolerance, 2);  // NaN vs 1 and -inf vs 2; NaN==NaN, inf==inf match
  EXPECT_EQ(s.finite, 0);
  EXPECT_EQ(s.min_atol, kInf);
  EXPECT_EQ(s.min_rtol, kInf);
  EXPECT_DOUBLE_EQ(s.mean_abs(), 0);
}

TEST(VerifyStats, NanInFloatTensors) {
  Tensor ref = Tensor::FromVector<float>({0.f, std::nanf("")}, {2});
  NonFinite nf = CountNonFinite(ref);
  EXPECT_EQ(nf.nan, 1);
  EXPECT_EQ(nf.inf, 0);
  Tensor ints = Tensor::FromVector<int64_t>({1, 2}, {2});
  EXPECT_FALSE(CountNonFinite(ints).any());
}

TEST(VerifyStats, CosineEdgeCases) {
  double z[] = {0, 0}, one[] = {1, 0}, neg[] = {-1, 0};
  Stats both, onlyone, opposite;
  both.AddDoubles(z, z, 2, Tolerance{});
  onlyone.AddDoubles(z, one, 2, Tolerance{});
  opposite.AddDoubles(one, neg, 2, Tolerance{});
  EXPECT_DOUBLE_EQ(both.cosine(), 1);
  EXPECT_DOUBLE_EQ(onlyone.cosine(), 0);
  EXPECT_DOUBLE_EQ(opposite.cosine(), -1);
}

TEST(VerifyStats, MixedDtypesAndStrings) {
  Stats s;
  s.Add(Tensor::FromVector<int64_t>({3, 4}, {2}), Tensor::FromVector<int32_t>({3, 4}, {2}),
        Tolerance{0, 0});
  EXPECT_TRUE(s.pass());
  Tensor h(DType::kFloat16, {2});
  h.data<Float16>()[0] = Float16(1.0f);
  h.data<Float16>()[1] = Float16(0.5f);
  Stats f;
  f.Add(Tensor::FromVector<float>({1.0f, 0.5f}, {2}), h, Tolerance{0, 0});
  EXPECT_TRUE(f.pass());
  Tensor a(DType::kString, {2}), b(DType::kString, {2});
  a.data<std::string>()[0] = b.data<std::string>()[0] = "x";
  a.data<std::string>()[1] = "y";
  b.data<std::string>()[1] = "z";
  Stats st;
  st.Add(a, b, Tolerance{});
  EXPECT_EQ(st.out_of_tolerance, 1);
}

TEST(VerifyStats, Incompatibility) {
  Tensor a(DType::kFloat, {1, 3}), b(DType::kFloat, {1, 4}), s(DType::kString, {1, 3});
  EXPECT_EQ(Incompatibility(a, a), "");
  EXPECT_EQ(Incompatibility(a, b), "shape [1,3] vs [1,4]");
  EXPECT_EQ(Incompatibility(a, s), "dtype float32 vs string");
  EXPECT_EQ(Incompatibility(a, Tensor(DType::kFloat16, {1, 3})), "");
}

TEST(VerifyTopK, OrderTiesAndNan) {
  double row[] = {0.1, 0.5, 0.5, kNaN, 0.3};
  EXPECT_EQ(TopK(row, 5, 3), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(TopK(row, 5, 9).size(), 5u);
  EXPECT_EQ(TopK(row, 5, 9).back(), 3);  // NaN last
}

TEST(VerifyClassifier, AgreementAndLabels) {
  EXPECT_TRUE(IsClassifierOutput(Tensor(DType::kFloat, {2, 3})));
  EXPECT_FALSE(IsClassifierOutput(Tensor(DType::kFloat, {2, 1})));
  EXPECT_FALSE(IsClassifierOutput(Tensor(DType::kInt64, {2, 3})));
  EXPECT_FALSE(IsClassifierOutput(Tensor(DType::kFloat, {2, 3, 4})));
  Tensor ref = Tensor::FromVector<float>({1, 2, 3, 3, 2, 1}, {2, 3});
  Tensor cand = Tensor::FromVector<float>({1, 3, 2, 3, 1, 2}, {2, 3});
  int64_t labels[] = {2, 0};
  ClassifierStats c(2);
  c.Add(ref, cand, labels);
  // row 0: argmax 2 vs 1 (disagree), top-2 {1,2} both (agree);
  // row 1: argmax 0 vs 0 (agree), top-2 {0,1} vs {0,2} (disagree).
  EXPECT_EQ(c.rows, 2);
  EXPECT_DOUBLE_EQ(c.top1(), 0.5);
  EXPECT_DOUBLE_EQ(c.topk(), 0.5);
  EXPECT_DOUBLE_EQ(c.ref_accuracy(), 1.0);
  EXPECT_DOUBLE_EQ(c.cand_accuracy(), 0.5);
  ASSERT_EQ(c.per_class.size(), 2u);
  EXPECT_EQ(c.per_class[2].rows, 1);
  EXPECT_EQ(c.per_class[2].ref_correct, 1);
  EXPECT_EQ(c.per_class[2].cand_correct, 0);
  EXPECT_EQ(c.per_class[0].cand_correct, 1);
}

}  // namespace
}  // namespace ferry::verify
