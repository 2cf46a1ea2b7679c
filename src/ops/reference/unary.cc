// Reference kernels: elementwise unary math (Abs, Exp, Sin...), activations (Relu, Elu, Gelu...),
// predicates (IsNaN, IsInf), logical/bitwise Not, Shrink and Clip.
//
// Most ops are a small function object applied per element by RunMap: the element is read
// as ComputeType<T> (float for float16/bfloat16), transformed, and written back as T.
#include <string>
#include <type_traits>

#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

constexpr int64_t kMinChunk = 1 << 14;

// ---- element type sets ----

// Which input element types an op accepts; the output has the input's type.
enum class Types { kFloat, kSignedOrFloat, kNumeric };

template <typename T>
constexpr bool kIsFloatT =
    std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

template <typename T>
constexpr bool Accepts(Types types) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    return false;
  } else if constexpr (kIsFloatT<T>) {
    return true;
  } else {
    return types == Types::kNumeric || (types == Types::kSignedOrFloat && std::is_signed_v<T>);
  }
}

bool AcceptsDType(Types types, DType d) {
  bool ok = false;
  VisitDType(d, [&](auto tag) { ok = Accepts<typename decltype(tag)::type>(types); });
  return ok;
}

std::string_view TypesName(Types types) {
  switch (types) {
    case Types::kFloat:
      return "a float type (float16, bfloat16, float32, float64)";
    case Types::kSignedOrFloat:
      return "a float or signed integer type";
    case Types::kNumeric:
      return "a numeric type";
  }
  return "";
}

// Truncates a finite or non-finite double into integer type T: values in range truncate toward
// zero, NaN gives 0 and values beyond T's range saturate. (Integer Shrink's only lossy step.)
template <typename T>
T SaturatingFromDouble(double v) {
  if (std::isnan(v)) return T(0);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
    return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// ---- per-element function objects ----
// Each has kTypes, an operator() over the compute type C, and optionally a constructor reading
// attributes from the context and a static Validate(ctx) for attribute checks.

struct FloatFn {
  static constexpr Types kTypes = Types::kFloat;
};

struct AbsFn {
  static constexpr Types kTypes = Types::kNumeric;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return std::fabs(x);
    else if constexpr (std::is_unsigned_v<C>)
      return x;
    // Two's complement wrap: Abs(INT_MIN) stays INT_MIN, as numpy does.
    else
      return x < 0 ? static_cast<C>(-static_cast<std::make_unsigned_t<C>>(x)) : x;
  }
};

struct NegFn {
  static constexpr Types kTypes = Types::kSignedOrFloat;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return -x;
    else
      return static_cast<C>(-static_cast<std::make_unsigned_t<C>>(x));  // wraps for INT_MIN
  }
};

struct SignFn {
  static constexpr Types kTypes = Types::kNumeric;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    return x > C(0) ? C(1) : (x < C(0) ? static_cast<C>(-1) : C(0));
  }
};

struct ReluFn {
  static constexpr Types kTypes = Types::kSignedOrFloat;  // ints from opset 14
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? C(0) : x;  // NaN passes through, as max(0, x) does in numpy
  }
};

struct FloorFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::floor(x);
  }
};
struct CeilFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::ceil(x);
  }
};
// Round half to even, independent of the floating-point environment's rounding mode.
struct RoundFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    if (!std::isfinite(x)) return x;
    C r = std::floor(x);
    C diff = x - r;  // exact, in [0, 1)
    if (diff > C(0.5) || (diff == C(0.5) && std::fmod(r, C(2)) != C(0))) r += C(1);
    return std::copysign(r, x);  // keeps -0.0 for -0.4
  }
};
struct SqrtFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};
struct ReciprocalFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return C(1) / x;
  }
};
struct ExpFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::exp(x);
  }
};
struct LogFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::log(x);
  }
};
struct SinFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::sin(x);
  }
};
struct CosFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::cos(x);
  }
};
struct TanFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::tan(x);
  }
};
struct AsinFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::asin(x);
  }
};
struct AcosFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::acos(x);
  }
};
struct AtanFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::atan(x);
  }
};
struct SinhFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::sinh(x);
  }
};
struct CoshFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::cosh(x);
  }
};
struct AsinhFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::asinh(x);
  }
};
struct AcoshFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::acosh(x);
  }
};
struct AtanhFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::atanh(x);
  }
};
struct TanhFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return std::tanh(x);
  }
};

// 1 / (1 + exp(-x)), written so that exp never overflows.
template <typename C>
C Sigmoid(C x) {
  if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
  C e = std::exp(x);
  return e / (C(1) + e);
}
struct SigmoidFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return Sigmoid(x);
  }
};

// log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), which neither overflows nor loses small values.
template <typename C>
C Softplus(C x) {
  if (std::isnan(x)) return x;
  return std::max(x, C(0)) + std::log1p(std::exp(-std::fabs(x)));
}
struct SoftplusFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return Softplus(x);
  }
};
struct SoftsignFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return x / (C(1) + std::fabs(x));
  }
};
struct MishFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return x * std::tanh(Softplus(x));
  }
};
struct ErfFn {
  static constexpr Types kTypes = Types::kNumeric;  // opset 9 allows integers too
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>)
      return std::erf(x);
    else
      return SaturatingFromDouble<C>(std::erf(static_cast<double>(x)));
  }
};

struct LeakyReluFn : FloatFn {
  float alpha;
  explicit LeakyReluFn(const OpContext& ctx) : alpha(ctx.attr_float("alpha", 0.01f)) {}
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? C(alpha) * x : x;
  }
};
struct EluFn : FloatFn {
  float alpha;
  explicit EluFn(const OpContext& ctx) : alpha(ctx.attr_float("alpha", 1.0f)) {}
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? C(alpha) * std::expm1(x) : x;
  }
};
struct SeluFn : FloatFn {
  float alpha, gamma;
  explicit SeluFn(const OpContext& ctx)
      : alpha(ctx.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(ctx.attr_float("gamma", 1.05070102214813232421875f)) {}
  template <typename C>
  C operator()(C x) const {
    return C(gamma) * (x > C(0) ? x : C(alpha) * std::expm1(x));
  }
};
// max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
struct CeluFn : FloatFn {
  float alpha;
  explicit CeluFn(const OpContext& ctx) : alpha(ctx.attr_float("alpha", 1.0f)) {}
  static Status Validate(const OpContext& ctx) {
    if (ctx.attr_float("alpha", 1.0f) == 0.0f)
      return NodeError(ctx, "alpha is 0, must be non-zero");
    return Status::Ok();
  }
  template <typename C>
  C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * std::expm1(x / C(alpha));
  }
};
struct ThresholdedReluFn : FloatFn {
  float alpha;
  explicit ThresholdedReluFn(const OpContext& ctx) : alpha(ctx.attr_float("alpha", 1.0f)) {}
  template <typename C>
  C operator()(C x) const {
    return x <= C(alpha) ? C(0) : x;
  }  // NaN passes through
};
// max(0, min(1, alpha * x + beta)); NaN stays NaN.
template <typename C>
C HardSigmoid(C x, C alpha, C beta) {
  C y = alpha * x + beta;
  if (std::isnan(y)) return y;
  return std::clamp(y, C(0), C(1));
}
struct HardSigmoidFn : FloatFn {
  float alpha, beta;
  explicit HardSigmoidFn(const OpContext& ctx)
      : alpha(ctx.attr_float("alpha", 0.2f)), beta(ctx.attr_float("beta", 0.5f)) {}
  template <typename C>
  C operator()(C x) const {
    return HardSigmoid(x, C(alpha), C(beta));
  }
};
struct HardSwishFn : FloatFn {
  template <typename C>
  C operator()(C x) const {
    return x * HardSigmoid(x, C(1) / C(6), C(0.5));
  }
};

struct GeluFn : FloatFn {
  bool tanh_approx;
  explicit GeluFn(const OpContext& ctx)
      : tanh_approx(ctx.attr_string("approximate", "none") == "tanh") {}
  static Status Validate(const OpContext& ctx) {
    std::string a = ctx.attr_string("approximate", "none");
    if (a != "none" && a != "tanh")
      return NodeError(ctx, "approximate is '{}', expected 'none' or 'tanh'", a);
    return Status::Ok();
  }
  template <typename C>
  C operator()(C x) const {
    if (tanh_approx) {
      const C k = std::sqrt(C(2) / C(3.14159265358979323846));
      return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
    }
    return C(0.5) * x * (C(1) + std::erf(x / std::sqrt(C(2))));
  }
};

// x < -lambd: x + bias; x > lambd: x - bias; else 0. Integers compute in double.
struct ShrinkFn {
  static constexpr Types kTypes = Types::kNumeric;
  double lambd, bias;
  explicit ShrinkFn(const OpContext& ctx)
      : lambd(ctx.attr_float("lambd", 0.5f)), bias(ctx.attr_float("bias", 0.0f)) {}
  template <typename C>
  C operator()(C x) const {
    double v = static_cast<double>(x);
    double y = v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0);
    if constexpr (std::is_floating_point_v<C>)
      return static_cast<C>(y);
    else
      return SaturatingFromDouble<C>(y);
  }
};

// ---- generic same-type elementwise kernel ----

template <typename Fn>
Fn MakeFn(const OpContext& ctx) {
  if constexpr (std::is_constructible_v<Fn, const OpContext&>)
    return Fn(ctx);
  else
    return Fn{};
}

template <typename Fn>
Status PrepareMap(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  const Tensor& x = ctx.input(0);
  if (!AcceptsDType(Fn::kTypes, x.dtype()))
    return NodeUnsupported(ctx, "input X has dtype {}, expected {}", DTypeName(x.dtype()),
                           TypesName(Fn::kTypes));
  if constexpr (requires { Fn::Validate(ctx); }) FERRY_RETURN_IF_ERROR(Fn::Validate(ctx));
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

template <typename Fn>
void RunMap(OpContext& ctx) {
  const Fn fn = MakeFn<Fn>(ctx);
  const Tensor& x = ctx.input(0);
  VisitDType(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Accepts<T>(Fn::kTypes)) {
      using C = ComputeType<T>;
      const T* in = x.data<T>();
      T* out = ctx.output(0).data<T>();
      ParallelFor(ctx, x.size(), kMinChunk, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = static_cast<T>(fn(static_cast<C>(in[i])));
      });
    }
  });
}

// ---- IsNaN, IsInf: float in, bool out ----
Status PrepareFloatPredicate(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  const Tensor& x = ctx.input(0);
  if (!IsFloat(x.dtype()))
    return NodeUnsupported(ctx, "input X has dtype {}, expected {}", DTypeName(x.dtype()),
                           TypesName(Types::kFloat));
  ctx.set_output(0, DType::kBool, x.shape());
  return Status::Ok();
}

template <typename Pred>
void RunFloatPredicate(OpContext& ctx, Pred pred) {
  const Tensor& x = ctx.input(0);
  bool* out = ctx.output(0).data<bool>();
  VisitDType(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloatT<T>) {
      const T* in = x.data<T>();
      for (int64_t i = 0; i < x.size(); ++i) out[i] = pred(static_cast<ComputeType<T>>(in[i]));
    }
  });
}

void RunIsNaN(OpContext& ctx) {
  RunFloatPredicate(ctx, [](auto v) { return std::isnan(v); });
}

void RunIsInf(OpContext& ctx) {
  bool pos = ctx.attr_int("detect_positive", 1) != 0, neg = ctx.attr_int("detect_negative", 1) != 0;
  RunFloatPredicate(ctx, [&](auto v) { return std::isinf(v) && (v > 0 ? pos : neg); });
}

// ---- Not (bool), BitwiseNot (integers) ----
Status PrepareNot(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kBool}));
  ctx.set_output(0, DType::kBool, ctx.input(0).shape());
  return Status::Ok();
}

void RunNot(OpContext& ctx) {
  const bool* in = ctx.input(0).data<bool>();
  bool* out = ctx.output(0).data<bool>();
  for (int64_t i = 0; i < ctx.input(0).size(); ++i) out[i] = !in[i];
}

Status PrepareBitwiseNot(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  const Tensor& x = ctx.input(0);
  if (!IsInteger(x.dtype()))
    return NodeUnsupported(ctx, "input X has dtype {}, expected an integer type",
                           DTypeName(x.dtype()));
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunBitwiseNot(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  VisitDType(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* in = x.data<T>();
      T* out = ctx.output(0).data<T>();
      for (int64_t i = 0; i < x.size(); ++i) out[i] = static_cast<T>(~in[i]);
    }
  });
}

// ---- Clip: bounds are attributes before opset 11, optional scalar inputs from 11 ----
Status PrepareClip(OpContext& ctx) {
  const bool bounds_as_inputs = ctx.opset() >= 11;
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, bounds_as_inputs ? 3 : 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  const Tensor& x = ctx.input(0);
  Types types = ctx.opset() >= 12 ? Types::kNumeric : Types::kFloat;
  if (!AcceptsDType(types, x.dtype()))
    return NodeUnsupported(ctx, "input has dtype {}, expected {} at opset {}", DTypeName(x.dtype()),
                           TypesName(types), ctx.opset());
  if (bounds_as_inputs) {
    const char* names[] = {"", "min", "max"};
    for (size_t i = 1; i < 3; ++i) {
      if (!ctx.has_input(i)) continue;
      FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, names[i]));
      const Tensor& b = ctx.input(i);
      if (b.dtype() != x.dtype())
        return NodeError(ctx, "{} has dtype {}, expected the input's dtype {}", names[i],
                         DTypeName(b.dtype()), DTypeName(x.dtype()));
      if (b.size() != 1)
        return NodeError(ctx, "{} has shape {}, expected a scalar", names[i],
                         ShapeToString(b.shape()));
    }
  }
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

template <typename T>
void ClipTyped(OpContext& ctx) {
  using C = ComputeType<T>;
  C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
  if constexpr (std::is_floating_point_v<C>) {
    lo = -std::numeric_limits<C>::infinity();
    hi = std::numeric_limits<C>::infinity();
  }
  if (ctx.opset() >= 11) {
    if (ctx.has_input(1)) lo = static_cast<C>(ctx.input(1).data<T>()[0]);
    if (ctx.has_input(2)) hi = static_cast<C>(ctx.input(2).data<T>()[0]);
  } else {
    if (ctx.has_attr("min")) lo = static_cast<C>(ctx.attr_float("min", 0.0f));
    if (ctx.has_attr("max")) hi = static_cast<C>(ctx.attr_float("max", 0.0f));
  }
  const T* in = ctx.input(0).data<T>();
  T* out = ctx.output(0).data<T>();
  ParallelFor(ctx, ctx.input(0).size(), kMinChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // min(max(x, lo), hi): NaN passes through, and lo > hi gives hi everywhere (as the spec
      // says).
      C v = static_cast<C>(in[i]);
      if (v < lo) v = lo;
      if (v > hi) v = hi;
      out[i] = static_cast<T>(v);
    }
  });
}

void RunClip(OpContext& ctx) {
  VisitDType(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Accepts<T>(Types::kNumeric)) ClipTyped<T>(ctx);
  });
}

constexpr OpDef kOps[] = {
    {"", "Abs", 1, nullptr, PrepareMap<AbsFn>, RunMap<AbsFn>},
    {"", "Neg", 1, nullptr, PrepareMap<NegFn>, RunMap<NegFn>},
    {"", "Sign", 9, nullptr, PrepareMap<SignFn>, RunMap<SignFn>},
    {"", "Floor", 1, nullptr, PrepareMap<FloorFn>, RunMap<FloorFn>},
    {"", "Ceil", 1, nullptr, PrepareMap<CeilFn>, RunMap<CeilFn>},
    {"", "Round", 11, nullptr, PrepareMap<RoundFn>, RunMap<RoundFn>},
    {"", "Sqrt", 1, nullptr, PrepareMap<SqrtFn>, RunMap<SqrtFn>},
    {"", "Reciprocal", 1, nullptr, PrepareMap<ReciprocalFn>, RunMap<ReciprocalFn>},
    {"", "Exp", 1, nullptr, PrepareMap<ExpFn>, RunMap<ExpFn>},
    {"", "Log", 1, nullptr, PrepareMap<LogFn>, RunMap<LogFn>},
    {"", "Sin", 7, nullptr, PrepareMap<SinFn>, RunMap<SinFn>},
    {"", "Cos", 7, nullptr, PrepareMap<CosFn>, RunMap<CosFn>},
    {"", "Tan", 7, nullptr, PrepareMap<TanFn>, RunMap<TanFn>},
    {"", "Asin", 7, nullptr, PrepareMap<AsinFn>, RunMap<AsinFn>},
    {"", "Acos", 7, nullptr, PrepareMap<AcosFn>, RunMap<AcosFn>},
    {"", "Atan", 7, nullptr, PrepareMap<AtanFn>, RunMap<AtanFn>},
    {"", "Sinh", 9, nullptr, PrepareMap<SinhFn>, RunMap<SinhFn>},
    {"", "Cosh", 9, nullptr, PrepareMap<CoshFn>, RunMap<CoshFn>},
    {"", "Asinh", 9, nullptr, PrepareMap<AsinhFn>, RunMap<AsinhFn>},
    {"", "Acosh", 9, nullptr, PrepareMap<AcoshFn>, RunMap<AcoshFn>},
    {"", "Atanh", 9, nullptr, PrepareMap<AtanhFn>, RunMap<AtanhFn>},
    {"", "Erf", 9, nullptr, PrepareMap<ErfFn>, RunMap<ErfFn>},
    {"", "Sigmoid", 1, nullptr, PrepareMap<SigmoidFn>, RunMap<SigmoidFn>},
    {"", "Tanh", 1, nullptr, PrepareMap<TanhFn>, RunMap<TanhFn>},
    {"", "Relu", 1, nullptr, PrepareMap<ReluFn>, RunMap<ReluFn>},
    {"", "LeakyRelu", 1, nullptr, PrepareMap<LeakyReluFn>, RunMap<LeakyReluFn>},
    {"", "Elu", 1, nullptr, PrepareMap<EluFn>, RunMap<EluFn>},
    {"", "Selu", 1, nullptr, PrepareMap<SeluFn>, RunMap<SeluFn>},
    {"", "Celu", 12, nullptr, PrepareMap<CeluFn>, RunMap<CeluFn>},
    {"", "ThresholdedRelu", 10, nullptr, PrepareMap<ThresholdedReluFn>, RunMap<ThresholdedReluFn>},
    {"", "HardSigmoid", 1, nullptr, PrepareMap<HardSigmoidFn>, RunMap<HardSigmoidFn>},
    {"", "HardSwish", 14, nullptr, PrepareMap<HardSwishFn>, RunMap<HardSwishFn>},
    {"", "Softplus", 1, nullptr, PrepareMap<SoftplusFn>, RunMap<SoftplusFn>},
    {"", "Softsign", 1, nullptr, PrepareMap<SoftsignFn>, RunMap<SoftsignFn>},
    {"", "Mish", 18, nullptr, PrepareMap<MishFn>, RunMap<MishFn>},
    {"", "Gelu", 20, nullptr, PrepareMap<GeluFn>, RunMap<GeluFn>},
    {"", "Shrink", 9, nullptr, PrepareMap<ShrinkFn>, RunMap<ShrinkFn>},
    {"", "IsNaN", 9, nullptr, PrepareFloatPredicate, RunIsNaN},
    {"", "IsInf", 10, nullptr, PrepareFloatPredicate, RunIsInf},
    {"", "Not", 1, nullptr, PrepareNot, RunNot},
    {"", "BitwiseNot", 18, nullptr, PrepareBitwiseNot, RunBitwiseNot},
    {"", "Clip", 1, nullptr, PrepareClip, RunClip},
};

}  // namespace

std::span<const OpDef> UnaryOps() {
  return kOps;
}

}  // namespace ferry::ops
