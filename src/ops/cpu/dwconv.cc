// Depthwise 2-D convolution with an own AVX-512 kernel (see dwconv.h).
#include "ops/cpu/dwconv.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <tuple>

#include "ops/cpu/act512.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/winograd.h"

#define FERRY_AVX512 __attribute__((target("avx512f,avx2,fma")))

namespace ferry::ops::cpu {

namespace {

using act512::Act;
using act512::Apply;
using act512::Post;

std::atomic<uint64_t> g_runs{0};
std::atomic<int> g_mode{-1};  // SetDwConvMode

constexpr int kTile = 8;                 // output pixels per register tile
constexpr int64_t kWeightBytes = 16384;  // weights per pass over a row (L1-resident)

size_t Align64(size_t b) {
  return (b + 63) / 64 * 64;
}

// -1 auto, 0 off, 1 forced on: the setter, else FERRY_DWCONV (read once).
int Mode() {
  const int m = g_mode.load();
  if (m >= 0) return m;
  static const int env = KernelModeFromEnv("FERRY_DWCONV");
  return env;
}

struct Args {
  const DwShape* s;
  int64_t cp;
  const float* x;     // input, NHWC
  const float* w;     // [kh * kw][cp]
  const float* bias;  // [cp]
  const float* res;   // residual in NHWC or null
  float* y;           // output, NHWC
  Post post;
};

// Where a strip of output pixels reads: x at the first valid tap (row ky0, column kx0) of the
// first pixel, channel 0; w at tap (ky0, kx0); nky x nkx taps; input pixels ps floats apart,
// rows rs floats apart in x, wr floats apart in w. y / r (residual or null) at the first pixel.
struct Taps {
  const float* x;
  const float* w;
  int64_t ps, rs, wr, nky, nkx;
  float* y;
  const float* r;
};

// One tile of T consecutive output pixels x B channel blocks from channel c (T * B independent
// accumulators: few pixels get more blocks, so the chains of FMAs overlap); kMask: B == 1, the
// last C % 16 channels (mask m). xt / yt / rt: the tile's first pixel, channel 0.
template <int T, int B, bool kMask, Act A>
FERRY_AVX512 inline __attribute__((always_inline)) void Block(const Args& g, const Taps& k,
                                                              const float* xt, float* yt,
                                                              const float* rt, int64_t c,
                                                              __mmask16 m, __m512 lo, __m512 hi) {
  const int64_t C = g.s->c, cp = g.cp;
  __m512 acc[T][B];
#pragma GCC unroll 8
  for (int b = 0; b < B; ++b) {
    const __m512 bv = _mm512_load_ps(g.bias + c + b * 16);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t][b] = bv;
  }
  const float* xr = xt + c;
  const float* wt = k.w + c;
  for (int64_t ky = 0; ky < k.nky; ++ky, xr += k.rs, wt += k.wr) {
    for (int64_t kx = 0; kx < k.nkx; ++kx) {
      __m512 wv[B];
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) wv[b] = _mm512_load_ps(wt + kx * cp + b * 16);
      const float* xp = xr + kx * C;
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) {
          const float* q = xp + t * k.ps + b * 16;
          const __m512 xv = kMask ? _mm512_maskz_loadu_ps(m, q) : _mm512_loadu_ps(q);
          acc[t][b] = _mm512_fmadd_ps(xv, wv[b], acc[t][b]);
        }
    }
  }
  if (rt) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) {
        const float* q = rt + t * C + c + b * 16;
        acc[t][b] =
            _mm512_add_ps(acc[t][b], kMask ? _mm512_maskz_loadu_ps(m, q) : _mm512_loadu_ps(q));
      }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      const __m512 v = Apply<A>(acc[t][b], lo, hi);
      if (kMask)
        _mm512_mask_storeu_ps(yt + t * C + c + b * 16, m, v);
      else
        _mm512_storeu_ps(yt + t * C + c + b * 16, v);
    }
}

// `tiles` tiles of T pixels, channels [c0, c1) of each: kB blocks at a time, then 2, 1, then
// the masked tail. A tile's input is read once from memory, its channels one after the other
// (sequential lines); the weights come from L1.
template <int T, int kB, Act A>
FERRY_AVX512 void Strip(const Args& g, const Taps& k, int64_t tiles, int64_t c0, int64_t c1) {
  const int64_t C = g.s->c;
  const int64_t full = c0 + (c1 - c0) / 16 * 16;
  const __mmask16 m = static_cast<__mmask16>((1u << ((c1 - full) & 15)) - 1);
  const __m512 lo = _mm512_set1_ps(g.post.lo), hi = _mm512_set1_ps(g.post.hi);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const float* xt = k.x + tile * T * k.ps;
    float* yt = k.y + tile * T * C;
    const float* rt = k.r ? k.r + tile * T * C : nullptr;
    int64_t c = c0;
    for (; c + kB * 16 <= full; c += kB * 16)
      Block<T, kB, false, A>(g, k, xt, yt, rt, c, 0xffff, lo, hi);
    if constexpr (kB > 2) {
      if (c + 32 <= full) {
        Block<T, 2, false, A>(g, k, xt, yt, rt, c, 0xffff, lo, hi);
        c += 32;
      }
    }
    if constexpr (kB > 1) {
      for (; c < full; c += 16) Block<T, 1, false, A>(g, k, xt, yt, rt, c, 0xffff, lo, hi);
    }
    if (full < c1) Block<T, 1, true, A>(g, k, xt, yt, rt, full, m, lo, hi);
  }
}

// The interior (all kw x kh taps inside the image) of a tile of T = kTile pixels, one block of
// 16 channels from c, kernel width KW and stride S known: each input pixel of a tap row is loaded
// once and multiplied into every output pixel it feeds (T * S + KW - S loads per row instead of
// T * KW; the L1 loads, not the FMAs, bound the generic Block).
template <int KW, int S, bool kMask, Act A>
FERRY_AVX512 inline __attribute__((always_inline)) void WideBlock(const Args& g, const Taps& k,
                                                                  const float* xt, float* yt,
                                                                  const float* rt, int64_t c,
                                                                  __mmask16 m, __m512 lo,
                                                                  __m512 hi) {
  constexpr int T = kTile, J = (T - 1) * S + KW;
  const int64_t C = g.s->c, cp = g.cp;
  __m512 acc[T];
  const __m512 bv = _mm512_load_ps(g.bias + c);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = bv;
  const float* xr = xt + c;
  const float* wt = k.w + c;
  for (int64_t ky = 0; ky < k.nky; ++ky, xr += k.rs, wt += k.wr) {
    __m512 wv[KW];
#pragma GCC unroll 8
    for (int kx = 0; kx < KW; ++kx) wv[kx] = _mm512_load_ps(wt + kx * cp);
#pragma GCC unroll 32
    for (int j = 0; j < J; ++j) {
      const float* q = xr + j * C;
      __m512 xv = kMask ? _mm512_maskz_loadu_ps(m, q) : _mm512_loadu_ps(q);
      // One load into a register: without this GCC folds the load into every FMA again.
      asm("" : "+v"(xv));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int kx = j - t * S;
        if (kx >= 0 && kx < KW) acc[t] = _mm512_fmadd_ps(xv, wv[kx], acc[t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    __m512 v = acc[t];
    if (rt) {
      const float* q = rt + t * C + c;
      v = _mm512_add_ps(v, kMask ? _mm512_maskz_loadu_ps(m, q) : _mm512_loadu_ps(q));
    }
    v = Apply<A>(v, lo, hi);
    if (kMask)
      _mm512_mask_storeu_ps(yt + t * C + c, m, v);
    else
      _mm512_storeu_ps(yt + t * C + c, v);
  }
}

template <int KW, int S, Act A>
FERRY_AVX512 void WideStrip(const Args& g, const Taps& k, int64_t tiles, int64_t c0, int64_t c1) {
  const int64_t C = g.s->c;
  const int64_t full = c0 + (c1 - c0) / 16 * 16;
  const __mmask16 m = static_cast<__mmask16>((1u << ((c1 - full) & 15)) - 1);
  const __m512 lo = _mm512_set1_ps(g.post.lo), hi = _mm512_set1_ps(g.post.hi);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const float* xt = k.x + tile * kTile * k.ps;
    float* yt = k.y + tile * kTile * C;
    const float* rt = k.r ? k.r + tile * kTile * C : nullptr;
    for (int64_t c = c0; c < full; c += 16)
      WideBlock<KW, S, false, A>(g, k, xt, yt, rt, c, 0xffff, lo, hi);
    if (full < c1) WideBlock<KW, S, true, A>(g, k, xt, yt, rt, full, m, lo, hi);
  }
}

// Full tiles of the interior with WideStrip where KW and S have one; false: not done.
template <Act A>
FERRY_AVX512 bool Wide(const Args& g, const Taps& k, int64_t tiles, int64_t c0, int64_t c1) {
  const DwShape& s = *g.s;
  if (s.kw == 3 && s.sw == 1) return WideStrip<3, 1, A>(g, k, tiles, c0, c1), true;
  if (s.kw == 3 && s.sw == 2) return WideStrip<3, 2, A>(g, k, tiles, c0, c1), true;
  if (s.kw == 5 && s.sw == 1) return WideStrip<5, 1, A>(g, k, tiles, c0, c1), true;
  if (s.kw == 5 && s.sw == 2) return WideStrip<5, 2, A>(g, k, tiles, c0, c1), true;
  return false;
}

template <Act A>
FERRY_AVX512 void GroupN(int n, const Args& g, const Taps& k, int64_t tiles, int64_t c0,
                         int64_t c1) {
  switch (n) {
    case 8:
      return Strip<8, 1, A>(g, k, tiles, c0, c1);
    case 7:
      return Strip<7, 1, A>(g, k, tiles, c0, c1);
    case 6:
      return Strip<6, 1, A>(g, k, tiles, c0, c1);
    case 5:
      return Strip<5, 1, A>(g, k, tiles, c0, c1);
    case 4:
      return Strip<4, 2, A>(g, k, tiles, c0, c1);
    case 3:
      return Strip<3, 2, A>(g, k, tiles, c0, c1);
    case 2:
      return Strip<2, 4, A>(g, k, tiles, c0, c1);
    case 1:
      return Strip<1, 4, A>(g, k, tiles, c0, c1);
    default:
      return;
  }
}

// Output row oy of image n.
template <Act A>
FERRY_AVX512 void Row(const Args& g, int64_t n, int64_t oy) {
  const DwShape& s = *g.s;
  const int64_t C = s.c, cp = g.cp;
  const int64_t iy0 = oy * s.sh - s.pad_t;
  const int64_t ky0 = std::clamp<int64_t>(-iy0, 0, s.kh);
  const int64_t ky1 = std::clamp<int64_t>(s.h - iy0, ky0, s.kh);
  const int64_t nky = ky1 - ky0;
  const int64_t rs = s.w * C, ps = s.sw * C, wr = s.kw * cp;
  // Row ky0 of the input (only read when nky > 0).
  const float* xrow = g.x + (n * s.h + (nky > 0 ? iy0 + ky0 : 0)) * rs;
  const float* wrow = g.w + ky0 * wr;
  float* yrow = g.y + (n * s.oh + oy) * s.ow * C;
  const float* rrow = g.res ? g.res + (n * s.oh + oy) * s.ow * C : nullptr;
  // Interior pixels [lo, hi): every column tap inside the image.
  const int64_t lo = std::min(s.ow, (s.pad_l + s.sw - 1) / s.sw);
  const int64_t last = s.w - s.kw + s.pad_l;  // the largest ox * sw with all taps inside
  const int64_t hi = last < 0 ? lo : std::clamp(last / s.sw + 1, lo, s.ow);
  auto border = [&](int64_t ox, int64_t c0, int64_t c1) {
    const int64_t ix0 = ox * s.sw - s.pad_l;
    const int64_t kx0 = std::clamp<int64_t>(-ix0, 0, s.kw);
    const int64_t kx1 = std::clamp<int64_t>(s.w - ix0, kx0, s.kw);
    const int64_t nkx = kx1 - kx0;
    const Taps k{nkx > 0 && nky > 0 ? xrow + (ix0 + kx0) * C : g.x,
                 wrow + kx0 * cp,
                 ps,
                 rs,
                 wr,
                 nkx > 0 ? nky : 0,
                 nkx,
                 yrow + ox * C,
                 rrow ? rrow + ox * C : nullptr};
    GroupN<A>(1, g, k, 1, c0, c1);
  };
  const int64_t full = (hi - lo) / kTile, rest = (hi - lo) % kTile;
  // Channels in chunks whose weights fit in L1 (all of them up to 448 with 3x3), each over the
  // whole row.
  const int64_t chunk = std::max<int64_t>(64, kWeightBytes / (4 * s.kh * s.kw) / 16 * 16);
  for (int64_t c0 = 0; c0 < C; c0 += chunk) {
    const int64_t c1 = std::min(C, c0 + chunk);
    for (int64_t ox = 0; ox < lo; ++ox) border(ox, c0, c1);
    auto strip = [&](int64_t ox, int cnt, int64_t tiles) {
      const Taps k{xrow + (ox * s.sw - s.pad_l) * C, wrow, ps, rs, wr, nky, s.kw, yrow + ox * C,
                   rrow ? rrow + ox * C : nullptr};
      GroupN<A>(cnt, g, k, tiles, c0, c1);
    };
    if (full > 0) {
      const Taps k{xrow + (lo * s.sw - s.pad_l) * C, wrow, ps, rs, wr, nky, s.kw, yrow + lo * C,
                   rrow ? rrow + lo * C : nullptr};
      if (!Wide<A>(g, k, full, c0, c1)) strip(lo, kTile, full);
    }
    if (rest > 0) strip(lo + full * kTile, static_cast<int>(rest), 1);
    for (int64_t ox = hi; ox < s.ow; ++ox) border(ox, c0, c1);
  }
}

// Copies an [N, C, H, W] tensor stored in layout `from` into NHWC at dst.
void ToNhwc(const float* src, Layout from, int64_t N, int64_t C, int64_t H, int64_t W, float* dst) {
  ParallelRange(N * H, 4, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t n = item / H, yy = item % H;
      float* d = dst + item * W * C;
      if (from == Layout::kPlain) {
        for (int64_t c = 0; c < C; ++c) {
          const float* sp = src + ((n * C + c) * H + yy) * W;
          for (int64_t xx = 0; xx < W; ++xx) d[xx * C + c] = sp[xx];
        }
      } else {
        for (int64_t xx = 0; xx < W; ++xx)
          for (int64_t c = 0; c < C; ++c)
            d[xx * C + c] = src[LayoutIndex(from, C, H, W, n, c, yy, xx)];
      }
    }
  });
}

// The NHWC tensor src into layout `to` at dst.
void FromNhwc(const float* src, Layout to, int64_t N, int64_t C, int64_t H, int64_t W, float* dst) {
  ParallelRange(N * C, 4, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t n = item / C, c = item % C;
      const float* sp = src + n * H * W * C + c;
      if (to == Layout::kPlain) {
        float* d = dst + item * H * W;
        for (int64_t i = 0; i < H * W; ++i) d[i] = sp[i * C];
      } else {
        for (int64_t i = 0; i < H * W; ++i)
          dst[LayoutIndex(to, C, H, W, n, c, i / W, i % W)] = sp[i * C];
      }
    }
  });
}

// The activation of `f` as the tiles apply it.
Post PostOf(const Fusion& f) {
  Post p;
  switch (f.act) {
    case Fusion::Act::kSwish:
      p.act = Act::kSwish;
      break;
    case Fusion::Act::kHardSwish:
      p.act = Act::kHardSwish;
      break;
    default:
      p.act = Act::kClamp;
      std::tie(p.lo, p.hi) = f.bounds();
      break;
  }
  return p;
}

using RowFn = void (*)(const Args&, int64_t, int64_t);
RowFn RowFor(Act a) {
  return a == Act::kSwish       ? Row<Act::kSwish>
         : a == Act::kHardSwish ? Row<Act::kHardSwish>
                                : Row<Act::kClamp>;
}

}  // namespace

bool DwConvSupported() {
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu && Mode() != 0;
}

void SetDwConvMode(int mode) {
  g_mode.store(mode);
}

bool DwConvWanted(const DwShape& s, const Fusion& f) {
  if (!DwConvSupported()) return false;
  if (s.sh < 1 || s.sh > 2 || s.sw < 1 || s.sw > 2 || s.kh < 1 || s.kw < 1 || s.n < 1 || s.c < 1 ||
      s.oh < 1 || s.ow < 1)
    return false;
  if (Mode() == 1) return true;
  // Measured against oneDNN's brdgmm_dw (src/ops/cpu/README.md): 3x3 and 5x5 where a row has at
  // least one full interior tile (7x7 images with 5x5, or 14 -> 7 at stride 2, lost), and 3x3
  // at stride 2 only with SiLU / HardSwish (with a clamp, MobileNetV3's 112 -> 56 lost: memory
  // bound, and the cheaper activation no longer makes up for it).
  if (!((s.kh == 3 && s.kw == 3) || (s.kh == 5 && s.kw == 5))) return false;
  const int64_t lo = std::min(s.ow, (s.pad_l + s.sw - 1) / s.sw);
  const int64_t last = s.w - s.kw + s.pad_l;
  const int64_t hi = last < 0 ? lo : std::clamp(last / s.sw + 1, lo, s.ow);
  if (hi - lo < kTile) return false;
  const bool gate = f.act == Fusion::Act::kSwish || f.act == Fusion::Act::kHardSwish;
  return !(s.kw == 3 && s.sw == 2 && !gate);
}

uint64_t DwConvRuns() {
  return g_runs.load();
}

DwConv::DwConv(const DwShape& s, Layout in, Layout out, Layout res, const Fusion& fusion)
    : s_(s), in_(in), out_(out), res_(res), fusion_(fusion) {
  cp_ = (s.c + 15) / 16 * 16;
  packed_floats_ = static_cast<size_t>(s.kh * s.kw * cp_);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off += Align64(bytes);
    return at;
  };
  const size_t out_bytes = sizeof(float) * s.n * s.c * s.oh * s.ow;
  off_x_ = take(in_ == Layout::kNhwc ? 0 : sizeof(float) * s.n * s.c * s.h * s.w);
  off_y_ = take(out_ == Layout::kNhwc ? 0 : out_bytes);
  off_r_ = take(fusion_.sum && res_ != Layout::kNhwc ? out_bytes : 0);
  off_bias_ = take(sizeof(float) * cp_);
  total_ = off;
}

PackedPtr DwConv::Pack(const float* w) const {
  auto packed = std::make_shared<PackedFloats>(packed_floats_);
  float* d = packed->data();
  const int64_t taps = s_.kh * s_.kw;
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t c = 0; c < cp_; ++c) d[t * cp_ + c] = c < s_.c ? w[c * taps + t] : 0.f;
  return packed;
}

std::string DwConv::PackTag() const {
  return fmt::format("dw {}x{} c{}", s_.kh, s_.kw, s_.c);
}

void DwConv::RunRows(const DwShape& band, const float* x, const float* bias_padded, float* y,
                     int64_t oy_begin, int64_t oy_end) const {
  Args g;
  g.s = &band;
  g.cp = cp_;
  g.w = w_->data();
  g.bias = bias_padded;
  g.x = x;
  g.res = nullptr;
  g.y = y;
  g.post = PostOf(fusion_);
  const RowFn row = RowFor(g.post.act);
  for (int64_t oy = oy_begin; oy < oy_end; ++oy) row(g, 0, oy);
}

void DwConv::Run(const float* x, const float* bias, const float* res, float* y,
                 void* scratch) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  auto* sb = static_cast<std::byte*>(scratch);
  const DwShape& s = s_;
  Args g;
  g.s = &s_;
  g.cp = cp_;
  g.w = w_->data();
  auto* bp = reinterpret_cast<float*>(sb + off_bias_);
  for (int64_t c = 0; c < cp_; ++c) bp[c] = bias && c < s.c ? bias[c] : 0.f;
  g.bias = bp;
  g.x = x;
  if (in_ != Layout::kNhwc) {
    auto* xs = reinterpret_cast<float*>(sb + off_x_);
    ToNhwc(x, in_, s.n, s.c, s.h, s.w, xs);
    g.x = xs;
  }
  g.res = nullptr;
  if (fusion_.sum) {
    g.res = res;
    if (res_ != Layout::kNhwc) {  // (before y is written: res may alias it)
      auto* rs = reinterpret_cast<float*>(sb + off_r_);
      ToNhwc(res, res_, s.n, s.c, s.oh, s.ow, rs);
      g.res = rs;
    }
  }
  g.y = out_ == Layout::kNhwc ? y : reinterpret_cast<float*>(sb + off_y_);
  g.post = PostOf(fusion_);
  const RowFn row = RowFor(g.post.act);
  ParallelRange(s.n * s.oh, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) row(g, item / s.oh, item % s.oh);
  });
  if (out_ != Layout::kNhwc) FromNhwc(g.y, out_, s.n, s.c, s.oh, s.ow, y);
}

}  // namespace ferry::ops::cpu
