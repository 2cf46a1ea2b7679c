// Reference kernels: element-wise binary arithmetic, comparison and logic with numpy
// broadcasting (and the `broadcast`/`axis` form of opset < 7), Where, PRelu and the variadic
// Max/Min/Sum/Mean.
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

// clang-format off
enum class Bin {
  kAdd, kSub, kMul, kDiv, kMod, kPow, kBitShift,  // arithmetic
  kAnd, kOr, kXor, kBitAnd, kBitOr, kBitXor,      // logic and bitwise
  kEqual, kGreater, kLess, kGreaterEq, kLessEq    // comparisons (keep last: IsComparison)
};
// clang-format on

constexpr bool IsComparison(Bin op) {
  return op >= Bin::kEqual;
}
constexpr bool IsLogic(Bin op) {
  return op == Bin::kAnd || op == Bin::kOr || op == Bin::kXor;
}
// Ops whose opset 1-6 versions used the `broadcast` and `axis` attributes.
constexpr bool HasLegacyBroadcast(Bin op) {
  return op == Bin::kAdd || op == Bin::kSub || op == Bin::kMul || op == Bin::kDiv ||
         op == Bin::kPow || IsLogic(op) || op == Bin::kEqual || op == Bin::kGreater ||
         op == Bin::kLess;
}

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsHalf<T>;
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
constexpr bool kIsNumeric = kIsFloat<T> || kIsInt<T>;

// The element types each op accepts (compile-time, to instantiate only those kernels).
template <Bin kOp, typename T>
constexpr bool Supports() {
  if constexpr (IsLogic(kOp))
    return std::is_same_v<T, bool>;
  else if constexpr (kOp == Bin::kBitAnd || kOp == Bin::kBitOr || kOp == Bin::kBitXor)
    return kIsInt<T>;
  else if constexpr (kOp == Bin::kBitShift)
    return kIsInt<T> && std::is_unsigned_v<T>;
  else if constexpr (kOp == Bin::kEqual)
    return kIsNumeric<T> || std::is_same_v<T, bool> || std::is_same_v<T, std::string>;
  else if constexpr (kOp == Bin::kPow)
    return kIsFloat<T> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
  else
    return kIsNumeric<T>;
}

template <Bin kOp>
bool SupportsDType(DType t) {
  bool ok = false;
  VisitDType(t, [&](auto tag) { ok = Supports<kOp, typename decltype(tag)::type>(); });
  return ok;
}

// Unsigned type for wrapping (numpy-like modular) integer arithmetic; at least 32 bits so the
// usual promotions never turn it back into a signed int.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <typename T>
T WrapNeg(T x) {
  return static_cast<T>(WrapType<T>{0} - static_cast<WrapType<T>>(x));
}

// numpy's remainder: the result takes the sign of the divisor. y != 0 for integers.
template <typename T>
T FloorMod(T x, T y) {
  if constexpr (kIsInt<T>) {
    if constexpr (std::is_signed_v<T>) {
      if (y == -1) return 0;  // also avoids the INT_MIN % -1 trap
      T r = static_cast<T>(x % y);
      if (r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
      return r;
    } else {
      return static_cast<T>(x % y);
    }
  } else {
    if (y == 0) return std::fmod(x, y);  // NaN
    T r = std::fmod(x, y);
    if (r == 0) return std::copysign(T{0}, y);
    if ((r < 0) != (y < 0)) r += y;
    return r;
  }
}

// C's remainder (fmod=1): the result takes the sign of the dividend.
template <typename T>
T TruncMod(T x, T y) {
  if constexpr (kIsInt<T>) {
    if constexpr (std::is_signed_v<T>) {
      if (y == -1) return 0;
    }
    return static_cast<T>(x % y);
  } else {
    return std::fmod(x, y);
  }
}

// Integer power with wrap-around; a negative exponent truncates 1/x^-e toward zero (0 unless
// |x| == 1, and 0 for x == 0 as well).
template <typename T, typename E>
T IntPow(T x, E e) {
  if constexpr (std::is_signed_v<E>) {
    if (e < 0) {
      if (x == 1) return 1;
      if constexpr (std::is_signed_v<T>) {
        if (x == -1) return (e % 2 == 0) ? T{1} : T{-1};
      }
      return 0;
    }
  }
  using U = WrapType<T>;
  U base = static_cast<U>(x), result = 1;
  auto n = static_cast<std::make_unsigned_t<E>>(e);
  while (n) {
    if (n & 1) result = static_cast<U>(result * base);
    base = static_cast<U>(base * base);
    n >>= 1;
  }
  return static_cast<T>(result);
}

// Float to integer as numpy's astype does for representable values: truncation. NaN maps to 0
// and out-of-range values saturate (C++ leaves both undefined).
template <typename T>
T FloatToInt(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
    return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

struct BinParams {
  bool fmod = false;        // Mod
  bool shift_left = false;  // BitShift
};

// One element of op(x, y). Returns T, or bool for comparisons and logic.
template <Bin kOp, typename T>
auto Apply(const T& x, const T& y, const BinParams& p) {
  if constexpr (IsComparison(kOp)) {
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool>) {
      return x == y;  // only Equal accepts these
    } else {
      using C = ComputeType<T>;
      C a = static_cast<C>(x), b = static_cast<C>(y);
      if constexpr (kOp == Bin::kEqual)
        return a == b;
      else if constexpr (kOp == Bin::kGreater)
        return a > b;
      else if constexpr (kOp == Bin::kLess)
        return a < b;
      else if constexpr (kOp == Bin::kGreaterEq)
        return a >= b;
      else
        return a <= b;
    }
  } else if constexpr (kOp == Bin::kAnd) {
    return x && y;
  } else if constexpr (kOp == Bin::kOr) {
    return x || y;
  } else if constexpr (kOp == Bin::kXor) {
    return x != y;
  } else if constexpr (kOp == Bin::kBitAnd) {
    return static_cast<T>(x & y);
  } else if constexpr (kOp == Bin::kBitOr) {
    return static_cast<T>(x | y);
  } else if constexpr (kOp == Bin::kBitXor) {
    return static_cast<T>(x ^ y);
  } else if constexpr (kOp == Bin::kBitShift) {
    // Shifting by the bit width or more yields 0 (as numpy), not undefined behaviour.
    if (y >= static_cast<T>(sizeof(T) * 8)) return T{0};
    using U = WrapType<T>;
    return static_cast<T>(p.shift_left ? static_cast<U>(x) << y : static_cast<U>(x) >> y);
  } else if constexpr (kIsInt<T>) {
    using U = WrapType<T>;
    U a = static_cast<U>(x), b = static_cast<U>(y);
    if constexpr (kOp == Bin::kAdd)
      return static_cast<T>(a + b);
    else if constexpr (kOp == Bin::kSub)
      return static_cast<T>(a - b);
    else if constexpr (kOp == Bin::kMul)
      return static_cast<T>(a * b);
    else if constexpr (kOp == Bin::kDiv) {
      // Truncates toward zero like C; y != 0 is checked in prepare.
      if constexpr (std::is_signed_v<T>) {
        if (y == -1) return WrapNeg(x);
      }
      return static_cast<T>(x / y);
    } else {
      static_assert(kOp == Bin::kMod);
      return p.fmod ? TruncMod(x, y) : FloorMod(x, y);
    }
  } else {
    using C = ComputeType<T>;
    C a = static_cast<C>(x), b = static_cast<C>(y);
    if constexpr (kOp == Bin::kAdd)
      return static_cast<T>(a + b);
    else if constexpr (kOp == Bin::kSub)
      return static_cast<T>(a - b);
    else if constexpr (kOp == Bin::kMul)
      return static_cast<T>(a * b);
    else if constexpr (kOp == Bin::kDiv)
      return static_cast<T>(a / b);
    else {
      static_assert(kOp == Bin::kMod);
      return static_cast<T>(p.fmod ? TruncMod(a, b) : FloorMod(a, b));
    }
  }
}

// out[i] = fn(a[ia(i)], b[ib(i)]) over the output tensor.
template <typename A, typename B, typename O, typename Fn>
void Elementwise2(OpContext& ctx, const Shape& sa, const Shape& sb, Fn fn) {
  Tensor& out = ctx.output(0);
  const A* a = ctx.input(0).data<A>();
  const B* b = ctx.input(1).data<B>();
  O* o = out.data<O>();
  BroadcastIndexer ia(sa, out.shape()), ib(sb, out.shape());
  ParallelFor(ctx, out.size(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = fn(a[ia(i)], b[ib(i)]);
  });
}

struct OperandShapes {
  Shape a, b;
};

// The shapes the operands broadcast with. Before opset 7, without `broadcast` the shapes must
// match; with it, B lines up with A's dims from `axis` on (default: A's trailing dims).
Result<OperandShapes> BinaryOperandShapes(const OpContext& ctx, bool legacy) {
  const Shape& a = ctx.input(0).shape();
  const Shape& b = ctx.input(1).shape();
  if (!legacy) return OperandShapes{a, b};
  if (ctx.attr_int("broadcast", 0) == 0) {
    if (a != b)
      return NodeError(ctx, "shapes {} and {} differ and attribute broadcast is not set (opset {})",
                       ShapeToString(a), ShapeToString(b), ctx.opset());
    return OperandShapes{a, b};
  }
  if (NumElements(b) == 1) return OperandShapes{a, Shape{}};
  int64_t ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  if (rb > ra)
    return NodeError(ctx, "B has rank {}, expected at most A's rank {} for legacy broadcast", rb,
                     ra);
  int64_t axis = ctx.has_attr("axis") ? ctx.attr_int("axis", 0) : ra - rb;
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra)
    return NodeError(ctx, "axis {} does not fit B {} into A {}", ctx.attr_int("axis", 0),
                     ShapeToString(b), ShapeToString(a));
  Shape eff(a.size(), 1);
  for (int64_t i = 0; i < rb; ++i) {
    int64_t d = b[static_cast<size_t>(i)];
    if (d != 1 && d != a[static_cast<size_t>(axis + i)])
      return NodeError(ctx, "B {} does not match A {} at axis {}", ShapeToString(b),
                       ShapeToString(a), axis);
    eff[static_cast<size_t>(axis + i)] = d;
  }
  return OperandShapes{a, eff};
}

bool UsesLegacyBroadcast(const OpContext& ctx, Bin op) {
  return HasLegacyBroadcast(op) && ctx.opset() < 7;
}

template <Bin kOp>
Status PrepareBinary(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "A"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "B"));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (!SupportsDType<kOp>(a.dtype()))
    return NodeUnsupported(ctx, "input A has unsupported dtype {}", DTypeName(a.dtype()));
  if constexpr (kOp == Bin::kPow) {
    if (!IsNumeric(b.dtype()))
      return NodeUnsupported(ctx, "exponent has unsupported dtype {}", DTypeName(b.dtype()));
  } else {
    if (a.dtype() != b.dtype())
      return NodeError(ctx, "inputs have dtypes {} and {}, expected the same", DTypeName(a.dtype()),
                       DTypeName(b.dtype()));
  }
  if constexpr (kOp == Bin::kBitShift) {
    std::string dir = ctx.attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT")
      return NodeError(ctx, "direction is '{}', expected LEFT or RIGHT", dir);
  }
  if constexpr (kOp == Bin::kMod) {
    int64_t fmod = ctx.attr_int("fmod", 0);
    if (fmod != 0 && fmod != 1) return NodeError(ctx, "fmod is {}, expected 0 or 1", fmod);
  }
  if constexpr (kOp == Bin::kDiv || kOp == Bin::kMod) {
    if (IsInteger(b.dtype())) {
      for (int64_t i = 0; i < b.size(); ++i)
        if (b.GetAsInt64(i) == 0) return NodeError(ctx, "integer division by zero (B[{}] is 0)", i);
    }
  }
  FERRY_ASSIGN_OR_RETURN(OperandShapes s, BinaryOperandShapes(ctx, UsesLegacyBroadcast(ctx, kOp)));
  FERRY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(ctx, {s.a, s.b}));
  bool boolean = IsComparison(kOp) || IsLogic(kOp);
  ctx.set_output(0, boolean ? DType::kBool : a.dtype(), std::move(out));
  return Status::Ok();
}

// Pow: the exponent may have another dtype (opset 12); the result has the base's dtype. As
// numpy does, a float base with an exponent of another type computes in double.
template <typename X, typename Y>
X PowElement(X x, Y y) {
  if constexpr (kIsInt<X> && kIsInt<Y>) {
    return IntPow(x, y);
  } else {
    double e = static_cast<double>(static_cast<ComputeType<Y>>(y));
    if constexpr (kIsInt<X>) {
      return FloatToInt<X>(std::pow(static_cast<double>(x), e));
    } else if constexpr (std::is_same_v<X, Y>) {
      using C = ComputeType<X>;
      return static_cast<X>(std::pow(static_cast<C>(x), static_cast<C>(y)));
    } else {
      return static_cast<X>(std::pow(static_cast<double>(static_cast<ComputeType<X>>(x)), e));
    }
  }
}

void RunPow(OpContext& ctx, const OperandShapes& s) {
  VisitNumeric(ctx.input(0).dtype(), [&](auto xtag) {
    using X = typename decltype(xtag)::type;
    if constexpr (Supports<Bin::kPow, X>()) {
      VisitNumeric(ctx.input(1).dtype(), [&](auto ytag) {
        using Y = typename decltype(ytag)::type;
        Elementwise2<X, Y, X>(ctx, s.a, s.b, PowElement<X, Y>);
      });
    }
  });
}

template <Bin kOp>
void RunBinary(OpContext& ctx) {
  OperandShapes s = BinaryOperandShapes(ctx, UsesLegacyBroadcast(ctx, kOp)).value();
  if constexpr (kOp == Bin::kPow) {
    RunPow(ctx, s);
  } else {
    BinParams p;
    p.fmod = ctx.attr_int("fmod", 0) != 0;
    p.shift_left = ctx.attr_string("direction", "") == "LEFT";
    VisitDType(ctx.input(0).dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (Supports<kOp, T>()) {
        using O = std::conditional_t<IsComparison(kOp) || IsLogic(kOp), bool, T>;
        Elementwise2<T, T, O>(ctx, s.a, s.b,
                              [&p](const T& x, const T& y) { return Apply<kOp, T>(x, y, p); });
      }
    });
  }
}

// ---- Where ----
Status PrepareWhere(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "condition"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "X"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "Y"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kBool}));
  DType t = ctx.input(1).dtype();
  if (ctx.input(2).dtype() != t)
    return NodeError(ctx, "X and Y have dtypes {} and {}, expected the same", DTypeName(t),
                     DTypeName(ctx.input(2).dtype()));
  FERRY_ASSIGN_OR_RETURN(
      Shape out,
      BroadcastShapes(ctx, {ctx.input(0).shape(), ctx.input(1).shape(), ctx.input(2).shape()}));
  ctx.set_output(0, t, std::move(out));
  return Status::Ok();
}

void RunWhere(OpContext& ctx) {
  Tensor& out = ctx.output(0);
  BroadcastIndexer ic(ctx.input(0).shape(), out.shape());
  BroadcastIndexer ix(ctx.input(1).shape(), out.shape());
  BroadcastIndexer iy(ctx.input(2).shape(), out.shape());
  const bool* c = ctx.input(0).data<bool>();
  VisitDType(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = ctx.input(1).data<T>();
    const T* y = ctx.input(2).data<T>();
    T* o = out.data<T>();
    ParallelFor(ctx, out.size(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] = c[ic(i)] ? x[ix(i)] : y[iy(i)];
    });
  });
}

// ---- PRelu ----
// The shape slope broadcasts with against X. From opset 7 slope broadcasts unidirectionally to
// X. Before, slope was either one value or one value per channel (X's dim 1).
Result<Shape> SlopeShape(const OpContext& ctx) {
  const Shape& x = ctx.input(0).shape();
  const Shape& slope = ctx.input(1).shape();
  if (ctx.opset() < 7) {
    if (NumElements(slope) == 1) return Shape{};
    if (slope.size() == 1 && x.size() >= 2 && slope[0] == x[1]) {
      Shape eff(x.size(), 1);
      eff[1] = slope[0];
      return eff;
    }
  }
  FERRY_ASSIGN_OR_RETURN(Shape b, BroadcastShapes(ctx, {x, slope}));
  if (b != x)
    return NodeError(ctx, "slope {} does not broadcast unidirectionally to X {}",
                     ShapeToString(slope), ShapeToString(x));
  return slope;
}

Status PreparePRelu(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "slope"));
  DType t = ctx.input(0).dtype();
  if (!IsFloat(t) && !IsInteger(t))
    return NodeUnsupported(ctx, "X has unsupported dtype {}", DTypeName(t));
  if (ctx.input(1).dtype() != t)
    return NodeError(ctx, "X and slope have dtypes {} and {}, expected the same", DTypeName(t),
                     DTypeName(ctx.input(1).dtype()));
  FERRY_ASSIGN_OR_RETURN(Shape slope, SlopeShape(ctx));
  (void)slope;
  ctx.set_output(0, t, ctx.input(0).shape());
  return Status::Ok();
}

void RunPRelu(OpContext& ctx) {
  Shape slope = SlopeShape(ctx).value();
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    Elementwise2<T, T, T>(ctx, ctx.input(0).shape(), slope, [](T x, T s) -> T {
      using C = ComputeType<T>;
      if (static_cast<C>(x) >= C{0}) return x;
      return Apply<Bin::kMul, T>(s, x, BinParams{});
    });
  });
}

// ---- Max, Min, Sum, Mean (variadic) ----
enum class Variadic { kMax, kMin, kSum, kMean };

template <Variadic kOp>
Status PrepareVariadic(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, std::numeric_limits<int32_t>::max()));
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "data_" + std::to_string(i)));
    shapes.push_back(ctx.input(i).shape());
    if (ctx.input(i).dtype() != ctx.input(0).dtype())
      return NodeError(ctx, "input {} has dtype {}, expected {} like input 0", i,
                       DTypeName(ctx.input(i).dtype()), DTypeName(ctx.input(0).dtype()));
  }
  DType t = ctx.input(0).dtype();
  bool ok = kOp == Variadic::kMean ? IsFloat(t) : IsNumeric(t);
  if (!ok) return NodeUnsupported(ctx, "inputs have unsupported dtype {}", DTypeName(t));
  if (ctx.opset() < 8) {
    for (size_t i = 1; i < shapes.size(); ++i)
      if (shapes[i] != shapes[0])
        return NodeError(ctx, "input {} has shape {}, expected {} (no broadcasting before opset 8)",
                         i, ShapeToString(shapes[i]), ShapeToString(shapes[0]));
  }
  FERRY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(ctx, shapes));
  ctx.set_output(0, t, std::move(out));
  return Status::Ok();
}

// numpy's maximum/minimum: a NaN operand gives NaN.
template <typename C>
C MaxPropagateNaN(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<C>::quiet_NaN();
  }
  return a < b ? b : a;
}
template <typename C>
C MinPropagateNaN(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<C>::quiet_NaN();
  }
  return b < a ? b : a;
}

template <Variadic kOp>
void RunVariadic(OpContext& ctx) {
  Tensor& out = ctx.output(0);
  size_t n = ctx.num_inputs();
  std::vector<BroadcastIndexer> idx;
  for (size_t k = 0; k < n; ++k) idx.emplace_back(ctx.input(k).shape(), out.shape());
  VisitNumeric(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    T* o = out.data<T>();
    ParallelFor(ctx, out.size(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        C acc = static_cast<C>(ctx.input(0).data<T>()[idx[0](i)]);
        for (size_t k = 1; k < n; ++k) {
          C v = static_cast<C>(ctx.input(k).data<T>()[idx[k](i)]);
          if constexpr (kOp == Variadic::kMax)
            acc = MaxPropagateNaN(acc, v);
          else if constexpr (kOp == Variadic::kMin)
            acc = MinPropagateNaN(acc, v);
          else if constexpr (kIsInt<C>)
            acc = Apply<Bin::kAdd, C>(acc, v, BinParams{});
          else
            acc += v;
        }
        if constexpr (kOp == Variadic::kMean) {
          if constexpr (kIsFloat<C>) acc /= static_cast<C>(n);
        }
        o[i] = static_cast<T>(acc);
      }
    });
  });
}

constexpr OpDef kOps[] = {
    {"", "Add", 1, nullptr, PrepareBinary<Bin::kAdd>, RunBinary<Bin::kAdd>},
    {"", "Sub", 1, nullptr, PrepareBinary<Bin::kSub>, RunBinary<Bin::kSub>},
    {"", "Mul", 1, nullptr, PrepareBinary<Bin::kMul>, RunBinary<Bin::kMul>},
    {"", "Div", 1, nullptr, PrepareBinary<Bin::kDiv>, RunBinary<Bin::kDiv>},
    {"", "Mod", 10, nullptr, PrepareBinary<Bin::kMod>, RunBinary<Bin::kMod>},
    {"", "Pow", 1, nullptr, PrepareBinary<Bin::kPow>, RunBinary<Bin::kPow>},
    {"", "BitShift", 11, nullptr, PrepareBinary<Bin::kBitShift>, RunBinary<Bin::kBitShift>},
    {"", "And", 1, nullptr, PrepareBinary<Bin::kAnd>, RunBinary<Bin::kAnd>},
    {"", "Or", 1, nullptr, PrepareBinary<Bin::kOr>, RunBinary<Bin::kOr>},
    {"", "Xor", 1, nullptr, PrepareBinary<Bin::kXor>, RunBinary<Bin::kXor>},
    {"", "BitwiseAnd", 18, nullptr, PrepareBinary<Bin::kBitAnd>, RunBinary<Bin::kBitAnd>},
    {"", "BitwiseOr", 18, nullptr, PrepareBinary<Bin::kBitOr>, RunBinary<Bin::kBitOr>},
    {"", "BitwiseXor", 18, nullptr, PrepareBinary<Bin::kBitXor>, RunBinary<Bin::kBitXor>},
    {"", "Equal", 1, nullptr, PrepareBinary<Bin::kEqual>, RunBinary<Bin::kEqual>},
    {"", "Greater", 1, nullptr, PrepareBinary<Bin::kGreater>, RunBinary<Bin::kGreater>},
    {"", "Less", 1, nullptr, PrepareBinary<Bin::kLess>, RunBinary<Bin::kLess>},
    {"", "GreaterOrEqual", 12, nullptr, PrepareBinary<Bin::kGreaterEq>, RunBinary<Bin::kGreaterEq>},
    {"", "LessOrEqual", 12, nullptr, PrepareBinary<Bin::kLessEq>, RunBinary<Bin::kLessEq>},
    {"", "Where", 9, nullptr, PrepareWhere, RunWhere},
    {"", "PRelu", 1, nullptr, PreparePRelu, RunPRelu},
    {"", "Max", 1, nullptr, PrepareVariadic<Variadic::kMax>, RunVariadic<Variadic::kMax>},
    {"", "Min", 1, nullptr, PrepareVariadic<Variadic::kMin>, RunVariadic<Variadic::kMin>},
    {"", "Sum", 1, nullptr, PrepareVariadic<Variadic::kSum>, RunVariadic<Variadic::kSum>},
    {"", "Mean", 1, nullptr, PrepareVariadic<Variadic::kMean>, RunVariadic<Variadic::kMean>},
};

}  // namespace

std::span<const OpDef> BinaryOps() {
  return kOps;
}

}  // namespace ferry::ops
