// Reference kernels: Reduce* (axes as attribute, or as input from opset 13 for ReduceSum and
// from opset 18 for the others), ArgMax/ArgMin and CumSum.
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsHalf<T>;
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Wrapping (modular, like numpy with dtype=T) integer arithmetic happens in this unsigned type.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

// Float to integer as numpy's astype for representable values (truncation); NaN maps to 0 and
// out-of-range values saturate instead of being undefined.
template <typename T>
T FloatToInt(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
    return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// ---- Reduce* ----
enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// The opset from which `axes` is an input (and noop_with_empty_axes exists).
constexpr int64_t AxesInputOpset(Red r) {
  return r == Red::kSum ? 13 : 18;
}

struct ReducePlan {
  std::vector<bool> reduced;  // per input dim
  Shape out_shape;
};

Result<ReducePlan> MakeReducePlan(const OpContext& ctx, Red r) {
  const Tensor& x = ctx.input(0);
  int64_t rank = x.rank();
  std::vector<int64_t> axes;
  bool noop = false;
  if (ctx.opset() >= AxesInputOpset(r)) {
    if (ctx.has_input(1)) {
      if (!ctx.input_is_tensor(1) || ctx.input(1).dtype() != DType::kInt64 ||
          ctx.input(1).rank() > 1)
        return NodeError(ctx, "axes must be a 1-D int64 tensor");
      axes = ctx.input(1).ToInt64Vector();
    }
    noop = axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0;
  } else {
    if (ctx.num_inputs() > 1)
      return NodeError(ctx, "has {} inputs, expected 1 before opset {}", ctx.num_inputs(),
                       AxesInputOpset(r));
    axes = ctx.attr_ints("axes");
  }
  ReducePlan plan;
  plan.reduced.assign(static_cast<size_t>(rank), axes.empty() && !noop);
  for (int64_t a : axes) {
    FERRY_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(ctx, a, rank, "axes entry"));
    if (plan.reduced[static_cast<size_t>(ax)])
      return NodeError(ctx, "axes {} lists dimension {} twice", ShapeToString(axes), ax);
    plan.reduced[static_cast<size_t>(ax)] = true;
  }
  bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (!plan.reduced[static_cast<size_t>(d)])
      plan.out_shape.push_back(x.dim(d));
    else if (keepdims)
      plan.out_shape.push_back(1);
  }
  return plan;
}

template <Red kOp, typename T>
constexpr bool ReduceSupports() {
  if constexpr (std::is_same_v<T, bool>)
    return kOp == Red::kMax || kOp == Red::kMin;
  else
    return kIsFloat<T> || kIsInt<T>;
}

template <Red kOp>
Status PrepareReduce(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  bool ok = false;
  VisitDType(ctx.input(0).dtype(),
             [&](auto tag) { ok = ReduceSupports<kOp, typename decltype(tag)::type>(); });
  if (!ok)
    return NodeUnsupported(ctx, "data has unsupported dtype {}", DTypeName(ctx.input(0).dtype()));
  FERRY_ASSIGN_OR_RETURN(ReducePlan plan, MakeReducePlan(ctx, kOp));
  ctx.set_output(0, ctx.input(0).dtype(), std::move(plan.out_shape));
  return Status::Ok();
}

// Reduces the values of one reduction set, given as offsets from a base pointer.
// Floats accumulate in double; integers wrap in their own width (numpy with dtype=T).
template <Red kOp, typename T>
T ReduceSet(const T* base, const std::vector<int64_t>& offs) {
  if constexpr (std::is_same_v<T, bool>) {
    bool acc = kOp == Red::kMin;  // empty: max is false, min is true
    for (int64_t o : offs) acc = kOp == Red::kMax ? (acc || base[o]) : (acc && base[o]);
    return acc;
  } else if constexpr (kIsInt<T>) {
    using U = WrapType<T>;
    auto n = static_cast<int64_t>(offs.size());
    if constexpr (kOp == Red::kMax || kOp == Red::kMin) {
      T acc = kOp == Red::kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      for (int64_t o : offs)
        acc = kOp == Red::kMax ? std::max(acc, base[o]) : std::min(acc, base[o]);
      return acc;
    } else if constexpr (kOp == Red::kProd) {
      U acc = 1;
      for (int64_t o : offs) acc = static_cast<U>(acc * static_cast<U>(base[o]));
      return static_cast<T>(acc);
    } else if constexpr (kOp == Red::kSum || kOp == Red::kMean || kOp == Red::kSumSquare ||
                         kOp == Red::kL1) {
      U acc = 0;
      for (int64_t o : offs) {
        U v = static_cast<U>(base[o]);
        if constexpr (kOp == Red::kSumSquare) v = static_cast<U>(v * v);
        if constexpr (kOp == Red::kL1 && std::is_signed_v<T>) {
          if (base[o] < 0) v = static_cast<U>(U{0} - v);
        }
        acc = static_cast<U>(acc + v);
      }
      T sum = static_cast<T>(acc);
      if constexpr (kOp == Red::kMean) {
        // numpy's mean with dtype=T: the wrapped sum divided, truncated toward zero.
        if (n == 0) return T{0};
        if constexpr (std::is_signed_v<T>)
          return static_cast<T>(static_cast<int64_t>(sum) / n);
        else
          return static_cast<T>(static_cast<uint64_t>(sum) / static_cast<uint64_t>(n));
      }
      return sum;
    } else {
      // L2, LogSum, LogSumExp on integers: computed in double, truncated back.
      double acc = 0;
      double m = 0;
      if constexpr (kOp == Red::kLogSumExp) {
        if (n) {
          T best = base[offs[0]];
          for (int64_t o : offs) best = std::max(best, base[o]);
          m = static_cast<double>(best);
        }
      }
      for (int64_t o : offs) {
        double v = static_cast<double>(base[o]);
        if constexpr (kOp == Red::kLogSumExp)
          acc += std::exp(v - m);
        else if constexpr (kOp == Red::kLogSum)
          acc += v;
        else
          acc += v * v;
      }
      if constexpr (kOp == Red::kL2) acc = std::sqrt(acc);
      if constexpr (kOp == Red::kLogSum) acc = std::log(acc);
      if constexpr (kOp == Red::kLogSumExp) acc = std::log(acc) + m;
      return FloatToInt<T>(acc);
    }
  } else {
    using C = ComputeType<T>;
    double acc = 0;
    if constexpr (kOp == Red::kMax || kOp == Red::kMin) {
      // Empty: -inf for max, +inf for min. NaN propagates as in numpy's maximum.reduce.
      C best = kOp == Red::kMax ? -std::numeric_limits<C>::infinity()
                                : std::numeric_limits<C>::infinity();
      for (int64_t o : offs) {
        C v = static_cast<C>(base[o]);
        if (std::isnan(v)) return static_cast<T>(v);
        if (kOp == Red::kMax ? v > best : v < best) best = v;
      }
      return static_cast<T>(best);
    } else if constexpr (kOp == Red::kProd) {
      acc = 1;
      for (int64_t o : offs) acc *= static_cast<double>(static_cast<C>(base[o]));
    } else if constexpr (kOp == Red::kLogSumExp) {
      // Shift by the largest finite value for stability (infinities pass through exp as is).
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t o : offs) {
        double v = static_cast<double>(static_cast<C>(base[o]));
        if (std::isfinite(v)) m = std::max(m, v);
      }
      if (!std::isfinite(m)) m = 0;
      for (int64_t o : offs) acc += std::exp(static_cast<double>(static_cast<C>(base[o])) - m);
      acc = std::log(acc) + m;
    } else {
      for (int64_t o : offs) {
        double v = static_cast<double>(static_cast<C>(base[o]));
        if constexpr (kOp == Red::kL1)
          acc += std::abs(v);
        else if constexpr (kOp == Red::kL2 || kOp == Red::kSumSquare)
          acc += v * v;
        else
          acc += v;
      }
      if constexpr (kOp == Red::kMean) acc /= static_cast<double>(offs.size());  // empty: NaN
      if constexpr (kOp == Red::kL2) acc = std::sqrt(acc);
      if constexpr (kOp == Red::kLogSum) acc = std::log(acc);
    }
    return static_cast<T>(static_cast<C>(acc));
  }
}

template <Red kOp>
void RunReduce(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  ReducePlan plan = MakeReducePlan(ctx, kOp).value();
  // Offsets (in x) of one reduction set, and the kept dims/strides that locate each set.
  std::vector<int64_t> strides = Strides(x.shape());
  std::vector<int64_t> offs{0};
  std::vector<int64_t> kept_dims, kept_strides;
  for (int64_t d = 0; d < x.rank(); ++d) {
    size_t du = static_cast<size_t>(d);
    if (plan.reduced[du]) {
      std::vector<int64_t> next;
      next.reserve(offs.size() * static_cast<size_t>(x.dim(d)));
      for (int64_t o : offs)
        for (int64_t i = 0; i < x.dim(d); ++i) next.push_back(o + i * strides[du]);
      offs = std::move(next);
    } else {
      kept_dims.push_back(x.dim(d));
      kept_strides.push_back(strides[du]);
    }
  }
  VisitPod(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ReduceSupports<kOp, T>()) {
      const T* in = x.data<T>();
      T* o = out.data<T>();
      ParallelFor(ctx, out.size(), 64, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          int64_t base = 0, rem = i;
          for (size_t k = kept_dims.size(); k-- > 0;) {
            base += (rem % kept_dims[k]) * kept_strides[k];
            rem /= kept_dims[k];
          }
          o[i] = ReduceSet<kOp, T>(in + base, offs);
        }
      });
    }
  });
}

// ---- ArgMax, ArgMin ----
template <bool kMax>
Status PrepareArg(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  const Tensor& x = ctx.input(0);
  if (!IsNumeric(x.dtype()))
    return NodeUnsupported(ctx, "data has unsupported dtype {}", DTypeName(x.dtype()));
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), x.rank()));
  Shape out = x.shape();
  if (x.dim(axis) == 0) {
    Shape rest = out;
    rest.erase(rest.begin() + axis);
    if (NumElements(rest) != 0)
      return NodeError(ctx, "cannot take an arg index along axis {} of size 0", axis);
  }
  if (ctx.attr_int("keepdims", 1) != 0)
    out[static_cast<size_t>(axis)] = 1;
  else
    out.erase(out.begin() + axis);
  ctx.set_output(0, DType::kInt64, std::move(out));
  return Status::Ok();
}

template <bool kMax>
void RunArg(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = NormalizeAxis(ctx, ctx.attr_int("axis", 0), x.rank()).value();
  bool last = ctx.attr_int("select_last_index", 0) != 0;
  int64_t n = x.dim(axis), inner = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  int64_t* o = ctx.output(0).data<int64_t>();
  int64_t outer_count = ctx.output(0).size() / std::max<int64_t>(inner, 1);
  VisitNumeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data<T>();
    for (int64_t a = 0; a < outer_count; ++a) {
      for (int64_t b = 0; b < inner; ++b) {
        const T* p = in + a * n * inner + b;
        int64_t best = 0;
        C bv = static_cast<C>(p[0]);
        for (int64_t i = 1; i < n; ++i) {
          C v = static_cast<C>(p[i * inner]);
          // NaN counts as the extreme value (numpy's argmax/argmin return the first NaN).
          bool v_nan = false, b_nan = false;
          if constexpr (std::is_floating_point_v<C>) v_nan = std::isnan(v), b_nan = std::isnan(bv);
          bool better = b_nan ? false : (v_nan || (kMax ? v > bv : v < bv));
          bool tie = b_nan ? v_nan : (!v_nan && v == bv);
          if (better || (last && tie)) {
            best = i;
            bv = v;
          }
        }
        o[a * inner + b] = best;
      }
    }
  });
}

// ---- CumSum ----
// Floats accumulate in double; integers wrap in their own width.
template <typename T>
auto CumSumAcc() {
  if constexpr (kIsInt<T>)
    return WrapType<T>{};
  else
    return double{};
}

Status PrepareCumSum(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "x"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "axis"));
  const Tensor& x = ctx.input(0);
  if (!IsNumeric(x.dtype()))
    return NodeUnsupported(ctx, "x has unsupported dtype {}", DTypeName(x.dtype()));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt32, DType::kInt64}));
  const Tensor& axis = ctx.input(1);
  if (axis.size() != 1 || axis.rank() > 1)
    return NodeError(ctx, "axis must be a scalar, got shape {}", ShapeToString(axis.shape()));
  if (x.rank() == 0) return NodeError(ctx, "x must have rank >= 1");
  FERRY_RETURN_IF_ERROR(NormalizeAxis(ctx, axis.GetAsInt64(0), x.rank()).status());
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunCumSum(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = NormalizeAxis(ctx, ctx.input(1).GetAsInt64(0), x.rank()).value();
  bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  bool reverse = ctx.attr_int("reverse", 0) != 0;
  int64_t n = x.dim(axis), inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  VisitNumeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = decltype(CumSumAcc<T>());
    const T* in = x.data<T>();
    T* o = ctx.output(0).data<T>();
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t b = 0; b < inner; ++b) {
        Acc acc = 0;
        for (int64_t k = 0; k < n; ++k) {
          int64_t i = reverse ? n - 1 - k : k;
          int64_t off = (a * n + i) * inner + b;
          Acc v;
          if constexpr (kIsInt<T>)
            v = static_cast<Acc>(in[off]);
          else
            v = static_cast<double>(static_cast<ComputeType<T>>(in[off]));
          if (exclusive) {
            o[off] = static_cast<T>(static_cast<ComputeType<T>>(acc));
            acc = static_cast<Acc>(acc + v);
          } else {
            acc = static_cast<Acc>(acc + v);
            o[off] = static_cast<T>(static_cast<ComputeType<T>>(acc));
          }
        }
      }
    }
  });
}

constexpr OpDef kOps[] = {
    {"", "ReduceSum", 1, nullptr, PrepareReduce<Red::kSum>, RunReduce<Red::kSum>},
    {"", "ReduceMean", 1, nullptr, PrepareReduce<Red::kMean>, RunReduce<Red::kMean>},
    {"", "ReduceMax", 1, nullptr, PrepareReduce<Red::kMax>, RunReduce<Red::kMax>},
    {"", "ReduceMin", 1, nullptr, PrepareReduce<Red::kMin>, RunReduce<Red::kMin>},
    {"", "ReduceProd", 1, nullptr, PrepareReduce<Red::kProd>, RunReduce<Red::kProd>},
    {"", "ReduceL1", 1, nullptr, PrepareReduce<Red::kL1>, RunReduce<Red::kL1>},
    {"", "ReduceL2", 1, nullptr, PrepareReduce<Red::kL2>, RunReduce<Red::kL2>},
    {"", "ReduceLogSum", 1, nullptr, PrepareReduce<Red::kLogSum>, RunReduce<Red::kLogSum>},
    {"", "ReduceLogSumExp", 1, nullptr, PrepareReduce<Red::kLogSumExp>, RunReduce<Red::kLogSumExp>},
    {"", "ReduceSumSquare", 1, nullptr, PrepareReduce<Red::kSumSquare>, RunReduce<Red::kSumSquare>},
    {"", "ArgMax", 1, nullptr, PrepareArg<true>, RunArg<true>},
    {"", "ArgMin", 1, nullptr, PrepareArg<false>, RunArg<false>},
    {"", "CumSum", 11, nullptr, PrepareCumSum, RunCumSum},
};

}  // namespace

std::span<const OpDef> ReduceOps() {
  return kOps;
}

}  // namespace ferry::ops
