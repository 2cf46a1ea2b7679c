// Reference kernels, com.microsoft domain (ONNX Runtime contrib ops, since_version 1), what
// ONNX Runtime's QOperator quantizer writes besides QLinearConv / QLinearMatMul: QLinearAdd,
// QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearAveragePool,
// QLinearGlobalAveragePool, QGemm.
//
// The contrib spec (ContribOperators.md) gives the math in real numbers; where rounding decides
// an int8 result these kernels round as ONNX Runtime's CPU kernels (MLAS) do, so the same model
// gives the same integers:
//  - QLinearAdd: with ratios ra = a_scale / c_scale, rb = b_scale / c_scale (float),
//    c = nearbyint(fma(a, ra, fma(b, rb, zc - fma(ra, za, rb * zb)))), saturated;
//  - QLinearMul: c = saturate(nearbyint(float(a - za) * float(b - zb) * (sa * sb / sc)) + zc);
//  - QLinearSigmoid / QLinearLeakyRelu / QLinearConcat (re-scaled inputs): per input value,
//    y = saturate(nearbyint(f(float(x - zx) * sx) / sy) + zy) (ORT's lookup tables);
//  - QLinearAveragePool: the window's float(x - zx) * sx summed in float, divided by the count,
//    y = saturate(nearbyint(avg / sy + zy));
//  - QLinearGlobalAveragePool: acc = sum(x) - zx * n in int32,
//    y = saturate(nearbyint(float(acc) * (sx / (sy * n))) + zy);
//  - QGemm: acc = C + sum (a - za)(b - zb) in int32 (C broadcast), multiplier
//    alpha * sa * sb[j] (/ sy), y = saturate(nearbyint(float(acc) * multiplier) + zy), or
//    float(acc) * multiplier when y_scale is absent.
#include "ops/reference/contrib_common.h"

namespace ferry::ops {

namespace {

constexpr std::initializer_list<DType> kQ8 = {DType::kUint8, DType::kInt8};
constexpr std::initializer_list<DType> kF32 = {DType::kFloat};

// Input i is a uint8/int8 tensor of dtype `like` (or any 8-bit type when `like` is undefined).
Status RequireQ8(const OpContext& ctx, size_t i, std::string_view what, DType like) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kQ8));
  if (like != DType::kUndefined && ctx.input(i).dtype() != like)
    return NodeError(ctx, "{} has dtype {}, expected {}", what, DTypeName(ctx.input(i).dtype()),
                     DTypeName(like));
  return Status::Ok();
}

// x, x_scale, x_zero_point (optional) starting at input i.
Status RequireQTriple(const OpContext& ctx, size_t i, std::string_view name, DType like) {
  FERRY_RETURN_IF_ERROR(RequireQ8(ctx, i, name, like));
  const DType t = ctx.input(i).dtype();
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, i + 1, fmt::format("{}_scale", name), true, kF32));
  FERRY_RETURN_IF_ERROR(
      RequireScalarParam(ctx, i + 2, fmt::format("{}_zero_point", name), false, {t}));
  return Status::Ok();
}

// ---- QLinearAdd, QLinearMul: A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp ----
Status PrepareQLinearBinary(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 7, 8));
  FERRY_RETURN_IF_ERROR(RequireQTriple(ctx, 0, "A", DType::kUndefined));
  const DType t = ctx.input(0).dtype();
  FERRY_RETURN_IF_ERROR(RequireQTriple(ctx, 3, "B", t));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 6, "C_scale", true, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 7, "C_zero_point", false, {t}));
  FERRY_ASSIGN_OR_RETURN(Shape out,
                         BroadcastShapes(ctx, {ctx.input(0).shape(), ctx.input(3).shape()}));
  ctx.set_output(0, t, out);
  return Status::Ok();
}

template <bool kMul>
void RunQLinearBinary(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  Tensor& y = ctx.output(0);
  const DType t = y.dtype();
  const float sa = ParamF(ctx, 1), sb = ParamF(ctx, 4), sc = ParamF(ctx, 6);
  const int32_t za = ParamI(ctx, 2), zb = ParamI(ctx, 5), zc = ParamI(ctx, 7);
  BroadcastIndexer ia(a.shape(), y.shape()), ib(b.shape(), y.shape());
  const float ra = sa / sc, rb = sb / sc;
  const float c =
      static_cast<float>(zc) - std::fma(ra, static_cast<float>(za), rb * static_cast<float>(zb));
  const float mul = sa * sb / sc;
  const float lo = static_cast<float>(QMin(t)), hi = static_cast<float>(QMax(t));
  for (int64_t i = 0; i < y.size(); ++i) {
    const int32_t av = QAt(a, ia(i)), bv = QAt(b, ib(i));
    if constexpr (kMul) {
      const float v = static_cast<float>(av - za) * static_cast<float>(bv - zb) * mul;
      QStore(y, i, RoundToQ(v, zc, t));
    } else {
      const float v = std::fma(static_cast<float>(av), ra, std::fma(static_cast<float>(bv), rb, c));
      QStore(y, i, static_cast<int32_t>(std::clamp(std::nearbyint(v), lo, hi)));
    }
  }
}

// ---- QLinearSigmoid, QLinearLeakyRelu: X, X_scale, X_zp, Y_scale, Y_zp ----
Status PrepareQLinearUnary(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 4, 5));
  FERRY_RETURN_IF_ERROR(RequireQTriple(ctx, 0, "X", DType::kUndefined));
  const DType t = ctx.input(0).dtype();
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 3, "Y_scale", true, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 4, "Y_zero_point", false, {t}));
  ctx.set_output(0, t, ctx.input(0).shape());
  return Status::Ok();
}

template <typename F>
void RunQLinearTable(OpContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const DType t = x.dtype();
  const float sx = ParamF(ctx, 1), sy = ParamF(ctx, 3);
  const int32_t zx = ParamI(ctx, 2), zy = ParamI(ctx, 4);
  int32_t table[256];
  for (int32_t q = QMin(t); q <= QMax(t); ++q)
    table[q - QMin(t)] = QuantizeF(f(static_cast<float>(q - zx) * sx), sy, zy, t);
  for (int64_t i = 0; i < x.size(); ++i) QStore(y, i, table[QAt(x, i) - QMin(t)]);
}

void RunQLinearSigmoid(OpContext& ctx) {
  RunQLinearTable(ctx, [](float v) { return 1.f / (1.f + std::exp(-v)); });
}

void RunQLinearLeakyRelu(OpContext& ctx) {
  const float alpha = ctx.attr_float("alpha", 0.01f);
  RunQLinearTable(ctx, [alpha](float v) { return v >= 0 ? v : v * alpha; });
}

// ---- QLinearConcat: Y_scale, Y_zp, then (X, X_scale, X_zp) per input; attr axis ----
Status PrepareQLinearConcat(OpContext& ctx) {
  if (ctx.num_inputs() < 5 || (ctx.num_inputs() - 2) % 3 != 0)
    return NodeError(ctx, "has {} inputs, expected Y_scale, Y_zero_point and 3 per input",
                     ctx.num_inputs());
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 0, "Y_scale", true, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 1, "Y_zero_point", true, kQ8));
  if (!ctx.has_attr("axis")) return NodeError(ctx, "attribute axis is missing");
  const DType t = ctx.input(1).dtype();
  Shape out;
  int64_t axis = 0;
  for (size_t i = 2; i < ctx.num_inputs(); i += 3) {
    FERRY_RETURN_IF_ERROR(RequireQ8(ctx, i, fmt::format("input {}", (i - 2) / 3), t));
    FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, i + 1, "an input's scale", true, kF32));
    if (!ctx.has_input(i + 2)) return NodeError(ctx, "input {} is missing (zero point)", i + 2);
    FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, i + 2, "an input's zero point", true, {t}));
    const Shape& s = ctx.input(i).shape();
    if (i == 2) {
      FERRY_ASSIGN_OR_RETURN(
          axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), static_cast<int64_t>(s.size())));
      out = s;
      continue;
    }
    bool ok = s.size() == out.size();
    for (size_t d = 0; ok && d < s.size(); ++d)
      ok = static_cast<int64_t>(d) == axis || s[d] == out[d];
    if (!ok)
      return NodeError(ctx, "input {} has shape {}, which differs from {} outside axis {}",
                       (i - 2) / 3, ShapeToString(s), ShapeToString(ctx.input(2).shape()), axis);
    out[static_cast<size_t>(axis)] += s[static_cast<size_t>(axis)];
  }
  ctx.set_output(0, t, out);
  return Status::Ok();
}

void RunQLinearConcat(OpContext& ctx) {
  Tensor& y = ctx.output(0);
  const DType t = y.dtype();
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < 0) axis += y.rank();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= y.dim(d);
  for (int64_t d = axis + 1; d < y.rank(); ++d) inner *= y.dim(d);
  const int64_t out_row = y.dim(axis) * inner;
  const float sy = ParamF(ctx, 0);
  const int32_t zy = ParamI(ctx, 1);
  int64_t offset = 0;
  for (size_t i = 2; i < ctx.num_inputs(); i += 3) {
    const Tensor& x = ctx.input(i);
    const float sx = ParamF(ctx, i + 1);
    const int32_t zx = ParamI(ctx, i + 2);
    const bool same = sx == sy && zx == zy;
    int32_t table[256];
    for (int32_t q = QMin(t); q <= QMax(t); ++q)
      table[q - QMin(t)] = same ? q : QuantizeF(static_cast<float>(q - zx) * sx, sy, zy, t);
    const int64_t row = x.dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < row; ++k)
        QStore(y, o * out_row + offset + k, table[QAt(x, o * row + k) - QMin(t)]);
    offset += row;
  }
}

// ---- QLinearAveragePool: X, X_scale, X_zp, Y_scale, Y_zp; AveragePool's attributes ----
struct PoolGeom {
  int64_t n = 1, c = 1;
  bool channels_last = false;
  std::vector<int64_t> in, out, k, s, pad_begin;
};

Result<PoolGeom> GetPoolGeom(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return NodeError(ctx, "X has rank {}, expected at least 3", x.rank());
  PoolGeom g;
  g.channels_last = ctx.attr_int("channels_last", 0) != 0;
  const size_t nsp = static_cast<size_t>(x.rank() - 2);
  g.n = x.dim(0);
  g.c = g.channels_last ? x.dim(x.rank() - 1) : x.dim(1);
  for (size_t d = 0; d < nsp; ++d)
    g.in.push_back(x.dim(static_cast<int64_t>(d) + (g.channels_last ? 1 : 2)));
  g.k = ctx.attr_ints("kernel_shape");
  if (g.k.size() != nsp)
    return NodeError(ctx, "kernel_shape has {} values, expected {}", g.k.size(), nsp);
  g.s = ctx.attr_ints("strides");
  if (g.s.empty()) g.s.assign(nsp, 1);
  std::vector<int64_t> pads = ctx.attr_ints("pads");
  if (pads.empty()) pads.assign(2 * nsp, 0);
  if (g.s.size() != nsp || pads.size() != 2 * nsp)
    return NodeError(ctx, "strides/pads have {}/{} values for {} spatial dims", g.s.size(),
                     pads.size(), nsp);
  if (!ctx.attr_ints("dilations").empty())
    for (int64_t dl : ctx.attr_ints("dilations"))
      if (dl != 1) return NodeUnsupported(ctx, "dilations other than 1 are not supported");
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  const bool ceil = ctx.attr_int("ceil_mode", 0) != 0;
  g.pad_begin.assign(nsp, 0);
  for (size_t d = 0; d < nsp; ++d) {
    const int64_t k = g.k[d], s = g.s[d], in = g.in[d];
    if (k <= 0 || s <= 0) return NodeError(ctx, "kernel_shape and strides must be positive");
    int64_t o;
    if (auto_pad == "NOTSET") {
      g.pad_begin[d] = pads[d];
      const int64_t span = in + pads[d] + pads[d + nsp] - k;
      if (span < 0) return NodeError(ctx, "kernel {} is larger than the padded input", k);
      o = (ceil ? (span + s - 1) / s : span / s) + 1;
    } else if (auto_pad == "VALID") {
      if (in < k) return NodeError(ctx, "kernel {} is larger than the input {}", k, in);
      o = (in - k) / s + 1;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (o - 1) * s + k - in);
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else {
      return NodeUnsupported(ctx, "auto_pad '{}' is not supported", auto_pad);
    }
    g.out.push_back(o);
  }
  return g;
}

Status PrepareQLinearAveragePool(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 4, 5));
  FERRY_RETURN_IF_ERROR(RequireQTriple(ctx, 0, "X", DType::kUndefined));
  const DType t = ctx.input(0).dtype();
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 3, "y_scale", true, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 4, "y_zero_point", false, {t}));
  FERRY_ASSIGN_OR_RETURN(PoolGeom g, GetPoolGeom(ctx));
  Shape out = {g.n};
  if (!g.channels_last) out.push_back(g.c);
  out.insert(out.end(), g.out.begin(), g.out.end());
  if (g.channels_last) out.push_back(g.c);
  ctx.set_output(0, t, out);
  return Status::Ok();
}

void RunQLinearAveragePool(OpContext& ctx) {
  PoolGeom g = GetPoolGeom(ctx).value();
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const DType t = x.dtype();
  const float sx = ParamF(ctx, 1), sy = ParamF(ctx, 3);
  const int32_t zx = ParamI(ctx, 2), zy = ParamI(ctx, 4);
  const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  const size_t nsp = g.in.size();
  const int64_t in_size = NumElements(g.in), out_size = NumElements(g.out);
  int64_t ksize = 1;
  for (int64_t k : g.k) ksize *= k;
  std::vector<int64_t> oc(nsp), lo(nsp), hi(nsp), pos(nsp);
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t o = 0; o < out_size; ++o) {
        for (int64_t r = o, d = static_cast<int64_t>(nsp) - 1; d >= 0; --d) {
          oc[d] = r % g.out[d];
          r /= g.out[d];
        }
        int64_t count = 1;
        for (size_t d = 0; d < nsp; ++d) {
          const int64_t start = oc[d] * g.s[d] - g.pad_begin[d];
          hi[d] = std::min(start + g.k[d], g.in[d]);
          lo[d] = std::max<int64_t>(start, 0);
          count *= std::max<int64_t>(0, hi[d] - lo[d]);
        }
        float sum = 0.f;
        if (count > 0) {
          pos = lo;
          while (true) {
            int64_t off = 0;
            for (size_t d = 0; d < nsp; ++d) off = off * g.in[d] + pos[d];
            const int64_t xi =
                g.channels_last ? (b * in_size + off) * g.c + ch : (b * g.c + ch) * in_size + off;
            sum += sx * static_cast<float>(QAt(x, xi) - zx);
            size_t d = nsp;
            while (d > 0 && ++pos[d - 1] >= hi[d - 1]) {
              pos[d - 1] = lo[d - 1];
              --d;
            }
            if (d == 0) break;
          }
        }
        const float avg =
            sum / static_cast<float>(include_pad ? ksize : std::max<int64_t>(count, 1));
        const float v = std::nearbyint(avg / sy + static_cast<float>(zy));
        const int64_t yi =
            g.channels_last ? (b * out_size + o) * g.c + ch : (b * g.c + ch) * out_size + o;
        QStore(y, yi,
               static_cast<int32_t>(std::clamp(std::isnan(v) ? 0.f : v, static_cast<float>(QMin(t)),
                                               static_cast<float>(QMax(t)))));
      }
}

// ---- QLinearGlobalAveragePool: X, x_scale, x_zp, y_scale, y_zp; attr channels_last ----
Status PrepareQLinearGlobalAveragePool(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 5, 5));
  FERRY_RETURN_IF_ERROR(RequireQTriple(ctx, 0, "X", DType::kUndefined));
  const DType t = ctx.input(0).dtype();
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 3, "y_scale", true, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 4, "y_zero_point", true, {t}));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3) return NodeError(ctx, "X has rank {}, expected at least 3", x.rank());
  const bool last = ctx.attr_int("channels_last", 0) != 0;
  Shape out = x.shape();
  for (int64_t d = last ? 1 : 2; d < (last ? x.rank() - 1 : x.rank()); ++d)
    out[static_cast<size_t>(d)] = 1;
  ctx.set_output(0, t, out);
  return Status::Ok();
}

void RunQLinearGlobalAveragePool(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const DType t = x.dtype();
  const bool last = ctx.attr_int("channels_last", 0) != 0;
  const int64_t n = x.dim(0), c = last ? x.dim(x.rank() - 1) : x.dim(1);
  const int64_t hw = n * c == 0 ? 0 : x.size() / (n * c);
  const float sx = ParamF(ctx, 1), sy = ParamF(ctx, 3);
  const int32_t zx = ParamI(ctx, 2), zy = ParamI(ctx, 4);
  const float scale = sx / (sy * static_cast<float>(hw));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      int32_t acc = 0;
      for (int64_t p = 0; p < hw; ++p)
        acc += QAt(x, last ? (b * hw + p) * c + ch : (b * c + ch) * hw + p);
      acc -= zx * static_cast<int32_t>(hw);
      QStore(y, b * c + ch, RoundToQ(static_cast<float>(acc) * scale, zy, t));
    }
}

// ---- QGemm: A, a_scale, a_zp, B, b_scale, b_zp, C (int32), y_scale, y_zp ----
struct QGemmDims {
  int64_t m, k, n;
};

QGemmDims GetQGemmDims(const OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  return {ta ? a.dim(1) : a.dim(0), ta ? a.dim(0) : a.dim(1), tb ? b.dim(0) : b.dim(1)};
}

Status PrepareQGemm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 6, 9));
  FERRY_RETURN_IF_ERROR(RequireQ8(ctx, 0, "A", DType::kUndefined));
  FERRY_RETURN_IF_ERROR(RequireQ8(ctx, 3, "B", DType::kUndefined));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  if (a.rank() != 2 || b.rank() != 2)
    return NodeError(ctx, "A and B must be 2-D, got shapes {} and {}", ShapeToString(a.shape()),
                     ShapeToString(b.shape()));
  const QGemmDims d = GetQGemmDims(ctx);
  const int64_t kb = ctx.attr_int("transB", 0) != 0 ? b.dim(1) : b.dim(0);
  if (kb != d.k)
    return NodeError(ctx, "inner dimensions differ: A' is {}x{}, B' is {}x{}", d.m, d.k, kb, d.n);
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 1, "a_scale", true, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 2, "a_zero_point", true, {a.dtype()}));
  FERRY_RETURN_IF_ERROR(RequireScalarOrVector(ctx, 4, "b_scale", d.n, kF32));
  if (!ctx.has_input(5)) return NodeError(ctx, "input 5 (b_zero_point) is missing");
  FERRY_RETURN_IF_ERROR(RequireScalarOrVector(ctx, 5, "b_zero_point", d.n, {b.dtype()}));
  if (ctx.has_input(6)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 6, "C"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 6, {DType::kInt32}));
    const Shape& c = ctx.input(6).shape();
    bool ok = c.size() <= 2;
    for (size_t i = 0; ok && i < c.size(); ++i) {
      const int64_t want = i + 2 - c.size() == 0 ? d.m : d.n;
      ok = c[i] == want || c[i] == 1;
    }
    if (!ok)
      return NodeError(ctx, "C has shape {}, which does not broadcast to [{}, {}]",
                       ShapeToString(c), d.m, d.n);
  }
  const bool quantized_out = ctx.has_input(7);
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 7, "y_scale", false, kF32));
  if (ctx.has_input(8) && !quantized_out)
    return NodeError(ctx, "y_zero_point is given without y_scale");
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 8, "y_zero_point", false, kQ8));
  const DType yt =
      !quantized_out ? DType::kFloat : (ctx.has_input(8) ? ctx.input(8).dtype() : DType::kUint8);
  ctx.set_output(0, yt, {d.m, d.n});
  return Status::Ok();
}

void RunQGemm(OpContext& ctx) {
  const QGemmDims d = GetQGemmDims(ctx);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  const int32_t za = ParamI(ctx, 2);
  const float alpha = ctx.attr_float("alpha", 1.f), sa = ParamF(ctx, 1);
  const bool quantized_out = ctx.has_input(7);
  const float sy = quantized_out ? ParamF(ctx, 7) : 1.f;
  const int32_t zy = ParamI(ctx, 8);
  Tensor& y = ctx.output(0);
  BroadcastIndexer ci(ctx.has_input(6) ? ctx.input(6).shape() : Shape{}, Shape{d.m, d.n});
  for (int64_t i = 0; i < d.m; ++i)
    for (int64_t j = 0; j < d.n; ++j) {
      const int32_t zb = ParamI(ctx, 5, j);
      int64_t acc = ctx.has_input(6) ? ctx.input(6).data<int32_t>()[ci(i * d.n + j)] : 0;
      for (int64_t k = 0; k < d.k; ++k) {
        const int32_t av = QAt(a, ta ? k * d.m + i : i * d.k + k);
        const int32_t bv = QAt(b, tb ? j * d.k + k : k * d.n + j);
        acc += int64_t{av - za} * (bv - zb);
      }
      float mult = alpha * sa * ParamF(ctx, 4, j);
      if (quantized_out) mult /= sy;
      const float v = static_cast<float>(static_cast<int32_t>(acc)) * mult;
      if (quantized_out)
        QStore(y, i * d.n + j, RoundToQ(v, zy, y.dtype()));
      else
        y.data<float>()[i * d.n + j] = v;
    }
}

constexpr OpDef kOps[] = {
    {kMsDomain, "QLinearAdd", 1, nullptr, PrepareQLinearBinary, RunQLinearBinary<false>},
    {kMsDomain, "QLinearMul", 1, nullptr, PrepareQLinearBinary, RunQLinearBinary<true>},
    {kMsDomain, "QLinearSigmoid", 1, nullptr, PrepareQLinearUnary, RunQLinearSigmoid},
    {kMsDomain, "QLinearLeakyRelu", 1, nullptr, PrepareQLinearUnary, RunQLinearLeakyRelu},
    {kMsDomain, "QLinearConcat", 1, nullptr, PrepareQLinearConcat, RunQLinearConcat},
    {kMsDomain, "QLinearAveragePool", 1, nullptr, PrepareQLinearAveragePool, RunQLinearAveragePool},
    {kMsDomain, "QLinearGlobalAveragePool", 1, nullptr, PrepareQLinearGlobalAveragePool,
     RunQLinearGlobalAveragePool},
    {kMsDomain, "QGemm", 1, nullptr, PrepareQGemm, RunQGemm},
};

}  // namespace

std::span<const OpDef> ContribQLinearOps() {
  return kOps;
}

}  // namespace ferry::ops
