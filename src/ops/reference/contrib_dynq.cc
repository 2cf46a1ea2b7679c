// Reference kernels, com.microsoft (ONNX Runtime contrib ops, since_version 1): what ONNX
// Runtime's dynamic quantizer and graph optimizer write — DynamicQuantizeMatMul,
// MatMulIntegerToFloat, QAttention, DynamicQuantizeLSTM.
//
// Dynamic quantization of a float matrix (ONNX Runtime's GetQuantizationParameter): the range
// [min(0, min x), max(0, max x)], scale = (max - min) / 255 (1 when the range is empty),
// zp = nearbyint(clamp(-min / scale, 0, 255)), q = saturate(nearbyint(x / scale) + zp) as uint8.
// Integer products accumulate in int32; results are float(acc) * (a_scale * b_scale[j]) + bias[j].
//  - DynamicQuantizeMatMul: A float (quantized whole), B [K, N] int8/uint8, b_scale and
//    b_zero_point scalar or [N], bias [N] optional;
//  - MatMulIntegerToFloat: A, B 8-bit, a_scale / a_zero_point scalar, b_scale / b_zero_point
//    scalar or [N], bias [N];
//  - QAttention: input [B, S, D] and weight [D, 3 Dh] 8-bit, bias [3 Dh] float, input_scale,
//    weight_scale (scalar or [3 Dh]), mask_index, input / weight zero points, past; Q, K, V =
//    the dequantized product + bias, then Attention's computation (contrib_attention.h);
//  - DynamicQuantizeLSTM: ONNX LSTM (gates i, o, f, c; Sigmoid, Tanh, Tanh) whose W [D, I, 4H]
//    and R [D, H, 4H] are 8-bit (transposed against LSTM's) with scales / zero points per
//    direction or per direction and column; X · W quantizes all of a direction's input rows at
//    once, h · R the batch's hidden rows at every step, as ONNX Runtime does.
#include "ops/reference/contrib_attention.h"

namespace ferry::ops {

namespace {

constexpr std::initializer_list<DType> kQ8 = {DType::kUint8, DType::kInt8};
constexpr std::initializer_list<DType> kF32 = {DType::kFloat};

// ONNX Runtime's dynamic quantization of n floats to uint8: q, scale, zero point.
void DynamicQuantize(const float* x, int64_t n, std::vector<int32_t>* q, float* scale,
                     int32_t* zp) {
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  *scale = hi == lo ? 1.f : (hi - lo) / 255.f;
  *zp = static_cast<int32_t>(std::nearbyint(std::clamp(0.f - lo / *scale, 0.f, 255.f)));
  q->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    (*q)[static_cast<size_t>(i)] = RoundToQ(x[i] / *scale, *zp, DType::kUint8);
}

std::vector<int32_t> ReadQ(const Tensor& t) {
  std::vector<int32_t> v(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) v[static_cast<size_t>(i)] = QAt(t, i);
  return v;
}

// acc[r, j] = sum_k (a[r, k] - za) * (b[k, j] - zb[j]) for `rows` rows; b [K, N] row-major at
// b_off, zb per column (`zb_per_col`) or scalar; y[r, j] = float(acc) * scale[j] + add[r, j].
void IntGemmToFloat(const int32_t* a, int64_t rows, int64_t k, int32_t za, const int32_t* b,
                    int64_t n, const std::vector<int32_t>& zb, const std::vector<float>& scale,
                    float* y, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const int32_t z = zb[zb.size() == 1 ? 0 : static_cast<size_t>(j)];
      int64_t acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += int64_t{a[r * k + p] - za} * (b[p * n + j] - z);
      const float v = static_cast<float>(static_cast<int32_t>(acc)) *
                      scale[scale.size() == 1 ? 0 : static_cast<size_t>(j)];
      y[r * n + j] = accumulate ? y[r * n + j] + v : v;
    }
}

// ---- MatMul family: rows of A (any leading dims) times a 2-D B ----
Status CheckAB(const OpContext& ctx, size_t bi, int64_t* rows, int64_t* k, int64_t* n) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(bi);
  if (a.rank() < 1 || b.rank() != 2 || a.dim(a.rank() - 1) != b.dim(0))
    return NodeError(ctx, "A {} and B {}: expected A [..., K] and B [K, N]",
                     ShapeToString(a.shape()), ShapeToString(b.shape()));
  *k = b.dim(0);
  *n = b.dim(1);
  *rows = *k == 0 ? 0 : a.size() / *k;
  return Status::Ok();
}

Shape MatMulOut(const Tensor& a, int64_t n) {
  Shape s = a.shape();
  s.back() = n;
  return s;
}

Status CheckBias(const OpContext& ctx, size_t i, int64_t n) {
  if (!ctx.has_input(i)) return Status::Ok();
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "bias"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kF32));
  if (ctx.input(i).rank() != 1 || ctx.input(i).dim(0) != n)
    return NodeError(ctx, "bias has shape {}, expected [{}]", ShapeToString(ctx.input(i).shape()),
                     n);
  return Status::Ok();
}

void AddBias(const OpContext& ctx, size_t i, float* y, int64_t rows, int64_t n) {
  if (!ctx.has_input(i)) return;
  const float* b = ctx.input(i).data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) y[r * n + j] += b[j];
}

std::vector<float> Scales(const OpContext& ctx, float a_scale, size_t bi, int64_t n) {
  std::vector<float> s(static_cast<size_t>(ctx.input(bi).size() == 1 ? 1 : n));
  for (size_t j = 0; j < s.size(); ++j) s[j] = a_scale * ParamF(ctx, bi, static_cast<int64_t>(j));
  return s;
}

std::vector<int32_t> ZeroPoints(const OpContext& ctx, size_t zi) {
  if (!ctx.has_input(zi)) return {0};
  return ReadQ(ctx.input(zi));
}

// DynamicQuantizeMatMul: A, B, b_scale, b_zero_point, bias.
Status PrepareDynamicQuantizeMatMul(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 5));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "A"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kF32));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "B"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, kQ8));
  int64_t rows, k, n;
  FERRY_RETURN_IF_ERROR(CheckAB(ctx, 1, &rows, &k, &n));
  FERRY_RETURN_IF_ERROR(RequireScalarOrVector(ctx, 2, "b_scale", n, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarOrVector(ctx, 3, "b_zero_point", n, {ctx.input(1).dtype()}));
  FERRY_RETURN_IF_ERROR(CheckBias(ctx, 4, n));
  ctx.set_output(0, DType::kFloat, MatMulOut(ctx.input(0), n));
  return Status::Ok();
}

void RunDynamicQuantizeMatMul(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const int64_t k = ctx.input(1).dim(0), n = ctx.input(1).dim(1), rows = k == 0 ? 0 : a.size() / k;
  std::vector<int32_t> qa;
  float sa;
  int32_t za;
  DynamicQuantize(a.data<float>(), a.size(), &qa, &sa, &za);
  float* y = ctx.output(0).data<float>();
  IntGemmToFloat(qa.data(), rows, k, za, ReadQ(ctx.input(1)).data(), n, ZeroPoints(ctx, 3),
                 Scales(ctx, sa, 2, n), y, false);
  AddBias(ctx, 4, y, rows, n);
}

// MatMulIntegerToFloat: A, B, a_scale, b_scale, a_zero_point, b_zero_point, bias.
Status PrepareMatMulIntegerToFloat(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 4, 7));
  for (size_t i : {0, 1}) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, i == 0 ? "A" : "B"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kQ8));
  }
  int64_t rows, k, n;
  FERRY_RETURN_IF_ERROR(CheckAB(ctx, 1, &rows, &k, &n));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 2, "a_scale", true, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarOrVector(ctx, 3, "b_scale", n, kF32));
  if (!ctx.has_input(3)) return NodeError(ctx, "input 3 (b_scale) is missing");
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 4, "a_zero_point", false, {ctx.input(0).dtype()}));
  FERRY_RETURN_IF_ERROR(RequireScalarOrVector(ctx, 5, "b_zero_point", n, {ctx.input(1).dtype()}));
  FERRY_RETURN_IF_ERROR(CheckBias(ctx, 6, n));
  ctx.set_output(0, DType::kFloat, MatMulOut(ctx.input(0), n));
  return Status::Ok();
}

void RunMatMulIntegerToFloat(OpContext& ctx) {
  const Tensor& a = ctx.input(0);
  const int64_t k = ctx.input(1).dim(0), n = ctx.input(1).dim(1), rows = k == 0 ? 0 : a.size() / k;
  float* y = ctx.output(0).data<float>();
  IntGemmToFloat(ReadQ(a).data(), rows, k, ParamI(ctx, 4), ReadQ(ctx.input(1)).data(), n,
                 ZeroPoints(ctx, 5), Scales(ctx, ParamF(ctx, 2), 3, n), y, false);
  AddBias(ctx, 6, y, rows, n);
}

// ---- QAttention: input, weight, bias, input_scale, weight_scale, mask_index, input_zp,
// weight_zp, past ----
Result<AttnDims> QAttentionDims(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  AttnDims d;
  d.b = x.dim(0);
  d.s = x.dim(1);
  d.n = ctx.attr_int("num_heads", 1);
  const int64_t hidden = ctx.input(1).dim(1) / 3;
  d.h = d.hv = hidden / d.n;
  if (ctx.has_input(8)) {
    const Shape& p = ctx.input(8).shape();
    if (p.size() != 5 || p[0] != 2 || p[1] != d.b || p[2] != d.n || p[4] != d.h)
      return NodeError(ctx, "past has shape {}, expected [2, {}, {}, P, {}]", ShapeToString(p), d.b,
                       d.n, d.h);
    d.past = p[3];
  }
  d.t = d.past + d.s;
  return d;
}

Status PrepareQAttention(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 5, 9));
  if (!ctx.has_attr("num_heads") || ctx.attr_int("num_heads", 0) <= 0)
    return NodeError(ctx, "num_heads is missing or not positive");
  if (ctx.attr_int("do_rotary", 0) != 0 || ctx.attr_int("past_present_share_buffer", 0) != 0)
    return NodeUnsupported(ctx, "do_rotary / past_present_share_buffer are not supported");
  for (size_t i : {0, 1}) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, i == 0 ? "input" : "weight"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kQ8));
  }
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const int64_t n = ctx.attr_int("num_heads", 1);
  if (x.rank() != 3 || w.rank() != 2 || w.dim(0) != x.dim(2) || w.dim(1) % 3 != 0 ||
      (w.dim(1) / 3) % n != 0)
    return NodeError(
        ctx,
        "input {} / weight {}: expected [B, S, D] and [D, 3 * hidden], hidden a multiple of {}",
        ShapeToString(x.shape()), ShapeToString(w.shape()), n);
  FERRY_RETURN_IF_ERROR(CheckBias(ctx, 2, w.dim(1)));
  if (!ctx.has_input(2)) return NodeError(ctx, "input 2 (bias) is missing");
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 3, "input_scale", true, kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarOrVector(ctx, 4, "weight_scale", w.dim(1), kF32));
  FERRY_RETURN_IF_ERROR(RequireScalarParam(ctx, 6, "input_zero_point", false, {x.dtype()}));
  FERRY_RETURN_IF_ERROR(RequireScalarOrVector(ctx, 7, "weight_zero_point", w.dim(1), {w.dtype()}));
  if (ctx.has_input(8)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 8, "past"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 8, kF32));
  }
  FERRY_ASSIGN_OR_RETURN(AttnDims d, QAttentionDims(ctx));
  FERRY_RETURN_IF_ERROR(CheckAttentionMask(ctx, 5, "mask_index", d));
  ctx.set_output(0, DType::kFloat, {d.b, d.s, d.n * d.h});
  if (ctx.num_outputs() > 1 && ctx.has_output(1))
    ctx.set_output(1, DType::kFloat, {2, d.b, d.n, d.t, d.h});
  return Status::Ok();
}

void RunQAttention(OpContext& ctx) {
  const AttnDims d = QAttentionDims(ctx).value();
  const Tensor& w = ctx.input(1);
  const int64_t din = w.dim(0), cols = w.dim(1), rows = d.b * d.s, hidden = cols / 3;
  std::vector<float> qkvf(static_cast<size_t>(rows * cols));
  IntGemmToFloat(ReadQ(ctx.input(0)).data(), rows, din, ParamI(ctx, 6), ReadQ(w).data(), cols,
                 ZeroPoints(ctx, 7), Scales(ctx, ParamF(ctx, 3), 4, cols), qkvf.data(), false);
  AddBias(ctx, 2, qkvf.data(), rows, cols);
  const std::vector<double> qkv(qkvf.begin(), qkvf.end());
  std::vector<double> q = SplitHeads(qkv, d.b, d.s, d.n, d.h, cols, 0);
  std::vector<double> k = SplitHeads(qkv, d.b, d.s, d.n, d.h, cols, hidden);
  std::vector<double> v = SplitHeads(qkv, d.b, d.s, d.n, d.h, cols, 2 * hidden);
  if (ctx.has_input(8)) {
    const std::vector<double> past = ReadDoubles(ctx.input(8));
    const size_t half = past.size() / 2;
    k = ConcatPast(std::vector<double>(past.begin(), past.begin() + half), k, d.b, d.n, d.past, d.s,
                   d.h);
    v = ConcatPast(std::vector<double>(past.begin() + half, past.end()), v, d.b, d.n, d.past, d.s,
                   d.h);
  }
  const bool causal = ctx.attr_int("unidirectional", 0) != 0 && d.s > 1;
  const std::vector<double> mask =
      BuildAttentionMask(ctx, 5, d, causal, ctx.attr_float("mask_filter_value", -10000.f));
  const float sc = ctx.attr_float("scale", 0.f);
  std::vector<double> y;
  AttentionCore(ctx, d, q, k, v, mask, -1,
                sc == 0.f ? 1.0 / std::sqrt(static_cast<double>(d.h)) : sc, &y, nullptr);
  WriteDoubles(y, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) {
    std::vector<double> present = k;
    present.insert(present.end(), v.begin(), v.end());
    WriteDoubles(present, ctx.output(1));
  }
}

// ---- DynamicQuantizeLSTM ----
// X, W, R, B, sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale,
// R_zero_point. Outputs Y [S, D, B, H], Y_h [D, B, H], Y_c [D, B, H].
struct LstmDims {
  int64_t seq, batch, input, hidden, dirs;
};

LstmDims GetLstmDims(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  return {x.dim(0), x.dim(1), x.dim(2), ctx.attr_int("hidden_size", 0), ctx.input(1).dim(0)};
}

Status CheckLstmParam(const OpContext& ctx, size_t i, std::string_view what, int64_t dirs,
                      int64_t cols, std::initializer_list<DType> types) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, types));
  const Shape& s = ctx.input(i).shape();
  if ((s.size() == 1 && s[0] == dirs) || (s.size() == 2 && s[0] == dirs && s[1] == cols))
    return Status::Ok();
  return NodeError(ctx, "{} has shape {}, expected [{}] or [{}, {}]", what, ShapeToString(s), dirs,
                   dirs, cols);
}

Status PrepareDynamicQuantizeLstm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 12));
  for (size_t i : {0, 1, 2, 8, 9, 10, 11})
    if (!ctx.has_input(i)) return NodeError(ctx, "required input {} is missing", i);
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kF32));
  const std::string dir = ctx.attr_string("direction", "forward");
  const int64_t dirs = dir == "bidirectional" ? 2 : 1;
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return NodeError(ctx, "direction '{}' is not forward, reverse or bidirectional", dir);
  const int64_t h = ctx.attr_int("hidden_size", 0);
  if (h <= 0) return NodeError(ctx, "hidden_size is {}, expected a positive value", h);
  if (ctx.has_attr("activations") || ctx.has_attr("activation_alpha") ||
      ctx.has_attr("activation_beta"))
    return NodeUnsupported(
        ctx, "activations other than the default Sigmoid, Tanh, Tanh are not supported");
  if (ctx.attr_int("layout", 0) != 0) return NodeUnsupported(ctx, "layout 1 is not supported");
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3)
    return NodeError(ctx, "X has shape {}, expected [S, B, I]", ShapeToString(x.shape()));
  const Shape wshape{dirs, x.dim(2), 4 * h}, rshape{dirs, h, 4 * h};
  for (size_t i : {1, 2}) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, i == 1 ? "W" : "R"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kQ8));
    if (ctx.input(i).shape() != (i == 1 ? wshape : rshape))
      return NodeError(ctx, "{} has shape {}, expected {}", i == 1 ? "W" : "R",
                       ShapeToString(ctx.input(i).shape()),
                       ShapeToString(i == 1 ? wshape : rshape));
  }
  FERRY_RETURN_IF_ERROR(CheckLstmParam(ctx, 8, "W_scale", dirs, 4 * h, kF32));
  FERRY_RETURN_IF_ERROR(
      CheckLstmParam(ctx, 9, "W_zero_point", dirs, 4 * h, {ctx.input(1).dtype()}));
  FERRY_RETURN_IF_ERROR(CheckLstmParam(ctx, 10, "R_scale", dirs, 4 * h, kF32));
  FERRY_RETURN_IF_ERROR(
      CheckLstmParam(ctx, 11, "R_zero_point", dirs, 4 * h, {ctx.input(2).dtype()}));
  auto check = [&](size_t i, std::string_view what, const Shape& want) -> Status {
    if (!ctx.has_input(i)) return Status::Ok();
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
    if (ctx.input(i).shape() != want)
      return NodeError(ctx, "{} has shape {}, expected {}", what,
                       ShapeToString(ctx.input(i).shape()), ShapeToString(want));
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(check(3, "B", {dirs, 8 * h}));
  FERRY_RETURN_IF_ERROR(check(4, "sequence_lens", {x.dim(1)}));
  FERRY_RETURN_IF_ERROR(check(5, "initial_h", {dirs, x.dim(1), h}));
  FERRY_RETURN_IF_ERROR(check(6, "initial_c", {dirs, x.dim(1), h}));
  FERRY_RETURN_IF_ERROR(check(7, "P", {dirs, 3 * h}));
  for (size_t i : {3, 5, 6, 7})
    if (ctx.has_input(i)) FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kF32));
  if (ctx.has_input(4)) {
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 4, {DType::kInt32}));
    for (int64_t b = 0; b < x.dim(1); ++b) {
      const int32_t l = ctx.input(4).data<int32_t>()[b];
      if (l < 0 || l > x.dim(0))
        return NodeError(ctx, "sequence_lens[{}] is {}, expected 0..{}", b, l, x.dim(0));
    }
  }
  if (ctx.num_outputs() > 0 && ctx.has_output(0))
    ctx.set_output(0, DType::kFloat, {x.dim(0), dirs, x.dim(1), h});
  for (size_t i = 1; i < 3 && i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) ctx.set_output(i, DType::kFloat, {dirs, x.dim(1), h});
  return Status::Ok();
}

float Sigmoid(float v) {
  return 1.f / (1.f + std::exp(-v));
}

void RunDynamicQuantizeLstm(OpContext& ctx) {
  const LstmDims d = GetLstmDims(ctx);
  const int64_t h = d.hidden, g4 = 4 * h, seq = d.seq, nb = d.batch;
  const bool reverse_only = ctx.attr_string("direction", "forward") == "reverse";
  const float clip = ctx.has_attr("clip") ? ctx.attr_float("clip", 0.f) : 0.f;
  const bool input_forget = ctx.attr_int("input_forget", 0) != 0;
  const float* x = ctx.input(0).data<float>();
  const std::vector<int32_t> w = ReadQ(ctx.input(1)), r = ReadQ(ctx.input(2));
  auto per_dir = [&](size_t i, int64_t dir, auto read) {
    const Tensor& t = ctx.input(i);
    const int64_t cols = t.rank() == 2 ? g4 : 1;
    std::vector<decltype(read(t, 0))> v(static_cast<size_t>(cols));
    for (int64_t j = 0; j < cols; ++j) v[static_cast<size_t>(j)] = read(t, dir * cols + j);
    return v;
  };
  auto rf = [](const Tensor& t, int64_t i) { return static_cast<float>(t.GetAsDouble(i)); };
  auto ri = [](const Tensor& t, int64_t i) { return QAt(t, i); };
  std::vector<float> y(static_cast<size_t>(seq * d.dirs * nb * h), 0.f);
  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    const bool reverse = reverse_only || dir == 1;
    // X . W for all rows of the direction: [seq * batch, 4H].
    std::vector<int32_t> qx;
    float sx;
    int32_t zx;
    DynamicQuantize(x, seq * nb * d.input, &qx, &sx, &zx);
    std::vector<float> wscale = per_dir(8, dir, rf);
    for (float& s : wscale) s *= sx;
    std::vector<float> gx(static_cast<size_t>(seq * nb * g4));
    IntGemmToFloat(qx.data(), seq * nb, d.input, zx, w.data() + dir * d.input * g4, g4,
                   per_dir(9, dir, ri), wscale, gx.data(), false);
    const std::vector<float> rscale0 = per_dir(10, dir, rf);
    const std::vector<int32_t> rzp = per_dir(11, dir, ri);
    std::vector<float> bias(static_cast<size_t>(g4), 0.f), peep(static_cast<size_t>(3 * h), 0.f);
    if (ctx.has_input(3))
      for (int64_t j = 0; j < g4; ++j)
        bias[static_cast<size_t>(j)] = ctx.input(3).data<float>()[dir * 2 * g4 + j] +
                                       ctx.input(3).data<float>()[dir * 2 * g4 + g4 + j];
    if (ctx.has_input(7))
      for (int64_t j = 0; j < 3 * h; ++j)
        peep[static_cast<size_t>(j)] = ctx.input(7).data<float>()[dir * 3 * h + j];
    std::vector<float> hs(static_cast<size_t>(nb * h), 0.f), cs(hs.size(), 0.f);
    if (ctx.has_input(5))
      std::copy_n(ctx.input(5).data<float>() + dir * nb * h, nb * h, hs.begin());
    if (ctx.has_input(6))
      std::copy_n(ctx.input(6).data<float>() + dir * nb * h, nb * h, cs.begin());
    std::vector<float> gates(static_cast<size_t>(nb * g4));
    std::vector<int32_t> qh;
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      std::copy_n(gx.begin() + t * nb * g4, nb * g4, gates.begin());
      float sh;
      int32_t zh;
      DynamicQuantize(hs.data(), nb * h, &qh, &sh, &zh);
      std::vector<float> rscale = rscale0;
      for (float& s : rscale) s *= sh;
      IntGemmToFloat(qh.data(), nb, h, zh, r.data() + dir * h * g4, g4, rzp, rscale, gates.data(),
                     true);
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t len = ctx.has_input(4) ? ctx.input(4).data<int32_t>()[b] : seq;
        if (t >= len) continue;  // finished: state kept, output 0
        float* g = gates.data() + b * g4;
        float* hb = hs.data() + b * h;
        float* cb = cs.data() + b * h;
        for (int64_t j = 0; j < h; ++j) {
          auto clipped = [&](float v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
          float gi =
              clipped(g[j] + bias[static_cast<size_t>(j)] + peep[static_cast<size_t>(j)] * cb[j]);
          float gf = clipped(g[2 * h + j] + bias[static_cast<size_t>(2 * h + j)] +
                             peep[static_cast<size_t>(2 * h + j)] * cb[j]);
          const float gc = clipped(g[3 * h + j] + bias[static_cast<size_t>(3 * h + j)]);
          const float i = Sigmoid(gi);
          const float f = input_forget ? 1.f - i : Sigmoid(gf);
          const float c = f * cb[j] + i * std::tanh(gc);
          const float go = clipped(g[h + j] + bias[static_cast<size_t>(h + j)] +
                                   peep[static_cast<size_t>(h + j)] * c);
          cb[j] = c;
          hb[j] = Sigmoid(go) * std::tanh(c);
          y[static_cast<size_t>(((t * d.dirs + dir) * nb + b) * h + j)] = hb[j];
        }
      }
    }
    if (ctx.num_outputs() > 1 && ctx.has_output(1))
      std::copy(hs.begin(), hs.end(), ctx.output(1).data<float>() + dir * nb * h);
    if (ctx.num_outputs() > 2 && ctx.has_output(2))
      std::copy(cs.begin(), cs.end(), ctx.output(2).data<float>() + dir * nb * h);
  }
  if (ctx.num_outputs() > 0 && ctx.has_output(0))
    std::copy(y.begin(), y.end(), ctx.output(0).data<float>());
}

constexpr OpDef kOps[] = {
    {kMsDomain, "DynamicQuantizeMatMul", 1, nullptr, PrepareDynamicQuantizeMatMul,
     RunDynamicQuantizeMatMul},
    {kMsDomain, "MatMulIntegerToFloat", 1, nullptr, PrepareMatMulIntegerToFloat,
     RunMatMulIntegerToFloat},
    {kMsDomain, "QAttention", 1, nullptr, PrepareQAttention, RunQAttention},
    {kMsDomain, "DynamicQuantizeLSTM", 1, nullptr, PrepareDynamicQuantizeLstm,
     RunDynamicQuantizeLstm},
};

}  // namespace

std::span<const OpDef> ContribDynQuantOps() {
  return kOps;
}

}  // namespace ferry::ops
