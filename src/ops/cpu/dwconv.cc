// Depthwise 2-D convolution with an own AVX-512 kernel (see dwconv.h).
#include "ops/cpu/dwconv.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/winograd.h"

#define FERRY_AVX512 __attribute__((target("avx512f,avx2,fma")))

namespace ferry::ops::cpu {

namespace {

std::atomic<uint64_t> g_runs{0};
std::atomic<int> g_mode{-1};  // SetDwConvMode

constexpr int kTile = 8;    // output pixels per register tile
constexpr int kChunk = 64;  // channels per pass over a row

size_t Align64(size_t b) {
  return (b + 63) / 64 * 64;
}

// -1 auto, 0 off, 1 forced on: the setter, else FERRY_DWCONV (read once).
int Mode() {
  const int m = g_mode.load();
  if (m >= 0) return m;
  static const int env = [] {
    const char* e = std::getenv("FERRY_DWCONV");
    if (!e) return -1;
    const std::string v(e);
    return v == "onednn" ? 0 : v == "own" ? 1 : -1;
  }();
  return env;
}

enum class Act : uint8_t { kClamp, kSwish, kHardSwish };

struct Post {
  Act act = Act::kClamp;
  float lo = 0, hi = 0;  // kClamp bounds (+-inf: none)
};

// x * sigmoid(x): exp(-x) as 2^n * p(r) (vec_impl.inc's polynomial, the scaling by scalef, which
// gives 0 / inf outside the float range), then x * (1 / (1 + e)) with the reciprocal refined
// once from rcp14 (~1e-7 relative; -x clamped to 80 so 1 + e and its reciprocal stay normal). A
// NaN x stays NaN (the product).
FERRY_AVX512 inline __m512 Swish(__m512 v) {
  const __m512 nx =
      _mm512_maskz_min_ps(0xffff, _mm512_sub_ps(_mm512_setzero_ps(), v), _mm512_set1_ps(80.f));
  const __m512 n =
      _mm512_maskz_roundscale_ps(0xffff, _mm512_mul_ps(nx, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), nx);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  const __m512 d = _mm512_add_ps(_mm512_maskz_scalef_ps(0xffff, p, n), _mm512_set1_ps(1.f));
  __m512 q = _mm512_maskz_rcp14_ps(0xffff, d);
  q = _mm512_mul_ps(q, _mm512_fnmadd_ps(d, q, _mm512_set1_ps(2.f)));
  return _mm512_mul_ps(v, q);
}

FERRY_AVX512 inline __m512 Apply(const Post& post, __m512 v) {
  switch (post.act) {
    case Act::kSwish:
      return Swish(v);
    case Act::kHardSwish: {
      const __m512 g = _mm512_fmadd_ps(v, _mm512_set1_ps(1.f / 6.f), _mm512_set1_ps(0.5f));
      // max/min return their second operand when either is NaN: a NaN v gives g = NaN -> NaN.
      const __m512 gc = _mm512_maskz_min_ps(0xffff, _mm512_set1_ps(1.f),
                                            _mm512_maskz_max_ps(0xffff, _mm512_setzero_ps(), g));
      return _mm512_mul_ps(v, gc);
    }
    case Act::kClamp:
      break;
  }
  return _mm512_maskz_min_ps(0xffff, _mm512_set1_ps(post.hi),
                             _mm512_maskz_max_ps(0xffff, _mm512_set1_ps(post.lo), v));
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

// Where a group of output pixels reads: x at the first valid tap (row ky0, column kx0) of the
// first pixel, channel 0; w at tap (ky0, kx0); nky x nkx taps; input pixels ps floats apart,
// rows rs floats apart in x, wr floats apart in w. y / r (residual or null) at the first pixel.
struct Taps {
  const float* x;
  const float* w;
  int64_t ps, rs, wr, nky, nkx;
  float* y;
  const float* r;
};

// T output pixels x B channel blocks from channel c0 (T * B independent accumulators: few
// pixels get more blocks, so the chains of FMAs overlap); kMask: B == 1, the last C % 16
// channels.
template <int T, int B, bool kMask>
FERRY_AVX512 void Tile(const Args& g, const Taps& k, int64_t c0) {
  const int64_t C = g.s->c, cp = g.cp;
  const __mmask16 m = kMask ? static_cast<__mmask16>((1u << (C - c0)) - 1) : 0xffff;
  __m512 acc[T][B];
#pragma GCC unroll 8
  for (int b = 0; b < B; ++b) {
    const __m512 bv = _mm512_load_ps(g.bias + c0 + b * 16);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t][b] = bv;
  }
  const float* xr = k.x + c0;
  const float* wt = k.w + c0;
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
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      __m512 v = acc[t][b];
      const int64_t o = t * C + c0 + b * 16;
      if (k.r)
        v = kMask ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, k.r + o))
                  : _mm512_add_ps(v, _mm512_loadu_ps(k.r + o));
      v = Apply(g.post, v);
      if (kMask)
        _mm512_mask_storeu_ps(k.y + o, m, v);
      else
        _mm512_storeu_ps(k.y + o, v);
    }
}

// Channels [c0, c1) of T pixels, kB blocks at a time, then 2, 1, then the masked tail.
template <int T, int kB>
FERRY_AVX512 void Group(const Args& g, const Taps& k, int64_t c0, int64_t c1) {
  const int64_t full = c0 + (c1 - c0) / 16 * 16;
  int64_t c = c0;
  for (; c + kB * 16 <= full; c += kB * 16) Tile<T, kB, false>(g, k, c);
  if constexpr (kB > 2) {
    if (c + 32 <= full) {
      Tile<T, 2, false>(g, k, c);
      c += 32;
    }
  }
  if constexpr (kB > 1) {
    for (; c < full; c += 16) Tile<T, 1, false>(g, k, c);
  }
  if (full < c1) Tile<T, 1, true>(g, k, full);
}

FERRY_AVX512 void GroupN(int n, const Args& g, const Taps& k, int64_t c0, int64_t c1) {
  switch (n) {
    case 8:
      return Group<8, 1>(g, k, c0, c1);
    case 7:
      return Group<7, 1>(g, k, c0, c1);
    case 6:
      return Group<6, 1>(g, k, c0, c1);
    case 5:
      return Group<5, 1>(g, k, c0, c1);
    case 4:
      return Group<4, 2>(g, k, c0, c1);
    case 3:
      return Group<3, 2>(g, k, c0, c1);
    case 2:
      return Group<2, 4>(g, k, c0, c1);
    case 1:
      return Group<1, 4>(g, k, c0, c1);
    default:
      return;
  }
}

// Output row oy of image n.
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
    GroupN(1, g, k, c0, c1);
  };
  // kChunk channels at a time over the whole row: their weights stay in L1.
  for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
    const int64_t c1 = std::min(C, c0 + kChunk);
    for (int64_t ox = 0; ox < lo; ++ox) border(ox, c0, c1);
    for (int64_t ox = lo; ox < hi; ox += kTile) {
      const int cnt = static_cast<int>(std::min<int64_t>(kTile, hi - ox));
      const Taps k{xrow + (ox * s.sw - s.pad_l) * C, wrow, ps, rs, wr, nky, s.kw, yrow + ox * C,
                   rrow ? rrow + ox * C : nullptr};
      GroupN(cnt, g, k, c0, c1);
    }
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

}  // namespace

bool DwConvSupported() {
  static const bool cpu = __builtin_cpu_supports("avx512f");
  return cpu && Mode() != 0;
}

void SetDwConvMode(int mode) {
  g_mode.store(mode);
}

bool DwConvWanted(const DwShape& s) {
  if (!DwConvSupported()) return false;
  if (s.sh < 1 || s.sh > 2 || s.sw < 1 || s.sw > 2 || s.kh < 1 || s.kw < 1 || s.n < 1 || s.c < 1 ||
      s.oh < 1 || s.ow < 1)
    return false;
  if (Mode() == 1) return true;
  // Measured faster than oneDNN's brdgmm_dw (src/ops/cpu/README.md).
  return (s.kh == 3 && s.kw == 3) || (s.kh == 5 && s.kw == 5);
}

uint64_t DwConvRuns() {
  return g_runs.load();
}

DwConv::DwConv(const DwShape& s, Layout in, Layout out, Layout res, const Fusion& fusion)
    : s_(s), in_(in), out_(out), res_(res), fusion_(fusion) {
  cp_ = (s.c + 15) / 16 * 16;
  w_.assign(static_cast<size_t>(s.kh * s.kw * cp_ + 16), 0.f);
  const auto addr = reinterpret_cast<uintptr_t>(w_.data());
  w_off_ = ((64 - addr % 64) % 64) / sizeof(float);
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

void DwConv::PackWeights(const float* w) {
  float* d = w_.data() + w_off_;
  const int64_t taps = s_.kh * s_.kw;
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t c = 0; c < cp_; ++c) d[t * cp_ + c] = c < s_.c ? w[c * taps + t] : 0.f;
}

void DwConv::Run(const float* x, const float* bias, const float* res, float* y,
                 void* scratch) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  auto* sb = static_cast<std::byte*>(scratch);
  const DwShape& s = s_;
  Args g;
  g.s = &s_;
  g.cp = cp_;
  g.w = w_.data() + w_off_;
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
  switch (fusion_.act) {
    case Fusion::Act::kSwish:
      g.post.act = Act::kSwish;
      break;
    case Fusion::Act::kHardSwish:
      g.post.act = Act::kHardSwish;
      break;
    default:
      g.post.act = Act::kClamp;
      std::tie(g.post.lo, g.post.hi) = fusion_.bounds();
      break;
  }
  ParallelRange(s.n * s.oh, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) Row(g, item / s.oh, item % s.oh);
  });
  if (out_ != Layout::kNhwc) FromNhwc(g.y, out_, s.n, s.c, s.oh, s.ow, y);
}

}  // namespace ferry::ops::cpu
