// cpu kernels: float32 Softmax, ReduceMean / ReduceSum over trailing axes, LayerNormalization,
// on the row kernels of vec.h.
//
// Softmax: opset 1-12 coerces the input to 2-D at `axis` (rows of prod(dims[axis:])); opset 13+
// works along one axis. A contiguous row (the last axis, or any legacy split) is the fast path;
// an inner axis is gathered into a row, computed and scattered back.
// ReduceMean / ReduceSum: the reduced axes must be the trailing ones (after dropping nothing:
// e.g. axes [-1] or [-2,-1]); other reductions decline. keepdims either way.
// LayerNormalization (opset 17): one normalized row of prod(dims[axis:]); Scale and B of that
// many elements (or one); the optional Mean / InvStdDev outputs decline.
// Rows are split over the threads in fixed contiguous blocks when the tensor is large.
#include <algorithm>
#include <vector>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements

struct RowState : KernelState {
  int64_t outer = 1, n = 1, inner = 1;  // [outer, n, inner]: the op works along n
  float eps = 0;
  bool mean = false;  // ReduceMean (else ReduceSum)
};

bool PlainFloat(const OpContext& ctx, const NodeSlot& slot, size_t i) {
  return ctx.has_input(i) && ctx.input_is_tensor(i) && ctx.input(i).dtype() == DType::kFloat &&
         (slot.in_layouts.size() <= i || slot.in_layouts[i] == Layout::kPlain);
}

RowState* Fresh(NodeSlot& slot) {
  slot.state = std::make_unique<RowState>();
  return static_cast<RowState*>(slot.state.get());
}

// Splits rows [0, rows) of `row_elems` elements each over the threads.
template <typename F>
void ForRows(int64_t rows, int64_t row_elems, F&& fn) {
  ParallelRange(rows, std::max<int64_t>(1, kParallelMin / std::max<int64_t>(1, row_elems)), fn);
}

Status PrepareSoftmax(OpContext& ctx, NodeSlot& slot) {
  if (!PlainFloat(ctx, slot, 0) || ctx.input(0).size() == 0 || ctx.input(0).rank() == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  const bool legacy = ctx.opset() < 13;
  int64_t axis = ctx.attr_int("axis", legacy ? 1 : -1);
  if (axis < 0) axis += rank;
  RowState* st = Fresh(slot);
  const size_t a = static_cast<size_t>(std::min(axis, rank));
  st->outer = NumElements(Shape(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(a)));
  const Shape rest(s.begin() + static_cast<std::ptrdiff_t>(a), s.end());
  if (legacy) {
    st->n = NumElements(rest);
  } else {
    st->n = s[a];
    st->inner = NumElements(Shape(rest.begin() + 1, rest.end()));
  }
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, decl[0].shape);
  return Status::Ok();
}

void RunSoftmax(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const RowState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const auto softmax = Vec().softmax;
  const int64_t n = st->n, inner = st->inner;
  if (inner == 1) {
    ForRows(st->outer, n, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) softmax(x + r * n, y + r * n, n);
    });
    return;
  }
  ForRows(st->outer * inner, n, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(2 * n));
    for (int64_t r = b; r < e; ++r) {
      const int64_t base = (r / inner) * n * inner + r % inner;
      for (int64_t k = 0; k < n; ++k) row[static_cast<size_t>(k)] = x[base + k * inner];
      softmax(row.data(), row.data() + n, n);
      for (int64_t k = 0; k < n; ++k) y[base + k * inner] = row[static_cast<size_t>(n + k)];
    }
  });
}

template <bool kMean>
Status PrepareReduce(OpContext& ctx, NodeSlot& slot) {
  if (!PlainFloat(ctx, slot, 0) || ctx.input(0).rank() == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  const int64_t axes_input_opset = kMean ? 18 : 13;
  std::vector<int64_t> axes;
  if (ctx.opset() >= axes_input_opset) {
    if (ctx.has_input(1)) {
      if (!ctx.input_is_tensor(1) || ctx.input(1).dtype() != DType::kInt64) {
        slot.declined = true;
        return Status::Ok();
      }
      axes = ctx.input(1).ToInt64Vector();
    }
    if (axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0) {
      slot.declined = true;
      return Status::Ok();
    }
  } else {
    axes = ctx.attr_ints("axes");
  }
  // Validates (duplicate or out-of-range axes are the reference's errors).
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  std::vector<bool> reduced(s.size(), axes.empty());
  for (int64_t ax : axes) reduced[static_cast<size_t>(ax < 0 ? ax + rank : ax)] = true;
  size_t first = s.size();
  while (first > 0 && reduced[first - 1]) --first;
  for (size_t d = 0; d < first; ++d)
    if (reduced[d]) {  // a reduced axis before a kept one
      slot.declined = true;
      return Status::Ok();
    }
  const Shape kept(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(first));
  const Shape red(s.begin() + static_cast<std::ptrdiff_t>(first), s.end());
  if (NumElements(red) == 0 || NumElements(kept) == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  RowState* st = Fresh(slot);
  st->outer = NumElements(kept);
  st->n = NumElements(red);
  st->mean = kMean;
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, decl[0].shape);
  return Status::Ok();
}

void RunReduce(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const RowState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const auto sum = Vec().sum;
  const int64_t n = st->n;
  const float scale = st->mean ? 1.f / static_cast<float>(n) : 1.f;
  ForRows(st->outer, n, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) y[r] = sum(x + r * n, n) * scale;
  });
}

Status PrepareLayerNorm(OpContext& ctx, NodeSlot& slot) {
  const bool has_b = ctx.has_input(2);
  if (!PlainFloat(ctx, slot, 0) || !PlainFloat(ctx, slot, 1) ||
      (has_b && !PlainFloat(ctx, slot, 2)) || ctx.num_outputs() > 1 || ctx.input(0).size() == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += rank;
  const int64_t n = NumElements(Shape(s.begin() + axis, s.end()));
  auto fits = [&](size_t i) {
    const int64_t k = ctx.input(i).size();
    return k == n || k == 1;
  };
  if (n == 0 || !fits(1) || (has_b && !fits(2))) {
    slot.declined = true;
    return Status::Ok();
  }
  RowState* st = Fresh(slot);
  st->n = n;
  st->outer = ctx.input(0).size() / n;
  st->eps = ctx.attr_float("epsilon", 1e-5f);
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, decl[0].shape);
  return Status::Ok();
}

void RunLayerNorm(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const RowState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const float* g = ctx.input(1).data<float>();
  const int64_t gs = ctx.input(1).size() == 1 ? 0 : 1;
  const float* bb = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  const int64_t bs = bb && ctx.input(2).size() == 1 ? 0 : 1;
  const auto ln = Vec().layer_norm;
  const int64_t n = st->n;
  ForRows(st->outer, n, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) ln(x + r * n, y + r * n, n, st->eps, g, gs, bb, bs);
  });
}

constexpr KernelDef kKernels[] = {
    {"", "Softmax", 1, 1000, nullptr, 0, 0, PrepareSoftmax, RunSoftmax},
    {"", "ReduceMean", 1, 1000, nullptr, 0, 0, PrepareReduce<true>, RunReduce},
    {"", "ReduceSum", 1, 1000, nullptr, 0, 0, PrepareReduce<false>, RunReduce},
    {"", "LayerNormalization", 17, 1000, nullptr, 0, 0, PrepareLayerNorm, RunLayerNorm},
};

}  // namespace

std::span<const KernelDef> NormKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
