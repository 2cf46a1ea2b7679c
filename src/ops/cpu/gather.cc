// cpu kernel: Gather (any fixed-size dtype, plain layout), as row copies.
//
// Gather copies one contiguous row of `inner` elements per index (an embedding lookup is one
// memcpy per token); indices out of range decline, so the reference reports them. It splits
// over the provider's threads only when it moves at least kParallelBytes (below that a thread
// wake-up costs more than the copy). Transpose and Slice are in movement.cc.
#include <cstring>
#include <numeric>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

constexpr int64_t kParallelBytes = int64_t{1} << 20;

bool Copyable(const Tensor& t) {
  return t.dtype() != DType::kString && t.dtype() != DType::kUndefined;
}

bool PlainInputs(const NodeSlot& slot) {
  for (Layout l : slot.in_layouts)
    if (l != Layout::kPlain) return false;
  return true;
}

template <typename F>
void MaybeParallel(int64_t n, int64_t bytes, F&& fn) {
  if (bytes >= kParallelBytes)
    ParallelRange(n, 1, fn);
  else
    fn(int64_t{0}, n);
}

// ---- Gather ----

struct GatherState : KernelState {
  StateKey key;
  Shape out_shape;
  int64_t outer = 0, dim = 0, inner = 0, axis = 0;
};

Status PrepareGather(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || !ctx.input_is_tensor(1) || !Copyable(ctx.input(0)) ||
      !PlainInputs(slot) ||
      (ctx.input(1).dtype() != DType::kInt32 && ctx.input(1).dtype() != DType::kInt64)) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<GatherState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 2));
    auto fresh = std::make_unique<GatherState>();
    fresh->key = std::move(key);
    fresh->out_shape = decl[0].shape;
    const Shape& s = ctx.input(0).shape();
    int64_t axis = ctx.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(s.size());
    fresh->axis = axis;
    fresh->outer = std::accumulate(s.begin(), s.begin() + axis, int64_t{1}, std::multiplies<>());
    fresh->dim = s[static_cast<size_t>(axis)];
    fresh->inner = std::accumulate(s.begin() + axis + 1, s.end(), int64_t{1}, std::multiplies<>());
    slot.state = std::move(fresh);
    st = static_cast<GatherState*>(slot.state.get());
  }
  if (NumElements(st->out_shape) == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  // Index values change every run: out-of-range ones go to the reference (its error message).
  const Tensor& idx = ctx.input(1);
  const int64_t dim = st->dim;
  bool ok = true;
  if (idx.dtype() == DType::kInt64) {
    for (int64_t v : idx.span<int64_t>()) ok &= v >= -dim && v < dim;
  } else {
    for (int32_t v : idx.span<int32_t>()) ok &= v >= -dim && v < dim;
  }
  if (!ok) {
    slot.declined = true;
    return Status::Ok();
  }
  ctx.set_output(0, ctx.input(0).dtype(), st->out_shape);
  slot.out_layouts.assign(1, Layout::kPlain);
  return Status::Ok();
}

void RunGather(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const GatherState*>(slot.state.get());
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const size_t row = static_cast<size_t>(st->inner) * DTypeSize(data.dtype());
  const int64_t n = idx.size(), dim = st->dim;
  const auto* src = static_cast<const std::byte*>(data.raw());
  auto* dst = static_cast<std::byte*>(ctx.output(0).raw());
  const bool i64 = idx.dtype() == DType::kInt64;
  MaybeParallel(st->outer * n, st->outer * n * static_cast<int64_t>(row),
                [&](int64_t b, int64_t e) {
                  for (int64_t k = b; k < e; ++k) {
                    const int64_t o = k / n, j = k % n;
                    int64_t v = i64 ? idx.data<int64_t>()[j] : idx.data<int32_t>()[j];
                    if (v < 0) v += dim;
                    std::memcpy(dst + static_cast<size_t>(k) * row,
                                src + static_cast<size_t>(o * dim + v) * row, row);
                  }
                });
}

constexpr KernelDef kKernels[] = {
    {"", "Gather", 1, 1000, nullptr, 0, 0, PrepareGather, RunGather},
};

}  // namespace

std::span<const KernelDef> GatherKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
