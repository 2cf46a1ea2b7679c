// Reference kernels, default domain, the transformer ops of opset 23: Attention (23, with
// opset 24's nonpad_kv_seqlen), RMSNormalization (23), RotaryEmbedding (23). Computed in double
// from the inputs' values, rounded once to the output type.
//
// Attention: Q [B, Hq, Sq, D] / K [B, Hkv, Skv, D] / V [B, Hkv, Skv, Dv], or the 3-D forms
// [B, S, H * D] with q_num_heads and kv_num_heads given. past_key / past_value [B, Hkv, P, D|Dv]
// are put before K / V (present_key / present_value, T = P + Skv keys). Query head h reads KV head
// h / (Hq / Hkv) (grouped-query attention). For each query row i and key j:
//   s = scale * (q_i . k_j)            scale: attribute, default 1 / sqrt(D)
//     + bias                           attn_mask (bool: false -> -inf; float: added), broadcast to
//                                      [B, Hq, Sq, T], a last dim shorter than T padded with
//                                      -inf (false); is_causal: -inf where j - P > i;
//                                      nonpad_kv_seqlen[b]: -inf where j >= it
//   s = softcap * tanh(s / softcap)    when softcap > 0
//   y_i = sum_j softmax(s)_j v_j       (a row whose keys are all masked gives NaN, as numpy)
// qk_matmul_output: the scores after step qk_matmul_output_mode (0: scaled product, 1: + bias,
// 2: softcapped, 3: softmax). softmax_precision is accepted; the arithmetic is double anyway.
//
// RMSNormalization: Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * Scale (Scale
// broadcast to X, numpy rules).
//
// RotaryEmbedding: input [B, S, N * H] (num_heads given) or [B, N, S, H]; cos_cache / sin_cache
// [max_position, d / 2] indexed by position_ids [B, S], or [B, S, d / 2] without position_ids;
// d = rotary_embedding_dim (0: H). For each head vector x at position p, half = d / 2:
//   non-interleaved: y[i] = x[i] cos - x[i + half] sin, y[i + half] = x[i] sin + x[i + half] cos
//   interleaved:     y[2i] = x[2i] cos - x[2i + 1] sin, y[2i + 1] = x[2i] sin + x[2i + 1] cos
// and elements from d on copied.
#include <cmath>
#include <limits>

#include "ops/reference/contrib_common.h"

namespace ferry::ops {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// ---- Attention

struct AttnDims {
  int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, p = 0, t = 0, d = 0, dv = 0;
  bool three_d = false;
  // attn_mask as [mb, mh, mq, ml] (1: broadcast), ml <= t.
  int64_t mb = 1, mh = 1, mq = 1, ml = 0;
};

bool FloatType(DType t) {
  return t == DType::kFloat || t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kDouble;
}

Status GetAttnDims(const OpContext& ctx, AttnDims* a) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  if (q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4))
    return NodeError(ctx, "Q, K, V have shapes {}, {}, {}: expected all 3-D or all 4-D",
                     ShapeToString(q.shape()), ShapeToString(k.shape()), ShapeToString(v.shape()));
  a->three_d = q.rank() == 3;
  a->b = q.dim(0);
  if (k.dim(0) != a->b || v.dim(0) != a->b)
    return NodeError(ctx, "Q, K, V have batch sizes {}, {}, {}", a->b, k.dim(0), v.dim(0));
  if (a->three_d) {
    a->hq = ctx.attr_int("q_num_heads", 0);
    a->hkv = ctx.attr_int("kv_num_heads", 0);
    if (a->hq <= 0 || a->hkv <= 0)
      return NodeError(ctx, "3-D inputs need q_num_heads and kv_num_heads > 0 (got {}, {})", a->hq,
                       a->hkv);
    if (q.dim(2) % a->hq != 0 || k.dim(2) % a->hkv != 0 || v.dim(2) % a->hkv != 0)
      return NodeError(ctx, "hidden sizes {}, {}, {} do not split into {} / {} heads", q.dim(2),
                       k.dim(2), v.dim(2), a->hq, a->hkv);
    a->sq = q.dim(1);
    a->skv = k.dim(1);
    a->d = q.dim(2) / a->hq;
    if (k.dim(2) / a->hkv != a->d)
      return NodeError(ctx, "K's head size {} differs from Q's {}", k.dim(2) / a->hkv, a->d);
    a->dv = v.dim(2) / a->hkv;
    if (v.dim(1) != a->skv) return NodeError(ctx, "K has {} positions, V {}", a->skv, v.dim(1));
  } else {
    a->hq = q.dim(1);
    a->hkv = k.dim(1);
    a->sq = q.dim(2);
    a->skv = k.dim(2);
    a->d = q.dim(3);
    a->dv = v.dim(3);
    if (v.dim(1) != a->hkv || v.dim(2) != a->skv || k.dim(3) != a->d)
      return NodeError(ctx, "Q {}, K {}, V {} do not agree on heads, positions or head size",
                       ShapeToString(q.shape()), ShapeToString(k.shape()),
                       ShapeToString(v.shape()));
  }
  if (a->hq <= 0 || a->hkv <= 0 || a->hq % a->hkv != 0)
    return NodeError(ctx, "{} query heads are not a multiple of {} key/value heads", a->hq, a->hkv);
  const bool pk = ctx.has_input(4), pv = ctx.has_input(5);
  if (pk != pv) return NodeError(ctx, "past_key and past_value must be given together");
  if (pk) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 4, "past_key"));
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 5, "past_value"));
    const Tensor& x = ctx.input(4);
    const Tensor& y = ctx.input(5);
    a->p = x.rank() == 4 ? x.dim(2) : -1;
    if (x.shape() != Shape{a->b, a->hkv, a->p, a->d} ||
        y.shape() != Shape{a->b, a->hkv, a->p, a->dv} || x.dtype() != q.dtype() ||
        y.dtype() != q.dtype())
      return NodeError(ctx,
                       "past_key {} / past_value {}: expected [{}, {}, P, {}] / [.., {}] of {}",
                       ShapeToString(x.shape()), ShapeToString(y.shape()), a->b, a->hkv, a->d,
                       a->dv, DTypeName(q.dtype()));
  }
  a->t = a->p + a->skv;
  if (ctx.has_input(3)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 3, "attn_mask"));
    const Tensor& m = ctx.input(3);
    if (m.dtype() != DType::kBool && m.dtype() != q.dtype())
      return NodeError(ctx, "attn_mask is {}, expected bool or {}", DTypeName(m.dtype()),
                       DTypeName(q.dtype()));
    if (m.rank() < 1 || m.rank() > 4)
      return NodeError(ctx, "attn_mask has rank {}, expected 1 to 4", m.rank());
    Shape s(4 - static_cast<size_t>(m.rank()), 1);
    s.insert(s.end(), m.shape().begin(), m.shape().end());
    const int64_t want[3] = {a->b, a->hq, a->sq};
    for (int i = 0; i < 3; ++i)
      if (s[static_cast<size_t>(i)] != 1 && s[static_cast<size_t>(i)] != want[i])
        return NodeError(ctx, "attn_mask {} does not broadcast to [{}, {}, {}, {}]",
                         ShapeToString(m.shape()), a->b, a->hq, a->sq, a->t);
    a->mb = s[0];
    a->mh = s[1];
    a->mq = s[2];
    a->ml = s[3];
    if (a->ml > a->t || a->ml < 1)
      return NodeError(ctx, "attn_mask's last dim {} is not in [1, {}] (the keys)", a->ml, a->t);
  }
  if (ctx.has_input(6)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 6, "nonpad_kv_seqlen"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 6, {DType::kInt64}));
    if (ctx.input(6).shape() != Shape{a->b})
      return NodeError(ctx, "nonpad_kv_seqlen has shape {}, expected [{}]",
                       ShapeToString(ctx.input(6).shape()), a->b);
  }
  return Status::Ok();
}

Status PrepareAttention(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 7));
  for (size_t i = 0; i < 3; ++i)
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, i == 0 ? "Q" : i == 1 ? "K" : "V"));
  const DType dt = ctx.input(0).dtype();
  if (!FloatType(dt) || ctx.input(1).dtype() != dt || ctx.input(2).dtype() != dt)
    return NodeError(ctx, "Q, K, V are {}, {}, {}: expected one float type", DTypeName(dt),
                     DTypeName(ctx.input(1).dtype()), DTypeName(ctx.input(2).dtype()));
  AttnDims a;
  FERRY_RETURN_IF_ERROR(GetAttnDims(ctx, &a));
  const int64_t mode = ctx.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return NodeError(ctx, "qk_matmul_output_mode {} is not 0, 1, 2 or 3", mode);
  if (a.three_d)
    ctx.set_output(0, dt, {a.b, a.sq, a.hq * a.dv});
  else
    ctx.set_output(0, dt, {a.b, a.hq, a.sq, a.dv});
  if (ctx.has_output(1)) ctx.set_output(1, dt, {a.b, a.hkv, a.t, a.d});
  if (ctx.has_output(2)) ctx.set_output(2, dt, {a.b, a.hkv, a.t, a.dv});
  if (ctx.has_output(3)) ctx.set_output(3, dt, {a.b, a.hq, a.sq, a.t});
  return Status::Ok();
}

// x [B, S, H * E] (3-D) or [B, H, S, E] as [B, H, S, E] doubles.
std::vector<double> HeadsFirst(const Tensor& x, bool three_d, int64_t h) {
  std::vector<double> v = ReadDoubles(x);
  if (!three_d) return v;
  const int64_t b = x.dim(0), s = x.dim(1), e = x.dim(2) / h;
  std::vector<double> out(v.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t si = 0; si < s; ++si)
      for (int64_t hi = 0; hi < h; ++hi)
        std::copy_n(v.data() + ((bi * s + si) * h + hi) * e, e,
                    out.data() + ((bi * h + hi) * s + si) * e);
  return out;
}

// past [B, H, P, E] then cur [B, H, S, E] along the positions.
std::vector<double> Concat(const OpContext& ctx, size_t past, const std::vector<double>& cur,
                           int64_t b, int64_t h, int64_t p, int64_t s, int64_t e) {
  if (p == 0) return cur;
  const std::vector<double> pv = ReadDoubles(ctx.input(past));
  std::vector<double> out(static_cast<size_t>(b * h * (p + s) * e));
  for (int64_t bh = 0; bh < b * h; ++bh) {
    std::copy_n(pv.data() + bh * p * e, p * e, out.data() + bh * (p + s) * e);
    std::copy_n(cur.data() + bh * s * e, s * e, out.data() + bh * (p + s) * e + p * e);
  }
  return out;
}

// The bias of key j for query row (b, h, i): 0, or -inf (masked), or the float mask's value.
double MaskBias(const OpContext& ctx, const AttnDims& a, int64_t b, int64_t h, int64_t i, int64_t j,
                bool causal, const std::vector<double>& fmask) {
  double bias = 0;
  if (causal && j - a.p > i) bias = kNegInf;
  if (ctx.has_input(6) && j >= ctx.input(6).data<int64_t>()[b]) bias = kNegInf;
  if (a.ml > 0) {
    if (j >= a.ml) return kNegInf;  // padded
    const int64_t off =
        (((a.mb == 1 ? 0 : b) * a.mh + (a.mh == 1 ? 0 : h)) * a.mq + (a.mq == 1 ? 0 : i)) * a.ml +
        j;
    const Tensor& m = ctx.input(3);
    if (m.dtype() == DType::kBool) {
      if (!m.data<bool>()[off]) bias = kNegInf;
    } else {
      bias += fmask[static_cast<size_t>(off)];
    }
  }
  return bias;
}

void RunAttention(OpContext& ctx) {
  AttnDims a;
  (void)GetAttnDims(ctx, &a);  // prepare validated
  const std::vector<double> q = HeadsFirst(ctx.input(0), a.three_d, a.hq);
  const std::vector<double> k =
      Concat(ctx, 4, HeadsFirst(ctx.input(1), a.three_d, a.hkv), a.b, a.hkv, a.p, a.skv, a.d);
  const std::vector<double> v =
      Concat(ctx, 5, HeadsFirst(ctx.input(2), a.three_d, a.hkv), a.b, a.hkv, a.p, a.skv, a.dv);
  const std::vector<double> fmask = a.ml > 0 && ctx.input(3).dtype() != DType::kBool
                                        ? ReadDoubles(ctx.input(3))
                                        : std::vector<double>();
  const double scale = ctx.attr_float("scale", 0.f) != 0.f
                           ? static_cast<double>(ctx.attr_float("scale", 0.f))
                           : 1.0 / std::sqrt(static_cast<double>(a.d));
  const double softcap = ctx.attr_float("softcap", 0.f);
  const bool causal = ctx.attr_int("is_causal", 0) != 0;
  const int64_t mode = ctx.attr_int("qk_matmul_output_mode", 0);
  const bool want_qk = ctx.has_output(3);
  const int64_t group = a.hq / a.hkv;
  std::vector<double> y(static_cast<size_t>(a.b * a.hq * a.sq * a.dv));
  std::vector<double> qk(want_qk ? static_cast<size_t>(a.b * a.hq * a.sq * a.t) : 0);
  std::vector<double> s(static_cast<size_t>(a.t));
  for (int64_t b = 0; b < a.b; ++b)
    for (int64_t h = 0; h < a.hq; ++h) {
      const int64_t kvh = b * a.hkv + h / group;
      for (int64_t i = 0; i < a.sq; ++i) {
        const double* qi = q.data() + ((b * a.hq + h) * a.sq + i) * a.d;
        double* qkr = want_qk ? qk.data() + ((b * a.hq + h) * a.sq + i) * a.t : nullptr;
        double mx = kNegInf;
        for (int64_t j = 0; j < a.t; ++j) {
          const double* kj = k.data() + (kvh * a.t + j) * a.d;
          double dot = 0;
          for (int64_t e = 0; e < a.d; ++e) dot += qi[e] * kj[e];
          double x = dot * scale;
          if (qkr && mode == 0) qkr[j] = x;
          x += MaskBias(ctx, a, b, h, i, j, causal, fmask);
          if (qkr && mode == 1) qkr[j] = x;
          if (softcap > 0) x = softcap * std::tanh(x / softcap);
          if (qkr && mode == 2) qkr[j] = x;
          s[static_cast<size_t>(j)] = x;
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (double& x : s) {
          x = std::exp(x - mx);  // all keys masked: exp(-inf - -inf) = NaN, as numpy
          sum += x;
        }
        double* yi = y.data() + ((b * a.hq + h) * a.sq + i) * a.dv;
        for (int64_t j = 0; j < a.t; ++j) {
          const double w = s[static_cast<size_t>(j)] / sum;
          if (qkr && mode == 3) qkr[j] = w;
          const double* vj = v.data() + (kvh * a.t + j) * a.dv;
          for (int64_t e = 0; e < a.dv; ++e) yi[e] += w * vj[e];
        }
      }
    }
  if (a.three_d) {  // [B, Hq, Sq, Dv] -> [B, Sq, Hq * Dv]
    std::vector<double> t(y.size());
    for (int64_t b = 0; b < a.b; ++b)
      for (int64_t h = 0; h < a.hq; ++h)
        for (int64_t i = 0; i < a.sq; ++i)
          std::copy_n(y.data() + ((b * a.hq + h) * a.sq + i) * a.dv, a.dv,
                      t.data() + ((b * a.sq + i) * a.hq + h) * a.dv);
    y.swap(t);
  }
  WriteDoubles(y, ctx.output(0));
  if (ctx.has_output(1)) WriteDoubles(k, ctx.output(1));
  if (ctx.has_output(2)) WriteDoubles(v, ctx.output(2));
  if (want_qk) WriteDoubles(qk, ctx.output(3));
}

// ---- RMSNormalization

Status PrepareRmsNorm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "scale"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, kContribFloatTypes));
  const Tensor& x = ctx.input(0);
  FERRY_ASSIGN_OR_RETURN(const int64_t axis,
                         NormalizeAxis(ctx, ctx.attr_int("axis", -1), x.rank()));
  (void)axis;
  FERRY_ASSIGN_OR_RETURN(const Shape out, BroadcastShapes(ctx, {x.shape(), ctx.input(1).shape()}));
  if (out != x.shape())
    return NodeError(ctx, "scale {} does not broadcast to X {}",
                     ShapeToString(ctx.input(1).shape()), ShapeToString(x.shape()));
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunRmsNorm(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = *NormalizeAxis(ctx, ctx.attr_int("axis", -1), x.rank());
  int64_t len = 1;
  for (int64_t d = axis; d < x.rank(); ++d) len *= x.dim(d);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  std::vector<double> v = ReadDoubles(x);
  const std::vector<double> w = ReadDoubles(ctx.input(1));
  const BroadcastIndexer wi(ctx.input(1).shape(), x.shape());
  const int64_t rows = len > 0 ? x.size() / len : 0;
  for (int64_t r = 0; r < rows; ++r) {
    double* row = v.data() + r * len;
    double ss = 0;
    for (int64_t e = 0; e < len; ++e) ss += row[e] * row[e];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(len) + eps);
    for (int64_t e = 0; e < len; ++e)
      row[e] = row[e] * inv * w[static_cast<size_t>(wi(r * len + e))];
  }
  WriteDoubles(v, ctx.output(0));
}

// ---- RotaryEmbedding

struct RopeDims {
  int64_t b, s, n, h, rd;
  bool bnsh, by_position;
};

RopeDims GetRopeDims(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  RopeDims d{};
  d.bnsh = x.rank() == 4;
  d.b = x.dim(0);
  d.by_position = ctx.has_input(3);
  if (d.bnsh) {
    d.n = x.dim(1);
    d.s = x.dim(2);
    d.h = x.dim(3);
  } else {
    d.s = x.dim(1);
    d.n = ctx.attr_int("num_heads", 0);
    d.h = d.n > 0 ? x.dim(2) / d.n : 0;
  }
  d.rd = ctx.attr_int("rotary_embedding_dim", 0);
  if (d.rd == 0) d.rd = d.h;
  return d;
}

Status PrepareRope(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 4));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3 && x.rank() != 4)
    return NodeError(ctx, "X has shape {}, expected [B, S, N * H] or [B, N, S, H]",
                     ShapeToString(x.shape()));
  const RopeDims d = GetRopeDims(ctx);
  if (d.n <= 0 || d.h <= 0 || (!d.bnsh && d.n * d.h != x.dim(2)))
    return NodeError(ctx, "X {} does not split into num_heads {} heads", ShapeToString(x.shape()),
                     d.n);
  if (d.rd > d.h || d.rd <= 0 || d.rd % 2 != 0)
    return NodeError(ctx, "rotary_embedding_dim {} is not even and within the head size {}", d.rd,
                     d.h);
  for (size_t i : {1, 2}) {
    const char* what = i == 1 ? "cos_cache" : "sin_cache";
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
    const Tensor& c = ctx.input(i);
    const Shape want =
        d.by_position ? Shape{c.rank() == 2 ? c.dim(0) : -1, d.rd / 2} : Shape{d.b, d.s, d.rd / 2};
    if (c.dtype() != x.dtype() || c.shape() != want || c.shape() != ctx.input(1).shape())
      return NodeError(
          ctx, "{} is {}{}, expected {} [{}]", what, DTypeName(c.dtype()), ShapeToString(c.shape()),
          DTypeName(x.dtype()),
          d.by_position ? "max_position, rotary_dim / 2" : "batch, sequence, rotary_dim / 2");
  }
  if (d.by_position) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 3, "position_ids"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 3, {DType::kInt64}));
    const Tensor& p = ctx.input(3);
    if (p.shape() != Shape{d.b, d.s})
      return NodeError(ctx, "position_ids has shape {}, expected [{}, {}]",
                       ShapeToString(p.shape()), d.b, d.s);
    const int64_t max_pos = ctx.input(1).dim(0);
    for (int64_t i = 0; i < p.size(); ++i)
      if (p.data<int64_t>()[i] < 0 || p.data<int64_t>()[i] >= max_pos)
        return NodeError(ctx, "position {} is outside the caches' {} rows", p.data<int64_t>()[i],
                         max_pos);
  }
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunRope(OpContext& ctx) {
  const RopeDims d = GetRopeDims(ctx);
  const bool interleaved = ctx.attr_int("interleaved", 0) != 0;
  std::vector<double> x = ReadDoubles(ctx.input(0));
  const std::vector<double> cosv = ReadDoubles(ctx.input(1)), sinv = ReadDoubles(ctx.input(2));
  RotateHeads(x, d.b, d.s, d.n, d.h, d.bnsh, d.rd / 2, interleaved, cosv, sinv,
              [&](int64_t b, int64_t s) {
                return d.by_position ? ctx.input(3).data<int64_t>()[b * d.s + s] : b * d.s + s;
              });
  WriteDoubles(x, ctx.output(0));
}

constexpr OpDef kOps[] = {
    {"", "Attention", 23, nullptr, PrepareAttention, RunAttention},
    {"", "RMSNormalization", 23, nullptr, PrepareRmsNorm, RunRmsNorm},
    {"", "RotaryEmbedding", 23, nullptr, PrepareRope, RunRope},
};

}  // namespace

std::span<const OpDef> TransformerOps() {
  return kOps;
}

}  // namespace ferry::ops
