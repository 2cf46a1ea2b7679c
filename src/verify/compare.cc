#include "verify/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ir/value_files.h"

namespace ferry::verify {

namespace {

constexpr int64_t kChunk = 4096;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Converts elements [begin, begin + n) of a numeric or bool tensor to doubles.
void ToDoubles(const Tensor& t, int64_t begin, int64_t n, double* out) {
  VisitPod(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(t.raw()) + begin;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(static_cast<ComputeType<T>>(p[i]));
  });
}

bool IsPod(DType t) {
  return t != DType::kString && t != DType::kUndefined;
}

// The bucket of a finite element with error d against its bound (atol + rtol * |ref|): by
// q = d / bound against the decades 1e-4 ... 100, clamped to the passing buckets when d <= bound
// and to the failing ones when d > bound (so rounding of q near 1 never disagrees with the
// verdict).
Stats::ErrorBucket BucketOf(double d, double bound) {
  const bool out = d > bound;
  if (!out && d == 0) return Stats::kExact;
  if (!(bound > 0)) return out ? Stats::kOver100 : Stats::kExact;
  static constexpr double kEdges[] = {1e-4, 1e-3, 1e-2, 1e-1, 1, 10, 100};
  const double q = d / bound;
  int b = Stats::kUpTo1e4;
  for (double edge : kEdges)
    if (q > edge) ++b;
  b = out ? std::max<int>(b, Stats::kUpTo10) : std::min<int>(b, Stats::kUpTo1);
  return static_cast<Stats::ErrorBucket>(b);
}

}  // namespace

const std::array<const char*, Stats::kErrorBuckets> kErrorBucketNames = {
    "0", "<=1e-4", "<=1e-3", "<=0.01", "<=0.1", "<=1", "<=10", "<=100", ">100", "NaN/Inf"};

void Stats::AddDoubles(const double* ref, const double* cand, int64_t n, const Tolerance& tol) {
  for (int64_t i = 0; i < n; ++i) {
    double r = ref[i], c = cand[i];
    ++elements;
    bool rn = std::isnan(r), cn = std::isnan(c), ri = std::isinf(r), ci = std::isinf(c);
    nan_ref += rn;
    nan_cand += cn;
    inf_ref += ri;
    inf_cand += ci;
    if (rn || cn || ri || ci) {
      bool same = (rn && cn) || (ri && ci && r == c);
      if (!same) {
        ++out_of_tolerance;
        min_atol = min_rtol = kInf;
      }
      ++error_buckets[same ? kExact : kMismatch];
      continue;
    }
    ++finite;
    double d = std::fabs(c - r), ar = std::fabs(r);
    max_abs = std::max(max_abs, d);
    if (r != 0) max_rel = std::max(max_rel, d / ar);
    sum_abs += d;
    sum_sq += d * d;
    dot += r * c;
    ref_sq += r * r;
    cand_sq += c * c;
    const double bound = tol.atol + tol.rtol * ar;
    if (d > bound) ++out_of_tolerance;
    ++error_buckets[BucketOf(d, bound)];
    min_atol = std::max(min_atol, d - tol.rtol * ar);
    if (d > tol.atol) min_rtol = std::max(min_rtol, ar > 0 ? (d - tol.atol) / ar : kInf);
  }
}

void Stats::Add(const Tensor& ref, const Tensor& cand, const Tolerance& tol) {
  int64_t n = std::min(ref.size(), cand.size());
  if (ref.dtype() == DType::kString || cand.dtype() == DType::kString) {
    if (ref.dtype() != cand.dtype()) return;
    for (int64_t i = 0; i < n; ++i) {
      ++elements;
      const bool same = ref.data<std::string>()[i] == cand.data<std::string>()[i];
      ++error_buckets[same ? kExact : kMismatch];
      if (!same) {
        ++out_of_tolerance;
        min_atol = min_rtol = kInf;
      }
    }
    return;
  }
  if (!IsPod(ref.dtype()) || !IsPod(cand.dtype())) return;
  double r[kChunk], c[kChunk];
  for (int64_t b = 0; b < n; b += kChunk) {
    int64_t m = std::min(kChunk, n - b);
    ToDoubles(ref, b, m, r);
    ToDoubles(cand, b, m, c);
    AddDoubles(r, c, m, tol);
  }
}

double Stats::mean_abs() const {
  return finite ? sum_abs / static_cast<double>(finite) : 0;
}
double Stats::rmse() const {
  return finite ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0;
}
double Stats::cosine() const {
  if (ref_sq == 0 && cand_sq == 0) return 1;
  if (ref_sq == 0 || cand_sq == 0) return 0;
  return dot / (std::sqrt(ref_sq) * std::sqrt(cand_sq));
}
double Stats::out_share() const {
  return elements ? static_cast<double>(out_of_tolerance) / static_cast<double>(elements) : 0;
}

std::string Incompatibility(const Tensor& ref, const Tensor& cand) {
  bool rs = ref.dtype() == DType::kString, cs = cand.dtype() == DType::kString;
  if (rs != cs || (!IsPod(ref.dtype()) && !rs) || (!IsPod(cand.dtype()) && !cs))
    return fmt::format("dtype {} vs {}", DTypeName(ref.dtype()), DTypeName(cand.dtype()));
  if (ref.shape() != cand.shape())
    return fmt::format("shape {} vs {}", ShapeToString(ref.shape()), ShapeToString(cand.shape()));
  return "";
}

bool IsClassifierOutput(const Tensor& t) {
  return IsFloat(t.dtype()) && t.rank() == 2 && t.dim(1) > 1;
}

std::vector<int64_t> TopK(const double* row, int64_t classes, int64_t k) {
  k = std::clamp<int64_t>(k, 0, classes);
  std::vector<int64_t> idx(static_cast<size_t>(classes));
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [&](int64_t a, int64_t b) {
    double x = row[a], y = row[b];
    bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn != yn) return yn;  // NaN ranks lowest
    if (!xn && x != y) return x > y;
    return a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
  idx.resize(static_cast<size_t>(k));
  return idx;
}

std::vector<std::vector<std::pair<int64_t, double>>> TopClasses(const Tensor& t, int64_t k) {
  const int64_t n = t.dim(0), classes = t.dim(1);
  std::vector<std::vector<std::pair<int64_t, double>>> out(static_cast<size_t>(n));
  std::vector<double> row(static_cast<size_t>(classes));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < classes; ++c) row[c] = t.GetAsDouble(r * classes + c);
    for (int64_t c : TopK(row.data(), classes, k)) out[r].emplace_back(c, row[c]);
  }
  return out;
}

void ClassifierStats::Add(const Tensor& ref, const Tensor& cand, const int64_t* labels) {
  if (!IsClassifierOutput(ref) || ref.shape() != cand.shape()) return;
  int64_t n = ref.dim(0), classes = ref.dim(1);
  this->classes = classes;
  std::vector<double> r(static_cast<size_t>(classes)), c(static_cast<size_t>(classes));
  for (int64_t i = 0; i < n; ++i) {
    ToDoubles(ref, i * classes, classes, r.data());
    ToDoubles(cand, i * classes, classes, c.data());
    int64_t k = std::max<int64_t>(k_, 1);
    std::vector<int64_t> tr = TopK(r.data(), classes, k), tc = TopK(c.data(), classes, k);
    ++rows;
    top1_agree += tr[0] == tc[0];
    std::sort(tr.begin(), tr.end());
    std::sort(tc.begin(), tc.end());
    topk_agree += tr == tc;
    if (labels) {
      int64_t label = labels[i];
      int64_t ra = TopK(r.data(), classes, 1)[0], ca = TopK(c.data(), classes, 1)[0];
      ++labeled;
      PerClass& pc = per_class[label];
      ++pc.rows;
      if (ra == label) ++ref_correct, ++pc.ref_correct;
      if (ca == label) ++cand_correct, ++pc.cand_correct;
    }
  }
}

NonFinite CountNonFinite(const Tensor& t) {
  NonFinite nf;
  if (!IsFloat(t.dtype())) return nf;
  VisitNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(t.raw());
    for (int64_t i = 0; i < t.size(); ++i) {
      auto v = static_cast<ComputeType<T>>(p[i]);
      if constexpr (std::is_floating_point_v<decltype(v)>) {
        nf.nan += std::isnan(v);
        nf.inf += std::isinf(v);
      }
    }
  });
  return nf;
}

std::string ValueSummary(const Value& v) {
  if (v.is_tensor())
    return fmt::format("{}{}", DTypeName(v.tensor().dtype()), ShapeToString(v.tensor().shape()));
  if (v.is_map()) return fmt::format("map of {}", v.tensor().size());
  if (v.is_map_sequence()) return fmt::format("sequence of {} maps", v.sequence().size());
  if (v.is_sequence()) return fmt::format("sequence of {}", v.sequence().size());
  return "none";
}

namespace {

void CompareExpectedTensors(const Tensor& got_in, const Tensor& want, double rtol, double atol,
                            ExpectedComparison* c) {
  Tensor got = got_in;
  if (got.dtype() == DType::kBFloat16 && want.dtype() == DType::kUint16) {
    // Expected bfloat16 values stored as their uint16 bits (numpy has no bfloat16): compare bits.
    got = Tensor(DType::kUint16, got_in.shape());
    ir::CopyBits(got_in, &got);
  }
  if (got.dtype() != want.dtype()) {
    c->ok = false;
    c->problem =
        fmt::format("dtype {} vs expected {}", DTypeName(got.dtype()), DTypeName(want.dtype()));
    return;
  }
  if (got.shape() != want.shape()) {
    c->ok = false;
    c->problem = fmt::format("shape {} vs expected {}", ShapeToString(got.shape()),
                             ShapeToString(want.shape()));
    return;
  }
  if (got.dtype() == DType::kString) {
    for (int64_t i = 0; i < got.size(); ++i)
      if (got.data<std::string>()[i] != want.data<std::string>()[i]) ++c->mismatches;
  } else if (IsFloat(got.dtype())) {
    for (int64_t i = 0; i < got.size(); ++i) {
      double a = got.GetAsDouble(i), e = want.GetAsDouble(i);
      if (std::isnan(a) || std::isnan(e)) {
        if (std::isnan(a) != std::isnan(e)) ++c->mismatches;
        continue;
      }
      if (std::isinf(a) || std::isinf(e)) {
        if (a != e) ++c->mismatches;
        continue;
      }
      double d = std::fabs(a - e);
      c->max_abs = std::max(c->max_abs, d);
      if (e != 0) c->max_rel = std::max(c->max_rel, d / std::fabs(e));
      if (d > atol + rtol * std::fabs(e)) ++c->mismatches;
    }
  } else {
    for (int64_t i = 0; i < got.size(); ++i) {
      int64_t a = got.GetAsInt64(i), e = want.GetAsInt64(i);
      if (got.dtype() == DType::kUint64) {
        if (static_cast<const uint64_t*>(got.raw())[i] !=
            static_cast<const uint64_t*>(want.raw())[i])
          ++c->mismatches;
        continue;
      }
      double d = std::fabs(static_cast<double>(a) - static_cast<double>(e));
      c->max_abs = std::max(c->max_abs, d);
      if (a != e) ++c->mismatches;
    }
  }
  if (c->mismatches) c->ok = false;
}

}  // namespace

ExpectedComparison CompareExpected(const Value& got, const Value& want, double rtol, double atol) {
  ExpectedComparison c;
  if (got.kind() != want.kind()) {
    c.ok = false;
    c.problem = fmt::format("{} vs expected {}", ValueSummary(got), ValueSummary(want));
    return c;
  }
  if (got.is_tensor()) CompareExpectedTensors(got.tensor(), want.tensor(), rtol, atol, &c);
  if (got.is_sequence()) {
    if (got.sequence().size() != want.sequence().size()) {
      c.ok = false;
      c.problem = fmt::format("sequence of {} vs expected {}", got.sequence().size(),
                              want.sequence().size());
      return c;
    }
    for (size_t i = 0; i < got.sequence().size() && c.ok; ++i)
      CompareExpectedTensors(got.sequence()[i], want.sequence()[i], rtol, atol, &c);
  }
  return c;
}

}  // namespace ferry::verify
