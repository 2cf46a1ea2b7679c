// Helpers shared by the shape-op family files (shape_ops.cc, shape_ops2.cc).
#pragma once

#include "core/memory_budget.h"
#include "ops/reference/common.h"

namespace ferry::ops::shape_util {

// Reads input i, a rank-0 or rank-1 integer tensor of one of `allowed` dtypes, as int64 values.
inline Result<std::vector<int64_t>> IntsInput(const OpContext& ctx, size_t i, std::string_view what,
                                              std::initializer_list<DType> allowed = {
                                                  DType::kInt64}) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, allowed));
  if (ctx.input(i).rank() > 1)
    return NodeError(ctx, "input {} ({}) has rank {}, expected 1", i, what, ctx.input(i).rank());
  return ctx.input(i).ToInt64Vector();
}

// Normalizes each axis against `rank`; a repeated axis is an error.
inline Result<std::vector<int64_t>> NormalizeAxes(const OpContext& ctx,
                                                  const std::vector<int64_t>& axes, int64_t rank,
                                                  std::string_view what) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    FERRY_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, rank, what));
    if (std::find(out.begin(), out.end(), n) != out.end())
      return NodeError(ctx, "{} {} is repeated in {}", what, a, ShapeToString(axes));
    out.push_back(n);
  }
  return out;
}

// Product of dims with an overflow guard (dims are non-negative).
inline Result<int64_t> CheckedProduct(const OpContext& ctx, const Shape& dims) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d != 0 && p > (int64_t{1} << 62) / d)
      return NodeError(ctx, "shape {} has too many elements", ShapeToString(dims));
    p *= d;
  }
  return p;
}

// The output `out` of `dt` must fit the calling run's memory budget (MemoryBudget::Current)
// before a plan builds index maps as long as its dims: a Tile or Pad to 2^40 elements (or to a
// dim of 2^34 beside a 0) allocated its maps before the output's own check. Returns the
// element count (0: nothing to copy, build no maps).
// `check`: false at run time, when the output is allocated (and charged) already.
inline Result<int64_t> OutputFits(const OpContext& ctx, const Shape& out, DType dt, bool check) {
  FERRY_ASSIGN_OR_RETURN(int64_t total, CheckedProduct(ctx, out));
  const uint64_t bytes = static_cast<uint64_t>(total) * DTypeSize(dt);
  if (const std::shared_ptr<MemoryBudget>& budget = MemoryBudget::Current(); budget && check)
    FERRY_RETURN_IF_ERROR(CheckFits(budget.get(), bytes,
                                    fmt::format("{}: output 0 {}{}", ctx.node().Describe(),
                                                DTypeName(dt), ShapeToString(out))));
  return total;
}

inline const void* ElemPtr(DType dt, const void* base, int64_t i) {
  return static_cast<const char*>(base) + i * static_cast<int64_t>(DTypeSize(dt));
}
inline void* ElemPtr(DType dt, void* base, int64_t i) {
  return static_cast<char*>(base) + i * static_cast<int64_t>(DTypeSize(dt));
}

}  // namespace ferry::ops::shape_util
