// Element-wise comparison of a candidate tensor against a reference tensor: the statistics
// `ferry verify` reports per output and per layer, accumulated over any number of tensor pairs
// (one per input set), plus top-k agreement and label accuracy for classifier outputs.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ferry::verify {

// An element passes when |cand - ref| <= atol + rtol * |ref| (numpy's allclose), NaN matches
// NaN, and an infinity matches the same infinity.
struct Tolerance {
  double atol = 1e-4;
  double rtol = 1e-3;
};

// Statistics of one output (or one intermediate tensor) accumulated over tensor pairs.
// Numeric statistics (max/mean abs, RMSE, cosine) cover the elements where both values are
// finite; NaN/Inf are counted per side, and a NaN or Inf that is not matched by the same value on
// the other side is out of tolerance (and makes the minimum passing atol/rtol infinite).
class Stats {
 public:
  // Adds one pair of equal shape. Numeric and bool dtypes (any mix, compared as doubles);
  // strings compare exactly. The caller checks Incompatibility() first.
  void Add(const Tensor& ref, const Tensor& cand, const Tolerance& tol);
  // The same for raw doubles (tests, and callers that already hold doubles).
  void AddDoubles(const double* ref, const double* cand, int64_t n, const Tolerance& tol);

  int64_t elements = 0;          // compared elements
  int64_t finite = 0;            // elements where both sides are finite
  int64_t out_of_tolerance = 0;  // elements failing the tolerance
  int64_t nan_ref = 0, nan_cand = 0, inf_ref = 0, inf_cand = 0;
  double max_abs = 0;
  double max_rel = 0;  // max |cand - ref| / |ref| over elements with ref != 0
  double sum_abs = 0, sum_sq = 0, dot = 0, ref_sq = 0, cand_sq = 0;
  double min_atol = 0;  // smallest atol that passes every element at the given rtol
  double min_rtol = 0;  // smallest rtol that passes every element at the given atol
  // How much of its tolerance each element used: q = |cand - ref| / (atol + rtol * |ref|), in
  // decade buckets (kErrorBucketNames). Every compared element lands in exactly one bucket, so
  // the buckets sum to `elements`; the buckets above q = 1 plus kMismatch sum to
  // `out_of_tolerance`. Equal values (q = 0, matching NaN/Inf, equal strings) are kExact; a
  // nonzero error against a zero bound counts as q = infinity (kOver100).
  enum ErrorBucket {
    kExact,
    kUpTo1e4,  // 0 < q <= 1e-4
    kUpTo1e3,  // 1e-4 < q <= 1e-3
    kUpTo1e2,  // ...
    kUpTo1e1,
    kUpTo1,   // 0.1 < q <= 1: the last passing bucket
    kUpTo10,  // 1 < q <= 10: out of tolerance
    kUpTo100,
    kOver100,
    kMismatch,  // NaN/Inf not matched by the same value, or unequal strings
    kErrorBuckets
  };
  std::array<int64_t, kErrorBuckets> error_buckets{};

  bool pass() const { return out_of_tolerance == 0; }
  double mean_abs() const;
  double rmse() const;
  // dot / (|ref| |cand|) over finite elements; 1 when both are all zero, 0 when only one is.
  double cosine() const;
  double out_share() const;  // out_of_tolerance / elements (0 for no elements)
};

// Labels of Stats::ErrorBucket, in order: "0", "<=1e-4", ..., ">100", "NaN/Inf".
extern const std::array<const char*, Stats::kErrorBuckets> kErrorBucketNames;

// "" when ref and cand can be compared element-wise, else why not ("shape [1,3] vs [1,4]",
// "dtype string vs float32").
std::string Incompatibility(const Tensor& ref, const Tensor& cand);

// Classifier outputs: rank-2 [N, C] float tensors with C > 1.
bool IsClassifierOutput(const Tensor& t);

// Indices of the k largest values of row (ties: lower index first; NaN ranks lowest).
std::vector<int64_t> TopK(const double* row, int64_t classes, int64_t k);
// Per row of a classifier output (IsClassifierOutput): its k best (class, score), TopK's order.
std::vector<std::vector<std::pair<int64_t, double>>> TopClasses(const Tensor& t, int64_t k);

// Top-1 / top-k agreement of a candidate classifier output with the reference, and with labels
// the accuracy of each side overall and per class.
class ClassifierStats {
 public:
  explicit ClassifierStats(int64_t k = 5) : k_(k) {}
  // Adds the N rows of [N, C] `ref`/`cand`; `labels` (may be null) holds N class ids.
  void Add(const Tensor& ref, const Tensor& cand, const int64_t* labels);

  struct PerClass {
    int64_t rows = 0, ref_correct = 0, cand_correct = 0;
  };
  // k as requested, capped at the number of classes once rows were added.
  int64_t k() const { return classes > 0 && classes < k_ ? classes : k_; }
  int64_t classes = 0;
  int64_t rows = 0;
  int64_t top1_agree = 0;  // rows whose argmax is the same
  int64_t topk_agree = 0;  // rows whose top-k index sets are equal (order ignored)
  int64_t labeled = 0, ref_correct = 0, cand_correct = 0;
  std::map<int64_t, PerClass> per_class;  // by label

  double top1() const { return rows ? static_cast<double>(top1_agree) / rows : 0; }
  double topk() const { return rows ? static_cast<double>(topk_agree) / rows : 0; }
  double ref_accuracy() const { return labeled ? static_cast<double>(ref_correct) / labeled : 0; }
  double cand_accuracy() const { return labeled ? static_cast<double>(cand_correct) / labeled : 0; }

 private:
  int64_t k_;
};

// A value's kind and size for messages: "float32[1,10]", "map of 3", "sequence of 2 maps",
// "sequence of 4", "none".
std::string ValueSummary(const Value& v);

// NaN and Inf counts of a tensor (0 for non-float dtypes).
struct NonFinite {
  int64_t nan = 0, inf = 0;
  bool any() const { return nan || inf; }
};
NonFinite CountNonFinite(const Tensor& t);

// An output against its expected value as the ONNX backend test runner compares them
// (`ferry run --test-data`): same kind, dtype and shape; floats within atol + rtol * |want|
// (NaN matches NaN, infinities must be equal), other types exactly; a bfloat16 output is
// compared bit for bit with expected uint16 bits (numpy has no bfloat16).
struct ExpectedComparison {
  bool ok = true;
  double max_abs = 0, max_rel = 0;
  int64_t mismatches = 0;
  std::string problem;  // kind/dtype/shape mismatch
};
ExpectedComparison CompareExpected(const Value& got, const Value& want, double rtol, double atol);

}  // namespace ferry::verify
