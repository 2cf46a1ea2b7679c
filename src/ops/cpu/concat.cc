// cpu kernel: Concat of any non-string dtype, layout-preserving. Every case is a copy of
// `outer` rows, each row the inputs' chunks side by side:
//  * plain: outer = product of the dims before the axis, chunk = the input's dims from the axis;
//  * channel-blocked [N,C/b,H,W,b] along C: outer = N, chunk = C_i*H*W (whole blocks, since
//    each input's C is a multiple of b);
//  * channels-last [N,H,W,C] along C: outer = N*H*W, chunk = C_i.
// So a CNN's concatenated branches (SqueezeNet's Fire, DenseNet, Inception) stay in the
// convolution library's layout instead of being converted to plain and back. A plain input
// among non-plain ones (a branch computed by a reference kernel) is converted first. When the
// output must be plain (a reader that only takes plain, e.g. a flattening Reshape, or
// ShuffleNetV2's channel-shuffle Reshape where channels-last is not native) or the axis is not
// C, non-plain inputs are reordered to plain on the way: with one row (N = 1 along C) straight
// into their place in the output.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

std::atomic<uint64_t> g_in_place{0};  // inputs found in their place (ConcatInputsInPlace)

struct ConcatState : KernelState {
  StateKey key;
  Shape out_shape;
  DType dtype = DType::kUndefined;
  Layout layout = Layout::kPlain;
  int64_t outer = 0;
  std::vector<size_t> chunk;            // bytes each input contributes to one row
  std::vector<bool> convert;            // input converted from `from[i]` to `layout` first
  std::vector<Layout> from;             // each input's layout
  std::vector<dnnl::reorder> reorders;  // per converted input, made once (rank-4 inputs)
  std::vector<dnnl::memory::desc> src_md, dst_md;
  size_t row = 0;  // bytes of one output row
};

Status PrepareConcat(OpContext& ctx, NodeSlot& slot) {
  const size_t n = ctx.num_inputs();
  if (n == 0 || !ctx.input_is_tensor(0)) {
    slot.declined = true;
    return Status::Ok();
  }
  const DType dt = ctx.input(0).dtype();
  if (dt == DType::kString || dt == DType::kUndefined) {
    slot.declined = true;
    return Status::Ok();
  }
  // The output takes the inputs' non-plain layout (all non-plain inputs must agree); plain
  // inputs among them (a branch that came from a reference kernel) are converted on the way.
  // Two different non-plain layouts: the output is plain.
  Layout layout = Layout::kPlain;
  bool mixed = false;
  for (size_t i = 0; i < n; ++i) {
    const Layout li = slot.in_layouts.size() > i ? slot.in_layouts[i] : Layout::kPlain;
    if (!ctx.input_is_tensor(i) || ctx.input(i).dtype() != dt) {
      slot.declined = true;  // mixed dtypes: the reference kernel reports the error
      return Status::Ok();
    }
    if (li != Layout::kPlain && layout != Layout::kPlain && li != layout) mixed = true;
    if (li != Layout::kPlain) layout = li;
  }
  auto* st = static_cast<ConcatState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key) || st->dtype != dt) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, n));
    auto fresh = std::make_unique<ConcatState>();
    fresh->key = key;
    fresh->out_shape = decl[0].shape;
    fresh->dtype = dt;
    const Shape& y = fresh->out_shape;
    const int64_t rank = static_cast<int64_t>(y.size());
    int64_t axis = ctx.attr_int("axis", 1);
    if (axis < 0) axis += rank;
    const size_t es = DTypeSize(dt);
    bool plain_out = layout == Layout::kPlain;
    if (!plain_out) {
      // Non-plain layouts are rank-4 float; only the channel axis keeps its blocks contiguous.
      // Otherwise (or when a reader needs plain) the output is plain, the inputs reordered.
      const bool ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
      plain_out = mixed || axis != 1 || rank != 4 || !ok;
    }
    if (!plain_out) {
      const int64_t hw = y[2] * y[3];
      const int64_t blk = layout == Layout::kBlocked8 ? 8 : layout == Layout::kBlocked16 ? 16 : 1;
      fresh->outer = layout == Layout::kNhwc ? y[0] * hw : y[0];
      for (size_t i = 0; i < n; ++i) {
        const int64_t c = ctx.input(i).dim(1);
        const Layout li = slot.in_layouts.size() > i ? slot.in_layouts[i] : Layout::kPlain;
        if (li != layout && c % blk != 0) {  // a plain input that has no blocked form
          slot.declined = true;
          return Status::Ok();
        }
        fresh->convert.push_back(li != layout);
        fresh->from.push_back(li);
        fresh->chunk.push_back(static_cast<size_t>(layout == Layout::kNhwc ? c : c * hw) * es);
      }
    } else {
      layout = Layout::kPlain;
      fresh->outer = 1;
      for (int64_t d = 0; d < axis; ++d) fresh->outer *= y[static_cast<size_t>(d)];
      for (size_t i = 0; i < n; ++i) {
        const Tensor& x = ctx.input(i);
        const Layout li = slot.in_layouts.size() > i ? slot.in_layouts[i] : Layout::kPlain;
        int64_t inner = 1;
        for (int64_t d = axis; d < x.rank(); ++d) inner *= x.dim(d);
        fresh->chunk.push_back(static_cast<size_t>(inner) * es);
        fresh->convert.push_back(li != Layout::kPlain);
        fresh->from.push_back(li);
      }
    }
    fresh->layout = layout;
    fresh->reorders.resize(n);
    fresh->src_md.resize(n);
    fresh->dst_md.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const Tensor& x = ctx.input(i);
      if (!fresh->convert[i] || x.rank() != 4 || x.nbytes() == 0) continue;
      try {
        dnnl::engine& eng = slot.provider->engine();
        const auto ddt = DnnlType(dt);
        fresh->src_md[i] = LayoutDesc(x.shape(), fresh->from[i], ddt);
        fresh->dst_md[i] = LayoutDesc(x.shape(), layout, ddt);
        fresh->reorders[i] = dnnl::reorder(
            dnnl::reorder::primitive_desc(eng, fresh->src_md[i], eng, fresh->dst_md[i]));
      } catch (const dnnl::error&) {
        slot.declined = true;
        return Status::Ok();
      }
    }
    for (size_t c : fresh->chunk) fresh->row += c;
    slot.state = std::move(fresh);
    st = static_cast<ConcatState*>(slot.state.get());
  }
  ctx.set_output(0, st->dtype, st->out_shape);
  slot.out_layouts.assign(1, st->layout);
  // Where each input's producer may write it instead (the runtime decides): channels-last
  // along C, float, any N, pixels a row apart; other layouts with one row, contiguous.
  slot.place_offsets.assign(st->chunk.size(), -1);
  slot.place_pixel_stride = 0;
  const bool strided = st->layout == Layout::kNhwc && st->dtype == DType::kFloat;
  if (strided) slot.place_pixel_stride = static_cast<int64_t>(st->row / sizeof(float));
  if (strided || st->outer == 1) {
    size_t offset = 0;
    for (size_t i = 0; i < st->chunk.size(); ++i) {
      if (!st->convert[i] && st->chunk[i] > 0) slot.place_offsets[i] = static_cast<int64_t>(offset);
      offset += st->chunk[i];
    }
  }
  return Status::Ok();
}

void RunConcat(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const ConcatState*>(slot.state.get());
  if (st->row == 0 || st->outer == 0) return;
  auto* dst = static_cast<std::byte*>(ctx.output(0).raw());
  std::vector<const std::byte*> src(st->chunk.size());
  std::vector<Tensor> converted;
  converted.reserve(src.size());
  std::vector<bool> done(src.size(), false);  // already written into the output
  size_t offset = 0;
  dnnl::engine& eng = slot.provider->engine();
  dnnl::stream& strm = slot.provider->stream();
  bool waited = true;
  // The reorder made at prepare, from `x` into `to` (the output's place or a scratch copy).
  auto convert = [&](size_t i, const Tensor& x, void* to) {
    if (!st->reorders[i]) {  // not rank 4: a plain copy
      ConvertLayoutInto(x, st->from[i], to, st->layout);
      return;
    }
    dnnl::memory sm(st->src_md[i], eng, const_cast<void*>(x.raw()));
    dnnl::memory dm(st->dst_md[i], eng, to);
    st->reorders[i].execute(strm, sm, dm);
    waited = false;
  };
  for (size_t i = 0; i < src.size(); ++i) {
    const Tensor& x = ctx.input(i);
    if (!st->convert[i] || x.nbytes() == 0) {
      src[i] = static_cast<const std::byte*>(x.raw());
      // Written in its place by its producer (the runtime's plan, `place_offsets`).
      if (st->chunk[i] > 0 && src[i] == dst + offset) {
        done[i] = true;
        g_in_place.fetch_add(1, std::memory_order_relaxed);
      }
    } else if (st->layout == Layout::kPlain && st->outer == 1) {
      // One row: the input's plain form is its place in the output; reorder straight there.
      convert(i, x, dst + offset);
      done[i] = true;
    } else {
      converted.push_back(Tensor::Uninitialized(x.dtype(), x.shape()));
      convert(i, x, converted.back().raw());
      src[i] = static_cast<const std::byte*>(converted.back().raw());
    }
    offset += st->chunk[i];
  }
  if (!waited) strm.wait();
  if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) return;
  // Rows of a few KiB or more are worth splitting across threads.
  const int64_t min_rows = std::max<int64_t>(1, static_cast<int64_t>(65536 / st->row));
  ParallelRange(st->outer, min_rows, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      std::byte* d = dst + static_cast<size_t>(o) * st->row;
      for (size_t i = 0; i < src.size(); ++i) {
        const size_t c = st->chunk[i];
        if (c && !done[i]) std::memcpy(d, src[i] + static_cast<size_t>(o) * c, c);
        d += c;
      }
    }
  });
}

constexpr KernelDef kKernels[] = {
    {"", "Concat", 1, 1000, nullptr, 0xFFFFFFFFu, 0, PrepareConcat, RunConcat},
};

}  // namespace

uint64_t ConcatInputsInPlace() {
  return g_in_place.load();
}

std::span<const KernelDef> ConcatKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
