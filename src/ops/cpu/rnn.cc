// cpu kernels: GRU and LSTM (float32, default activations).
//
// Weights are packed at prepare time (once for initializers, every run otherwise), biases folded
// where the spec allows (W-bias + R-bias for every gate except GRU's candidate gate with
// linear_before_reset, whose R-bias rides with the recurrent GEMM). A run does, per direction,
// one GEMM for the input projection of all time steps (X·W^T + bias, rows in X's own order, so
// layout 0 and 1 need no transpose), then per step a small GEMM h·R^T and the gate math.
// Handles forward/reverse/bidirectional, sequence_lens, layout 0/1, initial_h/initial_c,
// optional outputs, clip, GRU linear_before_reset 0/1 and LSTM peepholes and input_forget.
// Non-default activations are left to the reference kernel.
//
// Three paths, picked at prepare by what the CPU has (the packing depends on it):
// - AVX-512F: W^T and R^T in gate-interleaved panels (panel c: hidden units 16c..16c+15 of every
//   gate), so a register tile of up to 8 rows x one panel holds all the gates of its units and
//   the step's gate math runs on the accumulators (fused), into a second h buffer.
// - AVX2+FMA: W^T and R^T in 16-column panels in gate order, 6-row tiles; the step's h·R^T goes
//   to memory, then the gate math (8-wide) per row.
// - scalar: the AVX2 path's layout with plain loops.
//
// Threads: a bidirectional node runs its two directions on two threads; otherwise the input
// projection is split over rows. Every element is computed by the same code whatever the thread
// count, so results do not depend on it.
#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstring>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define FERRY_RNN_X86 1
// GCC 12 reports the _mm512_undefined_ps() inside _mm512_max_ps / rcp14 / roundscale as
// (maybe-)uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

constexpr int64_t kNr = 16;  // columns per packed panel
constexpr int64_t kJ = 16;   // hidden units per AVX-512 panel (one zmm per gate)
constexpr int kMaxMr = 6;    // rows per GEMM micro-tile
constexpr int64_t kParallelFmas = int64_t{8} << 20;  // below this much work, one thread

std::atomic<bool> g_scalar_only{false};  // SetRnnScalarOnlyForTesting
std::atomic<bool> g_no_avx512{false};    // SetRnnNoAvx512ForTesting

int64_t Panels(int64_t n) {
  return (n + kNr - 1) / kNr;
}

// Packs rows of the row-major matrix m (k columns) as the columns of panels `width` wide:
// column cc of panel p is m's row src(p, cc), or 0 where src gives -1. Element (kk, cc) of
// panel p lies at out[(p * k + kk) * width + cc].
template <class Src>
void PackPanels(const float* m, int64_t k, int64_t panels, int64_t width, Src src, float* out) {
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < k; ++kk) {
      float* o = out + (p * k + kk) * width;
      for (int64_t cc = 0; cc < width; ++cc) {
        const int64_t row = src(p, cc);
        o[cc] = row >= 0 ? m[row * k + kk] : 0.f;
      }
    }
}

// AVX2 and scalar: m [n, k] as m^T in panels of kNr columns, in m's row order (past n: 0).
void PackTransposed(const float* m, int64_t n, int64_t k, float* out) {
  PackPanels(
      m, k, Panels(n), kNr,
      [n](int64_t p, int64_t cc) { return p * kNr + cc < n ? p * kNr + cc : int64_t{-1}; }, out);
}

// ---- GEMM: C[m, panels*16] = A[m, k] (row stride lda) x packed B (+ bias[panels*16]) ----

template <int MR>
void TileScalar(const float* a, int64_t lda, int64_t k, const float* bp, float* c, int64_t ldc,
                const float* bias) {
  float acc[MR][kNr];
  for (int r = 0; r < MR; ++r)
    for (int64_t j = 0; j < kNr; ++j) acc[r][j] = bias ? bias[j] : 0.f;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* b = bp + kk * kNr;
    for (int r = 0; r < MR; ++r) {
      const float av = a[r * lda + kk];
      for (int64_t j = 0; j < kNr; ++j) acc[r][j] = std::fma(av, b[j], acc[r][j]);
    }
  }
  for (int r = 0; r < MR; ++r) std::memcpy(c + r * ldc, acc[r], sizeof(acc[r]));
}

#ifdef FERRY_RNN_X86
template <int MR>
__attribute__((target("avx2,fma"))) void TileAvx2(const float* a, int64_t lda, int64_t k,
                                                  const float* bp, float* c, int64_t ldc,
                                                  const float* bias) {
  __m256 lo[MR], hi[MR];
  const __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
  const __m256 b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    lo[r] = b0;
    hi[r] = b1;
  }
  for (int64_t kk = 0; kk < k; ++kk) {
    const __m256 w0 = _mm256_loadu_ps(bp + kk * kNr);
    const __m256 w1 = _mm256_loadu_ps(bp + kk * kNr + 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + kk);
      lo[r] = _mm256_fmadd_ps(av, w0, lo[r]);
      hi[r] = _mm256_fmadd_ps(av, w1, hi[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    _mm256_storeu_ps(c + r * ldc, lo[r]);
    _mm256_storeu_ps(c + r * ldc + 8, hi[r]);
  }
}

bool HaveAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes && !g_scalar_only.load(std::memory_order_relaxed);
}
#else
bool HaveAvx2() {
  return false;
}
#endif

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, float*, int64_t,
                        const float*);

TileFn PickTile(int mr) {
#ifdef FERRY_RNN_X86
  if (HaveAvx2()) {
    static constexpr TileFn kAvx[] = {TileAvx2<1>, TileAvx2<2>, TileAvx2<3>,
                                      TileAvx2<4>, TileAvx2<5>, TileAvx2<6>};
    return kAvx[mr - 1];
  }
#endif
  static constexpr TileFn kScalar[] = {TileScalar<1>, TileScalar<2>, TileScalar<3>,
                                       TileScalar<4>, TileScalar<5>, TileScalar<6>};
  return kScalar[mr - 1];
}

// Rows are split into near-equal tiles of at most kMaxMr (8 rows: 4 + 4). A row's result does
// not depend on its tile, so any split of the rows between threads gives the same numbers.
void GemmPacked(const float* a, int64_t lda, int64_t m, int64_t k, const float* bp, int64_t panels,
                float* c, int64_t ldc, const float* bias) {
  for (int64_t p = 0; p < panels; ++p) {
    const float* b = bp + p * k * kNr;
    const float* bi = bias ? bias + p * kNr : nullptr;
    int64_t r0 = 0;
    while (r0 < m) {
      const int64_t left = m - r0, tiles = (left + kMaxMr - 1) / kMaxMr;
      const int mr = static_cast<int>((left + tiles - 1) / tiles);
      PickTile(mr)(a + r0 * lda, lda, k, b, c + r0 * ldc + p * kNr, ldc, bi);
      r0 += mr;
    }
  }
}

// ---- gate math ----

float Sigmoid(float x) {
  return 1.f / (1.f + std::exp(-x));
}

struct GateArgs {
  int64_t h = 0;
  bool has_clip = false;
  float clip = 0;
  float Clip(float v) const { return has_clip ? std::min(std::max(v, -clip), clip) : v; }
};

#ifdef FERRY_RNN_X86
// exp(x) to ~1 ulp-ish (degree-6 polynomial on |r| <= ln2/2), inputs clamped to [-87, 88].
__attribute__((target("avx2,fma"))) inline __m256 Exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.f)), _mm256_set1_ps(88.f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
__attribute__((target("avx2,fma"))) inline __m256 Sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  return _mm256_div_ps(one, _mm256_add_ps(one, Exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}
// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|).
__attribute__((target("avx2,fma"))) inline __m256 Tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.f), one = _mm256_set1_ps(1.f);
  const __m256 ax = _mm256_andnot_ps(sign, x);
  const __m256 e = Exp8(_mm256_mul_ps(ax, _mm256_set1_ps(-2.f)));
  const __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  return _mm256_or_ps(t, _mm256_and_ps(x, sign));
}
__attribute__((target("avx2,fma"))) inline __m256 Clip8(__m256 v, const GateArgs& g) {
  if (!g.has_clip) return v;
  return _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-g.clip)), _mm256_set1_ps(g.clip));
}
#endif

// GRU, linear_before_reset = 1: hr holds h·R^T with R-bias in the candidate gate.
// Gates z, r, n at columns 0, H, 2H of xw and hr. Updates h in place.
void GruLbrScalar(const float* xw, const float* hr, float* h, const GateArgs& g, int64_t j0) {
  const int64_t H = g.h;
  for (int64_t j = j0; j < H; ++j) {
    const float z = Sigmoid(g.Clip(xw[j] + hr[j]));
    const float r = Sigmoid(g.Clip(xw[H + j] + hr[H + j]));
    const float n = std::tanh(g.Clip(xw[2 * H + j] + r * hr[2 * H + j]));
    h[j] = std::fma(z, h[j] - n, n);
  }
}
// GRU, linear_before_reset = 0, before the candidate GEMM: z (kept), r ⊙ h.
void GruZrScalar(const float* xw, const float* hr, const float* h, float* z, float* rh,
                 const GateArgs& g, int64_t j0) {
  const int64_t H = g.h;
  for (int64_t j = j0; j < H; ++j) {
    z[j] = Sigmoid(g.Clip(xw[j] + hr[j]));
    rh[j] = Sigmoid(g.Clip(xw[H + j] + hr[H + j])) * h[j];
  }
}
// ... after it: hn = (r ⊙ h)·Rh^T.
void GruNScalar(const float* xw, const float* hn, const float* z, float* h, const GateArgs& g,
                int64_t j0) {
  const int64_t H = g.h;
  for (int64_t j = j0; j < H; ++j) {
    const float n = std::tanh(g.Clip(xw[2 * H + j] + hn[j]));
    h[j] = std::fma(z[j], h[j] - n, n);
  }
}
// LSTM: gates i, o, f, c at columns 0, H, 2H, 3H; peepholes p (i, o, f). Updates h and c.
void LstmScalar(const float* xw, const float* hr, const float* p, bool input_forget, float* h,
                float* c, const GateArgs& g, int64_t j0) {
  const int64_t H = g.h;
  for (int64_t j = j0; j < H; ++j) {
    const float i = Sigmoid(g.Clip(xw[j] + hr[j] + p[j] * c[j]));
    const float f = input_forget
                        ? 1.f - i
                        : Sigmoid(g.Clip(xw[2 * H + j] + hr[2 * H + j] + p[2 * H + j] * c[j]));
    const float cand = std::tanh(g.Clip(xw[3 * H + j] + hr[3 * H + j]));
    const float cn = f * c[j] + i * cand;
    c[j] = cn;
    const float o = Sigmoid(g.Clip(xw[H + j] + hr[H + j] + p[H + j] * cn));
    h[j] = o * std::tanh(cn);
  }
}

#ifdef FERRY_RNN_X86
__attribute__((target("avx2,fma"))) void GruLbrAvx2(const float* xw, const float* hr, float* h,
                                                    const GateArgs& g) {
  const int64_t H = g.h;
  int64_t j = 0;
  for (; j + 8 <= H; j += 8) {
    const __m256 z =
        Sigmoid8(Clip8(_mm256_add_ps(_mm256_loadu_ps(xw + j), _mm256_loadu_ps(hr + j)), g));
    const __m256 r =
        Sigmoid8(Clip8(_mm256_add_ps(_mm256_loadu_ps(xw + H + j), _mm256_loadu_ps(hr + H + j)), g));
    const __m256 n = Tanh8(Clip8(
        _mm256_fmadd_ps(r, _mm256_loadu_ps(hr + 2 * H + j), _mm256_loadu_ps(xw + 2 * H + j)), g));
    const __m256 hv = _mm256_loadu_ps(h + j);
    _mm256_storeu_ps(h + j, _mm256_fmadd_ps(z, _mm256_sub_ps(hv, n), n));
  }
  GruLbrScalar(xw, hr, h, g, j);
}
__attribute__((target("avx2,fma"))) void GruZrAvx2(const float* xw, const float* hr, const float* h,
                                                   float* z, float* rh, const GateArgs& g) {
  const int64_t H = g.h;
  int64_t j = 0;
  for (; j + 8 <= H; j += 8) {
    _mm256_storeu_ps(
        z + j, Sigmoid8(Clip8(_mm256_add_ps(_mm256_loadu_ps(xw + j), _mm256_loadu_ps(hr + j)), g)));
    const __m256 r =
        Sigmoid8(Clip8(_mm256_add_ps(_mm256_loadu_ps(xw + H + j), _mm256_loadu_ps(hr + H + j)), g));
    _mm256_storeu_ps(rh + j, _mm256_mul_ps(r, _mm256_loadu_ps(h + j)));
  }
  GruZrScalar(xw, hr, h, z, rh, g, j);
}
__attribute__((target("avx2,fma"))) void GruNAvx2(const float* xw, const float* hn, const float* z,
                                                  float* h, const GateArgs& g) {
  const int64_t H = g.h;
  int64_t j = 0;
  for (; j + 8 <= H; j += 8) {
    const __m256 n =
        Tanh8(Clip8(_mm256_add_ps(_mm256_loadu_ps(xw + 2 * H + j), _mm256_loadu_ps(hn + j)), g));
    const __m256 hv = _mm256_loadu_ps(h + j);
    _mm256_storeu_ps(h + j, _mm256_fmadd_ps(_mm256_loadu_ps(z + j), _mm256_sub_ps(hv, n), n));
  }
  GruNScalar(xw, hn, z, h, g, j);
}
__attribute__((target("avx2,fma"))) inline __m256 Pre8(const float* xw, const float* hr,
                                                       int64_t off) {
  return _mm256_add_ps(_mm256_loadu_ps(xw + off), _mm256_loadu_ps(hr + off));
}
__attribute__((target("avx2,fma"))) void LstmAvx2(const float* xw, const float* hr, const float* p,
                                                  bool input_forget, float* h, float* c,
                                                  const GateArgs& g) {
  const int64_t H = g.h;
  const __m256 one = _mm256_set1_ps(1.f);
  int64_t j = 0;
  for (; j + 8 <= H; j += 8) {
    const __m256 cv = _mm256_loadu_ps(c + j);
    const __m256 i =
        Sigmoid8(Clip8(_mm256_fmadd_ps(_mm256_loadu_ps(p + j), cv, Pre8(xw, hr, 0 * H + j)), g));
    const __m256 f =
        input_forget
            ? _mm256_sub_ps(one, i)
            : Sigmoid8(Clip8(
                  _mm256_fmadd_ps(_mm256_loadu_ps(p + 2 * H + j), cv, Pre8(xw, hr, 2 * H + j)), g));
    const __m256 cand = Tanh8(Clip8(Pre8(xw, hr, 3 * H + j), g));
    const __m256 cn = _mm256_fmadd_ps(f, cv, _mm256_mul_ps(i, cand));
    _mm256_storeu_ps(c + j, cn);
    const __m256 o = Sigmoid8(
        Clip8(_mm256_fmadd_ps(_mm256_loadu_ps(p + H + j), cn, Pre8(xw, hr, 1 * H + j)), g));
    _mm256_storeu_ps(h + j, _mm256_mul_ps(o, Tanh8(cn)));
  }
  LstmScalar(xw, hr, p, input_forget, h, c, g, j);
}
#endif

// ---- AVX-512: gate-interleaved panels, the step's gate math fused into the GEMM tile ----
//
// W^T and R^T are packed in panels of G x 16 columns: panel c holds hidden units
// [16c, 16c + 16) of every gate (gate g at columns 16g..16g+15, past H: 0), so one register
// tile of rows x panel holds, per row, all the gates of 16 hidden units and the gate math runs
// on the accumulators. The projection's output xw keeps that column order (row stride
// ceil(H/16) * G * 16). The state h is double-buffered (every panel of a step reads the whole
// previous h).
#ifdef FERRY_RNN_X86
#define FERRY_RNN_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define FERRY_RNN_AVX512_INLINE __attribute__((target("avx512f,avx2,fma"), always_inline)) inline

// exp(x) as Exp8: degree-6 polynomial on |r| <= ln2/2, 2^n by vscalefps, x clamped to [-87, 88].
FERRY_RNN_AVX512_INLINE __m512 Exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.f)), _mm512_set1_ps(88.f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}
// 1/d for d >= 1: 14-bit estimate and one Newton step (~1 ulp; vdivps zmm would cost more than
// the rest of the gate math).
FERRY_RNN_AVX512_INLINE __m512 Recip16(__m512 d) {
  const __m512 y = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(y, _mm512_fnmadd_ps(d, y, _mm512_set1_ps(2.f)));
}
FERRY_RNN_AVX512_INLINE __m512 Sigmoid16(__m512 x) {
  return Recip16(_mm512_add_ps(_mm512_set1_ps(1.f), Exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
// tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|).
FERRY_RNN_AVX512_INLINE __m512 Tanh16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  const __m512 e = Exp16(_mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(-2.f)));
  const __m512 t = _mm512_mul_ps(_mm512_sub_ps(one, e), Recip16(_mm512_add_ps(one, e)));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_sub_ps(t, neg, _mm512_setzero_ps(), t);
}
FERRY_RNN_AVX512_INLINE void Copy16(float* to, const float* from, __mmask16 m) {
  _mm512_mask_storeu_ps(to, m, _mm512_maskz_loadu_ps(m, from));
}
FERRY_RNN_AVX512_INLINE __m512 Clip16(__m512 v, const GateArgs& g) {
  if (!g.has_clip) return v;
  return _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-g.clip)), _mm512_set1_ps(g.clip));
}

// What a tile does with its accumulators.
enum class Epi {
  kStore,   // C = A x B + bias (the input projection)
  kGruLbr,  // GRU, linear_before_reset: h' from z, r, n
  kGruZr,   // GRU: z (kept) and r ⊙ h, before the candidate GEMM
  kGruN,    // GRU: h' from the candidate GEMM (r ⊙ h)·Rh^T and z
  kLstm,    // LSTM: c' and h'
};

struct Args512 {
  // kStore: row r of the tile to out + r * ldc.
  float* out = nullptr;
  int64_t ldc = 0;
  // The step: per batch row its xw row (nullptr: the row's sequence has ended), the previous
  // and next h ([B, H]), c (in place), z and r ⊙ h ([B, H]), peepholes ([3, H]).
  const float* const* xw = nullptr;
  const float* hprev = nullptr;
  float* hnext = nullptr;
  float* c = nullptr;
  float* z = nullptr;
  float* rh = nullptr;
  const float* peep = nullptr;
  bool input_forget = false;
  GateArgs gate;
};

// Rows [row0, row0 + MR) of A times panel `panel` (NZ registers wide: k x NZ*16 floats at bp),
// accumulators started at bias (NZ*16 floats), then the epilogue E on them.
//
// A small step tile (batch 1 or 2: MR x NZ < 8 accumulators) would wait on the FMA latency, so
// it sums k in KS interleaved partial accumulators, added at the end. The summation order then
// depends on the tile's rows, which for a step depend only on the batch (a step's rows are never
// split over threads); the projection (kStore), whose rows are, always uses one accumulator.
template <Epi E, int MR, int NZ>
FERRY_RNN_AVX512 void Tile512(const float* a, int64_t lda, int64_t k, const float* bp,
                              const float* bias, int64_t row0, int64_t panel, const Args512& s) {
  constexpr int KS = E == Epi::kStore ? 1 : std::min(4, (8 + MR * NZ - 1) / (MR * NZ));
  __m512 acc[MR][NZ], part[KS > 1 ? KS - 1 : 1][MR][NZ];
#pragma GCC unroll 4
  for (int g = 0; g < NZ; ++g) {
    const __m512 bv = _mm512_loadu_ps(bias + g * kJ);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      acc[r][g] = bv;
#pragma GCC unroll 4
      for (int q = 0; q + 1 < KS; ++q) part[q][r][g] = _mm512_setzero_ps();
    }
  }
  const float* ar = a + row0 * lda;
  int64_t kk = 0;
  if constexpr (KS > 1) {
    for (; kk + KS <= k; kk += KS) {
#pragma GCC unroll 4
      for (int q = 0; q < KS; ++q) {
        __m512 w[NZ];
#pragma GCC unroll 4
        for (int g = 0; g < NZ; ++g) w[g] = _mm512_loadu_ps(bp + ((kk + q) * NZ + g) * kJ);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const __m512 av = _mm512_set1_ps(ar[r * lda + kk + q]);
#pragma GCC unroll 4
          for (int g = 0; g < NZ; ++g) {
            __m512& c = q == 0 ? acc[r][g] : part[q > 0 ? q - 1 : 0][r][g];
            c = _mm512_fmadd_ps(av, w[g], c);
          }
        }
      }
    }
  }
  for (; kk < k; ++kk) {
    __m512 w[NZ];
#pragma GCC unroll 4
    for (int g = 0; g < NZ; ++g) w[g] = _mm512_loadu_ps(bp + (kk * NZ + g) * kJ);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(ar[r * lda + kk]);
#pragma GCC unroll 4
      for (int g = 0; g < NZ; ++g) acc[r][g] = _mm512_fmadd_ps(av, w[g], acc[r][g]);
    }
  }
  if constexpr (KS > 1) {
#pragma GCC unroll 4
    for (int q = 0; q + 1 < KS; ++q)
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
        for (int g = 0; g < NZ; ++g) acc[r][g] = _mm512_add_ps(acc[r][g], part[q][r][g]);
  }
  if constexpr (E == Epi::kStore) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int g = 0; g < NZ; ++g)
        _mm512_storeu_ps(s.out + (row0 + r) * s.ldc + (panel * NZ + g) * kJ, acc[r][g]);
  } else {
    // The gate math in stages, each a loop over the tile's rows: a row's chain of dependent
    // operations is long (exp, reciprocal, then the gate that needs it), so the rows side by
    // side keep both vector ports busy where row after row would wait on latency.
    const int64_t H = s.gate.h, j0 = panel * kJ;
    const __mmask16 m =
        H - j0 >= kJ ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (H - j0)) - 1);
    constexpr int64_t kXg = E == Epi::kLstm ? 4 : 3;  // gates per xw panel
    alignas(64) static const float kZeros[kXg * kJ] = {};
    const GateArgs& ga = s.gate;
    const float* x[MR];  // the row's xw panel (zeros past the row's length: computed, not kept)
    bool live[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const float* row = s.xw[row0 + r];
      live[r] = row != nullptr;
      x[r] = row ? row + panel * kXg * kJ : kZeros;
    }
    auto at = [&](int r) { return (row0 + r) * H + j0; };  // the row's units in [B, H] buffers
    if constexpr (E == Epi::kGruLbr || E == Epi::kGruZr) {
      __m512 z[MR], rg[MR];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        z[r] = Sigmoid16(Clip16(_mm512_add_ps(_mm512_loadu_ps(x[r]), acc[r][0]), ga));
        rg[r] = Sigmoid16(Clip16(_mm512_add_ps(_mm512_loadu_ps(x[r] + kJ), acc[r][1]), ga));
      }
      if constexpr (E == Epi::kGruZr) {
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          if (!live[r]) continue;
          _mm512_mask_storeu_ps(s.z + at(r), m, z[r]);
          _mm512_mask_storeu_ps(s.rh + at(r), m,
                                _mm512_mul_ps(rg[r], _mm512_maskz_loadu_ps(m, s.hprev + at(r))));
        }
      } else {
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r)
          rg[r] =
              Tanh16(Clip16(_mm512_fmadd_ps(rg[r], acc[r][2], _mm512_loadu_ps(x[r] + 2 * kJ)), ga));
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          if (!live[r]) {
            Copy16(s.hnext + at(r), s.hprev + at(r), m);  // past the length: h carries over
            continue;
          }
          const __m512 hv = _mm512_maskz_loadu_ps(m, s.hprev + at(r));
          _mm512_mask_storeu_ps(s.hnext + at(r), m,
                                _mm512_fmadd_ps(z[r], _mm512_sub_ps(hv, rg[r]), rg[r]));
        }
      }
    } else if constexpr (E == Epi::kGruN) {
      __m512 n[MR];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        n[r] = Tanh16(Clip16(_mm512_add_ps(_mm512_loadu_ps(x[r] + 2 * kJ), acc[r][0]), ga));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        if (!live[r]) {
          Copy16(s.hnext + at(r), s.hprev + at(r), m);  // past the length: h carries over
          continue;
        }
        const __m512 hv = _mm512_maskz_loadu_ps(m, s.hprev + at(r));
        const __m512 z = _mm512_maskz_loadu_ps(m, s.z + at(r));
        _mm512_mask_storeu_ps(s.hnext + at(r), m,
                              _mm512_fmadd_ps(z, _mm512_sub_ps(hv, n[r]), n[r]));
      }
    } else {  // LSTM: gates i, o, f, c; peepholes i, o, f
      const float* p = s.peep + j0;
      __m512 cv[MR], i[MR], f[MR];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        cv[r] = _mm512_maskz_loadu_ps(m, s.c + at(r));
        i[r] = Sigmoid16(Clip16(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p), cv[r],
                                                _mm512_add_ps(_mm512_loadu_ps(x[r]), acc[r][0])),
                                ga));
        f[r] = s.input_forget
                   ? _mm512_sub_ps(_mm512_set1_ps(1.f), i[r])
                   : Sigmoid16(Clip16(
                         _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p + 2 * H), cv[r],
                                         _mm512_add_ps(_mm512_loadu_ps(x[r] + 2 * kJ), acc[r][2])),
                         ga));
      }
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {  // c' into cv
        const __m512 cand =
            Tanh16(Clip16(_mm512_add_ps(_mm512_loadu_ps(x[r] + 3 * kJ), acc[r][3]), ga));
        cv[r] = _mm512_fmadd_ps(f[r], cv[r], _mm512_mul_ps(i[r], cand));
      }
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {  // o into i, tanh(c') into f
        i[r] =
            Sigmoid16(Clip16(_mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, p + H), cv[r],
                                             _mm512_add_ps(_mm512_loadu_ps(x[r] + kJ), acc[r][1])),
                             ga));
        f[r] = Tanh16(cv[r]);
      }
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        if (!live[r]) {
          Copy16(s.hnext + at(r), s.hprev + at(r), m);  // past the length: h carries over
          continue;
        }
        _mm512_mask_storeu_ps(s.c + at(r), m, cv[r]);
        _mm512_mask_storeu_ps(s.hnext + at(r), m, _mm512_mul_ps(i[r], f[r]));
      }
    }
  }
}

alignas(64) constexpr float kNoBias[4 * kJ] = {};  // Gemm512 without bias

template <Epi E, int NZ, size_t... I>
constexpr auto TileTable512(std::index_sequence<I...>) {
  using Fn = void (*)(const float*, int64_t, int64_t, const float*, const float*, int64_t, int64_t,
                      const Args512&);
  return std::array<Fn, sizeof...(I)>{Tile512<E, static_cast<int>(I) + 1, NZ>...};
}

// Rows [0, m) of A times every panel (each k x NZ*16 floats, bias NZ*16 floats per panel), in
// blocks of 192 rows (a block of A stays in L2 across the panels). Rows are split into
// near-equal tiles of at most 8 (6 for 4 registers a row: 24 accumulators); in the projection
// a row's result does not depend on its block or tile (in a step, on the batch only: Tile512).
template <Epi E, int NZ>
void Gemm512(const float* a, int64_t lda, int64_t m, int64_t k, const float* bp, int64_t panels,
             const float* bias, const Args512& s) {
  constexpr int kMaxRows = NZ >= 4 ? 6 : 8;
  constexpr int64_t kRowBlock = 192;
  static constexpr auto kTiles = TileTable512<E, NZ>(std::make_index_sequence<kMaxRows>());
  for (int64_t rb = 0; rb < m; rb += kRowBlock) {
    const int64_t re = std::min(m, rb + kRowBlock);
    for (int64_t p = 0; p < panels; ++p) {
      const float* b = bp + p * k * NZ * kJ;
      const float* bi = bias ? bias + p * NZ * kJ : kNoBias;
      int64_t r0 = rb;
      while (r0 < re) {
        const int64_t left = re - r0, tiles = (left + kMaxRows - 1) / kMaxRows;
        const int64_t mr = (left + tiles - 1) / tiles;
        kTiles[static_cast<size_t>(mr - 1)](a, lda, k, b, bi, r0, p, s);
        r0 += mr;
      }
    }
  }
}

// (The CPU check is cached on its own: HaveAvx2() also reads the test switch.)
bool HaveAvx512() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
                          __builtin_cpu_supports("fma");
  return yes && !g_no_avx512.load(std::memory_order_relaxed) &&
         !g_scalar_only.load(std::memory_order_relaxed);
}
#else
bool HaveAvx512() {
  return false;
}
#endif

void GruLbr(const float* xw, const float* hr, float* h, const GateArgs& g) {
#ifdef FERRY_RNN_X86
  if (HaveAvx2()) return GruLbrAvx2(xw, hr, h, g);
#endif
  GruLbrScalar(xw, hr, h, g, 0);
}
void GruZr(const float* xw, const float* hr, const float* h, float* z, float* rh,
           const GateArgs& g) {
#ifdef FERRY_RNN_X86
  if (HaveAvx2()) return GruZrAvx2(xw, hr, h, z, rh, g);
#endif
  GruZrScalar(xw, hr, h, z, rh, g, 0);
}
void GruN(const float* xw, const float* hn, const float* z, float* h, const GateArgs& g) {
#ifdef FERRY_RNN_X86
  if (HaveAvx2()) return GruNAvx2(xw, hn, z, h, g);
#endif
  GruNScalar(xw, hn, z, h, g, 0);
}
void Lstm(const float* xw, const float* hr, const float* p, bool input_forget, float* h, float* c,
          const GateArgs& g) {
#ifdef FERRY_RNN_X86
  if (HaveAvx2()) return LstmAvx2(xw, hr, p, input_forget, h, c, g);
#endif
  LstmScalar(xw, hr, p, input_forget, h, c, g, 0);
}

// ---- the kernel ----

constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitH = 5, kInitC = 6, kP = 7;

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };  // RnnPathForTesting's numbers

Isa CurrentIsa() {
  return HaveAvx512() ? Isa::kAvx512 : HaveAvx2() ? Isa::kAvx2 : Isa::kScalar;
}

struct DirScratch {
  std::vector<float> xw, hr, hn, h, h2, c, z, rh;  // h2: AVX-512's second h buffer
  std::vector<const float*> xw_rows;               // AVX-512: a step's xw row per batch row
};

// The packed weights of an RNN node (layout in RnnState).
struct RnnPacked {
  std::vector<float> wpack, rpack, rhpack, bias_x, bias_r, peep;
  size_t bytes() const {
    return (wpack.size() + rpack.size() + rhpack.size() + bias_x.size() + bias_r.size() +
            peep.size()) *
           sizeof(float);
  }
};

struct RnnState : KernelState {
  StateKey key;
  std::vector<OpContext::Declared> decl;
  bool lstm = false;
  int64_t T = 0, B = 0, I = 0, H = 0, nd = 1, G = 3;
  bool layout1 = false, reverse_only = false, lbr = false, input_forget = false;
  GateArgs gate;
  Isa isa = Isa::kScalar;  // chosen at prepare: the packing depends on it
  // Packed per direction: the projection W^T (ldx columns), the recurrence R^T (ldr columns;
  // GRU without linear_before_reset: z and r only, the candidate's Rh^T in rhpack, ldh columns).
  // AVX2/scalar: panels of kNr columns in gate order; AVX-512: gate-interleaved panels of
  // gates x kJ columns (hc of them), xw in the same column order.
  int64_t ldx = 0, ldr = 0, ldh = 0, hc = 0;
  std::vector<int64_t> lens;            // the run's sequence lengths
  std::shared_ptr<const RnnPacked> pk;  // shared when W, R, B and P are constant
  const void* packed_from[4] = {nullptr, nullptr, nullptr, nullptr};  // W, R, B, P
  bool packed = false;
  std::vector<DirScratch> scratch;
};

bool AcceptsActivations(const ir::Node& node, bool lstm) {
  static const char* const kGru[] = {"sigmoid", "tanh"};
  static const char* const kLstm[] = {"sigmoid", "tanh", "tanh"};
  const size_t per = lstm ? 3 : 2;
  std::vector<std::string> names = node.attr_strings("activations");
  if (names.size() % per != 0) return false;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string lower;
    for (char ch : names[i])
      lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
    if (lower != (lstm ? kLstm[i % per] : kGru[i % per])) return false;
  }
  return true;
}
bool AcceptsGru(const ir::Node& node) {
  return AcceptsActivations(node, false);
}
bool AcceptsLstm(const ir::Node& node) {
  return AcceptsActivations(node, true);
}

// Packs W, R, biases and peepholes for every direction (inputs validated by the reference).
std::shared_ptr<RnnPacked> Pack(const OpContext& ctx, const RnnState* st) {
  auto pk = std::make_shared<RnnPacked>();
  pk->wpack.resize(static_cast<size_t>(st->nd * st->ldx * st->I));
  pk->rpack.resize(static_cast<size_t>(st->nd * st->ldr * st->H));
  pk->rhpack.resize(static_cast<size_t>(st->nd * st->ldh * st->H));
  pk->bias_x.resize(static_cast<size_t>(st->nd * st->ldx));
  pk->bias_r.resize(static_cast<size_t>(st->nd * st->ldr));
  if (st->lstm) pk->peep.resize(static_cast<size_t>(st->nd * 3 * st->H));
  const int64_t H = st->H, I = st->I, G = st->G, GH = G * H;
  const float* w = ctx.input(kW).data<float>();
  const float* r = ctx.input(kR).data<float>();
  const float* b = ctx.has_input(kB) ? ctx.input(kB).data<float>() : nullptr;
  const bool gru_split = !st->lstm && !st->lbr;
  const bool wide = st->isa == Isa::kAvx512;
  // The rows [gates * H, k] of m as packed columns: kNr-wide panels in row order, or (AVX-512)
  // hc panels of gates x kJ columns, panel p holding hidden units [p kJ, p kJ + kJ) of each gate.
  auto pack = [&](const float* m, int64_t gates, int64_t k, float* out) {
    if (!wide) return PackTransposed(m, gates * H, k, out);
    PackPanels(
        m, k, st->hc, gates * kJ,
        [H](int64_t p, int64_t cc) {
          const int64_t j = p * kJ + cc % kJ;
          return j < H ? cc / kJ * H + j : int64_t{-1};
        },
        out);
  };
  // The packed column of row `flat` (gate flat / H) of a matrix with `gates` gates.
  auto col = [&](int64_t flat, int64_t gates) {
    if (!wide) return flat;
    const int64_t g = flat / H, j = flat % H;
    return (j / kJ * gates + g) * kJ + j % kJ;
  };
  for (int64_t d = 0; d < st->nd; ++d) {
    pack(w + d * GH * I, G, I, pk->wpack.data() + d * st->ldx * I);
    const float* rd = r + d * GH * H;
    if (gru_split) {
      pack(rd, 2, H, pk->rpack.data() + d * st->ldr * H);
      pack(rd + 2 * H * H, 1, H, pk->rhpack.data() + d * st->ldh * H);
    } else {
      pack(rd, G, H, pk->rpack.data() + d * st->ldr * H);
    }
    float* bx = pk->bias_x.data() + d * st->ldx;
    float* br = pk->bias_r.data() + d * st->ldr;
    std::fill(bx, bx + st->ldx, 0.f);
    std::fill(br, br + st->ldr, 0.f);
    if (b) {
      const float* wb = b + d * 2 * GH;
      const float* rb = wb + GH;
      for (int64_t k = 0; k < GH; ++k) {
        const bool rb_inside = !st->lstm && st->lbr && k >= 2 * H;  // r ⊙ (h·Rh^T + Rb_h)
        bx[col(k, G)] = rb_inside ? wb[k] : wb[k] + rb[k];
        if (rb_inside) br[col(k, G)] = rb[k];
      }
    }
    if (st->lstm) {
      float* pd = pk->peep.data() + d * 3 * H;
      if (ctx.has_input(kP))
        std::memcpy(pd, ctx.input(kP).data<float>() + d * 3 * H,
                    static_cast<size_t>(3 * H) * sizeof(float));
      else
        std::fill(pd, pd + 3 * H, 0.f);
    }
  }
  return pk;
}

Status Prepare(OpContext& ctx, NodeSlot& slot, bool lstm) {
  const size_t n_in = lstm ? 8 : 6;
  for (size_t i = 0; i < ctx.num_inputs() && i < n_in; ++i) {
    if (!ctx.has_input(i) || i == kSeqLens) continue;
    if (!ctx.input_is_tensor(i) || ctx.input(i).dtype() != DType::kFloat) {
      slot.declined = true;
      return Status::Ok();
    }
  }
  if (!ctx.input_is_tensor(kX) || ctx.num_inputs() < 3) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<RnnState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  const Isa isa = CurrentIsa();
  if (!st || !(st->key == key) || st->isa != isa) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, n_in));
    auto fresh = std::make_unique<RnnState>();
    RnnState& s = *fresh;
    s.key = std::move(key);
    s.decl = std::move(decl);
    s.lstm = lstm;
    s.isa = isa;
    s.G = lstm ? 4 : 3;
    const Tensor& x = ctx.input(kX);
    s.layout1 = ctx.opset() >= 14 && ctx.attr_int("layout", 0) != 0;
    s.T = s.layout1 ? x.dim(1) : x.dim(0);
    s.B = s.layout1 ? x.dim(0) : x.dim(1);
    s.I = x.dim(2);
    s.H = ctx.input(kR).dim(2);
    const std::string dir = ctx.attr_string("direction", "forward");
    s.nd = dir == "bidirectional" ? 2 : 1;
    s.reverse_only = dir == "reverse";
    s.lbr = !lstm && ctx.attr_int("linear_before_reset", 0) != 0;
    s.input_forget = lstm && ctx.attr_int("input_forget", 0) != 0;
    s.gate.h = s.H;
    if (ctx.has_attr("clip")) {
      s.gate.has_clip = true;
      s.gate.clip = ctx.attr_float("clip", 0.f);
    }
    if (s.T == 0 || s.B == 0 || s.I == 0) {
      slot.declined = true;
      return Status::Ok();
    }
    const int64_t GH = s.G * s.H;
    const bool gru_split = !lstm && !s.lbr;
    if (isa == Isa::kAvx512) {
      s.hc = (s.H + kJ - 1) / kJ;
      s.ldx = s.hc * s.G * kJ;
      s.ldr = s.hc * (gru_split ? 2 : s.G) * kJ;
      s.ldh = gru_split ? s.hc * kJ : 0;
    } else {
      s.ldx = Panels(GH) * kNr;
      s.ldr = Panels(gru_split ? 2 * s.H : GH) * kNr;
      s.ldh = gru_split ? Panels(s.H) * kNr : 0;
    }
    s.scratch.resize(static_cast<size_t>(s.nd));
    s.lens.resize(static_cast<size_t>(s.B));
    for (DirScratch& d : s.scratch) {
      auto n = [](int64_t v) { return static_cast<size_t>(v); };
      d.xw.resize(n(s.T * s.B * s.ldx));
      d.hr.resize(n(s.B * s.ldr));
      d.h.resize(n(s.B * s.H));
      if (isa == Isa::kAvx512) {
        d.h2.resize(n(s.B * s.H));
        d.xw_rows.resize(n(s.B));
      }
      if (lstm) d.c.resize(n(s.B * s.H));
      if (gru_split) {
        d.hn.resize(n(s.B * s.ldh));
        d.z.resize(n(s.B * s.H));
        d.rh.assign(n(s.B * s.H), 0.f);
      }
    }
    slot.state = std::move(fresh);
    st = static_cast<RnnState*>(slot.state.get());
  }
  // sequence_lens values change between runs: out-of-range ones go to the reference (its error).
  if (ctx.has_input(kSeqLens)) {
    const Tensor& sl = ctx.input(kSeqLens);
    if (!ctx.input_is_tensor(kSeqLens) ||
        (sl.dtype() != DType::kInt32 && sl.dtype() != DType::kInt64)) {
      slot.declined = true;
      return Status::Ok();
    }
    for (int64_t v : sl.ToInt64Vector())
      if (v < 0 || v > st->T) {
        slot.declined = true;
        return Status::Ok();
      }
  }
  // Pack once for initializers (again if one changes), every run otherwise.
  const size_t idx[4] = {kW, kR, kB, kP};
  bool repack = !st->packed, all_const = true;
  for (int k = 0; k < 4; ++k) {
    const size_t i = idx[k];
    const void* p = ctx.has_input(i) ? ctx.input(i).raw() : nullptr;
    const bool is_const = !ctx.has_input(i) || ConstInput(slot, i);
    if (!is_const || p != st->packed_from[k]) repack = true;
    all_const = all_const && is_const;
    st->packed_from[k] = p;
  }
  if (repack) {
    const std::string tag =
        fmt::format("rnn isa{} ldx{} ldr{} ldh{} hc{} lbr{} R{} B{} P{}", static_cast<int>(st->isa),
                    st->ldx, st->ldr, st->ldh, st->hc, st->lbr ? 1 : 0, st->packed_from[1],
                    st->packed_from[2], st->packed_from[3]);
    st->pk = SharedPack<RnnPacked>(slot, all_const, st->packed_from[0], tag,
                                   [&] { return Pack(ctx, st); });
    st->packed = true;
  }
  for (size_t i = 0; i < st->decl.size(); ++i)
    if (st->decl[i].set) ctx.set_output(i, st->decl[i].dtype, st->decl[i].shape);
  slot.out_layouts.assign(ctx.num_outputs(), Layout::kPlain);
  return Status::Ok();
}

Status PrepareGru(OpContext& ctx, NodeSlot& slot) {
  return Prepare(ctx, slot, false);
}
Status PrepareLstm(OpContext& ctx, NodeSlot& slot) {
  return Prepare(ctx, slot, true);
}

struct Io {
  const float* x = nullptr;
  const float* init_h = nullptr;
  const float* init_c = nullptr;
  float* y = nullptr;
  float* y_h = nullptr;
  float* y_c = nullptr;
  const int64_t* lens = nullptr;
  int64_t max_len = 0;
};

void RunDirection(const RnnState& st, int64_t d, const Io& io, DirScratch& s, bool split_rows) {
  const int64_t T = st.T, B = st.B, I = st.I, H = st.H, nd = st.nd;
  const bool reverse = st.reverse_only || d == 1;
  const bool gru_split = !st.lstm && !st.lbr;
  const size_t hbytes = static_cast<size_t>(H) * sizeof(float);
  auto state_off = [&](int64_t b) { return (st.layout1 ? b * nd + d : d * B + b) * H; };
  auto x_row = [&](int64_t t, int64_t b) { return st.layout1 ? b * T + t : t * B + b; };
  auto y_off = [&](int64_t t, int64_t b) {
    return (st.layout1 ? (b * T + t) * nd + d : (t * nd + d) * B + b) * H;
  };
  // Input projection of every step: xw[row] = x[row]·W^T + bias.
  const float* wp = st.pk->wpack.data() + d * st.ldx * I;
  const float* bx = st.pk->bias_x.data() + d * st.ldx;
  const int64_t rows = T * B, px = st.ldx / kNr;
  auto project = [&](int64_t r0, int64_t r1) {
#ifdef FERRY_RNN_X86
    if (st.isa == Isa::kAvx512) {
      Args512 a;
      a.out = s.xw.data() + r0 * st.ldx;
      a.ldc = st.ldx;
      if (st.G == 4)
        Gemm512<Epi::kStore, 4>(io.x + r0 * I, I, r1 - r0, I, wp, st.hc, bx, a);
      else
        Gemm512<Epi::kStore, 3>(io.x + r0 * I, I, r1 - r0, I, wp, st.hc, bx, a);
      return;
    }
#endif
    GemmPacked(io.x + r0 * I, I, r1 - r0, I, wp, px, s.xw.data() + r0 * st.ldx, st.ldx, bx);
  };
  if (split_rows)
    ParallelRange(rows, 32, project);
  else
    project(0, rows);
  for (int64_t b = 0; b < B; ++b) {
    float* h = s.h.data() + b * H;
    if (io.init_h)
      std::memcpy(h, io.init_h + state_off(b), hbytes);
    else
      std::fill(h, h + H, 0.f);
    if (st.lstm) {
      float* c = s.c.data() + b * H;
      if (io.init_c)
        std::memcpy(c, io.init_c + state_off(b), hbytes);
      else
        std::fill(c, c + H, 0.f);
    }
  }
  const float* rp = st.pk->rpack.data() + d * st.ldr * H;
  const float* br = st.pk->bias_r.data() + d * st.ldr;
  const float* rhp = gru_split ? st.pk->rhpack.data() + d * st.ldh * H : nullptr;
  const float* peep = st.lstm ? st.pk->peep.data() + d * 3 * H : nullptr;
  const int64_t pr = st.ldr / kNr, ph = st.ldh / kNr;
  auto xw_of = [&](int64_t step, int64_t b) -> const float* {
    const int64_t len = io.lens[b];
    if (step >= len) return nullptr;
    const int64_t t = reverse ? len - 1 - step : step;
    return s.xw.data() + x_row(t, b) * st.ldx;
  };
  auto emit_y = [&](int64_t step, int64_t b, const float* h) {
    const int64_t len = io.lens[b];
    if (io.y && step < len)
      std::memcpy(io.y + y_off(reverse ? len - 1 - step : step, b), h, hbytes);
  };
  const float* h_last = s.h.data();  // the state after the last step
#ifdef FERRY_RNN_X86
  if (st.isa == Isa::kAvx512) {
    // Per step, per panel of 16 hidden units: the row tile's h·R^T for every gate, then its gate
    // math on the accumulators, into the other h buffer.
    // Layout 0 with every sequence full: a step's h goes straight into its [B, H] block of y
    // (read back as the next step's h), no copy.
    const bool h_in_y = io.y && !st.layout1 &&
                        std::all_of(io.lens, io.lens + B, [&](int64_t len) { return len == T; });
    float* hp = s.h.data();
    float* spare = s.h2.data();
    Args512 a;
    a.xw = s.xw_rows.data();
    a.c = st.lstm ? s.c.data() : nullptr;
    a.z = s.z.data();
    a.rh = s.rh.data();
    a.peep = peep;
    a.input_forget = st.input_forget;
    a.gate = st.gate;
    for (int64_t step = 0; step < io.max_len; ++step) {
      for (int64_t b = 0; b < B; ++b) s.xw_rows[static_cast<size_t>(b)] = xw_of(step, b);
      float* hn = h_in_y ? io.y + y_off(reverse ? T - 1 - step : step, 0) : spare;
      a.hprev = hp;
      a.hnext = hn;
      if (st.lstm) {
        Gemm512<Epi::kLstm, 4>(hp, H, B, H, rp, st.hc, br, a);
      } else if (st.lbr) {
        Gemm512<Epi::kGruLbr, 3>(hp, H, B, H, rp, st.hc, br, a);
      } else {
        Gemm512<Epi::kGruZr, 2>(hp, H, B, H, rp, st.hc, br, a);
        Gemm512<Epi::kGruN, 1>(s.rh.data(), H, B, H, rhp, st.hc, nullptr, a);
      }
      if (!h_in_y) {
        for (int64_t b = 0; b < B; ++b) emit_y(step, b, hn + b * H);
        spare = hp;
      }
      hp = hn;
    }
    h_last = hp;
  } else
#endif
    for (int64_t step = 0; step < io.max_len; ++step) {
      GemmPacked(s.h.data(), H, B, H, rp, pr, s.hr.data(), st.ldr, br);
      if (gru_split) {
        for (int64_t b = 0; b < B; ++b)
          if (const float* xw = xw_of(step, b))
            GruZr(xw, s.hr.data() + b * st.ldr, s.h.data() + b * H, s.z.data() + b * H,
                  s.rh.data() + b * H, st.gate);
        GemmPacked(s.rh.data(), H, B, H, rhp, ph, s.hn.data(), st.ldh, nullptr);
      }
      for (int64_t b = 0; b < B; ++b) {
        const float* xw = xw_of(step, b);
        if (!xw) continue;
        float* h = s.h.data() + b * H;
        const float* hr = s.hr.data() + b * st.ldr;
        if (st.lstm)
          Lstm(xw, hr, peep, st.input_forget, h, s.c.data() + b * H, st.gate);
        else if (st.lbr)
          GruLbr(xw, hr, h, st.gate);
        else
          GruN(xw, s.hn.data() + b * st.ldh, s.z.data() + b * H, h, st.gate);
        emit_y(step, b, h);
      }
    }
  for (int64_t b = 0; b < B; ++b) {
    if (io.y_h) std::memcpy(io.y_h + state_off(b), h_last + b * H, hbytes);
    if (io.y_c) std::memcpy(io.y_c + state_off(b), s.c.data() + b * H, hbytes);
  }
}

void Run(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<RnnState*>(slot.state.get());
  Io io;
  io.x = ctx.input(kX).data<float>();
  io.init_h = ctx.has_input(kInitH) ? ctx.input(kInitH).data<float>() : nullptr;
  io.init_c = st->lstm && ctx.has_input(kInitC) ? ctx.input(kInitC).data<float>() : nullptr;
  float* outs[3] = {nullptr, nullptr, nullptr};
  for (size_t i = 0; i < st->decl.size() && i < 3; ++i)
    if (st->decl[i].set) outs[i] = ctx.output(i).data<float>();
  io.y = outs[0];
  io.y_h = outs[1];
  io.y_c = st->lstm ? outs[2] : nullptr;
  std::vector<int64_t>& lens = st->lens;
  if (ctx.has_input(kSeqLens)) {
    const Tensor& sl = ctx.input(kSeqLens);
    for (int64_t b = 0; b < st->B; ++b)
      lens[static_cast<size_t>(b)] =
          sl.dtype() == DType::kInt32 ? sl.data<int32_t>()[b] : sl.data<int64_t>()[b];
  } else {
    std::fill(lens.begin(), lens.end(), st->T);
  }
  io.lens = lens.data();
  io.max_len = *std::max_element(lens.begin(), lens.end());
  if (io.y && std::any_of(lens.begin(), lens.end(), [&](int64_t v) { return v < st->T; }))
    std::fill(io.y, io.y + ctx.output(0).size(), 0.f);
  // A parallel region costs a thread wake-up (and, on a busy machine, a scheduler time slice):
  // only work of a few hundred microseconds is split.
  const int threads = slot.provider->threads();
  const int64_t proj_fmas = st->T * st->B * st->G * st->H * st->I;
  const int64_t dir_fmas = proj_fmas + st->T * st->B * st->G * st->H * st->H;
  if (st->nd == 2 && threads >= 2 && dir_fmas >= kParallelFmas) {
#pragma omp parallel for num_threads(2) schedule(static)
    for (int64_t d = 0; d < 2; ++d)
      RunDirection(*st, d, io, st->scratch[static_cast<size_t>(d)], false);
  } else {
    for (int64_t d = 0; d < st->nd; ++d)
      RunDirection(*st, d, io, st->scratch[static_cast<size_t>(d)],
                   threads > 1 && proj_fmas >= 2 * kParallelFmas);
  }
}

constexpr KernelDef kKernels[] = {
    {"", "GRU", 1, 1000, AcceptsGru, 0, 0, PrepareGru, Run},
    {"", "LSTM", 1, 1000, AcceptsLstm, 0, 0, PrepareLstm, Run},
};

}  // namespace

void SetRnnScalarOnlyForTesting(bool on) {
  g_scalar_only.store(on, std::memory_order_relaxed);
}

void SetRnnNoAvx512ForTesting(bool on) {
  g_no_avx512.store(on, std::memory_order_relaxed);
}

int RnnPathForTesting() {
  return static_cast<int>(CurrentIsa());
}

std::span<const KernelDef> RnnKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
