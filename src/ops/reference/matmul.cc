// Reference kernels: MatMul, Gemm, Einsum, Det.
//
// Float types accumulate in double and round once on store; integer types accumulate in
// uint64 (two's complement wrap-around, as numpy does for fixed-width integers).
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

// ---- accumulation helpers ----
template <typename T>
using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

template <typename T>
Acc<T> ToAcc(T v) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<uint64_t>(v);
  else
    return static_cast<double>(static_cast<ComputeType<T>>(v));
}

template <typename T>
T FromAcc(Acc<T> v) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(v);
  else
    return static_cast<T>(static_cast<ComputeType<T>>(v));
}

constexpr std::initializer_list<DType> kMatMulTypes = {
    DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16,
    DType::kInt32, DType::kInt64,  DType::kUint32,  DType::kUint64};

Status RequireSameDType(const OpContext& ctx, size_t i, size_t j) {
  if (ctx.input(i).dtype() != ctx.input(j).dtype())
    return NodeError(ctx, "input {} has dtype {} but input {} has dtype {}", j,
                     DTypeName(ctx.input(j).dtype()), i, DTypeName(ctx.input(i).dtype()));
  return Status::Ok();
}

// ---- MatMul (numpy matmul semantics) ----
struct MatMulDims {
  Shape a_batch, b_batch, batch, out;
  int64_t m = 1, k = 1, n = 1;
};

Result<MatMulDims> GetMatMulDims(const OpContext& ctx) {
  const Shape& a = ctx.input(0).shape();
  const Shape& b = ctx.input(1).shape();
  if (a.empty() || b.empty())
    return NodeError(ctx, "inputs must have rank >= 1, got shapes {} and {}", ShapeToString(a),
                     ShapeToString(b));
  MatMulDims d;
  int64_t ka, kb;
  if (a.size() == 1) {
    ka = a[0];
  } else {
    d.m = a[a.size() - 2];
    ka = a.back();
    d.a_batch.assign(a.begin(), a.end() - 2);
  }
  if (b.size() == 1) {
    kb = b[0];
  } else {
    kb = b[b.size() - 2];
    d.n = b.back();
    d.b_batch.assign(b.begin(), b.end() - 2);
  }
  if (ka != kb)
    return NodeError(ctx, "inner dimensions differ: A {} has {}, B {} has {}", ShapeToString(a), ka,
                     ShapeToString(b), kb);
  d.k = ka;
  FERRY_ASSIGN_OR_RETURN(d.batch, BroadcastShapes(ctx, {d.a_batch, d.b_batch}));
  d.out = d.batch;
  if (a.size() > 1) d.out.push_back(d.m);
  if (b.size() > 1) d.out.push_back(d.n);
  return d;
}

Status PrepareMatMul(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "A"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "B"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kMatMulTypes));
  FERRY_RETURN_IF_ERROR(RequireSameDType(ctx, 0, 1));
  FERRY_ASSIGN_OR_RETURN(MatMulDims d, GetMatMulDims(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), d.out);
  return Status::Ok();
}

template <typename T>
void MatMulTyped(OpContext& ctx, const MatMulDims& d) {
  const T* a = ctx.input(0).data<T>();
  const T* b = ctx.input(1).data<T>();
  T* y = ctx.output(0).data<T>();
  BroadcastIndexer a_idx(d.a_batch, d.batch), b_idx(d.b_batch, d.batch);
  int64_t m = d.m, k = d.k, n = d.n;
  int64_t batches = NumElements(d.batch);
  ParallelFor(ctx, batches * m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t bt = row / m, i = row % m;
      const T* ap = a + a_idx(bt) * m * k + i * k;
      const T* bp = b + b_idx(bt) * k * n;
      T* yp = y + bt * m * n + i * n;
      for (int64_t j = 0; j < n; ++j) {
        Acc<T> acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += ToAcc(ap[p]) * ToAcc(bp[p * n + j]);
        yp[j] = FromAcc<T>(acc);
      }
    }
  });
}

void RunMatMul(OpContext& ctx) {
  MatMulDims d = GetMatMulDims(ctx).value();
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    MatMulTyped<T>(ctx, d);
  });
}

// ---- Gemm: Y = alpha * A' * B' + beta * C ----
struct GemmDims {
  int64_t m, k, n;
};

GemmDims GetGemmDims(const OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  return {ta ? a.dim(1) : a.dim(0), ta ? a.dim(0) : a.dim(1), tb ? b.dim(0) : b.dim(1)};
}

bool IsIntegral(float v) {
  return std::isfinite(v) && std::nearbyint(v) == v;
}

Status PrepareGemm(OpContext& ctx) {
  size_t min_inputs = ctx.opset() >= 11 ? 2 : 3;
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, min_inputs, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "A"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "B"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kMatMulTypes));
  FERRY_RETURN_IF_ERROR(RequireSameDType(ctx, 0, 1));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2)
    return NodeError(ctx, "A and B must be 2-D, got shapes {} and {}", ShapeToString(a.shape()),
                     ShapeToString(b.shape()));
  bool tb = ctx.attr_int("transB", 0) != 0;
  GemmDims d = GetGemmDims(ctx);
  int64_t kb = tb ? b.dim(1) : b.dim(0);
  if (d.k != kb)
    return NodeError(ctx, "inner dimensions differ: A' is {}x{}, B' is {}x{}", d.m, d.k, kb, d.n);
  Shape out{d.m, d.n};
  if (ctx.has_input(2)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "C"));
    FERRY_RETURN_IF_ERROR(RequireSameDType(ctx, 0, 2));
    const Shape& c = ctx.input(2).shape();
    bool broadcast = ctx.opset() >= 7 || ctx.attr_int("broadcast", 0) != 0;
    bool ok = c.size() <= 2;
    for (size_t i = 0; ok && i < c.size(); ++i) {
      int64_t want = out[2 - c.size() + i];
      ok = c[i] == want || (broadcast && c[i] == 1);
    }
    if (!ok || (!broadcast && c.size() != 2))
      return NodeError(ctx, "C has shape {}, which does not {} to the output shape {}",
                       ShapeToString(c), broadcast ? "broadcast" : "match (broadcast=0)",
                       ShapeToString(out));
  }
  if (IsInteger(a.dtype()) &&
      (!IsIntegral(ctx.attr_float("alpha", 1.f)) || !IsIntegral(ctx.attr_float("beta", 1.f))))
    return NodeUnsupported(ctx, "non-integral alpha {} / beta {} with integer dtype {}",
                           ctx.attr_float("alpha", 1.f), ctx.attr_float("beta", 1.f),
                           DTypeName(a.dtype()));
  ctx.set_output(0, a.dtype(), out);
  return Status::Ok();
}

template <typename T>
void GemmTyped(OpContext& ctx) {
  GemmDims d = GetGemmDims(ctx);
  bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  float alpha_f = ctx.attr_float("alpha", 1.f), beta_f = ctx.attr_float("beta", 1.f);
  Acc<T> alpha, beta;
  if constexpr (std::is_integral_v<T>) {
    alpha = static_cast<uint64_t>(static_cast<int64_t>(alpha_f));
    beta = static_cast<uint64_t>(static_cast<int64_t>(beta_f));
  } else {
    alpha = alpha_f;
    beta = beta_f;
  }
  const T* a = ctx.input(0).data<T>();
  const T* b = ctx.input(1).data<T>();
  const T* c = ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr;
  Shape out{d.m, d.n};
  BroadcastIndexer c_idx(c ? ctx.input(2).shape() : Shape{}, out);
  T* y = ctx.output(0).data<T>();
  int64_t m = d.m, k = d.k, n = d.n;
  ParallelFor(ctx, m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < n; ++j) {
        Acc<T> acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          T av = ta ? a[p * m + i] : a[i * k + p];
          T bv = tb ? b[j * k + p] : b[p * n + j];
          acc += ToAcc(av) * ToAcc(bv);
        }
        acc *= alpha;
        if (c) acc += beta * ToAcc(c[c_idx(i * n + j)]);
        y[i * n + j] = FromAcc<T>(acc);
      }
  });
}

void RunGemm(OpContext& ctx) {
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    GemmTyped<T>(ctx);
  });
}

// ---- Einsum ----
// Labels are the letters' character codes; the broadcast dimensions an ellipsis stands for get
// labels kEllipsisBase + j (j-th of the E right-aligned ellipsis dims).
constexpr int kEllipsisBase = 128;
constexpr int kEllipsisMark = -1;

struct EinsumPlan {
  std::vector<int> out_labels, sum_labels;
  std::vector<int64_t> label_dim;                // by label
  std::vector<std::vector<int64_t>> in_strides;  // by input, by label (0 if unused/broadcast)
  Shape out_shape;
};

// Splits one term ("ab...c") into labels; kEllipsisMark for "...".
Result<std::vector<int>> ParseEinsumTerm(const OpContext& ctx, const std::string& term) {
  std::vector<int> labels;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    char ch = term[i];
    if (std::isalpha(static_cast<unsigned char>(ch))) {
      labels.push_back(static_cast<int>(ch));
    } else if (ch == '.' && term.compare(i, 3, "...") == 0 && !seen_ellipsis) {
      labels.push_back(kEllipsisMark);
      seen_ellipsis = true;
      i += 2;
    } else {
      return NodeError(ctx, "equation term '{}' has an unexpected '{}' at position {}", term, ch,
                       i);
    }
  }
  return labels;
}

Result<EinsumPlan> PlanEinsum(const OpContext& ctx) {
  std::string eq;
  for (char ch : ctx.attr_string("equation", "")) {
    if (!std::isspace(static_cast<unsigned char>(ch))) eq.push_back(ch);
  }
  std::string lhs = eq, rhs;
  bool explicit_out = false;
  if (size_t arrow = eq.find("->"); arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
    explicit_out = true;
  }
  std::vector<std::string> terms;
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    terms.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ctx.num_inputs())
    return NodeError(ctx, "equation '{}' has {} input terms but the node has {} inputs", eq,
                     terms.size(), ctx.num_inputs());
  // Parse inputs and find the ellipsis rank E.
  std::vector<std::vector<int>> in_terms;
  std::vector<int64_t> ell_rank(terms.size(), 0);
  int64_t e_rank = 0;
  for (size_t t = 0; t < terms.size(); ++t) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int> labels, ParseEinsumTerm(ctx, terms[t]));
    int64_t letters = 0;
    bool has_ell = false;
    for (int l : labels) {
      if (l == kEllipsisMark)
        has_ell = true;
      else
        ++letters;
    }
    int64_t rank = ctx.input(t).rank();
    if (has_ell ? rank < letters : rank != letters)
      return NodeError(ctx, "term '{}' does not match input {} of shape {}", terms[t], t,
                       ShapeToString(ctx.input(t).shape()));
    ell_rank[t] = rank - letters;
    e_rank = std::max(e_rank, ell_rank[t]);
    in_terms.push_back(std::move(labels));
  }
  EinsumPlan p;
  size_t num_labels = static_cast<size_t>(kEllipsisBase + e_rank);
  p.label_dim.assign(num_labels, -1);
  std::vector<int> count(num_labels, 0);
  p.in_strides.assign(terms.size(), std::vector<int64_t>(num_labels, 0));
  for (size_t t = 0; t < terms.size(); ++t) {
    const Shape& shape = ctx.input(t).shape();
    std::vector<int64_t> strides = Strides(shape);
    size_t axis = 0;
    for (int l : in_terms[t]) {
      std::vector<int> expanded;
      if (l == kEllipsisMark) {
        for (int64_t j = 0; j < ell_rank[t]; ++j)
          expanded.push_back(kEllipsisBase + static_cast<int>(e_rank - ell_rank[t] + j));
      } else {
        expanded.push_back(l);
      }
      for (int lab : expanded) {
        size_t li = static_cast<size_t>(lab);
        int64_t dim = shape[axis];
        int64_t& known = p.label_dim[li];
        bool ellipsis_label = lab >= kEllipsisBase;
        if (known < 0 || known == 1) {  // size-1 dims broadcast, as in numpy
          known = dim;
        } else if (dim != known && dim != 1) {
          return NodeError(
              ctx, "label '{}' has size {} in input {} but size {} elsewhere",
              ellipsis_label ? std::string("...") : std::string(1, static_cast<char>(lab)), dim, t,
              known);
        }
        if (dim != 1) p.in_strides[t][li] += strides[axis];
        ++count[li];
        ++axis;
      }
    }
  }
  // Output labels.
  std::vector<bool> in_out(num_labels, false);
  if (explicit_out) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int> labels, ParseEinsumTerm(ctx, rhs));
    for (int l : labels) {
      if (l == kEllipsisMark) {
        for (int64_t j = 0; j < e_rank; ++j)
          p.out_labels.push_back(kEllipsisBase + static_cast<int>(j));
        continue;
      }
      size_t li = static_cast<size_t>(l);
      if (count[li] == 0)
        return NodeError(ctx, "output label '{}' does not appear in the inputs of '{}'",
                         static_cast<char>(l), eq);
      if (in_out[li])
        return NodeError(ctx, "output label '{}' is repeated in '{}'", static_cast<char>(l), eq);
      in_out[li] = true;
      p.out_labels.push_back(l);
    }
    // Like numpy: dimensions an ellipsis stands for are never summed away implicitly.
    bool out_ellipsis = std::find(labels.begin(), labels.end(), kEllipsisMark) != labels.end();
    if (e_rank > 0 && !out_ellipsis)
      return NodeError(ctx, "output of '{}' has no '...' for the {} broadcast dims of the inputs",
                       eq, e_rank);
  } else {
    for (int64_t j = 0; j < e_rank; ++j)
      p.out_labels.push_back(kEllipsisBase + static_cast<int>(j));
    for (int l = 0; l < kEllipsisBase; ++l)
      if (count[static_cast<size_t>(l)] == 1) p.out_labels.push_back(l);
  }
  for (int l : p.out_labels) in_out[static_cast<size_t>(l)] = true;
  for (size_t l = 0; l < num_labels; ++l)
    if (count[l] > 0 && !in_out[l]) p.sum_labels.push_back(static_cast<int>(l));
  for (int l : p.out_labels) p.out_shape.push_back(p.label_dim[static_cast<size_t>(l)]);
  return p;
}

constexpr std::initializer_list<DType> kEinsumTypes = {
    DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16,
    DType::kInt8,  DType::kInt16,  DType::kInt32,   DType::kInt64,
    DType::kUint8, DType::kUint16, DType::kUint32,  DType::kUint64};

Status PrepareEinsum(OpContext& ctx) {
  if (ctx.num_inputs() < 1) return NodeError(ctx, "needs at least one input");
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "Inputs"));
    if (i == 0)
      FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kEinsumTypes));
    else
      FERRY_RETURN_IF_ERROR(RequireSameDType(ctx, 0, i));
  }
  if (!ctx.has_attr("equation")) return NodeError(ctx, "attribute equation is missing");
  FERRY_ASSIGN_OR_RETURN(EinsumPlan p, PlanEinsum(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), p.out_shape);
  return Status::Ok();
}

// Advances a mixed-radix counter over `labels`; returns false after the last combination.
bool NextIndex(const std::vector<int>& labels, const std::vector<int64_t>& dims,
               std::vector<int64_t>* idx) {
  for (size_t r = labels.size(); r-- > 0;) {
    size_t l = static_cast<size_t>(labels[r]);
    if (++(*idx)[l] < dims[l]) return true;
    (*idx)[l] = 0;
  }
  return false;
}

template <typename T>
void EinsumTyped(OpContext& ctx, const EinsumPlan& p) {
  size_t n_in = ctx.num_inputs();
  std::vector<const T*> in(n_in);
  for (size_t i = 0; i < n_in; ++i) in[i] = ctx.input(i).data<T>();
  T* y = ctx.output(0).data<T>();
  int64_t out_size = NumElements(p.out_shape);
  if (out_size == 0) return;
  bool empty_sum = false;
  for (int l : p.sum_labels) empty_sum = empty_sum || p.label_dim[static_cast<size_t>(l)] == 0;
  std::vector<int64_t> idx(p.label_dim.size(), 0);
  auto offset = [&](size_t i) {
    int64_t off = 0;
    for (size_t l = 0; l < idx.size(); ++l) off += idx[l] * p.in_strides[i][l];
    return off;
  };
  for (int64_t o = 0; o < out_size; ++o) {
    Acc<T> acc = 0;
    for (int l : p.sum_labels) idx[static_cast<size_t>(l)] = 0;
    if (!empty_sum) {
      do {
        Acc<T> prod = 1;
        for (size_t i = 0; i < n_in; ++i) prod *= ToAcc(in[i][offset(i)]);
        acc += prod;
      } while (NextIndex(p.sum_labels, p.label_dim, &idx));
    }
    y[o] = FromAcc<T>(acc);
    NextIndex(p.out_labels, p.label_dim, &idx);
  }
}

void RunEinsum(OpContext& ctx) {
  EinsumPlan p = PlanEinsum(ctx).value();
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    EinsumTyped<T>(ctx, p);
  });
}

// ---- Det: LU decomposition with partial pivoting, per trailing M x M matrix ----
Status PrepareDet(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  const Shape& s = ctx.input(0).shape();
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
    return NodeError(ctx, "X has shape {}, expected [*, M, M]", ShapeToString(s));
  ctx.set_output(0, ctx.input(0).dtype(), Shape(s.begin(), s.end() - 2));
  return Status::Ok();
}

template <typename T>
void DetTyped(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t m = x.dim(x.rank() - 1);
  int64_t count = ctx.output(0).size();
  const T* src = x.data<T>();
  T* y = ctx.output(0).data<T>();
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[static_cast<size_t>(i)] = ToAcc(src[b * m * m + i]);
    auto at = [&](int64_t r, int64_t c) -> double& { return a[static_cast<size_t>(r * m + c)]; };
    double det = 1;
    for (int64_t col = 0; col < m && det != 0; ++col) {
      int64_t piv = col;
      for (int64_t r = col + 1; r < m; ++r)
        if (std::fabs(at(r, col)) > std::fabs(at(piv, col))) piv = r;
      if (at(piv, col) == 0) {
        det = 0;
        break;
      }
      if (piv != col) {
        for (int64_t c = 0; c < m; ++c) std::swap(at(piv, c), at(col, c));
        det = -det;
      }
      det *= at(col, col);
      for (int64_t r = col + 1; r < m; ++r) {
        double f = at(r, col) / at(col, col);
        for (int64_t c = col; c < m; ++c) at(r, c) -= f * at(col, c);
      }
    }
    y[b] = FromAcc<T>(det);
  }
}

void RunDet(OpContext& ctx) {
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_integral_v<T>) DetTyped<T>(ctx);
  });
}

constexpr OpDef kOps[] = {
    {"", "MatMul", 1, nullptr, PrepareMatMul, RunMatMul},
    {"", "Gemm", 1, nullptr, PrepareGemm, RunGemm},
    {"", "Einsum", 12, nullptr, PrepareEinsum, RunEinsum},
    {"", "Det", 11, nullptr, PrepareDet, RunDet},
};

}  // namespace

std::span<const OpDef> MatMulOps() {
  return kOps;
}

}  // namespace ferry::ops
