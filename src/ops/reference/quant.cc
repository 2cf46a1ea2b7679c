// Reference kernels: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
// ConvInteger, QLinearMatMul, QLinearConv.
//
// These are the bit-exact specification for optimized int8 kernels:
//  - quantize: q = saturate(nearbyint(x / scale) + zero_point), x / scale in float (double for
//    int32 x), round half to even, saturate to the output type's range;
//  - integer products: sum((a - a_zp) * (b - b_zp)) accumulated in int32 with two's complement
//    wrap-around (computed in int64, then truncated);
//  - requantize (QLinear*): multiplier = a_scale * b_scale / y_scale in float (per output column
//    or channel when a scale is per-axis), y = saturate(nearbyint(float(acc) * multiplier) + y_zp).
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

bool IsQuantType(DType t) {
  return t == DType::kUint8 || t == DType::kInt8 || t == DType::kUint16 || t == DType::kInt16;
}

void QuantRange(DType t, double* lo, double* hi) {
  VisitNumeric(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      *lo = static_cast<double>(std::numeric_limits<T>::min());
      *hi = static_cast<double>(std::numeric_limits<T>::max());
    }
  });
}

// Rounds half to even and saturates to [lo, hi]; NaN maps to 0 before the zero point is added.
template <typename F>
int64_t RoundSaturate(F v, F zero_point, F lo, F hi) {
  if (std::isnan(v)) v = 0;
  F r = std::nearbyint(v) + zero_point;
  return static_cast<int64_t>(std::clamp(r, lo, hi));
}

void StoreInt(Tensor& t, int64_t i, int64_t v) {
  VisitNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) t.data<T>()[i] = static_cast<T>(v);
  });
}

// Maps an element of a tensor to its quantization parameter: per tensor, per axis or per block.
struct ParamMap {
  int64_t dim = 1, inner = 1, block = 0, param_dim = 1;  // block 0: per axis (1-D parameter)
  bool per_tensor = true;
  int64_t operator()(int64_t i) const {
    if (per_tensor) return 0;
    int64_t r = i % inner, q = i / inner;
    int64_t a = q % dim, o = q / dim;
    if (block == 0) return a;
    return (o * param_dim + a / block) * inner + r;
  }
};

// Validates scale (input si) and zero point (input zi, optional) against x (input 0).
Result<ParamMap> MakeParamMap(const OpContext& ctx, size_t si, size_t zi) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(si);
  ParamMap m;
  if (ctx.input_is_tensor(zi) && ctx.input(zi).shape() != s.shape())
    return NodeError(ctx, "zero point shape {} differs from scale shape {}",
                     ShapeToString(ctx.input(zi).shape()), ShapeToString(s.shape()));
  int64_t block_size = ctx.attr_int("block_size", 0);
  if (s.rank() == 0 || (s.rank() == 1 && s.size() == 1 && block_size == 0)) return m;
  if (ctx.opset() < 13)
    return NodeError(ctx, "scale must be a scalar before opset 13, has shape {}",
                     ShapeToString(s.shape()));
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", 1), x.rank()));
  m.per_tensor = false;
  m.dim = x.dim(axis);
  for (int64_t d = axis + 1; d < x.rank(); ++d) m.inner *= x.dim(d);
  if (block_size <= 0) {
    if (s.rank() != 1 || s.dim(0) != m.dim)
      return NodeError(ctx, "per-axis scale has shape {}, expected [{}] (axis {})",
                       ShapeToString(s.shape()), m.dim, axis);
    m.param_dim = m.dim;
    return m;
  }
  Shape want = x.shape();
  want[static_cast<size_t>(axis)] = (m.dim + block_size - 1) / block_size;
  if (s.shape() != want)
    return NodeError(ctx, "blocked scale has shape {}, expected {} (axis {}, block_size {})",
                     ShapeToString(s.shape()), ShapeToString(want), axis, block_size);
  m.block = block_size;
  m.param_dim = want[static_cast<size_t>(axis)];
  return m;
}

// ---- QuantizeLinear ----
DType QuantizeOutputType(const OpContext& ctx) {
  if (ctx.input_is_tensor(2)) return ctx.input(2).dtype();
  int64_t code = ctx.attr_int("output_dtype", 0);
  if (code != 0) return DTypeFromCode(static_cast<int>(code)).value_or(DType::kUndefined);
  return DType::kUint8;
}

Status PrepareQuantizeLinear(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "x"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "y_scale"));
  FERRY_RETURN_IF_ERROR(RequireDType(
      ctx, 0, {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kDouble}));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 1, {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}));
  DType out = QuantizeOutputType(ctx);
  if (!IsQuantType(out))
    return NodeUnsupported(ctx, "output type {} is not supported (uint8, int8, uint16, int16)",
                           DTypeName(out));
  FERRY_RETURN_IF_ERROR(MakeParamMap(ctx, 1, 2).status());
  ctx.set_output(0, out, ctx.input(0).shape());
  return Status::Ok();
}

void RunQuantizeLinear(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  Tensor& y = ctx.output(0);
  ParamMap pm = MakeParamMap(ctx, 1, 2).value();
  bool has_zp = ctx.input_is_tensor(2);
  double lo = 0, hi = 0;
  QuantRange(y.dtype(), &lo, &hi);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t p = pm(i);
    int64_t zp = has_zp ? ctx.input(2).GetAsInt64(p) : 0;
    int64_t q;
    if (x.dtype() == DType::kInt32 || x.dtype() == DType::kDouble) {
      double v = x.GetAsDouble(i) / s.GetAsDouble(p);
      q = RoundSaturate<double>(v, static_cast<double>(zp), lo, hi);
    } else {
      float v = static_cast<float>(x.GetAsDouble(i)) / static_cast<float>(s.GetAsDouble(p));
      q = RoundSaturate<float>(v, static_cast<float>(zp), static_cast<float>(lo),
                               static_cast<float>(hi));
    }
    StoreInt(y, i, q);
  }
}

// ---- DequantizeLinear ----
Status PrepareDequantizeLinear(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "x"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "x_scale"));
  FERRY_RETURN_IF_ERROR(RequireDType(
      ctx, 0, {DType::kUint8, DType::kInt8, DType::kUint16, DType::kInt16, DType::kInt32}));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 1, {DType::kFloat, DType::kFloat16, DType::kBFloat16, DType::kDouble}));
  if (ctx.input_is_tensor(2) && ctx.input(2).dtype() != ctx.input(0).dtype())
    return NodeError(ctx, "x_zero_point has dtype {}, expected x's dtype {}",
                     DTypeName(ctx.input(2).dtype()), DTypeName(ctx.input(0).dtype()));
  FERRY_RETURN_IF_ERROR(MakeParamMap(ctx, 1, 2).status());
  ctx.set_output(0, ctx.input(1).dtype(), ctx.input(0).shape());
  return Status::Ok();
}

void RunDequantizeLinear(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  Tensor& y = ctx.output(0);
  ParamMap pm = MakeParamMap(ctx, 1, 2).value();
  bool has_zp = ctx.input_is_tensor(2);
  VisitNumeric(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_integral_v<T>) {
      using C = ComputeType<T>;
      for (int64_t i = 0; i < x.size(); ++i) {
        int64_t p = pm(i);
        int64_t d = x.GetAsInt64(i) - (has_zp ? ctx.input(2).GetAsInt64(p) : 0);
        y.data<T>()[i] = T(static_cast<C>(d) * static_cast<C>(s.GetAsDouble(p)));
      }
    }
  });
}

// ---- DynamicQuantizeLinear ----
Status PrepareDynamicQuantizeLinear(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "x"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kFloat}));
  if (ctx.num_outputs() != 3)
    return NodeError(ctx, "has {} outputs; the operator has 3 (y, y_scale, y_zero_point)",
                     ctx.num_outputs());
  ctx.set_output(0, DType::kUint8, ctx.input(0).shape());
  ctx.set_output(1, DType::kFloat, {});
  ctx.set_output(2, DType::kUint8, {});
  return Status::Ok();
}

void RunDynamicQuantizeLinear(OpContext& ctx) {
  std::span<const float> x = ctx.input(0).span<float>();
  float x_min = 0.f, x_max = 0.f;  // the range always includes 0
  for (float v : x) {
    if (std::isnan(v)) continue;
    x_min = std::min(x_min, v);
    x_max = std::max(x_max, v);
  }
  float scale = (x_max - x_min) / 255.f;
  float zp = 0.f;
  if (scale != 0.f)
    zp = static_cast<float>(RoundSaturate<float>(0.f - x_min / scale, 0.f, 0.f, 255.f));
  ctx.output(1).data<float>()[0] = scale;
  ctx.output(2).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  uint8_t* y = ctx.output(0).data<uint8_t>();
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = scale == 0.f ? static_cast<uint8_t>(zp)
                        : static_cast<uint8_t>(RoundSaturate<float>(x[i] / scale, zp, 0.f, 255.f));
}

// ---- shared integer helpers ----
// Input i minus its zero point (input zi, optional), as int32. The zero point is a scalar or a
// 1-D tensor along dimension `axis` of the input (a per-row, per-column or per-channel offset).
std::vector<int32_t> Centered(const OpContext& ctx, size_t i, size_t zi, int64_t axis) {
  const Tensor& t = ctx.input(i);
  std::vector<int32_t> out(static_cast<size_t>(t.size()));
  bool has_zp = ctx.input_is_tensor(zi);
  bool scalar = !has_zp || ctx.input(zi).size() == 1;
  int64_t inner = 1, dim = t.rank() > 0 ? t.dim(axis) : 1;
  for (int64_t d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  for (int64_t k = 0; k < t.size(); ++k) {
    int64_t zp = !has_zp ? 0 : ctx.input(zi).GetAsInt64(scalar ? 0 : (k / inner) % dim);
    out[static_cast<size_t>(k)] = static_cast<int32_t>(t.GetAsInt64(k) - zp);
  }
  return out;
}

// A quantization parameter (input i) that is a scalar or a 1-D tensor of length n.
Status CheckParam(const OpContext& ctx, size_t i, std::string_view what, int64_t n,
                  std::string_view dim_name) {
  if (!ctx.input_is_tensor(i)) return Status::Ok();
  const Tensor& t = ctx.input(i);
  if (t.size() == 1 && t.rank() <= 1) return Status::Ok();
  if (t.rank() == 1 && t.dim(0) == n) return Status::Ok();
  return NodeError(ctx, "{} has shape {}, expected a scalar or [{}] ({})", what,
                   ShapeToString(t.shape()), n, dim_name);
}

float ParamAt(const OpContext& ctx, size_t i, int64_t k) {
  const Tensor& t = ctx.input(i);
  return static_cast<float>(t.GetAsDouble(t.size() == 1 ? 0 : k));
}

// ---- matmul (MatMulInteger, QLinearMatMul) with numpy batch broadcasting ----
struct MatMulDims {
  int64_t m = 1, k = 1, n = 1;
  Shape a_batch, b_batch, batch, out;
};

Result<MatMulDims> GetMatMulDims(const OpContext& ctx, size_t ai, size_t bi) {
  const Shape& a = ctx.input(ai).shape();
  const Shape& b = ctx.input(bi).shape();
  if (a.empty() || b.empty())
    return NodeError(ctx, "matmul inputs must have rank >= 1, got {} and {}", ShapeToString(a),
                     ShapeToString(b));
  MatMulDims d;
  d.k = a.back();
  d.m = a.size() >= 2 ? a[a.size() - 2] : 1;
  int64_t kb = b.size() >= 2 ? b[b.size() - 2] : b[0];
  d.n = b.size() >= 2 ? b.back() : 1;
  if (kb != d.k)
    return NodeError(ctx, "matmul inner dimensions differ: A {} and B {}", ShapeToString(a),
                     ShapeToString(b));
  d.a_batch.assign(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  d.b_batch.assign(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  FERRY_ASSIGN_OR_RETURN(d.batch, BroadcastShapes(ctx, {d.a_batch, d.b_batch}));
  d.out = d.batch;
  if (a.size() >= 2) d.out.push_back(d.m);
  if (b.size() >= 2) d.out.push_back(d.n);
  return d;
}

// acc[batch, m, n] = sum_k a[.., m, k] * b[.., k, n], wrapped to int32.
std::vector<int32_t> IntMatMul(const MatMulDims& d, const std::vector<int32_t>& a,
                               const std::vector<int32_t>& b) {
  BroadcastIndexer ai(d.a_batch, d.batch), bi(d.b_batch, d.batch);
  int64_t nb = NumElements(d.batch);
  std::vector<int32_t> out(static_cast<size_t>(nb * d.m * d.n));
  for (int64_t t = 0; t < nb; ++t) {
    const int32_t* pa = a.data() + ai(t) * d.m * d.k;
    const int32_t* pb = b.data() + bi(t) * d.k * d.n;
    int32_t* po = out.data() + t * d.m * d.n;
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        int64_t acc = 0;
        for (int64_t k = 0; k < d.k; ++k) acc += int64_t{pa[i * d.k + k]} * pb[k * d.n + j];
        po[i * d.n + j] = static_cast<int32_t>(acc);
      }
  }
  return out;
}

// ---- MatMulInteger ----
Status PrepareMatMulInteger(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 4));
  for (size_t i = 0; i < 4; ++i)
    if (ctx.has_input(i))
      FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kUint8, DType::kInt8}));
  FERRY_ASSIGN_OR_RETURN(MatMulDims d, GetMatMulDims(ctx, 0, 1));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 2, "a_zero_point", d.m, "rows of A"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 3, "b_zero_point", d.n, "columns of B"));
  ctx.set_output(0, DType::kInt32, d.out);
  return Status::Ok();
}

int64_t RowAxis(const Tensor& t) {
  return t.rank() >= 2 ? t.rank() - 2 : 0;
}
int64_t ColAxis(const Tensor& t) {
  return t.rank() - 1;
}

void RunMatMulInteger(OpContext& ctx) {
  MatMulDims d = GetMatMulDims(ctx, 0, 1).value();
  std::vector<int32_t> a = Centered(ctx, 0, 2, RowAxis(ctx.input(0)));
  std::vector<int32_t> b = Centered(ctx, 1, 3, ColAxis(ctx.input(1)));
  std::vector<int32_t> acc = IntMatMul(d, a, b);
  std::copy(acc.begin(), acc.end(), ctx.output(0).data<int32_t>());
}

// ---- QLinearMatMul ----
Status PrepareQLinearMatMul(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 8, 8));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kUint8, DType::kInt8}));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 3, {DType::kUint8, DType::kInt8}));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 7, {DType::kUint8, DType::kInt8}));
  // Scales: float32 (opset 10), float16/bfloat16 too from opset 21, all three of one type;
  // the requantization multiplier is computed in float32 either way.
  for (size_t i : {1, 4, 6})
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kFloat, DType::kFloat16, DType::kBFloat16}));
  if (ctx.input(4).dtype() != ctx.input(1).dtype() || ctx.input(6).dtype() != ctx.input(1).dtype())
    return NodeError(ctx, "a_scale, b_scale and y_scale have dtypes {}, {} and {}, expected one",
                     DTypeName(ctx.input(1).dtype()), DTypeName(ctx.input(4).dtype()),
                     DTypeName(ctx.input(6).dtype()));
  FERRY_ASSIGN_OR_RETURN(MatMulDims d, GetMatMulDims(ctx, 0, 3));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 1, "a_scale", d.m, "rows of A"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 2, "a_zero_point", d.m, "rows of A"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 4, "b_scale", d.n, "columns of B"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 5, "b_zero_point", d.n, "columns of B"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 6, "y_scale", 1, "scalar"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 7, "y_zero_point", 1, "scalar"));
  ctx.set_output(0, ctx.input(7).dtype(), d.out);
  return Status::Ok();
}

void RunQLinearMatMul(OpContext& ctx) {
  MatMulDims d = GetMatMulDims(ctx, 0, 3).value();
  std::vector<int32_t> a = Centered(ctx, 0, 2, RowAxis(ctx.input(0)));
  std::vector<int32_t> b = Centered(ctx, 3, 5, ColAxis(ctx.input(3)));
  std::vector<int32_t> acc = IntMatMul(d, a, b);
  Tensor& y = ctx.output(0);
  double lo = 0, hi = 0;
  QuantRange(y.dtype(), &lo, &hi);
  float y_scale = ParamAt(ctx, 6, 0);
  float y_zp = static_cast<float>(ctx.input(7).GetAsInt64(0));
  for (size_t t = 0; t < acc.size(); ++t) {
    int64_t j = static_cast<int64_t>(t) % d.n, i = (static_cast<int64_t>(t) / d.n) % d.m;
    float multiplier = ParamAt(ctx, 1, i) * ParamAt(ctx, 4, j) / y_scale;
    float v = static_cast<float>(acc[t]) * multiplier;
    StoreInt(y, static_cast<int64_t>(t),
             RoundSaturate<float>(v, y_zp, static_cast<float>(lo), static_cast<float>(hi)));
  }
}

// ---- convolution (ConvInteger, QLinearConv) ----
struct ConvGeom {
  int64_t batch = 0, in_c = 0, out_c = 0, group = 1;
  Shape in_sp, k_sp, out_sp;
  std::vector<int64_t> strides, dilations, pads_begin;
};

Result<ConvGeom> GetConvGeom(const OpContext& ctx, size_t xi, size_t wi) {
  const Tensor& x = ctx.input(xi);
  const Tensor& w = ctx.input(wi);
  if (x.rank() < 3) return NodeError(ctx, "X has rank {}, expected at least 3", x.rank());
  if (w.rank() != x.rank())
    return NodeError(ctx, "W has rank {}, expected {} (X's rank)", w.rank(), x.rank());
  ConvGeom g;
  size_t nsp = static_cast<size_t>(x.rank() - 2);
  g.batch = x.dim(0);
  g.in_c = x.dim(1);
  g.out_c = w.dim(0);
  g.group = ctx.attr_int("group", 1);
  if (g.group <= 0 || g.in_c % g.group != 0 || g.out_c % g.group != 0 ||
      w.dim(1) * g.group != g.in_c)
    return NodeError(ctx, "group {} does not fit X channels {} and W shape {}", g.group, g.in_c,
                     ShapeToString(w.shape()));
  g.in_sp.assign(x.shape().begin() + 2, x.shape().end());
  g.k_sp.assign(w.shape().begin() + 2, w.shape().end());
  std::vector<int64_t> ks = ctx.attr_ints("kernel_shape");
  if (!ks.empty() && ks != g.k_sp)
    return NodeError(ctx, "kernel_shape {} differs from W's spatial shape {}", ShapeToString(ks),
                     ShapeToString(g.k_sp));
  g.strides = ctx.attr_ints("strides");
  g.dilations = ctx.attr_ints("dilations");
  std::vector<int64_t> pads = ctx.attr_ints("pads");
  if (g.strides.empty()) g.strides.assign(nsp, 1);
  if (g.dilations.empty()) g.dilations.assign(nsp, 1);
  if (pads.empty()) pads.assign(2 * nsp, 0);
  if (g.strides.size() != nsp || g.dilations.size() != nsp || pads.size() != 2 * nsp)
    return NodeError(ctx, "strides/dilations/pads have {}/{}/{} values for {} spatial dims",
                     g.strides.size(), g.dilations.size(), pads.size(), nsp);
  std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  g.pads_begin.assign(nsp, 0);
  g.out_sp.assign(nsp, 0);
  for (size_t i = 0; i < nsp; ++i) {
    int64_t s = g.strides[i], dl = g.dilations[i];
    if (s <= 0 || dl <= 0) return NodeError(ctx, "strides and dilations must be positive");
    int64_t ext = (g.k_sp[i] - 1) * dl + 1, in = g.in_sp[i];
    if (auto_pad == "NOTSET") {
      g.pads_begin[i] = pads[i];
      g.out_sp[i] = (in + pads[i] + pads[i + nsp] - ext) / s + 1;
      if (in + pads[i] + pads[i + nsp] < ext) g.out_sp[i] = 0;
    } else if (auto_pad == "VALID") {
      g.out_sp[i] = in >= ext ? (in - ext) / s + 1 : 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out_sp[i] = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (g.out_sp[i] - 1) * s + ext - in);
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else {
      return NodeUnsupported(ctx, "auto_pad '{}' is not supported", auto_pad);
    }
  }
  return g;
}

Shape ConvOutShape(const ConvGeom& g) {
  Shape s{g.batch, g.out_c};
  s.insert(s.end(), g.out_sp.begin(), g.out_sp.end());
  return s;
}

// acc[n, m, out...] = sum over (c, k...) of x[n, g*C/G + c, o*s - pad + k*d] * w[m, c, k...];
// positions in the padding contribute nothing (they hold the zero point). Wrapped to int32.
std::vector<int32_t> IntConv(const ConvGeom& g, const std::vector<int32_t>& x,
                             const std::vector<int32_t>& w) {
  size_t nsp = g.in_sp.size();
  int64_t in_size = NumElements(g.in_sp), k_size = NumElements(g.k_sp);
  int64_t out_size = NumElements(g.out_sp);
  int64_t cg = g.in_c / g.group, mg = g.out_c / g.group;
  std::vector<int32_t> out(static_cast<size_t>(g.batch * g.out_c * out_size));
  std::vector<int64_t> oc(nsp), kc(nsp);
  for (int64_t o = 0; o < out_size; ++o) {
    for (int64_t r = o, d = static_cast<int64_t>(nsp) - 1; d >= 0; --d) {
      oc[d] = r % g.out_sp[d];
      r /= g.out_sp[d];
    }
    // Input offsets (or -1 for padding) of every kernel tap for this output position.
    std::vector<int64_t> taps(static_cast<size_t>(k_size));
    for (int64_t k = 0; k < k_size; ++k) {
      int64_t off = 0;
      for (int64_t r = k, d = static_cast<int64_t>(nsp) - 1; d >= 0; --d) {
        kc[d] = r % g.k_sp[d];
        r /= g.k_sp[d];
      }
      for (size_t d = 0; d < nsp && off >= 0; ++d) {
        int64_t p = oc[d] * g.strides[d] - g.pads_begin[d] + kc[d] * g.dilations[d];
        off = (p < 0 || p >= g.in_sp[d]) ? -1 : off * g.in_sp[d] + p;
      }
      taps[static_cast<size_t>(k)] = off;
    }
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t m = 0; m < g.out_c; ++m) {
        int64_t c0 = (m / mg) * cg, acc = 0;
        for (int64_t c = 0; c < cg; ++c) {
          const int32_t* px = x.data() + (n * g.in_c + c0 + c) * in_size;
          const int32_t* pw = w.data() + (m * cg + c) * k_size;
          for (int64_t k = 0; k < k_size; ++k)
            if (taps[k] >= 0) acc += int64_t{px[taps[k]]} * pw[k];
        }
        out[static_cast<size_t>((n * g.out_c + m) * out_size + o)] = static_cast<int32_t>(acc);
      }
  }
  return out;
}

// ---- ConvInteger ----
Status PrepareConvInteger(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 4));
  for (size_t i = 0; i < 4; ++i)
    if (ctx.has_input(i))
      FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kUint8, DType::kInt8}));
  FERRY_ASSIGN_OR_RETURN(ConvGeom g, GetConvGeom(ctx, 0, 1));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 2, "x_zero_point", 1, "scalar"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 3, "w_zero_point", g.out_c, "output channels"));
  ctx.set_output(0, DType::kInt32, ConvOutShape(g));
  return Status::Ok();
}

void RunConvInteger(OpContext& ctx) {
  ConvGeom g = GetConvGeom(ctx, 0, 1).value();
  std::vector<int32_t> acc = IntConv(g, Centered(ctx, 0, 2, 0), Centered(ctx, 1, 3, 0));
  std::copy(acc.begin(), acc.end(), ctx.output(0).data<int32_t>());
}

// ---- QLinearConv ----
Status PrepareQLinearConv(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 8, 9));
  for (size_t i : {0, 2, 3, 5, 7})
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kUint8, DType::kInt8}));
  for (size_t i : {1, 4, 6}) FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kFloat}));
  FERRY_ASSIGN_OR_RETURN(ConvGeom g, GetConvGeom(ctx, 0, 3));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 1, "x_scale", 1, "scalar"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 2, "x_zero_point", 1, "scalar"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 4, "w_scale", g.out_c, "output channels"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 5, "w_zero_point", g.out_c, "output channels"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 6, "y_scale", 1, "scalar"));
  FERRY_RETURN_IF_ERROR(CheckParam(ctx, 7, "y_zero_point", 1, "scalar"));
  if (ctx.has_input(8)) {
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 8, {DType::kInt32}));
    if (ctx.input(8).rank() != 1 || ctx.input(8).dim(0) != g.out_c)
      return NodeError(ctx, "B has shape {}, expected [{}]", ShapeToString(ctx.input(8).shape()),
                       g.out_c);
  }
  ctx.set_output(0, ctx.input(7).dtype(), ConvOutShape(g));
  return Status::Ok();
}

void RunQLinearConv(OpContext& ctx) {
  ConvGeom g = GetConvGeom(ctx, 0, 3).value();
  std::vector<int32_t> acc = IntConv(g, Centered(ctx, 0, 2, 0), Centered(ctx, 3, 5, 0));
  Tensor& y = ctx.output(0);
  double lo = 0, hi = 0;
  QuantRange(y.dtype(), &lo, &hi);
  float x_scale = ParamAt(ctx, 1, 0), y_scale = ParamAt(ctx, 6, 0);
  float y_zp = static_cast<float>(ctx.input(7).GetAsInt64(0));
  int64_t out_size = NumElements(g.out_sp);
  for (size_t t = 0; t < acc.size(); ++t) {
    int64_t m = (static_cast<int64_t>(t) / out_size) % g.out_c;
    int32_t a = acc[t];
    if (ctx.has_input(8)) a = static_cast<int32_t>(int64_t{a} + ctx.input(8).data<int32_t>()[m]);
    float multiplier = x_scale * ParamAt(ctx, 4, m) / y_scale;
    float v = static_cast<float>(a) * multiplier;
    StoreInt(y, static_cast<int64_t>(t),
             RoundSaturate<float>(v, y_zp, static_cast<float>(lo), static_cast<float>(hi)));
  }
}

constexpr OpDef kOps[] = {
    {"", "QuantizeLinear", 10, nullptr, PrepareQuantizeLinear, RunQuantizeLinear},
    {"", "DequantizeLinear", 10, nullptr, PrepareDequantizeLinear, RunDequantizeLinear},
    {"", "DynamicQuantizeLinear", 11, nullptr, PrepareDynamicQuantizeLinear,
     RunDynamicQuantizeLinear},
    {"", "MatMulInteger", 10, nullptr, PrepareMatMulInteger, RunMatMulInteger},
    {"", "QLinearMatMul", 10, nullptr, PrepareQLinearMatMul, RunQLinearMatMul},
    {"", "ConvInteger", 10, nullptr, PrepareConvInteger, RunConvInteger},
    {"", "QLinearConv", 10, nullptr, PrepareQLinearConv, RunQLinearConv},
};

}  // namespace

std::span<const OpDef> QuantOps() {
  return kOps;
}

}  // namespace ferry::ops
