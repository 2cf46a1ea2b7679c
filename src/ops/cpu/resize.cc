// cpu kernel: Resize (opsets 10+) and Upsample (7-9) of rank-4 float32 tensors over H and W (N
// and C unchanged), any mode and coordinate transformation the reference supports: the 1-D taps
// (input index, weight) of each axis are the reference's own (ops/reference/resize.h), computed
// once at prepare; run sums the product of the H and W taps in float. Nearest taps (one, weight
// 1) are copies, so nearest outputs equal the reference bit for bit. Any input Layout; the
// output keeps it when every reader accepts it, else plain. Channels-last and blocked layouts
// resize a whole vector of channels per output pixel.
#include <cstring>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/reference/resize.h"

namespace ferry::ops::cpu {

namespace {

struct AxisPlan {
  std::vector<int64_t> begin, idx;  // taps [begin[o], begin[o+1]) of output coordinate o
  std::vector<float> w;
  std::vector<uint8_t> extrapolate;
};

struct ResizeState : KernelState {
  StateKey key;
  std::vector<double> params;  // the values of roi / scales / sizes the plan was made for
  Shape out_shape;
  Layout in_layout = Layout::kPlain, out_layout = Layout::kPlain;
  AxisPlan h, w;
  bool copy = false;  // every tap is one input pixel with weight 1 (nearest)
  float fill = 0;     // tf_crop_and_resize's extrapolation_value
};

// Channels stored together per pixel in `l` for C channels: plain 1, NHWC C, blocked 8 / 16.
int64_t BlockOf(Layout l, int64_t c) {
  switch (l) {
    case Layout::kNhwc:
      return c;
    case Layout::kBlocked8:
      return 8;
    case Layout::kBlocked16:
      return 16;
    case Layout::kPlain:
      break;
  }
  return 1;
}

AxisPlan ToPlan(const ResizeTaps& t) {
  AxisPlan p;
  p.begin = t.begin;
  p.idx = t.idx;
  p.w.assign(t.w.begin(), t.w.end());
  p.extrapolate = t.extrapolate;
  return p;
}

// Whether axis taps map every output coordinate o to input o with weight 1.
bool Identity(const ResizeTaps& t, int64_t len) {
  if (static_cast<int64_t>(t.begin.size()) != len + 1) return false;
  for (int64_t o = 0; o < len; ++o) {
    const auto u = static_cast<size_t>(o);
    if (t.extrapolate[u] || t.begin[u + 1] - t.begin[u] != 1 ||
        t.idx[static_cast<size_t>(t.begin[u])] != o || t.w[static_cast<size_t>(t.begin[u])] != 1)
      return false;
  }
  return true;
}

bool SingleUnitTaps(const ResizeTaps& t) {
  for (size_t o = 0; o + 1 < t.begin.size(); ++o)
    if (t.begin[o + 1] - t.begin[o] != 1 || t.w[static_cast<size_t>(t.begin[o])] != 1) return false;
  return true;
}

// The values of inputs 1.. (roi, scales, sizes): a plan depends on them, and they may be
// computed (e.g. sizes from another tensor's Shape) with unchanged shapes.
std::vector<double> ParamValues(const OpContext& ctx) {
  std::vector<double> v;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.input_is_tensor(i)) continue;
    const Tensor& t = ctx.input(i);
    v.push_back(static_cast<double>(t.size()));
    for (int64_t k = 0; k < t.size(); ++k) v.push_back(t.GetAsDouble(k));
  }
  return v;
}

Status PrepareResize(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() != DType::kFloat ||
      ctx.input(0).rank() != 4) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<ResizeState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  std::vector<double> params = ParamValues(ctx);
  if (!st || !(st->key == key) || st->params != params) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
    FERRY_ASSIGN_OR_RETURN(ResizeConfig c, GetResizeConfig(ctx));
    const Tensor& x = ctx.input(0);
    auto fresh = std::make_unique<ResizeState>();
    fresh->key = key;
    fresh->params = std::move(params);
    fresh->out_shape = decl[0].shape;
    const Shape& y = fresh->out_shape;
    if (x.size() == 0 || NumElements(y) == 0) {
      slot.declined = true;
      return Status::Ok();
    }
    std::vector<ResizeTaps> taps;
    for (size_t d = 0; d < 4; ++d)
      taps.push_back(ComputeResizeTaps(c, d, x.dim(static_cast<int64_t>(d)), y[d]));
    if (y[0] != x.dim(0) || y[1] != x.dim(1) || !Identity(taps[0], y[0]) ||
        !Identity(taps[1], y[1])) {
      slot.declined = true;  // resizing N or C: the reference
      return Status::Ok();
    }
    fresh->h = ToPlan(taps[2]);
    fresh->w = ToPlan(taps[3]);
    fresh->copy = SingleUnitTaps(taps[2]) && SingleUnitTaps(taps[3]);
    fresh->fill = static_cast<float>(c.extrapolation_value);
    fresh->in_layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
    const bool nhwc_ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
    fresh->out_layout = nhwc_ok ? fresh->in_layout : Layout::kPlain;
    slot.state = std::move(fresh);
    st = static_cast<ResizeState*>(slot.state.get());
  }
  ctx.set_output(0, DType::kFloat, st->out_shape);
  slot.out_layouts.assign(1, st->out_layout);
  return Status::Ok();
}

void RunResize(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const ResizeState*>(slot.state.get());
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0), c = x.dim(1), ih = x.dim(2), iw = x.dim(3);
  const int64_t oh = st->out_shape[2], ow = st->out_shape[3];
  const int64_t bi = BlockOf(st->in_layout, c), bo = BlockOf(st->out_layout, c);
  const float* src = x.data<float>();
  float* dst = ctx.output(0).data<float>();
  const int64_t blocks = c / bi;
  // One task per (image, input channel block, output row).
  ParallelRange(n * blocks * oh, 8, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(bi));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task % oh, cb = (task / oh) % blocks, b = task / (oh * blocks);
      const float* xb = src + b * c * ih * iw + cb * ih * iw * bi;
      float* yb = dst + b * c * oh * ow;
      const auto ur = static_cast<size_t>(r);
      for (int64_t col = 0; col < ow; ++col) {
        const auto uc = static_cast<size_t>(col);
        if (st->h.extrapolate[ur] || st->w.extrapolate[uc]) {
          std::fill(acc.begin(), acc.end(), st->fill);
        } else if (st->copy) {
          const float* p = xb + (st->h.idx[static_cast<size_t>(st->h.begin[ur])] * iw +
                                 st->w.idx[static_cast<size_t>(st->w.begin[uc])]) *
                                    bi;
          if (bo == bi) {  // same layout: one copy of the pixel's channels
            std::memcpy(yb + cb * oh * ow * bo + (r * ow + col) * bo, p,
                        static_cast<size_t>(bi) * sizeof(float));
            continue;
          }
          std::memcpy(acc.data(), p, static_cast<size_t>(bi) * sizeof(float));
        } else {
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int64_t th = st->h.begin[ur]; th < st->h.begin[ur + 1]; ++th) {
            const float wh = st->h.w[static_cast<size_t>(th)];
            const float* row = xb + st->h.idx[static_cast<size_t>(th)] * iw * bi;
            for (int64_t tw = st->w.begin[uc]; tw < st->w.begin[uc + 1]; ++tw) {
              const float wt = wh * st->w.w[static_cast<size_t>(tw)];
              const float* p = row + st->w.idx[static_cast<size_t>(tw)] * bi;
              for (int64_t k = 0; k < bi; ++k) acc[static_cast<size_t>(k)] += wt * p[k];
            }
          }
        }
        for (int64_t k = 0; k < bi; ++k) {
          const int64_t ch = cb * bi + k;
          yb[(ch / bo) * oh * ow * bo + (r * ow + col) * bo + ch % bo] =
              acc[static_cast<size_t>(k)];
        }
      }
    }
  });
}

constexpr KernelDef kKernels[] = {
    {"", "Resize", 10, 1000, nullptr, 0b1, 0, PrepareResize, RunResize},
    {"", "Upsample", 7, 9, nullptr, 0b1, 0, PrepareResize, RunResize},
};

}  // namespace

std::span<const KernelDef> ResizeKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
