// Grouped 3x3 convolution with 4 / 8 / 16 channels per group, own AVX-512 kernel (see grouped.h).
#include "ops/cpu/grouped.h"

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
std::atomic<int> g_mode{-1};

constexpr int kTile = 8;  // output pixels per register tile

alignas(64) const float kZeros[16] = {};

// Permutation indices for G channels per group, built at compile time: row j sends lane l
// channel j of its group, (l / G) * G + j.
template <int G>
struct LaneTable {
  alignas(64) int32_t v[G][16];
};
template <int G>
constexpr LaneTable<G> MakeLanes() {
  LaneTable<G> t{};
  for (int j = 0; j < G; ++j)
    for (int l = 0; l < 16; ++l) t.v[j][l] = l / G * G + j;
  return t;
}
template <int G>
constexpr LaneTable<G> kLanes = MakeLanes<G>();

struct Args {
  const DwShape* s;
  const float* x;
  const float* w;     // packed [C / 16][9][G][16]
  const float* bias;  // [C] or null
  const float* res;   // NHWC or null
  float* y;
  float lo, hi;
};

// Output row (n, oy), channels [v * 16, v * 16 + 16), G channels per group, stride S.
template <int G, int S, Act A>
FERRY_AVX512 void Row(const Args& g, int64_t n, int64_t oy, int64_t v) {
  constexpr int kIn = (kTile - 1) * S + 3;  // input pixels a tile's tap row reads
  const DwShape& s = *g.s;
  const int64_t C = s.c;
  const float* wv = g.w + v * 9 * G * 16;
  // The last vector of C % 16 channels (whole groups) masked: its other lanes read and hold 0.
  const __mmask16 m = act512::FirstLanes(C - v * 16);
  const __m512 b = g.bias ? _mm512_maskz_loadu_ps(m, g.bias + v * 16) : _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
  for (int64_t ox0 = 0; ox0 < s.ow; ox0 += kTile) {
    __m512 acc[kTile];
#pragma GCC unroll 8
    for (int t = 0; t < kTile; ++t) acc[t] = b;
    for (int ky = 0; ky < 3; ++ky) {
      const int64_t iy = oy * S + ky - s.pad_t;
      if (iy < 0 || iy >= s.h) continue;
      const float* row = g.x + ((n * s.h + iy) * s.w) * C + v * 16;
      const float* px[kIn];
      for (int i = 0; i < kIn; ++i) {
        const int64_t ix = ox0 * S - s.pad_l + i;
        px[i] = ix >= 0 && ix < s.w ? row + ix * C : kZeros;
      }
      const float* wk = wv + ky * 3 * G * 16;
      for (int j = 0; j < G; ++j) {
        __m512 p[kIn];
        if constexpr (G == 16) {
#pragma GCC unroll 17
          for (int i = 0; i < kIn; ++i) p[i] = _mm512_set1_ps(px[i][j]);  // (C % 16 == 0)
        } else {
          const __m512i lanes = _mm512_load_si512(kLanes<G>.v[j]);
#pragma GCC unroll 17
          for (int i = 0; i < kIn; ++i)
            p[i] = _mm512_maskz_permutexvar_ps(0xffff, lanes, _mm512_maskz_loadu_ps(m, px[i]));
        }
#pragma GCC unroll 3
        for (int kx = 0; kx < 3; ++kx) {
          const __m512 w = _mm512_load_ps(wk + (kx * G + j) * 16);
#pragma GCC unroll 8
          for (int t = 0; t < kTile; ++t) acc[t] = _mm512_fmadd_ps(p[t * S + kx], w, acc[t]);
        }
      }
    }
    const int64_t count = std::min<int64_t>(kTile, s.ow - ox0);
    const int64_t at = ((n * s.oh + oy) * s.ow + ox0) * C + v * 16;
    for (int64_t t = 0; t < count; ++t) {
      __m512 r = acc[t];
      if (g.res) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, g.res + at + t * C));
      _mm512_mask_storeu_ps(g.y + at + t * C, m, Apply<A>(r, lo, hi));
    }
  }
}

using RowFn = void (*)(const Args&, int64_t, int64_t, int64_t);

template <int G, int S>
RowFn ForAct(Fusion::Act a) {
  return a == Fusion::Act::kSwish       ? Row<G, S, Act::kSwish>
         : a == Fusion::Act::kHardSwish ? Row<G, S, Act::kHardSwish>
                                        : Row<G, S, Act::kClamp>;
}

template <int G>
RowFn ForStride(int64_t s, Fusion::Act a) {
  return s == 1 ? ForAct<G, 1>(a) : ForAct<G, 2>(a);
}

int EnvMode() {
  static const int m = KernelModeFromEnv("FERRY_GROUPED");
  return m;
}

}  // namespace

void SetGroupedMode(int mode) {
  g_mode = mode;
}

bool GroupedWanted(const DwShape& s, int64_t groups, int64_t k) {
  const int forced = g_mode.load(std::memory_order_relaxed);
  const int mode = forced >= 0 ? forced : EnvMode();
  if (mode == 0 || !WinogradAvx512() || groups < 2 || s.c % groups != 0 || k != s.c) return false;
  const int64_t per = s.c / groups;
  const bool shape = s.kh == 3 && s.kw == 3 && s.sh == s.sw && (s.sh == 1 || s.sh == 2) &&
                     s.n > 0 && s.oh > 0 && s.ow > 0;
  if (!shape || !(per == 4 || per == 8 || per == 16)) return false;
  if (mode == 1) return true;
  // Per node against oneDNN (NHWC), 1 thread, medians of 6 alternating rounds: 4 per group
  // (ResNeXt-50's 56x56 stage) 0.52-0.55; 8 per group at stride 1 on 256 channels (its 28x28
  // stage) 0.85-0.88, at stride 2 0.99; RegNet-Y-400MF's 8-wide groups on 104 / 208 / 440
  // channels lost (1.10-1.29 at stride 1, 1.26-1.57 at stride 2) and 16 per group (ResNeXt's
  // 14x14 stage) 1.32-1.39: those stay on oneDNN.
  return per == 4 || (per == 8 && s.sh == 1 && s.c % 16 == 0 && s.c >= 256);
}

uint64_t GroupedRuns() {
  return g_runs.load();
}

GroupedConv::GroupedConv(const DwShape& s, int64_t groups, const Fusion& fusion)
    : s_(s), per_group_(s.c / groups), fusion_(fusion) {
  packed_floats_ = static_cast<size_t>((s.c + 15) / 16 * 9 * per_group_ * 16);
}

PackedPtr GroupedConv::Pack(const float* w) const {
  auto packed = std::make_shared<PackedFloats>(packed_floats_);
  const int64_t G = per_group_;
  float* dst = packed->data();
  for (int64_t v = 0; v < (s_.c + 15) / 16; ++v)
    for (int64_t tap = 0; tap < 9; ++tap)
      for (int64_t j = 0; j < G; ++j)
        for (int64_t l = 0; l < 16; ++l)
          dst[((v * 9 + tap) * G + j) * 16 + l] =
              v * 16 + l < s_.c ? w[((v * 16 + l) * G + j) * 9 + tap] : 0.f;
  return packed;
}

std::string GroupedConv::PackTag() const {
  return fmt::format("grouped c{} g{}", s_.c, per_group_);
}

void GroupedConv::Run(const float* x, const float* bias, const float* res, float* y) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  Args g;
  g.s = &s_;
  g.x = x;
  g.w = w_->data();
  g.bias = bias;
  g.res = fusion_.sum ? res : nullptr;
  g.y = y;
  std::tie(g.lo, g.hi) = fusion_.bounds();
  const RowFn row = per_group_ == 4   ? ForStride<4>(s_.sh, fusion_.act)
                    : per_group_ == 8 ? ForStride<8>(s_.sh, fusion_.act)
                                      : ForStride<16>(s_.sh, fusion_.act);
  const int64_t vecs = (s_.c + 15) / 16, items = s_.n * s_.oh * vecs;
  ParallelRange(items, 1, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t v = item % vecs, r = item / vecs;
      row(g, r / s_.oh, r % s_.oh, v);
    }
  });
}

}  // namespace ferry::ops::cpu
