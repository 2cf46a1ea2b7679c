// cpu kernels: float32 elementwise ops on the provider's threads, on the row kernels of vec.h.
//
// Unary (Relu, Clip, Sqrt, Exp, Neg, Reciprocal, Abs, Tanh, Sigmoid, Erf, HardSigmoid,
// HardSwish) are layout-preserving: a channels-last input gives a channels-last output when every
// reader accepts it. Binary (Add, Sub, Mul, Div, Pow) take full numpy (multidirectional)
// broadcasting on plain operands, or equal shapes in any (shared) layout; Add/Sub/Mul/Div also a
// rank-4 operand in any layout against a per-channel ([N|1,C,1,1], [C,1,1]) or single-value plain
// operand, in either order (an [N,C,1,1] value in a blocked or channels-last layout is stored as
// plain): the output keeps the big operand's layout, walked in storage order with the small
// operand's values tiled into a buffer so each row call is long. The plain broadcast is
// planned once per shape pair: dims of size 1 in the output are dropped, adjacent dims that
// broadcast the same way are merged, and the run walks the output as rows of the innermost
// merged dim, each row one vectorized call (both operands advancing, or one held fixed).
// Pow with a scalar exponent of 2, 1 or 0.5 runs as x*x, a copy or sqrt; other exponents call
// std::pow. Work is split over the threads in fixed contiguous chunks of the output (so results
// do not depend on timing) when the output is large enough to pay for it.
#include <algorithm>
#include <limits>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

// Below this many output elements a node runs on one thread.
constexpr int64_t kParallelMin = 1 << 15;

struct EltState : KernelState {
  StateKey key;
  float lo = 0, hi = 0;  // Clip bounds
  UnOp unary = UnOp::kCopy;
  // Binary: the merged output dims (outer first) and each operand's element stride per dim
  // (0 where it broadcasts). The innermost dim is the row.
  std::vector<int64_t> dims, sa, sb;
  int64_t total = 0;
  bool as_unary = false;  // Pow with a special scalar exponent: `unary` on A
  // Per-channel broadcast on a non-plain operand (`channel`): the output is `segs` segments of
  // `seg_len` elements in the big operand's storage order; segment s meets the small operand's
  // values at (s / segs_per_n) * small_n + (s % segs_per_n) * period, repeating `period` of them.
  bool channel = false;
  bool big_is_a = true;
  int64_t seg_len = 0, segs_per_n = 1, small_n = 0, period = 1;
  // Equal shapes in two layouts, or a per-channel operation whose output must be plain
  // (`mixed`): operand k stored in `from[k]` is first copied into `scratch[k]` in the output's
  // layout when `from[k]` differs from it.
  bool mixed = false;
  Layout from[2] = {Layout::kPlain, Layout::kPlain}, to = Layout::kPlain;
  std::vector<float> scratch[2];
  Shape out_shape;
};

Layout InLayout(const NodeSlot& slot, size_t i) {
  return slot.in_layouts.size() > i ? slot.in_layouts[i] : Layout::kPlain;
}

// The output takes the input's layout when allowed; a non-plain input whose output must be
// plain declines (the runtime converts it first).
bool PickLayout(NodeSlot& slot, Layout in) {
  const bool ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
  if (in != Layout::kPlain && !ok) return false;
  slot.out_layouts.assign(1, in);
  return true;
}

bool FloatInput(const OpContext& ctx, size_t i) {
  return ctx.has_input(i) && ctx.input_is_tensor(i) && ctx.input(i).dtype() == DType::kFloat;
}

// Runs a unary row kernel over n elements, split over the threads when large.
void RunRows(UnOp op, const float* x, float* y, int64_t n, float lo, float hi) {
  const VecOps::UnaryRow f = Vec().unary[static_cast<int>(op)];
  ParallelRange(n, kParallelMin, [&](int64_t b, int64_t e) { f(x + b, y + b, e - b, lo, hi); });
}

template <UnOp kOp>
Status PrepareUnary(OpContext& ctx, NodeSlot& slot) {
  if (!FloatInput(ctx, 0)) {
    slot.declined = true;
    return Status::Ok();
  }
  if (!slot.state) {
    FERRY_RETURN_IF_ERROR(ReferenceDeclare(ctx, slot, ctx.num_inputs()).status());
    slot.state = std::make_unique<EltState>();
  }
  auto* st = static_cast<EltState*>(slot.state.get());
  st->unary = kOp;
  if constexpr (kOp == UnOp::kHardSigmoid) {
    st->lo = ctx.attr_float("alpha", 0.2f);
    st->hi = ctx.attr_float("beta", 0.5f);
  }
  if constexpr (kOp == UnOp::kClip) {
    st->lo = -std::numeric_limits<float>::infinity();
    st->hi = std::numeric_limits<float>::infinity();
    if (ctx.opset() < 11) {
      st->lo = ctx.attr_float("min", st->lo);
      st->hi = ctx.attr_float("max", st->hi);
    } else {
      for (size_t i = 1; i < 3; ++i) {
        if (!ctx.has_input(i)) continue;
        if (!FloatInput(ctx, i) || ctx.input(i).size() != 1) {
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

void RunUnary(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const EltState*>(slot.state.get());
  RunRows(st->unary, ctx.input(0).data<float>(), ctx.output(0).data<float>(), ctx.input(0).size(),
          st->lo, st->hi);
}

// Plans the broadcast of a (shape sa) op b (shape sb) into `out`.
void PlanBroadcast(const Shape& a, const Shape& b, const Shape& out, EltState* st) {
  const size_t r = out.size();
  auto padded = [&](const Shape& s, size_t d) {
    const size_t lead = r - s.size();
    return d < lead ? int64_t{1} : s[d - lead];
  };
  std::vector<int64_t> dims;
  std::vector<std::pair<bool, bool>> moves;  // (a advances, b advances) per merged dim
  for (size_t d = 0; d < r; ++d) {
    if (out[d] == 1) continue;
    const std::pair<bool, bool> mv{padded(a, d) != 1, padded(b, d) != 1};
    if (!dims.empty() && moves.back() == mv) {
      dims.back() *= out[d];
    } else {
      dims.push_back(out[d]);
      moves.push_back(mv);
    }
  }
  if (dims.empty()) {  // every dim is 1: one element
    dims.push_back(1);
    moves.push_back({true, true});
  }
  st->dims = dims;
  st->sa.assign(dims.size(), 0);
  st->sb.assign(dims.size(), 0);
  int64_t acc_a = 1, acc_b = 1;
  for (size_t k = dims.size(); k-- > 0;) {
    if (moves[k].first) {
      st->sa[k] = acc_a;
      acc_a *= dims[k];
    }
    if (moves[k].second) {
      st->sb[k] = acc_b;
      acc_b *= dims[k];
    }
  }
  st->total = NumElements(out);
}

// Whether a value of this shape and layout is stored as its plain row-major order: plain, or
// rank 4 with H = W = 1 ([N,C/B,1,1,B] and [N,1,1,C] are [N,C] in order).
bool StoredPlain(const Shape& s, Layout l) {
  return l == Layout::kPlain || (s.size() == 4 && s[2] * s[3] == 1);
}

// Plans `big op small` (or `small op big`) where big is rank-4 [N,C,H,W] stored in `lb` and
// small is one value or per channel ([N|1,C,1,1] or [C,1,1]) stored plain. False when it is not.
bool PlanChannel(const Shape& big, Layout lb, const Shape& small, EltState* st) {
  if (big.size() != 4) return false;
  const int64_t n = big[0], c = big[1], hw = big[2] * big[3];
  int64_t small_n = 0;  // element stride over N in small (0: one value per channel for all N)
  const int64_t ns = NumElements(small);
  if (ns == 1 && small.size() <= 4) {
    // One value: any layout, one segment.
    st->seg_len = n * c * hw;
    st->segs_per_n = 1;
    st->small_n = 0;
    st->period = 1;
    st->total = st->seg_len;
    return st->total > 0;
  }
  if (small.size() == 4) {
    if (small[1] != c || small[2] != 1 || small[3] != 1 || (small[0] != 1 && small[0] != n))
      return false;
    small_n = small[0] == n && n > 1 ? c : 0;
  } else if (small.size() == 3) {
    if (small[0] != c || small[1] != 1 || small[2] != 1) return false;
  } else {
    return false;
  }
  switch (lb) {
    case Layout::kPlain:  // [N,C,HW]: a scalar per row of HW
      st->seg_len = hw, st->segs_per_n = c, st->period = 1;
      break;
    case Layout::kNhwc:  // [N,HW,C]: the C values repeat along the image
      st->seg_len = hw * c, st->segs_per_n = 1, st->period = c;
      break;
    case Layout::kBlocked8:
    case Layout::kBlocked16: {  // [N,C/B,HW,B]: B values repeat along each block's image
      const int64_t b = lb == Layout::kBlocked8 ? 8 : 16;
      if (c % b != 0) return false;
      st->seg_len = hw * b, st->segs_per_n = c / b, st->period = b;
      break;
    }
  }
  st->small_n = small_n;
  st->total = n * c * hw;
  return st->total > 0;
}

template <BinOp kOp>
Status PrepareBinary(OpContext& ctx, NodeSlot& slot) {
  constexpr int kInt = kOp == BinOp::kAdd   ? 0
                       : kOp == BinOp::kSub ? 1
                       : kOp == BinOp::kMul ? 2
                                            : -1;
  if constexpr (kInt >= 0) {  // int32 / int64 operands: logic.cc's integer rows (plain)
    if (IntArithInputs(ctx)) return PrepareIntArith(ctx, slot, kInt);
    if (HasIntArithState(slot)) slot.state.reset();
  }
  if (!FloatInput(ctx, 0) || !FloatInput(ctx, 1)) {
    slot.declined = true;
    return Status::Ok();
  }
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Layout la = InLayout(slot, 0), lb = InLayout(slot, 1);
  // An [N,C,1,1] operand in a blocked or channels-last layout is stored as plain.
  if (StoredPlain(a.shape(), la)) la = Layout::kPlain;
  if (StoredPlain(b.shape(), lb)) lb = Layout::kPlain;
  const bool same = a.shape() == b.shape() && la == lb;
  // Equal shapes in two layouts (ConvNeXt's residual Add: a channels-last branch against an
  // 8-channel-blocked convolution output on AVX2): the other operand is converted first, into
  // the first non-plain layout, or plain when a reader needs plain.
  const bool mixed = a.shape() == b.shape() && la != lb && a.rank() == 4;
  // Otherwise one non-plain operand against a per-channel or single value.
  const bool channel =
      !same && !mixed && kOp != BinOp::kPow && (la == Layout::kPlain) != (lb == Layout::kPlain);
  const bool nhwc_ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
  // A per-channel operation whose output must be plain (a reader takes plain only: PP-OCR's SE
  // scale Mul before an Identity) converts the non-plain operand to plain first (as `mixed`
  // does) instead of leaving the node to the reference kernel.
  const bool channel_to_plain = channel && !nhwc_ok;
  const Layout out_layout = channel_to_plain ? Layout::kPlain
                            : same           ? la
                            : mixed          ? (!nhwc_ok               ? Layout::kPlain
                                                : la != Layout::kPlain ? la
                                                                       : lb)
                            : channel        ? (la != Layout::kPlain ? la : lb)
                                             : Layout::kPlain;
  if ((!same && !mixed && !channel && (la != Layout::kPlain || lb != Layout::kPlain)) ||
      !PickLayout(slot, out_layout)) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<EltState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 2));
    auto fresh = std::make_unique<EltState>();
    fresh->key = std::move(key);
    fresh->out_shape = decl[0].shape;
    if (channel) {
      fresh->channel = true;
      fresh->big_is_a = la != Layout::kPlain;
      const Shape& big = fresh->big_is_a ? a.shape() : b.shape();
      const Shape& small = fresh->big_is_a ? b.shape() : a.shape();
      const Layout stored = fresh->big_is_a ? la : lb;
      if (big != fresh->out_shape ||
          !PlanChannel(big, channel_to_plain ? Layout::kPlain : stored, small, fresh.get())) {
        slot.declined = true;
        return Status::Ok();
      }
      if (channel_to_plain) {
        fresh->mixed = true;
        fresh->from[0] = la;
        fresh->from[1] = lb;
        fresh->to = Layout::kPlain;
      }
    } else if (same || mixed) {
      PlanBroadcast({NumElements(a.shape())}, {NumElements(a.shape())}, {NumElements(a.shape())},
                    fresh.get());
      fresh->mixed = mixed;
      fresh->from[0] = la;
      fresh->from[1] = lb;
      fresh->to = out_layout;
    } else {
      PlanBroadcast(a.shape(), b.shape(), fresh->out_shape, fresh.get());
    }
    slot.state = std::move(fresh);
    st = static_cast<EltState*>(slot.state.get());
  }
  st->as_unary = false;
  if constexpr (kOp == BinOp::kPow) {
    // A scalar exponent (read every run): pick the special case.
    if (b.size() == 1 && st->out_shape == a.shape()) {
      const float e = b.data<float>()[0];
      st->as_unary = e == 2.f || e == 1.f || e == 0.5f;
      st->unary = e == 2.f ? UnOp::kSquare : (e == 1.f ? UnOp::kCopy : UnOp::kPowHalf);
    }
  }
  ctx.set_output(0, DType::kFloat, st->out_shape);
  return Status::Ok();
}

// The per-channel case: walks output elements [s, e) segment by segment. A repeating pattern
// (period > 1) is tiled into a buffer so each call covers up to kTile elements.
template <BinOp kOp>
void RunChannel(const EltState* st, const float* big, const float* small, float* y) {
  const auto& rows = Vec().binary[static_cast<int>(kOp)];
  const bool a_big = st->big_is_a;
  const int64_t p = st->period, len_seg = st->seg_len;
  constexpr int64_t kTile = 512;
  auto walk = [&](int64_t s, int64_t e) {
    std::vector<float> tile;
    int64_t tile_seg = -1;  // segment whose pattern `tile` holds
    const int64_t reps = p > 1 ? std::max<int64_t>(1, kTile / p) : 0;
    for (int64_t pos = s; pos < e;) {
      const int64_t seg = pos / len_seg, off = pos % len_seg;
      const float* pat = small + (seg / st->segs_per_n) * st->small_n + (seg % st->segs_per_n) * p;
      const int64_t n = std::min(e - pos, len_seg - off);
      if (p == 1) {
        if (a_big)
          rows[static_cast<int>(RowKind::kVS)](big + pos, pat, y + pos, n);
        else
          rows[static_cast<int>(RowKind::kSV)](pat, big + pos, y + pos, n);
        pos += n;
        continue;
      }
      if (tile_seg != seg) {  // reps + 1 copies: a row may start at any phase
        tile.resize(static_cast<size_t>((reps + 1) * p));
        for (int64_t r = 0; r <= reps; ++r) std::copy(pat, pat + p, tile.data() + r * p);
        tile_seg = seg;
      }
      const VecOps::BinaryRow row = rows[static_cast<int>(RowKind::kVV)];
      for (int64_t done = 0; done < n;) {
        const int64_t phase = (off + done) % p;
        const int64_t len = std::min(n - done, reps * p);
        const float* t = tile.data() + phase;
        if (a_big)
          row(big + pos + done, t, y + pos + done, len);
        else
          row(t, big + pos + done, y + pos + done, len);
        done += len;
      }
      pos += n;
    }
  };
  ParallelRange(st->total, kParallelMin, walk);
}

template <BinOp kOp>
void RunBinary(OpContext& ctx, NodeSlot& slot) {
  if (HasIntArithState(slot))
    return RunIntArith(ctx, slot, kOp == BinOp::kAdd ? 0 : kOp == BinOp::kSub ? 1 : 2);
  auto* st = static_cast<EltState*>(slot.state.get());
  const float* a = ctx.input(0).data<float>();
  const float* b = ctx.input(1).data<float>();
  float* y = ctx.output(0).data<float>();
  if (st->total == 0) return;
  if (st->mixed) {
    const float** op[2] = {&a, &b};
    for (int k = 0; k < 2; ++k) {
      if (st->from[k] == st->to) continue;
      std::vector<float>& buf = st->scratch[k];
      buf.resize(static_cast<size_t>(st->total));
      ConvertLayoutInto(ctx.input(static_cast<size_t>(k)), st->from[k], buf.data(), st->to);
      *op[k] = buf.data();
    }
  }
  if (st->as_unary) {
    RunRows(st->unary, a, y, st->total, 0.f, 0.f);
    return;
  }
  if (st->channel) {
    RunChannel<kOp>(st, st->big_is_a ? a : b, st->big_is_a ? b : a, y);
    return;
  }
  const auto& rows = Vec().binary[static_cast<int>(kOp)];
  const size_t nd = st->dims.size();
  const int64_t inner = st->dims[nd - 1];
  const int64_t ia = st->sa[nd - 1], ib = st->sb[nd - 1];
  const VecOps::BinaryRow row =
      rows[static_cast<int>(ia && ib ? RowKind::kVV : (ia ? RowKind::kVS : RowKind::kSV))];
  // Walks output elements [s, e): row by row, the outer index kept as an odometer.
  auto walk = [&](int64_t s, int64_t e) {
    int64_t r = s / inner, c = s % inner;
    std::vector<int64_t> idx(nd, 0);
    int64_t oa = 0, ob = 0;
    for (size_t k = nd - 1, q = static_cast<size_t>(r); k-- > 0;) {
      idx[k] = static_cast<int64_t>(q) % st->dims[k];
      q /= static_cast<size_t>(st->dims[k]);
      oa += idx[k] * st->sa[k];
      ob += idx[k] * st->sb[k];
    }
    int64_t pos = s;
    while (pos < e) {
      const int64_t len = std::min(inner - c, e - pos);
      row(a + oa + c * ia, b + ob + c * ib, y + pos, len);
      pos += len;
      c = 0;
      for (size_t k = nd - 1; k-- > 0;) {  // next row
        oa += st->sa[k];
        ob += st->sb[k];
        if (++idx[k] < st->dims[k]) break;
        oa -= idx[k] * st->sa[k];
        ob -= idx[k] * st->sb[k];
        idx[k] = 0;
      }
    }
  };
  ParallelRange(st->total, kParallelMin, walk);
}

constexpr uint32_t kAnyLayout = 0b11;

constexpr KernelDef kKernels[] = {
    {"", "Relu", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kRelu>, RunUnary},
    {"", "Clip", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kClip>, RunUnary},
    {"", "Sqrt", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kSqrt>, RunUnary},
    {"", "Exp", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kExp>, RunUnary},
    {"", "Neg", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kNeg>, RunUnary},
    {"", "Reciprocal", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kReciprocal>, RunUnary},
    {"", "Abs", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kAbs>, RunUnary},
    {"", "Tanh", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kTanh>, RunUnary},
    {"", "Sigmoid", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kSigmoid>, RunUnary},
    {"", "Erf", 9, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kErf>, RunUnary},
    {"", "HardSigmoid", 6, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kHardSigmoid>, RunUnary},
    {"", "HardSwish", 14, 1000, nullptr, 0b1, 0, PrepareUnary<UnOp::kHardSwish>, RunUnary},
    {"", "Add", 7, 1000, nullptr, kAnyLayout, 0, PrepareBinary<BinOp::kAdd>,
     RunBinary<BinOp::kAdd>},
    {"", "Sub", 7, 1000, nullptr, kAnyLayout, 0, PrepareBinary<BinOp::kSub>,
     RunBinary<BinOp::kSub>},
    {"", "Mul", 7, 1000, nullptr, kAnyLayout, 0, PrepareBinary<BinOp::kMul>,
     RunBinary<BinOp::kMul>},
    {"", "Div", 7, 1000, nullptr, kAnyLayout, 0, PrepareBinary<BinOp::kDiv>,
     RunBinary<BinOp::kDiv>},
    {"", "Pow", 7, 1000, nullptr, 0b11, 0, PrepareBinary<BinOp::kPow>, RunBinary<BinOp::kPow>},
};

}  // namespace

std::span<const KernelDef> ElementwiseKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
