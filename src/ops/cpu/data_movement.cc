// cpu kernels: Gather and Transpose (any fixed-size dtype, plain layout), as row copies.
//
// Gather copies one contiguous row of `inner` elements per index (an embedding lookup is one
// memcpy per token); indices out of range decline, so the reference reports them. Transpose
// copies the innermost run that the permutation keeps contiguous, or strided elements when it
// moves the last axis. Both split over the provider's threads only when they move at least
// kParallelBytes (below that a thread wake-up costs more than the copy).
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
  StateKey key = MakeKey(ctx, slot);
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

// ---- Transpose ----

struct TransposeState : KernelState {
  StateKey key;
  Shape out_shape;
  // The output walked as [outer dims..., run]: for each outer output index, `run` elements read
  // with stride `run_stride` (elements) from the input offset sum(index[d] * in_stride[d]).
  std::vector<int64_t> out_dims, in_strides;
  int64_t run = 1, run_stride = 1;
};

Status PrepareTranspose(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || !Copyable(ctx.input(0)) || !PlainInputs(slot) ||
      ctx.input(0).rank() == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<TransposeState*>(slot.state.get());
  StateKey key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
    auto fresh = std::make_unique<TransposeState>();
    fresh->key = std::move(key);
    fresh->out_shape = decl[0].shape;
    const Shape& s = ctx.input(0).shape();
    const size_t r = s.size();
    std::vector<int64_t> perm = ctx.attr_ints("perm");
    if (perm.empty())
      for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
    for (int64_t& p : perm)
      if (p < 0) p += static_cast<int64_t>(r);
    std::vector<int64_t> stride(r, 1);
    for (size_t i = r - 1; i-- > 0;) stride[i] = stride[i + 1] * s[i + 1];
    // Output dim k reads input dim perm[k]. Trailing output dims that continue a contiguous run
    // in the input (input stride == run length so far) merge into one run.
    size_t k = r - 1;
    int64_t run = s[static_cast<size_t>(perm[k])];
    const int64_t run_stride = stride[static_cast<size_t>(perm[k])];
    while (k > 0 && run_stride == 1 && stride[static_cast<size_t>(perm[k - 1])] == run) {
      --k;
      run *= s[static_cast<size_t>(perm[k])];
    }
    fresh->run = run;
    fresh->run_stride = run_stride;
    for (size_t i = 0; i < k; ++i) {
      fresh->out_dims.push_back(s[static_cast<size_t>(perm[i])]);
      fresh->in_strides.push_back(stride[static_cast<size_t>(perm[i])]);
    }
    slot.state = std::move(fresh);
    st = static_cast<TransposeState*>(slot.state.get());
  }
  if (NumElements(st->out_shape) == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  ctx.set_output(0, ctx.input(0).dtype(), st->out_shape);
  slot.out_layouts.assign(1, Layout::kPlain);
  return Status::Ok();
}

template <typename T>
void TransposeRuns(const TransposeState& st, const T* src, T* dst, int64_t b, int64_t e) {
  const size_t nd = st.out_dims.size();
  std::vector<int64_t> index(nd, 0);
  int64_t off = 0;
  // Start index of run b.
  for (size_t i = nd, rem = static_cast<size_t>(b); i-- > 0;) {
    index[i] = static_cast<int64_t>(rem % static_cast<size_t>(st.out_dims[i]));
    rem /= static_cast<size_t>(st.out_dims[i]);
    off += index[i] * st.in_strides[i];
  }
  for (int64_t q = b; q < e; ++q) {
    T* d = dst + q * st.run;
    if (st.run_stride == 1) {
      std::memcpy(d, src + off, static_cast<size_t>(st.run) * sizeof(T));
    } else {
      const T* s = src + off;
      for (int64_t j = 0; j < st.run; ++j) d[j] = s[j * st.run_stride];
    }
    for (size_t i = nd; i-- > 0;) {
      off += st.in_strides[i];
      if (++index[i] < st.out_dims[i]) break;
      off -= index[i] * st.in_strides[i];
      index[i] = 0;
    }
  }
}

template <typename T>
void TransposeAll(const TransposeState& st, const void* src, void* dst) {
  int64_t runs = 1;
  for (int64_t d : st.out_dims) runs *= d;
  MaybeParallel(runs, runs * st.run * static_cast<int64_t>(sizeof(T)), [&](int64_t b, int64_t e) {
    TransposeRuns(st, static_cast<const T*>(src), static_cast<T*>(dst), b, e);
  });
}

struct Bytes16 {
  unsigned char b[16];
};

void RunTranspose(OpContext& ctx, NodeSlot& slot) {
  const auto& st = *static_cast<const TransposeState*>(slot.state.get());
  const void* src = ctx.input(0).raw();
  void* dst = ctx.output(0).raw();
  switch (DTypeSize(ctx.input(0).dtype())) {
    case 1:
      return TransposeAll<uint8_t>(st, src, dst);
    case 2:
      return TransposeAll<uint16_t>(st, src, dst);
    case 4:
      return TransposeAll<uint32_t>(st, src, dst);
    case 8:
      return TransposeAll<uint64_t>(st, src, dst);
    default:
      return TransposeAll<Bytes16>(st, src, dst);
  }
}

constexpr KernelDef kKernels[] = {
    {"", "Gather", 1, 1000, nullptr, 0, 0, PrepareGather, RunGather},
    {"", "Transpose", 1, 1000, nullptr, 0, 0, PrepareTranspose, RunTranspose},
};

}  // namespace

std::span<const KernelDef> DataMovementKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
