// Reference kernels, com.microsoft (ONNX Runtime contrib ops, since_version 1): Attention and
// MultiHeadAttention — BERT / GPT-2 self- and cross-attention as ONNX Runtime's transformer
// optimizer fuses them. Computed in double, rounded once on store.
//
// Attention: input [B, S, D_in] x weights [D_in, Dq + Dk + Dv] + bias -> Q, K, V (qkv_hidden_sizes,
// default three equal parts), split into num_heads heads; past [2, B, N, P, H] is prepended to K
// and V, present = [2, B, N, P + S, H]. scores = scale * Q K' (scale 0: 1/sqrt(H)) + mask +
// attention_bias, softmax over the keys, times V, heads joined: [B, S, Dv].
// Masks (mask_index, int32): [B] key lengths (keys at or after the end are masked), [2B] end and
// start positions, [B, T] / [B, S, T] raw 0/1, [B, 1, M, M] Megatron; masked scores get
// mask_filter_value (default -10000) instead of the mask's 0; unidirectional (with S > 1) masks
// the keys after past + s for query s.
//
// MultiHeadAttention: query [B, S, D] with key [B, L, D] and value [B, L, Dv] (bias [D + D + Dv]
// added), or key / value already in heads [B, N, L, H] (no bias for them), or packed: query
// [B, S, N, 3, H] (no key / value) or key [B, L, N, 2, H] (no value). key_padding_mask as
// Attention's mask ([B], [B, T], [B, S, T]); past_key / past_value [B, N, P, H]; outputs output,
// present_key, present_value [B, N, P + L, H] and qk [B, N, S, T] (scaled scores + mask + bias).
#include "ops/reference/contrib_attention.h"

namespace ferry::ops {

// ---- shared core ----
Status CheckAttentionMask(const OpContext& ctx, size_t i, std::string_view what,
                          const AttnDims& d) {
  if (!ctx.has_input(i)) return Status::Ok();
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kInt32}));
  const Tensor& m = ctx.input(i);
  const Shape& s = m.shape();
  const bool ok = (s.size() == 1 && (s[0] == d.b || s[0] == 2 * d.b)) ||
                  (s.size() == 2 && s[0] == d.b && s[1] == d.t) ||
                  (s.size() == 3 && s[0] == d.b && s[1] == d.s && s[2] == d.t) ||
                  (s.size() == 4 && s[0] == d.b && s[1] == 1 && s[2] == s[3] && s[2] >= d.t);
  if (!ok)
    return NodeError(
        ctx,
        "{} has shape {}, expected [{}], [{}], [{}, {}], [{}, {}, {}] or [{}, 1, M, M] "
        "(M >= {})",
        what, ShapeToString(s), d.b, 2 * d.b, d.b, d.t, d.b, d.s, d.t, d.b, d.t);
  if (s.size() == 1)
    for (int64_t k = 0; k < m.size(); ++k) {
      const int32_t v = m.data<int32_t>()[k];
      if (v < 0 || v > d.t)
        return NodeError(ctx, "{}[{}] is {}, expected a position in [0, {}]", what, k, v, d.t);
    }
  return Status::Ok();
}

std::vector<double> BuildAttentionMask(const OpContext& ctx, size_t i, const AttnDims& d,
                                       bool causal, double filter) {
  const bool has = ctx.has_input(i);
  if (!has && !causal) return {};
  std::vector<double> mask(static_cast<size_t>(d.b * d.s * d.t), 0.0);
  if (has) {
    const Tensor& m = ctx.input(i);
    const int32_t* p = m.data<int32_t>();
    const Shape& sh = m.shape();
    for (int64_t b = 0; b < d.b; ++b)
      for (int64_t s = 0; s < d.s; ++s)
        for (int64_t t = 0; t < d.t; ++t) {
          bool keep = true;
          if (sh.size() == 1) {
            keep = t < p[b] && (sh[0] != 2 * d.b || t >= p[d.b + b]);
          } else if (sh.size() == 2) {
            keep = p[b * d.t + t] > 0;
          } else if (sh.size() == 3) {
            keep = p[(b * d.s + s) * d.t + t] > 0;
          } else {
            const int64_t mm = sh[2];
            keep = p[(b * mm + d.past + s) * mm + t] > 0;
          }
          if (!keep) mask[static_cast<size_t>((b * d.s + s) * d.t + t)] = filter;
        }
  }
  if (causal)
    for (int64_t b = 0; b < d.b; ++b)
      for (int64_t s = 0; s < d.s; ++s)
        for (int64_t t = d.past + s + 1; t < d.t; ++t)
          mask[static_cast<size_t>((b * d.s + s) * d.t + t)] = filter;
  return mask;
}

Status CheckAttentionBias(const OpContext& ctx, size_t i, const AttnDims& d, DType t) {
  if (!ctx.has_input(i)) return Status::Ok();
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "attention_bias"));
  const Tensor& a = ctx.input(i);
  const Shape& s = a.shape();
  if (a.dtype() != t || s.size() != 4 || (s[0] != 1 && s[0] != d.b) || (s[1] != 1 && s[1] != d.n) ||
      s[2] != d.s || s[3] != d.t)
    return NodeError(ctx,
                     "attention_bias has shape {} ({}), expected [{} or 1, {} or 1, {}, {}] ({})",
                     ShapeToString(s), DTypeName(a.dtype()), d.b, d.n, d.s, d.t, DTypeName(t));
  return Status::Ok();
}

void AttentionCore(const OpContext& ctx, const AttnDims& d, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v,
                   const std::vector<double>& mask, int bias_input, double scale,
                   std::vector<double>* y, std::vector<double>* scores) {
  const Tensor* bias = bias_input >= 0 && ctx.has_input(static_cast<size_t>(bias_input))
                           ? &ctx.input(static_cast<size_t>(bias_input))
                           : nullptr;
  y->assign(static_cast<size_t>(d.b * d.s * d.n * d.hv), 0.0);
  if (scores) scores->assign(static_cast<size_t>(d.b * d.n * d.s * d.t), 0.0);
  std::vector<double> row(static_cast<size_t>(d.t));
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t s = 0; s < d.s; ++s) {
        const double* qp = q.data() + ((b * d.n + n) * d.s + s) * d.h;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < d.t; ++t) {
          const double* kp = k.data() + ((b * d.n + n) * d.t + t) * d.h;
          double acc = 0;
          for (int64_t c = 0; c < d.h; ++c) acc += qp[c] * kp[c];
          double x = acc * scale;
          if (!mask.empty()) x += mask[static_cast<size_t>((b * d.s + s) * d.t + t)];
          if (bias) {
            const Shape& bs = bias->shape();
            const int64_t bb = bs[0] == 1 ? 0 : b, bn = bs[1] == 1 ? 0 : n;
            x += bias->GetAsDouble(((bb * bs[1] + bn) * d.s + s) * d.t + t);
          }
          row[static_cast<size_t>(t)] = x;
          if (scores) (*scores)[static_cast<size_t>(((b * d.n + n) * d.s + s) * d.t + t)] = x;
          mx = std::max(mx, x);
        }
        double sum = 0;
        for (double& x : row) sum += (x = std::exp(x - mx));
        double* yp = y->data() + (b * d.s + s) * d.n * d.hv + n * d.hv;
        for (int64_t t = 0; t < d.t; ++t) {
          const double p = row[static_cast<size_t>(t)] / sum;
          const double* vp = v.data() + ((b * d.n + n) * d.t + t) * d.hv;
          for (int64_t c = 0; c < d.hv; ++c) yp[c] += p * vp[c];
        }
      }
}

std::vector<double> SplitHeads(const std::vector<double>& x, int64_t b, int64_t l, int64_t n,
                               int64_t h, int64_t row, int64_t off) {
  std::vector<double> out(static_cast<size_t>(b * n * l * h));
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t li = 0; li < l; ++li)
      for (int64_t ni = 0; ni < n; ++ni)
        for (int64_t c = 0; c < h; ++c)
          out[static_cast<size_t>(((bi * n + ni) * l + li) * h + c)] =
              x[static_cast<size_t>((bi * l + li) * row + off + ni * h + c)];
  return out;
}

std::vector<double> ConcatPast(const std::vector<double>& past, const std::vector<double>& now,
                               int64_t b, int64_t n, int64_t p, int64_t l, int64_t h) {
  std::vector<double> out(static_cast<size_t>(b * n * (p + l) * h));
  for (int64_t i = 0; i < b * n; ++i) {
    std::copy_n(past.begin() + i * p * h, p * h, out.begin() + i * (p + l) * h);
    std::copy_n(now.begin() + i * l * h, l * h, out.begin() + i * (p + l) * h + p * h);
  }
  return out;
}

namespace {

double ScaleOf(const OpContext& ctx, int64_t h) {
  const float s = ctx.attr_float("scale", 0.f);
  return s == 0.f ? 1.0 / std::sqrt(static_cast<double>(h)) : static_cast<double>(s);
}

Status CheckNumHeads(const OpContext& ctx) {
  if (!ctx.has_attr("num_heads")) return NodeError(ctx, "attribute num_heads is missing");
  if (ctx.attr_int("num_heads", 0) <= 0)
    return NodeError(ctx, "num_heads is {}, expected a positive value",
                     ctx.attr_int("num_heads", 0));
  if (ctx.attr_int("do_rotary", 0) != 0)
    return NodeUnsupported(ctx, "do_rotary=1 is not supported (use RotaryEmbedding before it)");
  if (ctx.attr_int("past_present_share_buffer", 0) != 0)
    return NodeUnsupported(ctx, "past_present_share_buffer=1 is not supported");
  return Status::Ok();
}

// ---- Attention: input, weights, [bias], [mask_index], [past], [attention_bias], [past_seq_len]
// ----
struct AttentionSizes {
  int64_t dq, dk, dv;
};

Result<AttentionSizes> GetAttentionSizes(const OpContext& ctx) {
  const int64_t n = ctx.attr_int("num_heads", 1), total = ctx.input(1).dim(1);
  std::vector<int64_t> qkv = ctx.attr_ints("qkv_hidden_sizes");
  AttentionSizes z{};
  if (qkv.empty()) {
    if (total % 3 != 0)
      return NodeError(ctx, "weights have {} columns, expected 3 equal parts", total);
    z = {total / 3, total / 3, total / 3};
  } else {
    if (qkv.size() != 3 || qkv[0] != qkv[1] || qkv[0] + qkv[1] + qkv[2] != total)
      return NodeError(ctx, "qkv_hidden_sizes {} must be 3 values with q == k summing to {}",
                       ShapeToString(qkv), total);
    z = {qkv[0], qkv[1], qkv[2]};
  }
  if (z.dq <= 0 || z.dv <= 0 || z.dq % n != 0 || z.dv % n != 0)
    return NodeError(ctx, "hidden sizes q {} / v {} must be positive multiples of num_heads {}",
                     z.dq, z.dv, n);
  return z;
}

Result<AttnDims> AttentionDimsOf(const OpContext& ctx, const AttentionSizes& z) {
  const Tensor& x = ctx.input(0);
  AttnDims d;
  d.b = x.dim(0);
  d.s = x.dim(1);
  d.n = ctx.attr_int("num_heads", 1);
  d.h = z.dq / d.n;
  d.hv = z.dv / d.n;
  if (ctx.has_input(4)) {
    const Shape& p = ctx.input(4).shape();
    if (p.size() != 5 || p[0] != 2 || p[1] != d.b || p[2] != d.n || p[4] != d.h || d.h != d.hv)
      return NodeError(ctx, "past has shape {}, expected [2, {}, {}, P, {}] (and equal head sizes)",
                       ShapeToString(p), d.b, d.n, d.h);
    d.past = p[3];
  }
  d.t = d.past + d.s;
  return d;
}

Status PrepareAttention(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 7));
  FERRY_RETURN_IF_ERROR(CheckNumHeads(ctx));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "weights"));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  if (x.rank() != 3)
    return NodeError(ctx, "input has shape {}, expected [B, S, D]", ShapeToString(x.shape()));
  if (w.rank() != 2 || w.dim(0) != x.dim(2) || w.dtype() != x.dtype())
    return NodeError(ctx, "weights have shape {} ({}), expected [{}, Dq + Dk + Dv] ({})",
                     ShapeToString(w.shape()), DTypeName(w.dtype()), x.dim(2),
                     DTypeName(x.dtype()));
  FERRY_ASSIGN_OR_RETURN(AttentionSizes z, GetAttentionSizes(ctx));
  if (ctx.has_input(2)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "bias"));
    const Tensor& b = ctx.input(2);
    if (b.rank() != 1 || b.dim(0) != w.dim(1) || b.dtype() != x.dtype())
      return NodeError(ctx, "bias has shape {}, expected [{}]", ShapeToString(b.shape()), w.dim(1));
  }
  if (ctx.has_input(4)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 4, "past"));
    if (ctx.input(4).dtype() != x.dtype())
      return NodeError(ctx, "past's dtype differs from input's");
  }
  FERRY_ASSIGN_OR_RETURN(AttnDims d, AttentionDimsOf(ctx, z));
  FERRY_RETURN_IF_ERROR(CheckAttentionMask(ctx, 3, "mask_index", d));
  FERRY_RETURN_IF_ERROR(CheckAttentionBias(ctx, 5, d, x.dtype()));
  ctx.set_output(0, x.dtype(), {d.b, d.s, z.dv});
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) {
    if (d.h != d.hv) return NodeError(ctx, "present needs equal head sizes for K and V");
    ctx.set_output(1, x.dtype(), {2, d.b, d.n, d.t, d.h});
  }
  return Status::Ok();
}

void RunAttention(OpContext& ctx) {
  const AttentionSizes z = GetAttentionSizes(ctx).value();
  const AttnDims d = AttentionDimsOf(ctx, z).value();
  const int64_t din = ctx.input(0).dim(2), cols = z.dq + z.dk + z.dv, rows = d.b * d.s;
  const std::vector<double> x = ReadDoubles(ctx.input(0)), w = ReadDoubles(ctx.input(1));
  std::vector<double> qkv(static_cast<size_t>(rows * cols), 0.0);
  if (ctx.has_input(2)) {
    const std::vector<double> bias = ReadDoubles(ctx.input(2));
    for (int64_t r = 0; r < rows; ++r) std::copy(bias.begin(), bias.end(), qkv.begin() + r * cols);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < din; ++i) {
      const double a = x[static_cast<size_t>(r * din + i)];
      for (int64_t j = 0; j < cols; ++j)
        qkv[static_cast<size_t>(r * cols + j)] += a * w[static_cast<size_t>(i * cols + j)];
    }
  std::vector<double> q = SplitHeads(qkv, d.b, d.s, d.n, d.h, cols, 0);
  std::vector<double> k = SplitHeads(qkv, d.b, d.s, d.n, d.h, cols, z.dq);
  std::vector<double> v = SplitHeads(qkv, d.b, d.s, d.n, d.hv, cols, z.dq + z.dk);
  if (ctx.has_input(4)) {
    const std::vector<double> past = ReadDoubles(ctx.input(4));
    const size_t half = past.size() / 2;
    k = ConcatPast(std::vector<double>(past.begin(), past.begin() + half), k, d.b, d.n, d.past, d.s,
                   d.h);
    v = ConcatPast(std::vector<double>(past.begin() + half, past.end()), v, d.b, d.n, d.past, d.s,
                   d.hv);
  }
  const bool causal = ctx.attr_int("unidirectional", 0) != 0 && d.s > 1;
  const std::vector<double> mask =
      BuildAttentionMask(ctx, 3, d, causal, ctx.attr_float("mask_filter_value", -10000.f));
  std::vector<double> y;
  AttentionCore(ctx, d, q, k, v, mask, 5, ScaleOf(ctx, d.h), &y, nullptr);
  WriteDoubles(y, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) {
    std::vector<double> present = k;
    present.insert(present.end(), v.begin(), v.end());
    WriteDoubles(present, ctx.output(1));
  }
}

// ---- MultiHeadAttention ----
// query, key, value, bias, key_padding_mask, attention_bias, past_key, past_value,
// past_sequence_length, cache_indirection.
enum class MhaForm { kSeparate, kKvHeads, kPackedQkv, kPackedKv };

struct MhaPlan {
  MhaForm form = MhaForm::kSeparate;
  AttnDims d;
  int64_t l = 0;  // new key length
};

Result<MhaPlan> GetMhaPlan(const OpContext& ctx) {
  const Tensor& q = ctx.input(0);
  MhaPlan p;
  AttnDims& d = p.d;
  d.n = ctx.attr_int("num_heads", 1);
  const bool has_k = ctx.has_input(1), has_v = ctx.has_input(2);
  if (q.rank() == 5) {
    if (has_k || has_v || q.dim(2) != d.n || q.dim(3) != 3)
      return NodeError(ctx,
                       "packed query has shape {}, expected [B, S, {}, 3, H] without key/value",
                       ShapeToString(q.shape()), d.n);
    p.form = MhaForm::kPackedQkv;
    d.b = q.dim(0);
    d.s = q.dim(1);
    d.h = d.hv = q.dim(4);
    p.l = d.s;
  } else {
    if (q.rank() != 3 || q.dim(2) % d.n != 0)
      return NodeError(ctx, "query has shape {}, expected [B, S, D] with D a multiple of {}",
                       ShapeToString(q.shape()), d.n);
    d.b = q.dim(0);
    d.s = q.dim(1);
    d.h = q.dim(2) / d.n;
    if (!has_k) return NodeError(ctx, "key is missing (and query is not packed)");
    const Tensor& k = ctx.input(1);
    if (k.rank() == 5) {
      if (has_v || k.dim(0) != d.b || k.dim(2) != d.n || k.dim(3) != 2 || k.dim(4) != d.h)
        return NodeError(ctx, "packed key has shape {}, expected [{}, L, {}, 2, {}] without value",
                         ShapeToString(k.shape()), d.b, d.n, d.h);
      p.form = MhaForm::kPackedKv;
      p.l = k.dim(1);
      d.hv = d.h;
    } else {
      if (!has_v) return NodeError(ctx, "value is missing");
      const Tensor& v = ctx.input(2);
      if (k.rank() == 3 && v.rank() == 3) {
        if (k.dim(0) != d.b || k.dim(2) != q.dim(2) || v.dim(0) != d.b || v.dim(1) != k.dim(1) ||
            v.dim(2) % d.n != 0)
          return NodeError(ctx, "key {} / value {} do not match query {}", ShapeToString(k.shape()),
                           ShapeToString(v.shape()), ShapeToString(q.shape()));
        p.l = k.dim(1);
        d.hv = v.dim(2) / d.n;
      } else if (k.rank() == 4 && v.rank() == 4) {
        if (k.dim(0) != d.b || k.dim(1) != d.n || k.dim(3) != d.h || v.dim(0) != d.b ||
            v.dim(1) != d.n || v.dim(2) != k.dim(2))
          return NodeError(ctx, "key {} / value {} are not [{}, {}, L, H] heads of query {}",
                           ShapeToString(k.shape()), ShapeToString(v.shape()), d.b, d.n,
                           ShapeToString(q.shape()));
        p.form = MhaForm::kKvHeads;
        p.l = k.dim(2);
        d.hv = v.dim(3);
      } else {
        return NodeError(ctx, "key {} and value {} must both be 3-D or both 4-D",
                         ShapeToString(k.shape()), ShapeToString(v.shape()));
      }
    }
  }
  if (ctx.has_input(6) != ctx.has_input(7))
    return NodeError(ctx, "past_key and past_value must be given together");
  if (ctx.has_input(6)) {
    if (p.form == MhaForm::kKvHeads)
      return NodeUnsupported(ctx, "past_key with key/value in heads is not supported");
    const Shape& pk = ctx.input(6).shape();
    const Shape& pv = ctx.input(7).shape();
    if (pk.size() != 4 || pk[0] != d.b || pk[1] != d.n || pk[3] != d.h || pv.size() != 4 ||
        pv[0] != d.b || pv[1] != d.n || pv[2] != pk[2] || pv[3] != d.hv)
      return NodeError(ctx,
                       "past_key {} / past_value {}, expected [{}, {}, P, {}] / [{}, {}, P, {}]",
                       ShapeToString(pk), ShapeToString(pv), d.b, d.n, d.h, d.b, d.n, d.hv);
    d.past = pk[2];
  }
  d.t = d.past + p.l;
  return p;
}

Status PrepareMha(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 10));
  FERRY_RETURN_IF_ERROR(CheckNumHeads(ctx));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "query"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  const DType t = ctx.input(0).dtype();
  for (size_t i : {1, 2, 3, 6, 7})
    if (ctx.has_input(i)) {
      FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "a float input"));
      if (ctx.input(i).dtype() != t)
        return NodeError(ctx, "input {} has dtype {}, expected {}", i,
                         DTypeName(ctx.input(i).dtype()), DTypeName(t));
    }
  if (ctx.has_input(9)) return NodeUnsupported(ctx, "cache_indirection is not supported");
  FERRY_ASSIGN_OR_RETURN(MhaPlan p, GetMhaPlan(ctx));
  const AttnDims& d = p.d;
  if (ctx.has_input(3)) {
    const int64_t want = d.n * (2 * d.h + d.hv);
    if (ctx.input(3).rank() != 1 || ctx.input(3).dim(0) != want)
      return NodeError(ctx, "bias has shape {}, expected [{}]", ShapeToString(ctx.input(3).shape()),
                       want);
  }
  FERRY_RETURN_IF_ERROR(CheckAttentionMask(ctx, 4, "key_padding_mask", d));
  if (ctx.has_input(4) && ctx.input(4).rank() == 4)
    return NodeUnsupported(ctx, "a 4-D key_padding_mask is not supported");
  FERRY_RETURN_IF_ERROR(CheckAttentionBias(ctx, 5, d, t));
  ctx.set_output(0, t, {d.b, d.s, d.n * d.hv});
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) ctx.set_output(1, t, {d.b, d.n, d.t, d.h});
  if (ctx.num_outputs() > 2 && ctx.has_output(2)) ctx.set_output(2, t, {d.b, d.n, d.t, d.hv});
  if (ctx.num_outputs() > 3 && ctx.has_output(3)) ctx.set_output(3, t, {d.b, d.n, d.s, d.t});
  return Status::Ok();
}

void RunMha(OpContext& ctx) {
  const MhaPlan p = GetMhaPlan(ctx).value();
  const AttnDims& d = p.d;
  const std::vector<double> bias =
      ctx.has_input(3) ? ReadDoubles(ctx.input(3)) : std::vector<double>();
  const int64_t dq = d.n * d.h, dv = d.n * d.hv;
  auto add_bias = [&](std::vector<double>& x, int64_t rows, int64_t row, int64_t off, int64_t width,
                      int64_t bias_off) {
    if (bias.empty()) return;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c)
        x[static_cast<size_t>(r * row + off + c)] += bias[static_cast<size_t>(bias_off + c)];
  };
  std::vector<double> q, k, v;
  std::vector<double> qx = ReadDoubles(ctx.input(0));
  if (p.form == MhaForm::kPackedQkv) {
    // [B, S, N, 3, H]: per head q, k, v; bias laid out as [Dq | Dk | Dv].
    std::vector<double> qq(static_cast<size_t>(d.b * d.s * dq)), kk(qq.size()), vv(qq.size());
    for (int64_t r = 0; r < d.b * d.s; ++r)
      for (int64_t n = 0; n < d.n; ++n)
        for (int64_t c = 0; c < d.h; ++c) {
          const size_t src = static_cast<size_t>(((r * d.n + n) * 3) * d.h + c),
                       dst = static_cast<size_t>(r * dq + n * d.h + c);
          qq[dst] = qx[src];
          kk[dst] = qx[src + static_cast<size_t>(d.h)];
          vv[dst] = qx[src + static_cast<size_t>(2 * d.h)];
        }
    add_bias(qq, d.b * d.s, dq, 0, dq, 0);
    add_bias(kk, d.b * d.s, dq, 0, dq, dq);
    add_bias(vv, d.b * d.s, dq, 0, dq, 2 * dq);
    q = SplitHeads(qq, d.b, d.s, d.n, d.h, dq, 0);
    k = SplitHeads(kk, d.b, p.l, d.n, d.h, dq, 0);
    v = SplitHeads(vv, d.b, p.l, d.n, d.hv, dq, 0);
  } else {
    add_bias(qx, d.b * d.s, dq, 0, dq, 0);
    q = SplitHeads(qx, d.b, d.s, d.n, d.h, dq, 0);
    if (p.form == MhaForm::kPackedKv) {
      const std::vector<double> kv = ReadDoubles(ctx.input(1));
      std::vector<double> kk(static_cast<size_t>(d.b * p.l * dq)), vv(kk.size());
      for (int64_t r = 0; r < d.b * p.l; ++r)
        for (int64_t n = 0; n < d.n; ++n)
          for (int64_t c = 0; c < d.h; ++c) {
            const size_t src = static_cast<size_t>(((r * d.n + n) * 2) * d.h + c),
                         dst = static_cast<size_t>(r * dq + n * d.h + c);
            kk[dst] = kv[src];
            vv[dst] = kv[src + static_cast<size_t>(d.h)];
          }
      add_bias(kk, d.b * p.l, dq, 0, dq, dq);
      add_bias(vv, d.b * p.l, dq, 0, dq, 2 * dq);
      k = SplitHeads(kk, d.b, p.l, d.n, d.h, dq, 0);
      v = SplitHeads(vv, d.b, p.l, d.n, d.hv, dq, 0);
    } else if (p.form == MhaForm::kKvHeads) {
      k = ReadDoubles(ctx.input(1));
      v = ReadDoubles(ctx.input(2));
    } else {
      std::vector<double> kk = ReadDoubles(ctx.input(1)), vv = ReadDoubles(ctx.input(2));
      add_bias(kk, d.b * p.l, dq, 0, dq, dq);
      add_bias(vv, d.b * p.l, dv, 0, dv, 2 * dq);
      k = SplitHeads(kk, d.b, p.l, d.n, d.h, dq, 0);
      v = SplitHeads(vv, d.b, p.l, d.n, d.hv, dv, 0);
    }
  }
  if (ctx.has_input(6)) {
    k = ConcatPast(ReadDoubles(ctx.input(6)), k, d.b, d.n, d.past, p.l, d.h);
    v = ConcatPast(ReadDoubles(ctx.input(7)), v, d.b, d.n, d.past, p.l, d.hv);
  }
  const bool causal = ctx.attr_int("unidirectional", 0) != 0 && d.s > 1;
  const std::vector<double> mask =
      BuildAttentionMask(ctx, 4, d, causal, ctx.attr_float("mask_filter_value", -10000.f));
  const bool want_qk = ctx.num_outputs() > 3 && ctx.has_output(3);
  std::vector<double> y, scores;
  AttentionCore(ctx, d, q, k, v, mask, 5, ScaleOf(ctx, d.h), &y, want_qk ? &scores : nullptr);
  WriteDoubles(y, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) WriteDoubles(k, ctx.output(1));
  if (ctx.num_outputs() > 2 && ctx.has_output(2)) WriteDoubles(v, ctx.output(2));
  if (want_qk) WriteDoubles(scores, ctx.output(3));
}

constexpr OpDef kOps[] = {
    {kMsDomain, "Attention", 1, nullptr, PrepareAttention, RunAttention},
    {kMsDomain, "MultiHeadAttention", 1, nullptr, PrepareMha, RunMha},
};

}  // namespace

std::span<const OpDef> ContribAttentionOps() {
  return kOps;
}

}  // namespace ferry::ops
