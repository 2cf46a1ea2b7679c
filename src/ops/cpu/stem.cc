// A network's first convolution (few input channels, plain input) with an own AVX-512 kernel
// (see stem.h).
#include "ops/cpu/stem.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <tuple>

#include "ops/cpu/act512.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/winograd.h"

namespace ferry::ops::cpu {

namespace {

using act512::Act;
using act512::Apply;

std::atomic<uint64_t> g_runs{0};

// FERRY_STEM: onednn (never), own (every shape the kernel takes), else the rule; read once.
std::atomic<int> g_forced{-1};  // SetStemModeForTesting

int Mode() {
  const int f = g_forced.load();
  if (f >= 0) return f;
  static const int m = KernelModeFromEnv("FERRY_STEM");
  return m;
}

bool Off() {
  return Mode() == 0;
}

bool ForcedOn() {
  return Mode() == 1;
}

struct Args {
  const StemShape* s;
  const float* x;
  const float* w;  // [c][kh][kw][P * 16]
  const float* bias;
  float* y;
  float lo, hi;
  __mmask16 tail;  // the last vector's channels
};

// Output row (n, oy), pixels [ox0, ox0 + R). kBorder: some tap of some pixel falls outside the
// row (checked per pixel; the others read without checks).
template <int R, int P, Act A, bool kBorder>
FERRY_AVX512 inline __attribute__((always_inline)) void Tile(const Args& g, int64_t n, int64_t oy,
                                                             int64_t ox0) {
  const StemShape& s = *g.s;
  __m512 acc[R][P];
#pragma GCC unroll 4
  for (int j = 0; j < P; ++j) {
    const __mmask16 mk = j == P - 1 ? g.tail : static_cast<__mmask16>(0xffff);
    const __m512 b = g.bias ? _mm512_maskz_loadu_ps(mk, g.bias + j * 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) acc[r][j] = b;
  }
  const int64_t ix0 = ox0 * s.sw - s.pad_l;
  for (int64_t c = 0; c < s.c; ++c) {
    for (int64_t ky = 0; ky < s.kh; ++ky) {
      const int64_t iy = oy * s.sh - s.pad_t + ky;
      if (iy < 0 || iy >= s.h) continue;
      const float* row = g.x + ((n * s.c + c) * s.h + iy) * s.w;
      const float* wt = g.w + ((c * s.kh + ky) * s.kw) * P * 16;
      for (int64_t kx = 0; kx < s.kw; ++kx) {
        __m512 w[P];
#pragma GCC unroll 4
        for (int j = 0; j < P; ++j) w[j] = _mm512_load_ps(wt + kx * P * 16 + j * 16);
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
          const int64_t ix = ix0 + r * s.sw + kx;
          float v;
          if constexpr (kBorder) {
            v = ix >= 0 && ix < s.w ? row[ix] : 0.f;
          } else {
            v = row[ix];
          }
          const __m512 a = _mm512_set1_ps(v);
#pragma GCC unroll 4
          for (int j = 0; j < P; ++j) acc[r][j] = _mm512_fmadd_ps(a, w[j], acc[r][j]);
        }
      }
    }
  }
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* yp = g.y + ((n * s.oh + oy) * s.ow + ox0 + r) * s.k;
#pragma GCC unroll 4
    for (int j = 0; j < P; ++j) {
      const __mmask16 mk = j == P - 1 ? g.tail : static_cast<__mmask16>(0xffff);
      _mm512_mask_storeu_ps(yp + j * 16, mk, Apply<A>(acc[r][j], lo, hi));
    }
  }
}

constexpr int RowsFor(int p) {
  return p == 4 ? 6 : p == 3 ? 8 : 12;
}

template <int P, Act A>
FERRY_AVX512 void Rows(const Args& g, int64_t r0, int64_t r1) {
  constexpr int R = RowsFor(P);
  const StemShape& s = *g.s;
  // Output columns whose taps all fall inside the row: [in0, in1).
  const int64_t in0 = std::min(s.ow, (s.pad_l + s.sw - 1) / s.sw);
  const int64_t last = s.w + s.pad_l - s.kw;  // the last pixel's leftmost tap, if >= 0
  const int64_t in1 = last < 0 ? in0 : std::max(in0, std::min(s.ow, last / s.sw + 1));
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / s.oh, oy = row % s.oh;
    int64_t ox = 0;
    for (; ox < in0; ++ox) Tile<1, P, A, true>(g, n, oy, ox);
    for (; ox + R <= in1; ox += R) Tile<R, P, A, false>(g, n, oy, ox);
    for (; ox < in1; ++ox) Tile<1, P, A, false>(g, n, oy, ox);
    for (; ox < s.ow; ++ox) Tile<1, P, A, true>(g, n, oy, ox);
  }
}

template <Act A>
void (*RowsOf(int64_t vecs))(const Args&, int64_t, int64_t) {
  switch (vecs) {
    case 4:
      return Rows<4, A>;
    case 3:
      return Rows<3, A>;
    case 2:
      return Rows<2, A>;
    default:
      return Rows<1, A>;
  }
}

}  // namespace

bool StemSupported() {
  return !Off() && WinogradAvx512();
}

bool StemWanted(const StemShape& s, const Fusion& fusion) {
  if (!StemSupported() || fusion.sum || fusion.act == Fusion::Act::kGelu || s.c < 1 || s.c > 4 ||
      s.k < 1 || s.k > 64 || s.kh < 1 || s.kw < 1 || s.sh < 1 || s.sw < 1 || s.oh <= 0 ||
      s.ow <= 0 || s.n <= 0)
    return false;
  if (ForcedOn()) return s.kh <= 11 && s.kw <= 11;
  // Measured (first conv per model, 1 thread, medians of 5 alternating rounds, own / oneDNN):
  // 3x3 stride 2 with SiLU / HardSwish 0.72 (EfficientNet-B0, K 32) / 0.83 (MobileNetV3-L, K
  // 16), with Clip / Relu 0.87 (MobileNetV2, K 32), 0.86 (RegNetY, K 32), 0.96 (ShuffleNetV2,
  // K 24) but 1.29 (MnasNet, K 16); 7x7 1.06 (ResNet-18, K 64), 0.97 (GoogLeNet), 11x11 stride 4
  // 1.08 (AlexNet): larger kernels and a plain / Relu K 16 stay on oneDNN.
  const bool gate = fusion.act == Fusion::Act::kSwish || fusion.act == Fusion::Act::kHardSwish;
  return s.kh <= 3 && s.kw <= 3 && (s.k >= 24 || gate);
}

void SetStemModeForTesting(int mode) {
  g_forced.store(mode);
}

uint64_t StemRuns() {
  return g_runs.load();
}

StemConv::StemConv(const StemShape& s, const Fusion& fusion) : s_(s), fusion_(fusion) {
  vecs_ = (s.k + 15) / 16;
  w_.assign(static_cast<size_t>(s.c * s.kh * s.kw * vecs_ * 16 + 16), 0.f);
  const auto addr = reinterpret_cast<uintptr_t>(w_.data());
  w_align_ = ((64 - addr % 64) % 64) / sizeof(float);
}

void StemConv::PackWeights(const float* w) {
  float* dst = w_.data() + w_align_;
  const int64_t width = vecs_ * 16, taps = s_.kh * s_.kw;
  for (int64_t c = 0; c < s_.c; ++c)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t j = 0; j < width; ++j)
        dst[(c * taps + t) * width + j] = j < s_.k ? w[(j * s_.c + c) * taps + t] : 0.f;
}

void StemConv::Run(const float* x, const float* bias, float* y) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  Args g;
  g.s = &s_;
  g.x = x;
  g.w = w_.data() + w_align_;
  g.bias = bias;
  g.y = y;
  std::tie(g.lo, g.hi) = fusion_.bounds();
  g.tail = s_.k % 16 == 0 ? static_cast<__mmask16>(0xffff)
                          : static_cast<__mmask16>((1u << static_cast<unsigned>(s_.k % 16)) - 1);
  void (*rows)(const Args&, int64_t, int64_t) =
      fusion_.act == Fusion::Act::kSwish       ? RowsOf<Act::kSwish>(vecs_)
      : fusion_.act == Fusion::Act::kHardSwish ? RowsOf<Act::kHardSwish>(vecs_)
                                               : RowsOf<Act::kClamp>(vecs_);
  ParallelRange(s_.n * s_.oh, 2, [&](int64_t b, int64_t e) { rows(g, b, e); });
}

}  // namespace ferry::ops::cpu
