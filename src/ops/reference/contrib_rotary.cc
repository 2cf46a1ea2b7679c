// Reference kernel, com.microsoft (ONNX Runtime contrib op, since_version 1): RotaryEmbedding.
//
// input [B, S, N * H] (num_heads given) or [B, N, S, H]; position_ids [B, S] int64, or one value
// p0 (positions p0 + s); cos_cache / sin_cache [max_position, rotary_dim / 2]. For each head
// vector x and position p, with d = rotary_dim (rotary_embedding_dim, default H) and half = d/2:
//   non-interleaved: y[i] = x[i] cos - x[i + half] sin, y[i + half] = x[i + half] cos + x[i] sin
//   interleaved:     y[2i] = x[2i] cos - x[2i + 1] sin, y[2i + 1] = x[2i + 1] cos + x[2i] sin
// (cos, sin = cache[p, i]); elements from d on are copied.
#include "ops/reference/contrib_common.h"

namespace ferry::ops {

namespace {

struct RotaryDims {
  int64_t b, s, n, h, rd;
  bool bnsh;
};

RotaryDims GetRotaryDims(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  RotaryDims d{};
  d.bnsh = x.rank() == 4;
  d.b = x.dim(0);
  if (d.bnsh) {
    d.n = x.dim(1);
    d.s = x.dim(2);
    d.h = x.dim(3);
  } else {
    d.s = x.dim(1);
    d.n = ctx.attr_int("num_heads", 0);
    if (d.n <= 0) d.n = x.dim(2) / (2 * ctx.input(2).dim(1));
    d.h = d.n > 0 ? x.dim(2) / d.n : 0;
  }
  d.rd = ctx.attr_int("rotary_embedding_dim", 0);
  if (d.rd == 0) d.rd = d.h;
  return d;
}

Status PrepareRotary(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 4, 4));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3 && x.rank() != 4)
    return NodeError(ctx, "input has shape {}, expected [B, S, D] or [B, N, S, H]",
                     ShapeToString(x.shape()));
  for (size_t i : {2, 3}) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, i == 2 ? "cos_cache" : "sin_cache"));
    if (ctx.input(i).rank() != 2 || ctx.input(i).dtype() != x.dtype() ||
        ctx.input(i).shape() != ctx.input(2).shape())
      return NodeError(ctx, "{} has shape {} ({}), expected 2-D like cos_cache ({})",
                       i == 2 ? "cos_cache" : "sin_cache", ShapeToString(ctx.input(i).shape()),
                       DTypeName(ctx.input(i).dtype()), DTypeName(x.dtype()));
  }
  if (ctx.attr_int("is_packed_batching", 0) != 0)
    return NodeUnsupported(ctx, "is_packed_batching=1 is not supported");
  const RotaryDims d = GetRotaryDims(ctx);
  if (d.n <= 0 || d.h <= 0 || (!d.bnsh && d.n * d.h != x.dim(2)))
    return NodeError(ctx, "input {} does not split into num_heads {} heads",
                     ShapeToString(x.shape()), d.n);
  const int64_t max_pos = ctx.input(2).dim(0), half = ctx.input(2).dim(1);
  if (d.rd > d.h || d.rd % 2 != 0 || half * 2 != d.rd)
    return NodeError(ctx, "rotary dim {} (head size {}) does not match the caches' {} columns",
                     d.rd, d.h, half);
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "position_ids"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt64}));
  const Tensor& p = ctx.input(1);
  const bool one = p.size() == 1;
  if (!one && p.shape() != Shape{d.b, d.s})
    return NodeError(ctx, "position_ids has shape {}, expected [{}, {}] or one value",
                     ShapeToString(p.shape()), d.b, d.s);
  for (int64_t i = 0; i < p.size(); ++i) {
    const int64_t lo = p.data<int64_t>()[i], hi = one ? lo + d.s - 1 : lo;
    if (lo < 0 || hi >= max_pos)
      return NodeError(ctx, "position {} is outside the caches' {} rows", lo < 0 ? lo : hi,
                       max_pos);
  }
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunRotary(OpContext& ctx) {
  const RotaryDims d = GetRotaryDims(ctx);
  const bool interleaved = ctx.attr_int("interleaved", 0) != 0;
  std::vector<double> x = ReadDoubles(ctx.input(0));
  const std::vector<double> cosv = ReadDoubles(ctx.input(2)), sinv = ReadDoubles(ctx.input(3));
  const Tensor& p = ctx.input(1);
  RotateHeads(x, d.b, d.s, d.n, d.h, d.bnsh, d.rd / 2, interleaved, cosv, sinv,
              [&](int64_t b, int64_t s) {
                return p.size() == 1 ? p.data<int64_t>()[0] + s : p.data<int64_t>()[b * d.s + s];
              });
  WriteDoubles(x, ctx.output(0));
}

constexpr OpDef kOps[] = {
    {kMsDomain, "RotaryEmbedding", 1, nullptr, PrepareRotary, RunRotary},
};

}  // namespace

std::span<const OpDef> ContribRotaryOps() {
  return kOps;
}

}  // namespace ferry::ops
