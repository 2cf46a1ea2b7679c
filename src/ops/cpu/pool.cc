// cpu kernels: 2-D MaxPool / AveragePool (float32; MaxPool also uint8 / int8) on oneDNN,
// GlobalAveragePool (own loops).
// MaxPool/AveragePool take any Layout and keep it when every reader accepts it.
// GlobalAveragePool takes any Layout (its [N,C,1,1] output is plain either way).
#include <algorithm>
#include <atomic>
#include <cstring>

#include <immintrin.h>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/pool.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

using dnnl::memory;

struct PoolState : KernelState {
  StateKey key;
  Shape out_shape;
  Layout out_layout = Layout::kPlain;
  DType dtype = DType::kFloat;  // float32, or uint8 / int8 (MaxPool of a QOperator model)
  dnnl::pooling_v2_forward prim;
  memory::desc src_md, dst_md;
  bool own_max = false;    // MaxPool in NHWC / blocked, layout kept: VecMaxPool, not oneDNN
  bool plain_max = false;  // MaxPool on plain NCHW where oneDNN has only its slow simple_nchw
  VecPoolGeom geom;
};

// The input pixels under output pixel (oy, ox)'s window, as float offsets into the image, rows
// [ky0, ky1) (the rows inside the image, from the row's setup); returns their count.
int WindowTaps(const VecPoolGeom& g, int64_t y0, int64_t ky0, int64_t ky1, int64_t ox,
               int64_t* off) {
  const int64_t x0 = ox * g.sw - g.pl;
  int64_t kx0 = 0, kx1 = g.kw;
  while (kx0 < kx1 && x0 + kx0 * g.dw < 0) ++kx0;
  while (kx1 > kx0 && x0 + (kx1 - 1) * g.dw >= g.w) --kx1;
  int nt = 0;
  for (int64_t ky = ky0; ky < ky1; ++ky)
    for (int64_t kx = kx0; kx < kx1; ++kx)
      off[nt++] = ((y0 + ky * g.dh) * g.w + x0 + kx * g.dw) * g.vc;
  return nt;
}

void RowSetup(const VecPoolGeom& g, int64_t oy, int64_t* y0, int64_t* ky0, int64_t* ky1) {
  *y0 = oy * g.sh - g.pt;
  *ky0 = 0;
  *ky1 = g.kh;  // taps inside the image: [ky0, ky1)
  while (*ky0 < *ky1 && *y0 + *ky0 * g.dh < 0) ++*ky0;
  while (*ky1 > *ky0 && *y0 + (*ky1 - 1) * g.dh >= g.h) --*ky1;
}

// Scalar max over the taps for channels [j, vc): the first maximum wins and a NaN stays, as in
// the reference.
void MaxTapsScalar(const float* xi, const int64_t* off, int nt, int64_t j, int64_t vc, float* d) {
  for (; j < vc; ++j) {
    float m = xi[off[0] + j];
    for (int t = 1; t < nt; ++t) {
      const float v = xi[off[t] + j];
      if (v > m || (v != v && m == m)) m = v;
    }
    d[j] = m;
  }
}

// Vector forms: max_ps(acc, v) takes v when v is NaN; a NaN already in acc is kept by masking.
// The K registers are unrolled (without the pragma GCC kept acc[] on the stack: 2x slower).
// (Dropping the ordered compare from the chain — a plain max plus a NaN mask per tap, NaN pixels
// redone by the scalar loop — ran GoogLeNet's pools 1.2-1.4x slower: more ops per tap.)
template <int K>
__attribute__((target("avx512f"), always_inline)) inline void MaxTaps512(const float* xi,
                                                                         const int64_t* off, int nt,
                                                                         __mmask16 m, float* d) {
  __m512 acc[K];
#pragma GCC unroll 4
  for (int i = 0; i < K; ++i) acc[i] = _mm512_maskz_loadu_ps(m, xi + off[0] + i * 16);
  for (int t = 1; t < nt; ++t)
#pragma GCC unroll 4
    for (int i = 0; i < K; ++i) {
      const __m512 v = _mm512_maskz_loadu_ps(m, xi + off[t] + i * 16);
      const __mmask16 ok = _mm512_cmp_ps_mask(acc[i], acc[i], _CMP_ORD_Q);
      acc[i] = _mm512_mask_max_ps(acc[i], ok, acc[i], v);
    }
#pragma GCC unroll 4
  for (int i = 0; i < K; ++i) _mm512_mask_storeu_ps(d + i * 16, m, acc[i]);
}

__attribute__((target("avx512f"))) void VecMaxPoolRow512(const float* x, float* y,
                                                         const VecPoolGeom& g, int64_t img,
                                                         int64_t oy) {
  int64_t y0, ky0, ky1, off[kMaxTaps];
  RowSetup(g, oy, &y0, &ky0, &ky1);
  const int64_t vc = g.vc;
  const float* xi = x + img * g.h * g.w * vc;
  float* yr = y + (img * g.oh + oy) * g.ow * vc;
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int nt = WindowTaps(g, y0, ky0, ky1, ox, off);
    float* d = yr + ox * vc;
    int64_t j = 0;
    for (; j + 64 <= vc; j += 64) MaxTaps512<4>(xi + j, off, nt, 0xFFFF, d + j);
    for (; j + 16 <= vc; j += 16) MaxTaps512<1>(xi + j, off, nt, 0xFFFF, d + j);
    if (j < vc) MaxTaps512<1>(xi + j, off, nt, static_cast<__mmask16>((1u << (vc - j)) - 1), d + j);
  }
}

template <int K>
__attribute__((target("avx2"), always_inline)) inline void MaxTaps256(const float* xi,
                                                                      const int64_t* off, int nt,
                                                                      float* d) {
  __m256 acc[K];
#pragma GCC unroll 4
  for (int i = 0; i < K; ++i) acc[i] = _mm256_loadu_ps(xi + off[0] + i * 8);
  for (int t = 1; t < nt; ++t)
#pragma GCC unroll 4
    for (int i = 0; i < K; ++i) {
      const __m256 v = _mm256_loadu_ps(xi + off[t] + i * 8);
      const __m256 nan = _mm256_cmp_ps(acc[i], acc[i], _CMP_UNORD_Q);
      acc[i] = _mm256_blendv_ps(_mm256_max_ps(acc[i], v), acc[i], nan);
    }
#pragma GCC unroll 4
  for (int i = 0; i < K; ++i) _mm256_storeu_ps(d + i * 8, acc[i]);
}

__attribute__((target("avx2"))) void VecMaxPoolRow256(const float* x, float* y,
                                                      const VecPoolGeom& g, int64_t img,
                                                      int64_t oy) {
  int64_t y0, ky0, ky1, off[kMaxTaps];
  RowSetup(g, oy, &y0, &ky0, &ky1);
  const int64_t vc = g.vc;
  const float* xi = x + img * g.h * g.w * vc;
  float* yr = y + (img * g.oh + oy) * g.ow * vc;
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int nt = WindowTaps(g, y0, ky0, ky1, ox, off);
    float* d = yr + ox * vc;
    int64_t j = 0;
    for (; j + 32 <= vc; j += 32) MaxTaps256<4>(xi + j, off, nt, d + j);
    for (; j + 8 <= vc; j += 8) MaxTaps256<1>(xi + j, off, nt, d + j);
    MaxTapsScalar(xi, off, nt, j, vc, d);
  }
}

void VecMaxPoolRowScalar(const float* x, float* y, const VecPoolGeom& g, int64_t img, int64_t oy) {
  int64_t y0, ky0, ky1, off[kMaxTaps];
  RowSetup(g, oy, &y0, &ky0, &ky1);
  const float* xi = x + img * g.h * g.w * g.vc;
  float* yr = y + (img * g.oh + oy) * g.ow * g.vc;
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int nt = WindowTaps(g, y0, ky0, ky1, ox, off);
    MaxTapsScalar(xi, off, nt, 0, g.vc, yr + ox * g.vc);
  }
}

std::atomic<int> g_max_pool_isa{0};  // SetMaxPoolIsaForTesting: 0 widest, 1 AVX2, 2 scalar

bool Accepts2d(const ir::Node& n) {
  const ir::Attribute* ks = n.attr("kernel_shape");
  return ks && ks->ints.size() == 2 && n.outputs.size() <= 1;
}

}  // namespace

// The columns whose window lies inside the row run tap by tap over the whole span (a loop the
// compiler vectorises), the edge columns one by one.
void PlainMaxPoolRow(const float* x, float* y, const VecPoolGeom& g, int64_t plane, int64_t oy) {
  int64_t y0 = 0, ky0 = 0, ky1 = 0;
  RowSetup(g, oy, &y0, &ky0, &ky1);
  const float* xp = x + plane * g.h * g.w;
  float* yr = y + (plane * g.oh + oy) * g.ow;
  const auto inside = [&](int64_t ox) {
    const int64_t x0 = ox * g.sw - g.pl;
    return x0 >= 0 && x0 + (g.kw - 1) * g.dw < g.w;
  };
  const auto one = [&](int64_t ox) {
    const int64_t x0 = ox * g.sw - g.pl;
    bool any = false;
    float m = 0.f;
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* r = xp + (y0 + ky * g.dh) * g.w;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t xx = x0 + kx * g.dw;
        if (xx < 0 || xx >= g.w) continue;
        const float v = r[xx];
        if (!any || v > m || (v != v && m == m)) m = v;
        any = true;
      }
    }
    yr[ox] = any ? m : 0.f;
  };
  int64_t a = 0, b = g.ow;
  while (a < b && !inside(a)) ++a;
  while (b > a && !inside(b - 1)) --b;
  for (int64_t ox = 0; ox < a; ++ox) one(ox);
  for (int64_t ox = b; ox < g.ow; ++ox) one(ox);
  if (a == b) return;
  if (ky0 == ky1) {
    std::fill(yr + a, yr + b, 0.f);
    return;
  }
  const int64_t sw = g.sw;
  bool first = true;
  for (int64_t ky = ky0; ky < ky1; ++ky)
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const float* r = xp + (y0 + ky * g.dh) * g.w - g.pl + kx * g.dw;
      if (first) {
#pragma omp simd
        for (int64_t ox = a; ox < b; ++ox) yr[ox] = r[ox * sw];
        first = false;
        continue;
      }
#pragma omp simd
      for (int64_t ox = a; ox < b; ++ox) {
        const float v = r[ox * sw], m = yr[ox];
        yr[ox] = (v > m || (v != v && m == m)) ? v : m;
      }
    }
}

namespace {

// The window of a 2-D pooling: kernel, strides, dilations, pads (top, left, bottom, right).
struct PoolWindow {
  std::vector<int64_t> k, strides, dil, pads;
  bool ceil = false;
};

// The own max-pool kernels' geometry: `images` planes of `vc` channels each.
VecPoolGeom MaxPoolGeom(const Tensor& x, const Shape& y, const PoolWindow& w, int64_t images,
                        int64_t vc) {
  VecPoolGeom g;
  g.images = images;
  g.vc = vc;
  g.h = x.dim(2);
  g.w = x.dim(3);
  g.oh = y[2];
  g.ow = y[3];
  g.kh = w.k[0];
  g.kw = w.k[1];
  g.sh = w.strides[0];
  g.sw = w.strides[1];
  g.dh = w.dil[0];
  g.dw = w.dil[1];
  g.pt = w.pads[0];
  g.pl = w.pads[1];
  return g;
}

// Builds the oneDNN pooling from x to y (shape `y`) into slot.state, or declines.
Status BuildWindowPool(OpContext& ctx, NodeSlot& slot, StateKey key, const Shape& y, bool max,
                       bool include_pad, const PoolWindow& w) {
  const Tensor& x = ctx.input(0);
  auto fresh = std::make_unique<PoolState>();
  fresh->key = std::move(key);
  fresh->out_shape = y;
  memory::dims pl(2), pr(2), dd(2), ss(w.strides.begin(), w.strides.end()),
      kk(w.k.begin(), w.k.end());
  for (int a = 0; a < 2; ++a) {
    const int64_t in = x.dim(2 + a), out = y[2 + static_cast<size_t>(a)];
    dd[a] = w.dil[a] - 1;
    pl[a] = w.pads[a];
    const int64_t given = w.pads[2 + a];
    // ceil_mode: the last window may reach past the declared end pad; MaxPool pads with -inf
    // there, but AveragePool counts such windows differently, so it declines.
    const int64_t needed = (out - 1) * w.strides[a] + (w.k[a] - 1) * w.dil[a] + 1 - in - pl[a];
    pr[a] = std::max(given, needed);
    if (!max && w.ceil && needed > given) {
      slot.declined = true;
      return Status::Ok();
    }
  }
  const Layout in_layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  const bool nhwc_ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
  fresh->out_layout = nhwc_ok ? in_layout : Layout::kPlain;
  fresh->dtype = x.dtype();
  fresh->src_md = LayoutDesc(x.shape(), in_layout, DnnlType(x.dtype()));
  fresh->dst_md = LayoutDesc(y, fresh->out_layout, DnnlType(x.dtype()));
  // Max pooling that keeps a channels-last / channel-blocked layout: own loops over channel
  // vectors (oneDNN 2.6's jit pooling on NHWC: GoogLeNet's 3x3 stride-1 branch pools ran at
  // ~1 ns per output element; ONNX Runtime's took half that).
  if (max && x.dtype() == DType::kFloat && fresh->out_layout == in_layout &&
      in_layout != Layout::kPlain && w.k[0] * w.k[1] <= kMaxTaps) {
    const int64_t blk = in_layout == Layout::kBlocked8    ? 8
                        : in_layout == Layout::kBlocked16 ? 16
                                                          : x.dim(1);
    fresh->geom = MaxPoolGeom(
        x, y, w, in_layout == Layout::kNhwc ? x.dim(0) : x.dim(0) * (x.dim(1) / blk), blk);
    fresh->own_max = true;
    slot.state = std::move(fresh);
    return Status::Ok();
  }
  auto alg = max ? dnnl::algorithm::pooling_max
                 : (include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                : dnnl::algorithm::pooling_avg_exclude_padding);
  try {
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, fresh->src_md,
                                     fresh->dst_md, ss, kk, dd, pl, pr);
    dnnl::pooling_v2_forward::primitive_desc pd(d, slot.provider->engine());
    // oneDNN 2.6 has no jit max pooling for plain NCHW with uneven pads on larger images
    // (PP-OCR's detector, 2x2 stride 1 SAME_UPPER on [1,24,320,320]: its simple_nchw took
    // 100 ms of the model's 430, ~40 ns per output): its simple_nchw / ref implementations run
    // the own plain kernel instead. (Not its jit ones: on a 3x3 stride-2 pool the own kernel,
    // strided loads, is far slower.)
    const std::string impl = pd.impl_info_str();
    if (max && x.dtype() == DType::kFloat && in_layout == Layout::kPlain &&
        fresh->out_layout == Layout::kPlain && w.k[0] * w.k[1] <= kMaxTaps &&
        (impl.rfind("simple", 0) == 0 || impl.rfind("ref", 0) == 0)) {
      fresh->geom = MaxPoolGeom(x, y, w, x.dim(0) * x.dim(1), 1);
      fresh->plain_max = true;
      slot.state = std::move(fresh);
      return Status::Ok();
    }
    fresh->prim = dnnl::pooling_v2_forward(pd);
  } catch (const dnnl::error&) {
    slot.declined = true;
    return Status::Ok();
  }
  slot.state = std::move(fresh);
  return Status::Ok();
}

void SetPoolOutput(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const PoolState*>(slot.state.get());
  ctx.set_output(0, st->dtype, st->out_shape);
  slot.out_layouts.assign(1, st->out_layout);
}

// MaxPool also takes uint8 / int8 (QOperator models: a max of integers is exact on oneDNN).
template <bool kMax>
Status PrepareWindowPool(OpContext& ctx, NodeSlot& slot) {
  const DType dt = ctx.input_is_tensor(0) ? ctx.input(0).dtype() : DType::kUndefined;
  const bool int8 = kMax && (dt == DType::kUint8 || dt == DType::kInt8);
  if (!ctx.input_is_tensor(0) || (dt != DType::kFloat && !int8) || ctx.input(0).rank() != 4) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<PoolState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
    PoolWindow w;
    w.k = ctx.attr_ints("kernel_shape");
    w.strides = ctx.attr_ints("strides");
    w.dil = ctx.attr_ints("dilations");
    w.pads = ctx.attr_ints("pads");
    if (w.strides.empty()) w.strides = {1, 1};
    if (w.dil.empty()) w.dil = {1, 1};
    const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
    if (w.pads.empty() || auto_pad == "VALID") w.pads = {0, 0, 0, 0};
    w.ceil = ctx.attr_int("ceil_mode", 0) != 0;
    const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // MaxPool only (padding never wins a max): the pads that give ceil(in / stride) outputs,
      // the odd one at the end (SAME_UPPER) or the start (SAME_LOWER), as the reference
      // computes them. AveragePool keeps the reference (its divisor rules with SAME).
      if (!kMax || w.k.size() != 2 || w.strides.size() != 2 || w.dil.size() != 2) {
        slot.declined = true;
        return Status::Ok();
      }
      const Shape& xs = ctx.input(0).shape();
      w.pads.assign(4, 0);
      for (size_t a = 0; a < 2; ++a) {
        const int64_t in = xs[2 + a], st = std::max<int64_t>(w.strides[a], 1);
        const int64_t out = (in + st - 1) / st;
        const int64_t total =
            std::max<int64_t>(0, (out - 1) * st + (w.k[a] - 1) * w.dil[a] + 1 - in);
        const int64_t small = total / 2, big = total - small;
        w.pads[a] = auto_pad == "SAME_UPPER" ? small : big;
        w.pads[2 + a] = auto_pad == "SAME_UPPER" ? big : small;
      }
    } else if (auto_pad != "NOTSET" && auto_pad != "VALID") {
      slot.declined = true;
      return Status::Ok();
    }
    FERRY_RETURN_IF_ERROR(
        BuildWindowPool(ctx, slot, std::move(key), decl[0].shape, kMax, include_pad, w));
    if (slot.declined) return Status::Ok();
  }
  SetPoolOutput(ctx, slot);
  return Status::Ok();
}

void RunWindowPool(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<PoolState*>(slot.state.get());
  if (st->own_max) {
    const VecPoolGeom& g = st->geom;
    const float* x = ctx.input(0).data<float>();
    float* y = ctx.output(0).data<float>();
    const int64_t loads = g.ow * g.vc * g.kh * g.kw;  // per output row
    const VecMaxPoolRowFn row = VecMaxPoolRow();
    ParallelRange(g.images * g.oh, std::max<int64_t>(1, 32768 / std::max<int64_t>(loads, 1)),
                  [&](int64_t r0, int64_t r1) {
                    for (int64_t r = r0; r < r1; ++r) row(x, y, g, r / g.oh, r % g.oh);
                  });
    return;
  }
  if (st->plain_max) {
    const VecPoolGeom& g = st->geom;
    const float* x = ctx.input(0).data<float>();
    float* y = ctx.output(0).data<float>();
    const int64_t loads = std::max<int64_t>(g.ow * g.kh * g.kw, 1);  // per output row
    ParallelRange(g.images * g.oh, std::max<int64_t>(1, 32768 / loads),
                  [&](int64_t r0, int64_t r1) {
                    for (int64_t r = r0; r < r1; ++r) PlainMaxPoolRow(x, y, g, r / g.oh, r % g.oh);
                  });
    return;
  }
  Provider& p = *slot.provider;
  memory src(st->src_md, p.engine(), const_cast<void*>(ctx.input(0).raw()));
  memory dst(st->dst_md, p.engine(), ctx.output(0).raw());
  st->prim.execute(p.stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  p.stream().wait();
}

struct GapState : KernelState {
  Layout in_layout = Layout::kPlain;
  std::vector<float> partial;  // NHWC: per pixel chunk channel sums
};

// NHWC images are summed in chunks of this many pixels (each chunk's channel sums, then the
// chunks in order): a fixed split, so the sums do not depend on the thread count, and large
// images (EfficientNet's 112x112 SE pools) run on every thread.
constexpr int64_t kGapPixelChunk = 512;

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

// Sums of channels [ch0, ch0 + W) of one NHWC image over its pixels, in pixel order, into db.
template <int64_t W>
inline __attribute__((always_inline)) void SumChannelsNhwc(const float* s, int64_t hw, int64_t c,
                                                           int64_t ch0, float* db) {
  float acc[W] = {};
  for (int64_t p = 0; p < hw; ++p) {
    const float* sp = s + p * c + ch0;
#pragma GCC unroll 64
    for (int64_t j = 0; j < W; ++j) acc[j] += sp[j];
  }
  for (int64_t j = 0; j < W; ++j) db[ch0 + j] = acc[j];
}

// Per-channel sums of one NHWC image, db[ch] = sum over p of s[p * c + ch], pixels in order (the
// same additions as a plain loop): 64, then 16, then 1 channel(s) at a time held in registers
// across all pixels (the single-channel tail used to run for every channel past the last 64:
// EfficientNet's 32- and 96-channel SE pools, 2/3 of this function's time). Compiled for AVX-512,
// AVX2 and the baseline, picked at load time (FERRY_TARGET_CLONES).
FERRY_TARGET_CLONES void SumPixelsNhwc(const float* s, int64_t hw, int64_t c, float* db) {
  int64_t ch0 = 0;
  for (; ch0 + 64 <= c; ch0 += 64) SumChannelsNhwc<64>(s, hw, c, ch0, db);
  for (; ch0 + 16 <= c; ch0 += 16) SumChannelsNhwc<16>(s, hw, c, ch0, db);
  for (; ch0 < c; ++ch0) SumChannelsNhwc<1>(s, hw, c, ch0, db);
}

}  // namespace

VecMaxPoolRowFn VecMaxPoolRow() {
  const int cap = g_max_pool_isa.load(std::memory_order_relaxed);
  if (cap == 0 && __builtin_cpu_supports("avx512f")) return VecMaxPoolRow512;
  if (cap <= 1 && __builtin_cpu_supports("avx2")) return VecMaxPoolRow256;
  return VecMaxPoolRowScalar;
}

void ChannelSums(const float* s, Layout in, int64_t n, int64_t c, int64_t hw, float scale, float* d,
                 std::vector<float>& part) {
  if (in == Layout::kBlocked8 || in == Layout::kBlocked16) {
    // [N,C/b,H,W,b]: each block of b channels sums b-wide vectors over the pixels.
    const int64_t blk = in == Layout::kBlocked8 ? 8 : 16;
    const VecOps& v = Vec();
    ParallelRange(n * (c / blk), 4, [&](int64_t b, int64_t e) {
      float acc[16];
      for (int64_t i = b; i < e; ++i) {
        v.sum_lanes(s + i * hw * blk, hw, blk, acc);
        float* di = d + (i / (c / blk)) * c + (i % (c / blk)) * blk;
        for (int64_t j = 0; j < blk; ++j) di[j] = acc[j] * scale;
      }
    });
    return;
  }
  if (in == Layout::kNhwc) {
    const int64_t chunks = (hw + kGapPixelChunk - 1) / kGapPixelChunk;
    if (chunks <= 1) {
      for (int64_t b = 0; b < n; ++b) {
        float* db = d + b * c;
        SumPixelsNhwc(s + b * hw * c, hw, c, db);
        for (int64_t ch = 0; ch < c; ++ch) db[ch] *= scale;
      }
      return;
    }
    part.resize(static_cast<size_t>(n * chunks * c));
    ParallelRange(n * chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t img = i / chunks, p0 = (i % chunks) * kGapPixelChunk;
        SumPixelsNhwc(s + (img * hw + p0) * c, std::min(kGapPixelChunk, hw - p0), c,
                      part.data() + i * c);
      }
    });
    for (int64_t b = 0; b < n; ++b) {
      float* db = d + b * c;
      const float* pb = part.data() + b * chunks * c;
      for (int64_t ch = 0; ch < c; ++ch) db[ch] = pb[ch];
      for (int64_t k = 1; k < chunks; ++k)
        for (int64_t ch = 0; ch < c; ++ch) db[ch] += pb[k * c + ch];
      for (int64_t ch = 0; ch < c; ++ch) db[ch] *= scale;
    }
    return;
  }
  const VecOps& v = Vec();
  ParallelRange(n * c, 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) d[i] = v.sum(s + i * hw, hw) * scale;
  });
}

namespace {

void RunGlobalAveragePool(OpContext& ctx, NodeSlot& slot) {
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  auto* st = static_cast<GapState*>(slot.state.get());
  ChannelSums(x.data<float>(), st->in_layout, n, c, hw, hw > 0 ? 1.f / static_cast<float>(hw) : 0.f,
              ctx.output(0).data<float>(), st->partial);
}

// ---- PadAvgPool: Pad(constant 0, H and W only) -> AveragePool ----
// torch exports avg_pool2d(3, stride 1, padding 1) (Inception-v3's pool branches) as a zero Pad
// and an AveragePool without pads: together an AveragePool whose pads count (oneDNN
// avg_include_padding), run in the input's layout (no reference Pad, no plain round trip).
// params: {kh, kw, sh, sw, dh, dw, pt, pl, pb, pr}; inputs: {x}.

bool AllZero(const Tensor* t) {
  if (!t) return false;
  for (int64_t i = 0; i < t->size(); ++i)
    if ((t->dtype() == DType::kFloat ? t->data<float>()[i] != 0.f : t->GetAsInt64(i) != 0))
      return false;
  return true;
}

const KernelDef* PadAvgPoolKernel();

bool MatchPadAvgPool(const GraphView& g, size_t host, PatternMatch* m) {
  const ir::Node& pad = g.node(host);
  if (!IsOnnxOp(pad, "Pad") || pad.attr_string("mode", "constant") != "constant" ||
      pad.outputs.size() != 1)
    return false;
  std::vector<int64_t> pads;
  if (g.opset(host) < 11) {
    pads = pad.attr_ints("pads");
    if (pad.attr_float("value", 0.f) != 0.f) return false;
  } else {
    const Tensor* pt = pad.inputs.size() > 1 ? g.constant(g.input(host, 1)) : nullptr;
    if (!pt || pt->dtype() != DType::kInt64) return false;
    pads = pt->ToInt64Vector();
    if (pad.inputs.size() > 2 && g.input(host, 2) >= 0 && !AllZero(g.constant(g.input(host, 2))))
      return false;
    if (pad.inputs.size() > 3 && g.input(host, 3) >= 0) return false;  // axes
  }
  // [N, C, H, W]: pads only on H and W, none negative (a crop).
  if (pads.size() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0)
    return false;
  for (int64_t v : pads)
    if (v < 0) return false;
  const std::vector<size_t> r = g.readers(g.output(host, 0));
  if (r.size() != 1) return false;
  const ir::Node& pool = g.node(r[0]);
  if (!IsOnnxOp(pool, "AveragePool") || pool.outputs.size() != 1) return false;
  if (pool.attr_int("ceil_mode", 0) != 0) return false;
  const std::string auto_pad = pool.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return false;
  std::vector<int64_t> k = pool.attr_ints("kernel_shape"), st = pool.attr_ints("strides"),
                       dil = pool.attr_ints("dilations"), pp = pool.attr_ints("pads");
  if (st.empty()) st = {1, 1};
  if (dil.empty()) dil = {1, 1};
  if (pp.empty() || auto_pad == "VALID") pp = {0, 0, 0, 0};
  if (k.size() != 2 || st.size() != 2 || dil.size() != 2 || pp.size() != 4) return false;
  // The pool's own pads: counted (count_include_pad) they add to the Pad's; else none allowed.
  const bool include = pool.attr_int("count_include_pad", 0) != 0;
  for (int64_t v : pp)
    if (v < 0 || (v != 0 && !include)) return false;
  m->kernel = PadAvgPoolKernel();
  m->absorbed = {r[0]};
  m->inputs = {g.input(host, 0)};
  m->output = g.output(r[0], 0);
  for (int64_t v : {k[0], k[1], st[0], st[1], dil[0], dil[1], pads[2] + pp[0], pads[3] + pp[1],
                    pads[6] + pp[2], pads[7] + pp[3]})
    m->params.push_back(static_cast<float>(v));
  return true;
}

Status PreparePadAvgPool(OpContext& ctx, NodeSlot& slot) {
  if (slot.params.size() != 10 || !ctx.input_is_tensor(0) ||
      ctx.input(0).dtype() != DType::kFloat || ctx.input(0).rank() != 4 ||
      ctx.input(0).size() == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<PoolState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    auto p = [&](size_t i) { return static_cast<int64_t>(slot.params[i]); };
    PoolWindow w;
    w.k = {p(0), p(1)};
    w.strides = {p(2), p(3)};
    w.dil = {p(4), p(5)};
    w.pads = {p(6), p(7), p(8), p(9)};
    const Tensor& x = ctx.input(0);
    Shape y = {x.dim(0), x.dim(1), 0, 0};
    for (size_t a = 0; a < 2; ++a) {
      const int64_t span = x.dim(2 + static_cast<int64_t>(a)) + w.pads[a] + w.pads[2 + a];
      const int64_t ext = (w.k[a] - 1) * w.dil[a] + 1;
      if (w.k[a] < 1 || w.strides[a] < 1 || w.dil[a] < 1 || span < ext) {
        slot.declined = true;  // the steps report the error
        return Status::Ok();
      }
      y[2 + a] = (span - ext) / w.strides[a] + 1;
    }
    FERRY_RETURN_IF_ERROR(BuildWindowPool(ctx, slot, std::move(key), y, false, true, w));
    if (slot.declined) return Status::Ok();
  }
  SetPoolOutput(ctx, slot);
  return Status::Ok();
}

constexpr KernelDef kPadAvgPool = {
    "", "PadAvgPool (pattern)", 1, 1000, nullptr, 0, 0, PreparePadAvgPool, RunWindowPool};

const KernelDef* PadAvgPoolKernel() {
  return &kPadAvgPool;
}

constexpr Pattern kPatterns[] = {{"PadAvgPool", MatchPadAvgPool}};

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

void SetMaxPoolIsaForTesting(int cap) {
  g_max_pool_isa.store(cap, std::memory_order_relaxed);
}

std::span<const Pattern> PoolPatterns() {
  return kPatterns;
}

}  // namespace ferry::ops::cpu
