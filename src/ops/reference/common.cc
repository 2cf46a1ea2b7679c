#include "ops/reference/common.h"

namespace ferry::ops {

Status CheckArity(const OpContext& ctx, size_t min_inputs, size_t max_inputs) {
  if (ctx.num_inputs() < min_inputs || ctx.num_inputs() > max_inputs)
    return NodeError(ctx, "has {} inputs, expected {} to {}", ctx.num_inputs(), min_inputs,
                     max_inputs);
  for (size_t i = 0; i < min_inputs; ++i)
    if (!ctx.has_input(i)) return NodeError(ctx, "required input {} is missing", i);
  return Status::Ok();
}

Status RequireTensor(const OpContext& ctx, size_t i, std::string_view what) {
  if (!ctx.has_input(i)) return NodeError(ctx, "input {} ({}) is missing", i, what);
  if (!ctx.input_is_tensor(i)) return NodeError(ctx, "input {} ({}) must be a tensor", i, what);
  return Status::Ok();
}

Status RequireDType(const OpContext& ctx, size_t i, std::initializer_list<DType> allowed) {
  DType t = ctx.input(i).dtype();
  for (DType a : allowed)
    if (a == t) return Status::Ok();
  std::string list;
  for (DType a : allowed) list += (list.empty() ? "" : ", ") + std::string(DTypeName(a));
  return Status(StatusCode::kUnsupported,
                fmt::format("{}: input {} has dtype {}, expected one of {}", ctx.node().Describe(),
                            i, DTypeName(t), list));
}

Result<int64_t> NormalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank,
                              std::string_view what) {
  if (axis < -rank || axis >= rank)
    return NodeError(ctx, "{} {} is out of range for rank {}", what, axis, rank);
  return axis < 0 ? axis + rank : axis;
}

Result<Shape> BroadcastShapes(const OpContext& ctx, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string list;
      for (const auto& x : shapes) list += (list.empty() ? "" : " and ") + ShapeToString(x);
      return NodeError(ctx, "shapes {} cannot be broadcast together", list);
    }
  }
  return out;
}

BroadcastIndexer::BroadcastIndexer(const Shape& in, const Shape& out) {
  identity_ = in == out;
  scalar_ = NumElements(in) == 1;
  size_t r = out.size();
  out_strides_ = Strides(out);
  in_strides_.assign(r, 0);
  std::vector<int64_t> is = Strides(in);
  size_t off = r - in.size();
  for (size_t i = 0; i < in.size(); ++i) in_strides_[off + i] = in[i] == 1 ? 0 : is[i];
}

int64_t BroadcastIndexer::operator()(int64_t i) const {
  if (identity_) return i;
  if (scalar_) return 0;
  int64_t off = 0;
  for (size_t d = 0; d < out_strides_.size(); ++d) {
    int64_t q = i / out_strides_[d];
    i -= q * out_strides_[d];
    off += q * in_strides_[d];
  }
  return off;
}

void ParallelFor(const OpContext& ctx, int64_t n, int64_t min_chunk,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (ctx.pool())
    ctx.pool()->ParallelFor(n, min_chunk, fn);
  else
    fn(0, n);
}

void CopyElements(DType dt, const void* src, void* dst, int64_t n) {
  if (n <= 0) return;
  if (dt == DType::kString) {
    for (int64_t i = 0; i < n; ++i)
      static_cast<std::string*>(dst)[i] = static_cast<const std::string*>(src)[i];
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n) * DTypeSize(dt));
  }
}

std::vector<int64_t> OptionalInts(const OpContext& ctx, size_t i) {
  if (!ctx.input_is_tensor(i)) return {};
  return ctx.input(i).ToInt64Vector();
}

}  // namespace ferry::ops
