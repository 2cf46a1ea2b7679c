// cpu kernels: Transpose and Slice (any fixed-size dtype) as one strided copy; Pad with zero pads.
//
// Both describe the output as dims with, per dim, the input element stride (Transpose: the
// permuted input strides; Slice: step x input stride, starting at the first selected element).
// The copy drops dims of size 1, merges dims that stay contiguous in the input, and walks the
// output row by row: a memcpy when the innermost input stride is 1, a strided gather otherwise.
// Large copies are split over the threads in fixed contiguous chunks of output rows.
// Slice follows the ONNX clamping rules (negative starts/ends count from the end, negative
// steps walk backwards) and declines if its shape disagrees with the reference's.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/act512.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

constexpr int64_t kParallelMinBytes = 1 << 18;

struct CopyState : KernelState {
  std::vector<int64_t> dims, strides;  // merged output dims (outer first), input strides
  int64_t offset = 0;                  // first input element
  size_t elem = 0;                     // bytes per element
  Shape out_shape;
  // Slice of a channel-blocked input (oneDNN's AVX2 layout): converted to plain into `plain`
  // first, then sliced as plain.
  Layout convert = Layout::kPlain;
  std::vector<float> plain;
  // Slice: what the state was built for (shapes, layouts, starts / ends / axes / steps) and the
  // output layout it chose; the same again reuses it without the reference's prepare.
  StateKey key;
  std::vector<int64_t> args;
  Layout out_layout = Layout::kPlain;
  bool memo = false;
};

// Drops size-1 dims and merges dim k into k+1 when the input is contiguous across them.
void Simplify(std::vector<int64_t>* dims, std::vector<int64_t>* strides) {
  std::vector<int64_t> d, s;
  for (size_t k = 0; k < dims->size(); ++k) {
    if ((*dims)[k] == 1) continue;
    if (!d.empty() && s.back() == (*strides)[k] * (*dims)[k]) {
      d.back() *= (*dims)[k];
      s.back() = (*strides)[k];
    } else {
      d.push_back((*dims)[k]);
      s.push_back((*strides)[k]);
    }
  }
  if (d.empty()) {
    d.push_back(1);
    s.push_back(1);
  }
  *dims = std::move(d);
  *strides = std::move(s);
}

template <typename T>
void GatherRow(const T* src, int64_t stride, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i * stride];
}

void CopyRows(const CopyState& st, const std::byte* src, std::byte* dst, int64_t r0, int64_t r1) {
  const size_t nd = st.dims.size();
  const int64_t inner = st.dims[nd - 1], is = st.strides[nd - 1];
  const size_t e = st.elem;
  std::vector<int64_t> idx(nd, 0);
  int64_t off = st.offset;
  for (size_t k = nd - 1, q = static_cast<size_t>(r0); k-- > 0;) {
    idx[k] = static_cast<int64_t>(q % static_cast<size_t>(st.dims[k]));
    q /= static_cast<size_t>(st.dims[k]);
    off += idx[k] * st.strides[k];
  }
  for (int64_t r = r0; r < r1; ++r) {
    const std::byte* s = src + off * static_cast<int64_t>(e);
    std::byte* d = dst + r * inner * static_cast<int64_t>(e);
    if (is == 1) {
      std::memcpy(d, s, static_cast<size_t>(inner) * e);
    } else if (e == 4) {
      GatherRow(reinterpret_cast<const uint32_t*>(s), is, reinterpret_cast<uint32_t*>(d), inner);
    } else if (e == 8) {
      GatherRow(reinterpret_cast<const uint64_t*>(s), is, reinterpret_cast<uint64_t*>(d), inner);
    } else if (e == 2) {
      GatherRow(reinterpret_cast<const uint16_t*>(s), is, reinterpret_cast<uint16_t*>(d), inner);
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(d + i * static_cast<int64_t>(e), s + i * is * static_cast<int64_t>(e), e);
    }
    for (size_t k = nd - 1; k-- > 0;) {
      off += st.strides[k];
      if (++idx[k] < st.dims[k]) break;
      off -= idx[k] * st.strides[k];
      idx[k] = 0;
    }
  }
}

// A transpose of the two inner dims (the output's rows are contiguous in the input, its columns
// strided; 4-byte elements): 16x16 tiles, so each input cache line is read once instead of once
// per element of the row (the attention's K^T, [s, h*d] -> [h*d, s]: 3-4x faster than the
// row-by-row gather). Work items: outer index x 16-row block, [b0, b1).
constexpr int64_t kTile = 16;

bool TiledTranspose(const CopyState& st) {
  const size_t nd = st.dims.size();
  return st.elem == 4 && nd >= 2 && st.strides[nd - 1] != 1 && st.strides[nd - 2] == 1 &&
         st.dims[nd - 2] >= kTile && st.dims[nd - 1] >= kTile;
}

void TransposeTiles(const CopyState& st, const std::byte* src, std::byte* dst, int64_t b0,
                    int64_t b1) {
  const size_t nd = st.dims.size();
  const int64_t rows = st.dims[nd - 2], cols = st.dims[nd - 1], cs = st.strides[nd - 1];
  const int64_t blocks = (rows + kTile - 1) / kTile;
  const auto* s0 = reinterpret_cast<const uint32_t*>(src) + st.offset;
  auto* d0 = reinterpret_cast<uint32_t*>(dst);
  for (int64_t b = b0; b < b1; ++b) {
    int64_t o = b / blocks, off = 0;
    const int64_t r0 = (b % blocks) * kTile, r1 = std::min(rows, r0 + kTile);
    for (size_t k = nd - 2, q = static_cast<size_t>(o); k-- > 0;) {
      off += static_cast<int64_t>(q % static_cast<size_t>(st.dims[k])) * st.strides[k];
      q /= static_cast<size_t>(st.dims[k]);
    }
    const uint32_t* s = s0 + off;
    uint32_t* d = d0 + o * rows * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) d[r * cols + c] = s[r + c * cs];
    }
  }
}

// An interleave: the output's inner dims [B, A] with A small (2-8) read an input whose B is
// contiguous and A strided (4-byte elements) — ShuffleNet's channel shuffle on channels-last
// pixels, out[j * A + i] = in[i * cs + j]. Row by row it would gather A elements per row; here
// each outer index (a pixel) walks its A input runs at once. Work items: outer indexes [o0, o1).
constexpr int64_t kMaxInterleave = 8;

bool Interleave(const CopyState& st) {
  const size_t nd = st.dims.size();
  return st.elem == 4 && nd >= 2 && st.strides[nd - 2] == 1 && st.strides[nd - 1] != 1 &&
         st.dims[nd - 1] <= kMaxInterleave && st.dims[nd - 2] >= 16;
}

// Two runs of 16 into 32 interleaved floats: lanes (a0 b0 a1 b1 ...).
FERRY_AVX512 void Interleave2Avx512(const float* a, const float* b, float* d, int64_t n) {
  const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 x = _mm512_loadu_ps(a + j), y = _mm512_loadu_ps(b + j);
    _mm512_storeu_ps(d + 2 * j, _mm512_permutex2var_ps(x, lo, y));
    _mm512_storeu_ps(d + 2 * j + 16, _mm512_permutex2var_ps(x, hi, y));
  }
  for (; j < n; ++j) {
    d[2 * j] = a[j];
    d[2 * j + 1] = b[j];
  }
}

void InterleaveRows(const CopyState& st, const std::byte* src, std::byte* dst, int64_t o0,
                    int64_t o1) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  const size_t nd = st.dims.size();
  const int64_t b = st.dims[nd - 2], a = st.dims[nd - 1], cs = st.strides[nd - 1];
  const auto* s0 = reinterpret_cast<const float*>(src) + st.offset;
  auto* d0 = reinterpret_cast<float*>(dst);
  for (int64_t o = o0; o < o1; ++o) {
    int64_t off = 0;
    for (size_t k = nd - 2, q = static_cast<size_t>(o); k-- > 0;) {
      off += static_cast<int64_t>(q % static_cast<size_t>(st.dims[k])) * st.strides[k];
      q /= static_cast<size_t>(st.dims[k]);
    }
    const float* s = s0 + off;
    float* d = d0 + o * a * b;
    if (a == 2 && avx512) {
      Interleave2Avx512(s, s + cs, d, b);
      continue;
    }
    for (int64_t i = 0; i < a; ++i)
      for (int64_t j = 0; j < b; ++j) d[j * a + i] = s[i * cs + j];
  }
}

void RunCopy(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<CopyState*>(slot.state.get());
  const auto* src = static_cast<const std::byte*>(ctx.input(0).raw());
  auto* dst = static_cast<std::byte*>(ctx.output(0).raw());
  if (NumElements(st->out_shape) == 0) return;
  if (st->convert != Layout::kPlain) {
    ConvertLayoutInto(ctx.input(0), st->convert, st->plain.data(), Layout::kPlain);
    src = reinterpret_cast<const std::byte*>(st->plain.data());
  }
  if (Interleave(*st)) {
    const size_t nd = st->dims.size();
    const int64_t inner = st->dims[nd - 2] * st->dims[nd - 1];
    const int64_t outer = NumElements(st->out_shape) / inner;
    ParallelRange(outer, std::max<int64_t>(1, kParallelMinBytes / (inner * 4)),
                  [&](int64_t b, int64_t e) { InterleaveRows(*st, src, dst, b, e); });
    return;
  }
  if (TiledTranspose(*st)) {
    const size_t nd = st->dims.size();
    const int64_t rows = st->dims[nd - 2], cols = st->dims[nd - 1];
    const int64_t items = NumElements(st->out_shape) / (rows * cols) * ((rows + kTile - 1) / kTile);
    const int64_t item_bytes = kTile * cols * 4;
    ParallelRange(items, std::max<int64_t>(1, kParallelMinBytes / item_bytes),
                  [&](int64_t b, int64_t e) { TransposeTiles(*st, src, dst, b, e); });
    return;
  }
  const int64_t inner = st->dims.back();
  const int64_t rows = NumElements(st->out_shape) / inner;
  const int64_t row_bytes = inner * static_cast<int64_t>(st->elem);
  ParallelRange(rows, std::max<int64_t>(1, kParallelMinBytes / std::max<int64_t>(1, row_bytes)),
                [&](int64_t b, int64_t e) { CopyRows(*st, src, dst, b, e); });
}

// The input is plain, channels-last of rank >= 4 (a convolution's output, or a Reshape view of
// one splitting its channels), or a channel-blocked float32 rank-4 tensor.
bool Copyable(const OpContext& ctx, const NodeSlot& slot) {
  const Layout in = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() == DType::kString) return false;
  if (in == Layout::kNhwc) return ctx.input(0).rank() >= 4;
  return in == Layout::kPlain ||
         (ctx.input(0).rank() == 4 && ctx.input(0).dtype() == DType::kFloat);
}

// `dims` / `strides` per logical output dim: the copy walks them in the output's storage order,
// channels-last when `nhwc` (dims 0, r-2, r-1, then the channel dims).
Status Install(OpContext& ctx, NodeSlot& slot, std::unique_ptr<CopyState> st, bool nhwc = false) {
  if (nhwc) {
    std::vector<int64_t> d, s;
    for (size_t k : NhwcOrder(st->dims.size())) {
      d.push_back(st->dims[k]);
      s.push_back(st->strides[k]);
    }
    st->dims = std::move(d);
    st->strides = std::move(s);
  }
  Simplify(&st->dims, &st->strides);
  ctx.set_output(0, ctx.input(0).dtype(), st->out_shape);
  slot.out_layouts.assign(1, nhwc ? Layout::kNhwc : Layout::kPlain);
  slot.state = std::move(st);
  return Status::Ok();
}

// Whether the output of a copy from a channels-last input may stay channels-last: every reader
// takes it and the permutation keeps N first and H, W last.
bool KeepNhwc(const NodeSlot& slot, const std::vector<int64_t>& perm) {
  return !slot.nhwc_ok.empty() && slot.nhwc_ok[0] && KeepsPixelDims(perm);
}

// The input may be channels-last or channel-blocked (rank 4, read where a convolution wrote it;
// ConvNeXt's NCHW -> NHWC permutes; channels-last also rank 5+, ShuffleNet's channel shuffle):
// its logical dims then have other strides, and a blocked C splits into (C / block, block),
// both copied in output order. A channels-last input whose permutation keeps N first and H, W
// last stays channels-last when the readers take it (the shuffle: a per-pixel interleave).
Status PrepareTranspose(OpContext& ctx, NodeSlot& slot) {
  const Layout layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  const bool plain = layout == Layout::kPlain;
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() == DType::kString ||
      (!plain && ctx.input(0).rank() != 4 &&
       !(layout == Layout::kNhwc && ctx.input(0).rank() > 4))) {
    slot.declined = true;
    return Status::Ok();
  }
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
  const Shape& in = ctx.input(0).shape();
  std::vector<int64_t> perm = ctx.attr_ints("perm");
  if (perm.empty())
    for (size_t k = in.size(); k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  auto st = std::make_unique<CopyState>();
  st->out_shape = decl[0].shape;
  st->elem = DTypeSize(ctx.input(0).dtype());
  std::vector<int64_t> is = PlainStrides(in);
  int64_t block = 0;  // > 0: C (logical dim 1) stored in blocks of this many channels
  if (!plain) {
    const int64_t c = in[1], h = in[2], w = in[3];
    if (layout == Layout::kNhwc) {
      is = NhwcStrides(in);
    } else {
      block = layout == Layout::kBlocked8 ? 8 : 16;
      is = {c * h * w, h * w * block, w * block, block};  // C: the block index's stride
    }
  }
  for (size_t k = 0; k < perm.size(); ++k) {
    const size_t p = static_cast<size_t>(perm[k]);
    if (block > 0 && p == 1) {  // c = (c / block) * block + c % block
      st->dims.push_back(in[1] / block);
      st->strides.push_back(is[1]);
      st->dims.push_back(block);
      st->strides.push_back(1);
      continue;
    }
    st->dims.push_back(in[p]);
    st->strides.push_back(is[p]);
  }
  return Install(ctx, slot, std::move(st), layout == Layout::kNhwc && KeepNhwc(slot, perm));
}

Status PrepareSlice(OpContext& ctx, NodeSlot& slot) {
  if (!Copyable(ctx, slot)) {
    slot.declined = true;
    return Status::Ok();
  }
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    axes = ctx.attr_ints("axes");
  } else {
    auto ints = [&](size_t i) {
      return ctx.has_input(i) && ctx.input_is_tensor(i) ? ctx.input(i).ToInt64Vector()
                                                        : std::vector<int64_t>();
    };
    starts = ints(1);
    ends = ints(2);
    axes = ints(3);
    steps = ints(4);
  }
  // The same shapes, layouts and arguments as the last prepare: its plan (small tensors in
  // control-flow bodies pay the reference's prepare per call otherwise).
  std::vector<int64_t> args;
  for (const auto* v : {&starts, &ends, &axes, &steps}) {
    args.push_back(static_cast<int64_t>(v->size()));
    args.insert(args.end(), v->begin(), v->end());
  }
  const KeyProbe key = MakeKey(ctx, slot);
  if (auto* old = dynamic_cast<CopyState*>(slot.state.get());
      old && old->memo && old->key == key && old->args == args) {
    ctx.set_output(0, ctx.input(0).dtype(), old->out_shape);
    slot.out_layouts.assign(1, old->out_layout);
    return Status::Ok();
  }
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const Shape& in = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(in.size());
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  std::vector<int64_t> start(in.size(), 0), step(in.size(), 1);
  Shape out = in;
  for (size_t i = 0; i < starts.size() && i < ends.size() && i < axes.size() && i < steps.size();
       ++i) {
    const int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (ax < 0 || ax >= rank || steps[i] == 0) {
      slot.declined = true;
      return Status::Ok();
    }
    const int64_t dim = in[static_cast<size_t>(ax)];
    int64_t s = starts[i], e = ends[i];
    const int64_t p = steps[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (p > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else if (dim > 0) {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    } else {  // an empty axis: nothing to walk backwards over
      s = e = 0;
    }
    // Element count, written so that extreme steps (INT64_MIN / INT64_MAX) cannot overflow.
    int64_t n = 0;
    if (p > 0 && e > s) n = 1 + (e - s - 1) / p;
    if (p < 0 && s > e) n = p == std::numeric_limits<int64_t>::min() ? 1 : 1 + (s - e - 1) / -p;
    start[static_cast<size_t>(ax)] = s;
    step[static_cast<size_t>(ax)] = p;
    out[static_cast<size_t>(ax)] = n;
  }
  if (out != decl[0].shape) {  // not the reference's reading: let it run
    slot.declined = true;
    return Status::Ok();
  }
  auto st = std::make_unique<CopyState>();
  st->out_shape = out;
  st->elem = DTypeSize(ctx.input(0).dtype());
  const Layout layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  const bool nhwc = layout == Layout::kNhwc;
  if (layout != Layout::kPlain && !nhwc) {
    st->convert = layout;
    st->plain.resize(static_cast<size_t>(ctx.input(0).size()));
  }
  const std::vector<int64_t> is = nhwc ? NhwcStrides(in) : PlainStrides(in);
  for (size_t k = 0; k < in.size(); ++k) {
    st->dims.push_back(out[k]);
    st->strides.push_back(step[k] * is[k]);
    if (out[k] > 0) st->offset += start[k] * is[k];
  }
  // Channels-last in: channels-last out where the readers take it (ShuffleNet's split of the
  // shuffled channels, read by a Concat and a Conv), else plain.
  std::vector<int64_t> identity(in.size());
  for (size_t k = 0; k < in.size(); ++k) identity[k] = static_cast<int64_t>(k);
  const bool keep = nhwc && KeepNhwc(slot, identity);
  st->key = std::move(key);
  st->args = std::move(args);
  st->out_layout = keep ? Layout::kNhwc : Layout::kPlain;
  st->memo = true;
  return Install(ctx, slot, std::move(st), keep);
}

// Pad whose pads are all zero (torch exports one before DenseNet's AveragePool transitions): a
// copy in the input's layout (plain, NHWC, or channel-blocked with C a multiple of the block: the
// layouts that hold exactly the logical elements), so the activations of the convolutions around
// need no conversion to plain and back; any other Pad declines.
struct PadState : KernelState {
  size_t bytes = 0;
  // Padding of the last axis only (plain): `map` gives, per output column, the input column it
  // copies (-1: the constant), the same mapping as the reference's plan.
  bool last_axis = false;
  StateKey key;
  std::vector<int64_t> pads;
  std::vector<std::byte> value;  // the constant as given (input 2), for the reuse check
  int64_t rows = 0, w = 0, ow = 0, begin = 0;
  size_t esize = 0;
  std::vector<int64_t> map;
  std::vector<std::byte> fill;
};

// Pad of the last axis only (pads >= 0; constant, reflect or edge; plain input): rows copied
// with their padded ends (silero-vad's reflect Pad of the STFT input ran 17 us on the
// reference). False: not this case.
bool PrepareLastAxisPad(OpContext& ctx, NodeSlot& slot, const std::vector<int64_t>& pads,
                        const Shape& out) {
  const Tensor& x = ctx.input(0);
  const size_t r = static_cast<size_t>(x.rank());
  const std::string mode = ctx.attr_string("mode", "constant");
  const Layout in = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  if (r == 0 || pads.size() != 2 * r || in != Layout::kPlain ||
      (ctx.opset() >= 18 && ctx.has_input(3)) ||
      (mode != "constant" && mode != "reflect" && mode != "edge"))
    return false;
  for (size_t a = 0; a + 1 < r; ++a)
    if (pads[a] != 0 || pads[a + r] != 0) return false;
  const int64_t begin = pads[r - 1], end = pads[2 * r - 1], w = x.dim(r - 1);
  if (begin < 0 || end < 0 || (mode != "constant" && w <= 0)) return false;
  const KeyProbe key = MakeKey(ctx, slot);
  std::vector<std::byte> value;
  if (ctx.opset() >= 11 && ctx.has_input(2)) {
    const auto* v = static_cast<const std::byte*>(ctx.input(2).raw());
    value.assign(v, v + DTypeSize(x.dtype()));
  }
  if (auto* old = dynamic_cast<PadState*>(slot.state.get());
      old && old->last_axis && old->key == key && old->pads == pads && old->value == value) {
    ctx.set_output(0, x.dtype(), out);
    slot.out_layouts.assign(1, Layout::kPlain);
    return true;
  }
  auto st = std::make_unique<PadState>();
  st->key = std::move(key);
  st->pads = pads;
  st->value = value;
  st->begin = begin;
  st->last_axis = true;
  st->esize = DTypeSize(x.dtype());
  st->w = w;
  st->ow = w + begin + end;
  st->rows = w > 0 ? x.size() / w : 0;
  st->fill.assign(st->esize, std::byte{0});
  if (mode == "constant") {
    if (ctx.opset() >= 11 && ctx.has_input(2)) {
      std::memcpy(st->fill.data(), ctx.input(2).raw(), st->esize);
    } else if (ctx.opset() < 11 && ctx.attr_float("value", 0.f) != 0.f) {
      if (x.dtype() != DType::kFloat) return false;
      const float v = ctx.attr_float("value", 0.f);
      std::memcpy(st->fill.data(), &v, 4);
    }
  }
  st->map.resize(static_cast<size_t>(st->ow));
  for (int64_t o = 0; o < st->ow; ++o) {
    int64_t i = o - begin;
    if (i < 0 || i >= w) {
      if (mode == "constant") {
        i = -1;
      } else if (mode == "edge" || w == 1) {
        i = std::clamp<int64_t>(i, 0, w - 1);
      } else {
        const int64_t period = 2 * (w - 1);
        i = ((i % period) + period) % period;
        if (i >= w) i = period - i;
      }
    }
    st->map[static_cast<size_t>(o)] = i;
  }
  ctx.set_output(0, x.dtype(), out);
  slot.out_layouts.assign(1, Layout::kPlain);
  slot.state = std::move(st);
  return true;
}

void RunLastAxisPad(OpContext& ctx, const PadState& st) {
  const auto* src = static_cast<const std::byte*>(ctx.input(0).raw());
  auto* dst = static_cast<std::byte*>(ctx.output(0).raw());
  const size_t es = st.esize;
  const int64_t begin = st.begin;
  for (int64_t row = 0; row < st.rows; ++row) {
    const std::byte* x = src + static_cast<size_t>(row * st.w) * es;
    std::byte* y = dst + static_cast<size_t>(row * st.ow) * es;
    for (int64_t o = 0; o < st.ow; ++o) {
      if (o == begin && st.w > 0) {  // the row itself
        std::memcpy(y + static_cast<size_t>(o) * es, x, static_cast<size_t>(st.w) * es);
        o += st.w - 1;
        continue;
      }
      const int64_t i = st.map[static_cast<size_t>(o)];
      std::memcpy(y + static_cast<size_t>(o) * es,
                  i < 0 ? st.fill.data() : x + static_cast<size_t>(i) * es, es);
    }
  }
}

Status PreparePad(OpContext& ctx, NodeSlot& slot) {
  const Layout in = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  // Blocked layouts hold exactly the logical elements when C is a multiple of the block.
  const int64_t blk = in == Layout::kBlocked8 ? 8 : in == Layout::kBlocked16 ? 16 : 1;
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() == DType::kString ||
      (blk > 1 && (ctx.input(0).rank() < 2 || ctx.input(0).dim(1) % blk != 0))) {
    slot.declined = true;
    return Status::Ok();
  }
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  std::vector<int64_t> pads;
  if (ctx.opset() < 11) {
    pads = ctx.attr_ints("pads");
  } else if (ctx.has_input(1) && ctx.input_is_tensor(1)) {
    pads = ctx.input(1).ToInt64Vector();
  }
  const Tensor& x = ctx.input(0);
  if (std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v != 0; }) ||
      decl[0].shape != x.shape()) {
    if (PrepareLastAxisPad(ctx, slot, pads, decl[0].shape)) return Status::Ok();
    slot.declined = true;
    return Status::Ok();
  }
  auto st = std::make_unique<PadState>();  // pads all zero: a copy
  st->bytes = x.nbytes();
  ctx.set_output(0, x.dtype(), x.shape());
  slot.out_layouts.assign(1, in);
  slot.state = std::move(st);
  return Status::Ok();
}

void RunPad(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const PadState*>(slot.state.get());
  if (st->last_axis) return RunLastAxisPad(ctx, *st);
  const auto* src = static_cast<const std::byte*>(ctx.input(0).raw());
  auto* dst = static_cast<std::byte*>(ctx.output(0).raw());
  if (st->bytes == 0 || src == dst) return;
  const int64_t chunks = static_cast<int64_t>((st->bytes + 4095) / 4096);
  ParallelRange(chunks, kParallelMinBytes / 4096, [&](int64_t b, int64_t e) {
    const size_t lo = static_cast<size_t>(b) * 4096;
    const size_t hi = std::min(st->bytes, static_cast<size_t>(e) * 4096);
    std::memcpy(dst + lo, src + lo, hi - lo);
  });
}

constexpr KernelDef kKernels[] = {
    {"", "Transpose", 1, 1000, nullptr, 0b1, 0, PrepareTranspose, RunCopy},
    {"", "Slice", 1, 1000, nullptr, 0b1, 0, PrepareSlice, RunCopy},
    {"", "Pad", 2, 1000, nullptr, 1, 0, PreparePad, RunPad},
};

}  // namespace

std::span<const KernelDef> MovementKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
