#include "ops/reference/contrib_common.h"

namespace ferry::ops {

namespace {

Status CheckParamDType(const OpContext& ctx, size_t i, std::string_view what,
                       std::initializer_list<DType> allowed) {
  DType t = ctx.input(i).dtype();
  for (DType a : allowed)
    if (a == t) return Status::Ok();
  std::string list;
  for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(DTypeName(a));
  return NodeUnsupported(ctx, "{} has dtype {}, expected {}", what, DTypeName(t), list);
}

}  // namespace

Status RequireScalarParam(const OpContext& ctx, size_t i, std::string_view what, bool required,
                          std::initializer_list<DType> allowed) {
  if (!ctx.has_input(i)) {
    if (required) return NodeError(ctx, "input {} ({}) is missing", i, what);
    return Status::Ok();
  }
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(CheckParamDType(ctx, i, what, allowed));
  const Tensor& t = ctx.input(i);
  if (t.size() != 1 || t.rank() > 1)
    return NodeError(ctx, "{} has shape {}, expected a scalar or [1]", what,
                     ShapeToString(t.shape()));
  return Status::Ok();
}

Status RequireScalarOrVector(const OpContext& ctx, size_t i, std::string_view what, int64_t n,
                             std::initializer_list<DType> allowed) {
  if (!ctx.has_input(i)) return Status::Ok();
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(CheckParamDType(ctx, i, what, allowed));
  const Tensor& t = ctx.input(i);
  if ((t.size() == 1 && t.rank() <= 1) || (t.rank() == 1 && t.dim(0) == n)) return Status::Ok();
  return NodeError(ctx, "{} has shape {}, expected a scalar, [1] or [{}]", what,
                   ShapeToString(t.shape()), n);
}

float ParamF(const OpContext& ctx, size_t i, int64_t k) {
  if (!ctx.has_input(i)) return 0.f;
  const Tensor& t = ctx.input(i);
  return static_cast<float>(t.GetAsDouble(t.size() == 1 ? 0 : k));
}

int32_t ParamI(const OpContext& ctx, size_t i, int64_t k) {
  if (!ctx.has_input(i)) return 0;
  const Tensor& t = ctx.input(i);
  return static_cast<int32_t>(t.GetAsInt64(t.size() == 1 ? 0 : k));
}

std::vector<double> ReadDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.GetAsDouble(static_cast<int64_t>(i));
  return v;
}

void WriteDoubles(const std::vector<double>& v, Tensor& t) {
  VisitNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
  });
}

void LayerNormRows(std::vector<double>& x, int64_t rows, int64_t len, double eps,
                   const std::vector<double>& gamma, const std::vector<double>* beta,
                   bool simplified, std::vector<double>* means, std::vector<double>* inv_std) {
  for (int64_t r = 0; r < rows; ++r) {
    double* p = x.data() + r * len;
    double mean = 0, sq = 0;
    for (int64_t k = 0; k < len; ++k) mean += p[k];
    mean = simplified || len == 0 ? 0.0 : mean / static_cast<double>(len);
    for (int64_t k = 0; k < len; ++k) sq += (p[k] - mean) * (p[k] - mean);
    double var = len == 0 ? 0.0 : sq / static_cast<double>(len);
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t k = 0; k < len; ++k) {
      double v = (p[k] - mean) * inv * gamma[static_cast<size_t>(k)];
      if (beta) v += (*beta)[static_cast<size_t>(k)];
      p[k] = v;
    }
    if (means) (*means)[static_cast<size_t>(r)] = mean;
    if (inv_std) (*inv_std)[static_cast<size_t>(r)] = inv;
  }
}

void RotateHeads(std::vector<double>& x, int64_t b, int64_t s, int64_t n, int64_t h, bool bnsh,
                 int64_t half, bool interleaved, const std::vector<double>& cosv,
                 const std::vector<double>& sinv,
                 const std::function<int64_t(int64_t, int64_t)>& row) {
  std::vector<double> v(static_cast<size_t>(2 * half));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t si = 0; si < s; ++si) {
      const int64_t r = row(bi, si);
      for (int64_t ni = 0; ni < n; ++ni) {
        double* xp =
            x.data() + (bnsh ? ((bi * n + ni) * s + si) * h : ((bi * s + si) * n + ni) * h);
        std::copy_n(xp, 2 * half, v.begin());
        for (int64_t i = 0; i < half; ++i) {
          const double c = cosv[static_cast<size_t>(r * half + i)],
                       sn = sinv[static_cast<size_t>(r * half + i)];
          const size_t a = static_cast<size_t>(interleaved ? 2 * i : i),
                       q = static_cast<size_t>(interleaved ? 2 * i + 1 : i + half);
          xp[a] = v[a] * c - v[q] * sn;
          xp[q] = v[q] * c + v[a] * sn;
        }
      }
    }
}

}  // namespace ferry::ops
