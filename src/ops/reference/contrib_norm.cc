// Reference kernels, ONNX Runtime contrib normalizations: SkipLayerNormalization,
// SkipSimplifiedLayerNormalization, EmbedLayerNormalization (com.microsoft, since_version 1),
// and LayerNormalization / SimplifiedLayerNormalization in the default domain from opset 1 (ONNX
// Runtime registers its LayerNormalization there below opset 17, where ONNX added its own; its
// transformer optimizer writes them into opset 11-16 models).
//
// Rows are normalized in double: mean, variance as the mean squared deviation, then
// (x - mean) / sqrt(var + epsilon) * gamma + beta, rounded once on store.
#include "ops/reference/contrib_common.h"

namespace ferry::ops {

namespace {

Status RequireVector(const OpContext& ctx, size_t i, std::string_view what, int64_t n) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kContribFloatTypes));
  const Tensor& t = ctx.input(i);
  if (t.rank() != 1 || t.dim(0) != n)
    return NodeError(ctx, "{} has shape {}, expected [{}]", what, ShapeToString(t.shape()), n);
  return Status::Ok();
}

Status RequireSameDType(const OpContext& ctx, size_t i, std::string_view what, DType want) {
  if (ctx.input(i).dtype() != want)
    return NodeError(ctx, "{} has dtype {}, expected {} (the input's)", what,
                     DTypeName(ctx.input(i).dtype()), DTypeName(want));
  return Status::Ok();
}

// ---- SkipLayerNormalization: input, skip, gamma, [beta], [bias] ----
// Simplified (RMS) form: input, skip, gamma, [bias]. Outputs: output, [mean], [inv_std_var],
// [input_skip_bias_sum]. skip is input's shape, or broadcast over the batch ([1, S, H], [S, H]).
template <bool kSimplified>
Status PrepareSkipLayerNorm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, kSimplified ? 4 : 5));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "skip"));
  const Tensor& x = ctx.input(0);
  const DType t = x.dtype();
  FERRY_RETURN_IF_ERROR(RequireSameDType(ctx, 1, "skip", t));
  if (x.rank() != 2 && x.rank() != 3)
    return NodeError(ctx, "input has shape {}, expected rank 3 (batch, sequence, hidden) or 2",
                     ShapeToString(x.shape()));
  const int64_t h = x.dim(x.rank() - 1);
  const Shape& s = ctx.input(1).shape();
  const bool same = s == x.shape();
  const bool bcast =
      x.rank() == 3 && ((s.size() == 3 && s[0] == 1 && s[1] == x.dim(1) && s[2] == h) ||
                        (s.size() == 2 && s[0] == x.dim(1) && s[1] == h));
  if (!same && !bcast)
    return NodeError(ctx, "skip has shape {}, expected {} (or [1, {}, {}] / [{}, {}])",
                     ShapeToString(s), ShapeToString(x.shape()), x.rank() == 3 ? x.dim(1) : 1, h,
                     x.rank() == 3 ? x.dim(1) : 1, h);
  FERRY_RETURN_IF_ERROR(RequireVector(ctx, 2, "gamma", h));
  const size_t bias_at = kSimplified ? 3 : 4;
  if (!kSimplified && ctx.has_input(3)) FERRY_RETURN_IF_ERROR(RequireVector(ctx, 3, "beta", h));
  if (ctx.has_input(bias_at)) FERRY_RETURN_IF_ERROR(RequireVector(ctx, bias_at, "bias", h));
  if (ctx.num_outputs() > 4)
    return NodeError(ctx, "has {} outputs, expected at most 4", ctx.num_outputs());
  Shape stat = x.shape();
  stat.back() = 1;
  ctx.set_output(0, t, x.shape());
  for (size_t i = 1; i < 3 && i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) ctx.set_output(i, DType::kFloat, stat);
  if (ctx.num_outputs() > 3 && ctx.has_output(3)) ctx.set_output(3, t, x.shape());
  return Status::Ok();
}

template <bool kSimplified>
void RunSkipLayerNorm(OpContext& ctx) {
  const Tensor& xt = ctx.input(0);
  const int64_t h = xt.dim(xt.rank() - 1), rows = h == 0 ? 0 : xt.size() / h;
  std::vector<double> x = ReadDoubles(xt), skip = ReadDoubles(ctx.input(1));
  const int64_t skip_rows = h == 0 ? 0 : ctx.input(1).size() / h;
  const std::vector<double> gamma = ReadDoubles(ctx.input(2));
  std::vector<double> beta;
  if (!kSimplified && ctx.has_input(3)) beta = ReadDoubles(ctx.input(3));
  const size_t bias_at = kSimplified ? 3 : 4;
  const std::vector<double> bias =
      ctx.has_input(bias_at) ? ReadDoubles(ctx.input(bias_at)) : std::vector<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < h; ++k) {
      double& v = x[static_cast<size_t>(r * h + k)];
      v += skip[static_cast<size_t>((r % std::max<int64_t>(skip_rows, 1)) * h + k)];
      if (!bias.empty()) v += bias[static_cast<size_t>(k)];
    }
  if (ctx.num_outputs() > 3 && ctx.has_output(3)) WriteDoubles(x, ctx.output(3));
  std::vector<double> means(static_cast<size_t>(rows)), inv(static_cast<size_t>(rows));
  LayerNormRows(x, rows, h, ctx.attr_float("epsilon", 1e-12f), gamma,
                beta.empty() ? nullptr : &beta, kSimplified, &means, &inv);
  WriteDoubles(x, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) WriteDoubles(means, ctx.output(1));
  if (ctx.num_outputs() > 2 && ctx.has_output(2)) WriteDoubles(inv, ctx.output(2));
}

// ---- LayerNormalization / SimplifiedLayerNormalization (default domain, from opset 1) ----
// X, Scale, [B] (Simplified: X, scale); Scale and B broadcast to X's dims from `axis` on.
template <bool kSimplified>
Status PrepareLayerNormV1(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, kSimplified ? 2 : 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  const Tensor& x = ctx.input(0);
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", -1), x.rank()));
  const Shape norm(x.shape().begin() + axis, x.shape().end());
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const char* what = i == 1 ? "Scale" : "B";
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kContribFloatTypes));
    const Shape& p = ctx.input(i).shape();
    if (NumElements(p) != NumElements(norm) && NumElements(p) != 1)
      return NodeError(ctx, "{} has shape {}, expected {} elements (X's shape {} from axis {})",
                       what, ShapeToString(p), NumElements(norm), ShapeToString(x.shape()), axis);
  }
  Shape stat = x.shape();
  for (size_t d = static_cast<size_t>(axis); d < stat.size(); ++d) stat[d] = 1;
  ctx.set_output(0, x.dtype(), x.shape());
  const DType stash = ctx.attr_int("stash_type", 1) == 11 ? DType::kDouble : DType::kFloat;
  for (size_t i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) ctx.set_output(i, stash, stat);
  return Status::Ok();
}

template <bool kSimplified>
void RunLayerNormV1(OpContext& ctx) {
  const Tensor& xt = ctx.input(0);
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += xt.rank();
  int64_t len = 1;
  for (int64_t d = axis; d < xt.rank(); ++d) len *= xt.dim(d);
  const int64_t rows = len == 0 ? 0 : xt.size() / len;
  auto expand = [&](size_t i) {
    std::vector<double> p = ReadDoubles(ctx.input(i));
    if (p.size() == 1) p.assign(static_cast<size_t>(len), p[0]);
    return p;
  };
  std::vector<double> x = ReadDoubles(xt), gamma = expand(1), beta;
  if (!kSimplified && ctx.has_input(2)) beta = expand(2);
  std::vector<double> means(static_cast<size_t>(rows)), inv(static_cast<size_t>(rows));
  LayerNormRows(x, rows, len, ctx.attr_float("epsilon", 1e-5f), gamma,
                beta.empty() ? nullptr : &beta, kSimplified, &means, &inv);
  WriteDoubles(x, ctx.output(0));
  // LayerNormalization: Mean, InvStdDev; SimplifiedLayerNormalization: inv_std_var.
  if (kSimplified) {
    if (ctx.num_outputs() > 1 && ctx.has_output(1)) WriteDoubles(inv, ctx.output(1));
    return;
  }
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) WriteDoubles(means, ctx.output(1));
  if (ctx.num_outputs() > 2 && ctx.has_output(2)) WriteDoubles(inv, ctx.output(2));
}

// ---- EmbedLayerNormalization ----
// input_ids [B, S], segment_ids [B, S] (optional), word_embedding [V, H], position_embedding
// [P, H], segment_embedding [G, H] (optional), gamma [H], beta [H], mask [B, S] (optional),
// position_ids [B, S] or [1, S] (optional; default 0..S-1). Outputs: LayerNorm(word + position
// + segment) [B, S, H]; mask_index [B] (the count of non-zero mask values per row, 0... without
// a mask: S); embedding_sum [B, S, H] (optional).
constexpr std::initializer_list<DType> kIds = {DType::kInt32, DType::kInt64};

Status CheckIds(const OpContext& ctx, size_t i, std::string_view what, const Shape& want,
                int64_t rows, bool allow_row_broadcast) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kIds));
  const Tensor& t = ctx.input(i);
  const bool ok = t.shape() == want ||
                  (allow_row_broadcast && t.rank() == 2 && t.dim(0) == 1 && t.dim(1) == want[1]);
  if (!ok)
    return NodeError(ctx, "{} has shape {}, expected {}", what, ShapeToString(t.shape()),
                     ShapeToString(want));
  if (rows < 0) return Status::Ok();
  for (int64_t k = 0; k < t.size(); ++k) {
    const int64_t v = t.GetAsInt64(k);
    if (v < 0 || v >= rows)
      return NodeError(ctx, "{}[{}] is {}, outside the table's {} rows", what, k, v, rows);
  }
  return Status::Ok();
}

Status PrepareEmbedLayerNorm(OpContext& ctx) {
  // segment_ids (1) and segment_embedding (4) are optional inside the 7 listed inputs.
  if (ctx.num_inputs() < 7 || ctx.num_inputs() > 9)
    return NodeError(ctx, "has {} inputs, expected 7 to 9", ctx.num_inputs());
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input_ids"));
  const Tensor& ids = ctx.input(0);
  if (ids.rank() != 2)
    return NodeError(ctx, "input_ids has shape {}, expected [batch, sequence]",
                     ShapeToString(ids.shape()));
  const Shape bs = ids.shape();
  for (size_t i : {2, 3}) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, i == 2 ? "word_embedding" : "position_embedding"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kContribFloatTypes));
    if (ctx.input(i).rank() != 2)
      return NodeError(ctx, "{} has shape {}, expected 2-D",
                       i == 2 ? "word_embedding" : "position_embedding",
                       ShapeToString(ctx.input(i).shape()));
  }
  const int64_t h = ctx.input(2).dim(1);
  const DType t = ctx.input(2).dtype();
  FERRY_RETURN_IF_ERROR(CheckIds(ctx, 0, "input_ids", bs, ctx.input(2).dim(0), false));
  if (ctx.input(3).dim(1) != h || ctx.input(3).dtype() != t)
    return NodeError(ctx, "position_embedding has shape {} ({}), expected [*, {}] ({})",
                     ShapeToString(ctx.input(3).shape()), DTypeName(ctx.input(3).dtype()), h,
                     DTypeName(t));
  const bool has_seg = ctx.has_input(1) || ctx.has_input(4);
  if (has_seg) {
    if (!ctx.has_input(1) || !ctx.has_input(4))
      return NodeError(ctx, "segment_ids and segment_embedding must be given together");
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 4, "segment_embedding"));
    const Tensor& se = ctx.input(4);
    if (se.rank() != 2 || se.dim(1) != h || se.dtype() != t)
      return NodeError(ctx, "segment_embedding has shape {} ({}), expected [*, {}] ({})",
                       ShapeToString(se.shape()), DTypeName(se.dtype()), h, DTypeName(t));
    FERRY_RETURN_IF_ERROR(CheckIds(ctx, 1, "segment_ids", bs, se.dim(0), false));
  }
  FERRY_RETURN_IF_ERROR(RequireVector(ctx, 5, "gamma", h));
  FERRY_RETURN_IF_ERROR(RequireVector(ctx, 6, "beta", h));
  if (ctx.has_input(7)) FERRY_RETURN_IF_ERROR(CheckIds(ctx, 7, "mask", bs, -1, false));
  const int64_t positions = ctx.input(3).dim(0);
  if (ctx.has_input(8)) {
    FERRY_RETURN_IF_ERROR(CheckIds(ctx, 8, "position_ids", bs, positions, true));
  } else if (bs[1] > positions) {
    return NodeError(ctx, "sequence length {} exceeds position_embedding's {} rows", bs[1],
                     positions);
  }
  ctx.set_output(0, t, {bs[0], bs[1], h});
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) ctx.set_output(1, DType::kInt32, {bs[0]});
  if (ctx.num_outputs() > 2 && ctx.has_output(2)) ctx.set_output(2, t, {bs[0], bs[1], h});
  return Status::Ok();
}

void RunEmbedLayerNorm(OpContext& ctx) {
  const Tensor& ids = ctx.input(0);
  const int64_t b = ids.dim(0), s = ids.dim(1), h = ctx.input(2).dim(1);
  const std::vector<double> word = ReadDoubles(ctx.input(2)), pos = ReadDoubles(ctx.input(3));
  const bool has_seg = ctx.has_input(1);
  const std::vector<double> seg = has_seg ? ReadDoubles(ctx.input(4)) : std::vector<double>();
  std::vector<double> x(static_cast<size_t>(b * s * h));
  for (int64_t r = 0; r < b * s; ++r) {
    const int64_t w = ids.GetAsInt64(r);
    int64_t p = r % s;
    if (ctx.has_input(8)) p = ctx.input(8).GetAsInt64(ctx.input(8).dim(0) == 1 ? r % s : r);
    const int64_t g = has_seg ? ctx.input(1).GetAsInt64(r) : 0;
    for (int64_t k = 0; k < h; ++k) {
      double v = word[static_cast<size_t>(w * h + k)] + pos[static_cast<size_t>(p * h + k)];
      if (has_seg) v += seg[static_cast<size_t>(g * h + k)];
      x[static_cast<size_t>(r * h + k)] = v;
    }
  }
  if (ctx.num_outputs() > 2 && ctx.has_output(2)) WriteDoubles(x, ctx.output(2));
  const std::vector<double> gamma = ReadDoubles(ctx.input(5)), beta = ReadDoubles(ctx.input(6));
  LayerNormRows(x, b * s, h, ctx.attr_float("epsilon", 1e-12f), gamma, &beta, false, nullptr,
                nullptr);
  WriteDoubles(x, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) {
    int32_t* mi = ctx.output(1).data<int32_t>();
    for (int64_t r = 0; r < b; ++r) {
      int32_t count = 0;
      for (int64_t k = 0; k < s; ++k)
        count += !ctx.has_input(7) || ctx.input(7).GetAsInt64(r * s + k) != 0;
      mi[r] = count;
    }
  }
}

constexpr OpDef kOps[] = {
    {kMsDomain, "SkipLayerNormalization", 1, nullptr, PrepareSkipLayerNorm<false>,
     RunSkipLayerNorm<false>},
    {kMsDomain, "SkipSimplifiedLayerNormalization", 1, nullptr, PrepareSkipLayerNorm<true>,
     RunSkipLayerNorm<true>},
    {kMsDomain, "EmbedLayerNormalization", 1, nullptr, PrepareEmbedLayerNorm, RunEmbedLayerNorm},
    {"", "LayerNormalization", 1, nullptr, PrepareLayerNormV1<false>, RunLayerNormV1<false>},
    {"", "SimplifiedLayerNormalization", 1, nullptr, PrepareLayerNormV1<true>,
     RunLayerNormV1<true>},
};

}  // namespace

std::span<const OpDef> ContribNormOps() {
  return kOps;
}

}  // namespace ferry::ops
