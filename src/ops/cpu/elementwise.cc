// cpu kernels: float32 Relu, Clip, Add, Sub, Mul on the provider's threads, layout-preserving
// (a channels-last input gives a channels-last output when every reader accepts it).
// Binary ops take equal shapes (any layout, both the same) or one plain operand broadcast along
// the rows of the other ([..., K] op [K], [K] op [..., K], scalars); other shapes decline.
#include <algorithm>
#include <limits>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

enum class Unary { kRelu, kClip };
enum class Binary { kAdd, kSub, kMul };

struct EltState : KernelState {
  float lo = 0, hi = 0;
  int64_t inner = 0;     // binary: the small operand's element count (it repeats every `inner`)
  bool swapped = false;  // binary: A is the small (broadcast) operand, B the full one
};

// Whether `small`, left-padded with 1s to `full`'s rank, is all 1s followed by `full`'s
// trailing dims (so it repeats every small.size() elements of `full`).
bool TrailingBroadcast(const Shape& full, const Shape& small) {
  if (small.size() > full.size()) return false;
  Shape bs(full.size() - small.size(), 1);
  bs.insert(bs.end(), small.begin(), small.end());
  size_t first = 0;
  while (first < bs.size() && bs[first] == 1 && full[first] != 1) ++first;
  for (size_t d = first; d < bs.size(); ++d)
    if (bs[d] != full[d]) return false;
  return true;
}

Layout InLayout(const NodeSlot& slot, size_t i) {
  return slot.in_layouts.size() > i ? slot.in_layouts[i] : Layout::kPlain;
}

// The output takes the input's layout when allowed; a channels-last input whose output must be
// plain declines (the runtime converts it first).
bool PickLayout(NodeSlot& slot, Layout in) {
  const bool ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
  if (in != Layout::kPlain && !ok) return false;
  slot.out_layouts.assign(1, in);
  return true;
}

template <Unary kOp>
Status PrepareUnary(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() != DType::kFloat) {
    slot.declined = true;
    return Status::Ok();
  }
  if (!slot.state) {
    FERRY_RETURN_IF_ERROR(ReferenceDeclare(ctx, slot, ctx.num_inputs()).status());
    slot.state = std::make_unique<EltState>();
  }
  auto* st = static_cast<EltState*>(slot.state.get());
  if constexpr (kOp == Unary::kClip) {
    st->lo = -std::numeric_limits<float>::infinity();
    st->hi = std::numeric_limits<float>::infinity();
    if (ctx.opset() < 11) {
      st->lo = ctx.attr_float("min", st->lo);
      st->hi = ctx.attr_float("max", st->hi);
    } else {
      for (size_t i = 1; i < 3; ++i) {
        if (!ctx.has_input(i)) continue;
        if (!ctx.input_is_tensor(i) || ctx.input(i).dtype() != DType::kFloat ||
            ctx.input(i).size() != 1) {
          slot.declined = true;
          return Status::Ok();
        }
        (i == 1 ? st->lo : st->hi) = ctx.input(i).data<float>()[0];
      }
    }
  }
  if (!PickLayout(slot, InLayout(slot, 0))) {
    slot.declined = true;
    return Status::Ok();
  }
  ctx.set_output(0, DType::kFloat, ctx.input(0).shape());
  return Status::Ok();
}

template <Unary kOp>
void RunUnary(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const EltState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const float lo = st->lo, hi = st->hi;
  ParallelRange(ctx.input(0).size(), 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if constexpr (kOp == Unary::kRelu)
        y[i] = x[i] < 0.f ? 0.f : x[i];
      else
        y[i] = std::min(std::max(x[i], lo), hi);
    }
  });
}

template <Binary kOp>
Status PrepareBinary(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || !ctx.input_is_tensor(1) || ctx.input(0).dtype() != DType::kFloat ||
      ctx.input(1).dtype() != DType::kFloat) {
    slot.declined = true;
    return Status::Ok();
  }
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Layout la = InLayout(slot, 0), lb = InLayout(slot, 1);
  int64_t inner = 0;
  bool swapped = false;
  const bool plain = la == Layout::kPlain && lb == Layout::kPlain;
  if (a.shape() == b.shape() && la == lb) {
    inner = a.size();
  } else if (plain && b.size() >= 1 && TrailingBroadcast(a.shape(), b.shape())) {
    inner = b.size();
  } else if (plain && a.size() >= 1 && TrailingBroadcast(b.shape(), a.shape())) {
    inner = a.size();
    swapped = true;
  }
  if (inner == 0 || !PickLayout(slot, la)) {
    slot.declined = true;
    return Status::Ok();
  }
  if (!slot.state) {
    FERRY_RETURN_IF_ERROR(ReferenceDeclare(ctx, slot, 2).status());
    slot.state = std::make_unique<EltState>();
  }
  static_cast<EltState*>(slot.state.get())->inner = inner;
  static_cast<EltState*>(slot.state.get())->swapped = swapped;
  ctx.set_output(0, DType::kFloat, swapped ? b.shape() : a.shape());
  return Status::Ok();
}

template <Binary kOp>
void RunBinary(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const EltState*>(slot.state.get());
  const int64_t inner = st->inner;
  const float* a = ctx.input(0).data<float>();
  const float* b = ctx.input(1).data<float>();
  float* y = ctx.output(0).data<float>();
  const int64_t n = ctx.output(0).size();
  auto op = [](float p, float q) {
    if constexpr (kOp == Binary::kAdd) return p + q;
    if constexpr (kOp == Binary::kSub) return p - q;
    return p * q;
  };
  if (inner == n) {
    ParallelRange(n, 1 << 14, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = op(a[i], b[i]);
    });
    return;
  }
  const int64_t rows = n / inner;
  const bool swapped = st->swapped;
  ParallelRange(rows, std::max<int64_t>(1, (1 << 14) / inner), [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      float* yr = y + r * inner;
      if (swapped) {
        const float* br = b + r * inner;
        for (int64_t i = 0; i < inner; ++i) yr[i] = op(a[i], br[i]);
      } else {
        const float* ar = a + r * inner;
        for (int64_t i = 0; i < inner; ++i) yr[i] = op(ar[i], b[i]);
      }
    }
  });
}

constexpr KernelDef kKernels[] = {
    {"", "Relu", 6, 1000, nullptr, 0b1, 0, PrepareUnary<Unary::kRelu>, RunUnary<Unary::kRelu>},
    {"", "Clip", 6, 1000, nullptr, 0b1, 0, PrepareUnary<Unary::kClip>, RunUnary<Unary::kClip>},
    {"", "Add", 7, 1000, nullptr, 0b11, 0, PrepareBinary<Binary::kAdd>, RunBinary<Binary::kAdd>},
    {"", "Sub", 7, 1000, nullptr, 0b11, 0, PrepareBinary<Binary::kSub>, RunBinary<Binary::kSub>},
    {"", "Mul", 7, 1000, nullptr, 0b11, 0, PrepareBinary<Binary::kMul>, RunBinary<Binary::kMul>},
};

}  // namespace

std::span<const KernelDef> ElementwiseKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
