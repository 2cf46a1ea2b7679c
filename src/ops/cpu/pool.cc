// cpu kernels: 2-D MaxPool / AveragePool (float32) on oneDNN, GlobalAveragePool (own loops).
// MaxPool/AveragePool take any Layout and keep it when every reader accepts it.
// GlobalAveragePool takes any Layout (its [N,C,1,1] output is plain either way).
#include <algorithm>
#include <cstring>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

using dnnl::memory;

struct PoolState : KernelState {
  StateKey key;
  Shape out_shape;
  Layout out_layout = Layout::kPlain;
  dnnl::pooling_v2_forward prim;
  memory::desc src_md, dst_md;
};

bool Accepts2d(const ir::Node& n) {
  const ir::Attribute* ks = n.attr("kernel_shape");
  return ks && ks->ints.size() == 2 && n.outputs.size() <= 1;
}

template <bool kMax>
Status PrepareWindowPool(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() != DType::kFloat ||
      ctx.input(0).rank() != 4) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<PoolState*>(slot.state.get());
  StateKey key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
    auto fresh = std::make_unique<PoolState>();
    fresh->key = key;
    fresh->out_shape = decl[0].shape;
    const Tensor& x = ctx.input(0);
    const Shape& y = fresh->out_shape;
    std::vector<int64_t> k = ctx.attr_ints("kernel_shape"), strides = ctx.attr_ints("strides"),
                         dil = ctx.attr_ints("dilations"), pads = ctx.attr_ints("pads");
    if (strides.empty()) strides = {1, 1};
    if (dil.empty()) dil = {1, 1};
    if (pads.empty()) pads = {0, 0, 0, 0};
    const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
    const bool ceil = ctx.attr_int("ceil_mode", 0) != 0;
    const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
    if (auto_pad != "NOTSET" && auto_pad != "VALID") {
      slot.declined = true;
      return Status::Ok();
    }
    memory::dims pl(2), pr(2), dd(2), ss(strides.begin(), strides.end()), kk(k.begin(), k.end());
    for (int a = 0; a < 2; ++a) {
      const int64_t in = x.dim(2 + a), out = y[2 + static_cast<size_t>(a)];
      dd[a] = dil[a] - 1;
      pl[a] = auto_pad == "VALID" ? 0 : pads[a];
      const int64_t given = auto_pad == "VALID" ? 0 : pads[2 + a];
      // ceil_mode: the last window may reach past the declared end pad; MaxPool pads with -inf
      // there, but AveragePool counts such windows differently, so it declines.
      const int64_t needed = (out - 1) * strides[a] + (k[a] - 1) * dil[a] + 1 - in - pl[a];
      pr[a] = std::max(given, needed);
      if (!kMax && ceil && needed > given) {
        slot.declined = true;
        return Status::Ok();
      }
    }
    const Layout in_layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
    const bool nhwc_ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
    fresh->out_layout = nhwc_ok ? in_layout : Layout::kPlain;
    fresh->src_md = LayoutDesc(x.shape(), in_layout);
    fresh->dst_md = LayoutDesc(y, fresh->out_layout);
    auto alg = kMax ? dnnl::algorithm::pooling_max
                    : (include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                   : dnnl::algorithm::pooling_avg_exclude_padding);
    try {
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, fresh->src_md,
                                       fresh->dst_md, ss, kk, dd, pl, pr);
      fresh->prim = dnnl::pooling_v2_forward(
          dnnl::pooling_v2_forward::primitive_desc(d, slot.provider->engine()));
    } catch (const dnnl::error&) {
      slot.declined = true;
      return Status::Ok();
    }
    slot.state = std::move(fresh);
    st = static_cast<PoolState*>(slot.state.get());
  }
  ctx.set_output(0, DType::kFloat, st->out_shape);
  slot.out_layouts.assign(1, st->out_layout);
  return Status::Ok();
}

void RunWindowPool(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<PoolState*>(slot.state.get());
  Provider& p = *slot.provider;
  memory src(st->src_md, p.engine(), const_cast<void*>(ctx.input(0).raw()));
  memory dst(st->dst_md, p.engine(), ctx.output(0).raw());
  st->prim.execute(p.stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  p.stream().wait();
}

struct GapState : KernelState {
  Layout in_layout = Layout::kPlain;
};

Status PrepareGlobalAveragePool(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() != DType::kFloat ||
      ctx.input(0).rank() != 4) {
    slot.declined = true;
    return Status::Ok();
  }
  const Tensor& x = ctx.input(0);
  ctx.set_output(0, DType::kFloat, {x.dim(0), x.dim(1), 1, 1});
  if (!slot.state) slot.state = std::make_unique<GapState>();
  static_cast<GapState*>(slot.state.get())->in_layout =
      slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  slot.out_layouts.assign(1, Layout::kPlain);
  return Status::Ok();
}

// Per-channel sums of one NHWC image, db[ch] = sum over p of s[p * c + ch], pixels in order (the
// same additions as a plain loop): 64 channels at a time held in registers across all pixels.
// Compiled for AVX-512, AVX2 and the baseline, picked at load time (GCC target_clones).
__attribute__((target_clones("avx512f", "avx2", "default"))) void SumPixelsNhwc(const float* s,
                                                                                int64_t hw,
                                                                                int64_t c,
                                                                                float* db) {
  constexpr int64_t kW = 64;
  int64_t ch0 = 0;
  for (; ch0 + kW <= c; ch0 += kW) {
    float acc[kW] = {};
    for (int64_t p = 0; p < hw; ++p) {
      const float* sp = s + p * c + ch0;
#pragma GCC unroll 64
      for (int64_t j = 0; j < kW; ++j) acc[j] += sp[j];
    }
    for (int64_t j = 0; j < kW; ++j) db[ch0 + j] = acc[j];
  }
  if (ch0 == c) return;
  for (int64_t ch = ch0; ch < c; ++ch) db[ch] = 0.f;
  for (int64_t p = 0; p < hw; ++p) {
    const float* sp = s + p * c;
    for (int64_t ch = ch0; ch < c; ++ch) db[ch] += sp[ch];
  }
}

void RunGlobalAveragePool(OpContext& ctx, NodeSlot& slot) {
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  const float* s = x.data<float>();
  float* d = ctx.output(0).data<float>();
  const float inv = hw > 0 ? 1.f / static_cast<float>(hw) : 0.f;
  const Layout in = static_cast<GapState*>(slot.state.get())->in_layout;
  if (in == Layout::kBlocked8 || in == Layout::kBlocked16) {
    // [N,C/b,H,W,b]: each block of b channels sums b-wide vectors over the pixels.
    const int64_t blk = in == Layout::kBlocked8 ? 8 : 16;
    const VecOps& v = Vec();
    ParallelRange(n * (c / blk), 4, [&](int64_t b, int64_t e) {
      float acc[16];
      for (int64_t i = b; i < e; ++i) {
        v.sum_lanes(s + i * hw * blk, hw, blk, acc);
        float* di = d + (i / (c / blk)) * c + (i % (c / blk)) * blk;
        for (int64_t j = 0; j < blk; ++j) di[j] = acc[j] * inv;
      }
    });
    return;
  }
  if (in == Layout::kNhwc) {
    for (int64_t b = 0; b < n; ++b) {
      float* db = d + b * c;
      SumPixelsNhwc(s + b * hw * c, hw, c, db);
      for (int64_t ch = 0; ch < c; ++ch) db[ch] *= inv;
    }
    return;
  }
  const VecOps& v = Vec();
  ParallelRange(n * c, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      d[i] = v.sum(s + i * hw, hw) * inv;
    }
  });
}

constexpr KernelDef kKernels[] = {
    {"", "MaxPool", 1, 1000, Accepts2d, 0b1, 0, PrepareWindowPool<true>, RunWindowPool},
    {"", "AveragePool", 1, 1000, Accepts2d, 0b1, 0, PrepareWindowPool<false>, RunWindowPool},
    {"", "GlobalAveragePool", 1, 1000, nullptr, 0b1, 0, PrepareGlobalAveragePool,
     RunGlobalAveragePool},
};

}  // namespace

std::span<const KernelDef> PoolKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
