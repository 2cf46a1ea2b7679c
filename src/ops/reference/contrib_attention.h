// The attention computation shared by the contrib Attention, MultiHeadAttention and QAttention
// reference kernels (contrib_attention.cc, contrib_dynq.cc).
#pragma once

#include "ops/reference/contrib_common.h"

namespace ferry::ops {

struct AttnDims {
  int64_t b = 1, n = 1, s = 1;  // batch, heads, query length
  int64_t past = 0, t = 1;      // past length, total key length (past + new)
  int64_t h = 1, hv = 1;        // head sizes of Q/K and of V
};

// Validates a mask input (int32): [B] key lengths, [2B] end and start positions, [B, T] key
// padding, [B, S, T] per query, [B, 1, M, M] (M >= T, rows past..past+S-1). `what` names it.
Status CheckAttentionMask(const OpContext& ctx, size_t i, std::string_view what, const AttnDims& d);
// The additive mask [B, S, T]: 0 where attended, `filter` where masked (padding, positions
// outside [start, end), and with `causal` keys after past + s). Empty when there is neither a
// mask nor a causal constraint.
std::vector<double> BuildAttentionMask(const OpContext& ctx, size_t i, const AttnDims& d,
                                       bool causal, double filter);
// Validates an additive attention bias [B or 1, N or 1, S, T] (input i, optional).
Status CheckAttentionBias(const OpContext& ctx, size_t i, const AttnDims& d, DType t);

// y[b, s, n * hv + c] = sum_t softmax_t(scale * q.k + mask + bias) v; q [B,N,S,H], k [B,N,T,H],
// v [B,N,T,Hv]; mask [B,S,T] or empty; bias (input `bias_input` when given) [B|1, N|1, S, T].
// `scores` (optional) receives scale * q.k + mask + bias [B, N, S, T] before the softmax.
void AttentionCore(const OpContext& ctx, const AttnDims& d, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v,
                   const std::vector<double>& mask, int bias_input, double scale,
                   std::vector<double>* y, std::vector<double>* scores);

// [B, L, N * H] (row-major, `off` elements into each row of `row` values) -> [B, N, L, H].
std::vector<double> SplitHeads(const std::vector<double>& x, int64_t b, int64_t l, int64_t n,
                               int64_t h, int64_t row, int64_t off);
// Concatenates past [B, N, P, H] and new [B, N, L, H] along the sequence: [B, N, P + L, H].
std::vector<double> ConcatPast(const std::vector<double>& past, const std::vector<double>& now,
                               int64_t b, int64_t n, int64_t p, int64_t l, int64_t h);

}  // namespace ferry::ops
