// Winograd F(2x2,3x3) / F(4x4,3x3) convolution for the cpu provider (see winograd.h).
//
// Transform matrices (points 0, 1, -1 for m = 2; 0, 1, -1, 2, -2 for m = 4; plus infinity):
//   m = 2: B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
//          A^T = [1 1 1 0; 0 1 -1 -1]
//   m = 4: B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
//                 0 4 0 -5 0 1],
//          G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1],
//          A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
// The 2-D transforms apply the 1-D one to the columns, then to the rows, 8 channels per AVX
// register.
#include "ops/cpu/winograd.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>
#include <tuple>
#include <utility>

#include "ops/cpu/dnnl_util.h"

#define FERRY_AVX2 __attribute__((target("avx2,fma")))
#define FERRY_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline
#define FERRY_AVX512 __attribute__((target("avx512f,avx2,fma")))

namespace ferry::ops::cpu {

namespace {

std::atomic<int> g_override{-1};  // -1: not set (use the environment, then the rule)
std::atomic<uint64_t> g_runs{0};
std::atomic<int> g_gemm_isa{-1};  // -1: not set (the CPU decides); 0: AVX2; 1: AVX-512
std::atomic<int> g_split{-1};     // -1: not set (environment, then the rule); 0: phases; 1: chunks

constexpr int64_t kGemmRows = 6;   // tiles per GEMM step
constexpr int64_t kGemmCols = 16;  // output channels per GEMM step (two AVX registers)

int64_t RoundUp(int64_t v, int64_t to) {
  return (v + to - 1) / to * to;
}
size_t Align64(size_t b) {
  return (b + 63) / 64 * 64;
}

// 1-D transforms of 8 channels at once: In = B^T d, Out = A^T m.
template <int M>
struct Tr;

template <>
struct Tr<2> {
  FERRY_AVX2_INLINE static void In(const __m256* d, __m256* r) {
    r[0] = _mm256_sub_ps(d[0], d[2]);
    r[1] = _mm256_add_ps(d[1], d[2]);
    r[2] = _mm256_sub_ps(d[2], d[1]);
    r[3] = _mm256_sub_ps(d[1], d[3]);
  }
  FERRY_AVX2_INLINE static void Out(const __m256* m, __m256* o) {
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], m[1]), m[2]);
    o[1] = _mm256_sub_ps(_mm256_sub_ps(m[1], m[2]), m[3]);
  }
};

template <>
struct Tr<4> {
  FERRY_AVX2_INLINE static void In(const __m256* d, __m256* r) {
    const __m256 two = _mm256_set1_ps(2.f), four = _mm256_set1_ps(4.f), five = _mm256_set1_ps(5.f);
    r[0] = _mm256_fmadd_ps(four, d[0], _mm256_fnmadd_ps(five, d[2], d[4]));
    r[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
    r[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
    const __m256 a = _mm256_sub_ps(d[4], d[2]), b = _mm256_sub_ps(d[3], d[1]);
    r[3] = _mm256_fmadd_ps(two, b, a);
    r[4] = _mm256_fnmadd_ps(two, b, a);
    r[5] = _mm256_fmadd_ps(four, d[1], _mm256_fnmadd_ps(five, d[3], d[5]));
  }
  FERRY_AVX2_INLINE static void Out(const __m256* m, __m256* o) {
    const __m256 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
    const __m256 s34 = _mm256_add_ps(m[3], m[4]), d34 = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
    o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.f), d34, d12);
    o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.f), s34, s12);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.f), d34, d12), m[5]);
  }
};

// V = B^T d B for one tile of 8 channels: d rows `rs` floats apart, pixels `xs` floats apart
// (8 in nChw8c, C in NHWC); the A*A results go to dst + p * ps.
template <int M>
FERRY_AVX2 void InputTile(const float* src, int64_t rs, int64_t xs, float* dst, int64_t ps) {
  constexpr int A = M + 2;
  __m256 t[A][A];
#pragma GCC unroll 8
  for (int j = 0; j < A; ++j) {
    __m256 d[A], r[A];
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) d[i] = _mm256_loadu_ps(src + i * rs + j * xs);
    Tr<M>::In(d, r);
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) t[i][j] = r[i];
  }
#pragma GCC unroll 8
  for (int i = 0; i < A; ++i) {
    __m256 r[A];
    Tr<M>::In(t[i], r);
#pragma GCC unroll 8
    for (int j = 0; j < A; ++j) _mm256_storeu_ps(dst + (i * A + j) * ps, r[j]);
  }
}

// Y = A^T m A for one tile of 8 output channels: m at src + p * ps.
template <int M>
FERRY_AVX2_INLINE void OutputTile(const float* src, int64_t ps, __m256 (*o)[M]) {
  constexpr int A = M + 2;
  __m256 t[M][A];
#pragma GCC unroll 8
  for (int j = 0; j < A; ++j) {
    __m256 m[A], r[M];
#pragma GCC unroll 8
    for (int i = 0; i < A; ++i) m[i] = _mm256_loadu_ps(src + (i * A + j) * ps);
    Tr<M>::Out(m, r);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) t[i][j] = r[i];
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) Tr<M>::Out(t[i], o[i]);
}

// out[r][0..16) = sum_i v[r * vs + i] * u[i * 16 + 0..16) for r < R (R tiles, 16 channels).
template <int R>
FERRY_AVX2 void GemmStep(const float* v, int64_t vs, const float* u, int64_t c, float* out,
                         int64_t os) {
  __m256 a0[R], a1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < c; ++i) {
    // The weights stream from memory on the first pass over a panel: fetch ahead.
    _mm_prefetch(reinterpret_cast<const char*>(u + i * 16 + 2048), _MM_HINT_T0);
    const __m256 u0 = _mm256_loadu_ps(u + i * 16), u1 = _mm256_loadu_ps(u + i * 16 + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 b = _mm256_broadcast_ss(v + r * vs + i);
      a0[r] = _mm256_fmadd_ps(b, u0, a0[r]);
      a1[r] = _mm256_fmadd_ps(b, u1, a1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(out + r * os, a0[r]);
    _mm256_storeu_ps(out + r * os + 8, a1[r]);
  }
}

struct RunArgs {
  const WinogradShape* s;
  int64_t cp, kp, th, tw, t;
  const float* x;                     // nChw8c (cp channels) or NHWC (C a multiple of 8)
  int64_t x_img, x_cb, x_row, x_pix;  // x strides: image, 8-channel block, row, pixel
  int64_t y_img, y_cb, y_row, y_pix;  // the same for y and the residual (fast output path)
  bool y_fast;                        // y (and the residual) nChw8c or NHWC with K % 8 == 0
  const float* u;                     // transformed weights
  const float* bias;                  // kp floats
  const float* res;                   // residual (fusion.sum) or null
  float* v;                           // [A*A][vt][cp]
  float* m;                           // [A*A][vt][kp]
  int64_t vt;                         // tiles per position in v and m (t, or a chunk's)
  int64_t t_base;                     // the tile at row 0 of v and m
  float* y;
  Layout out, res_layout;
  float lo, hi;  // activation bounds (-inf, inf: none)
};

// Input transform of work items [b, e) (item = tile * C/8 + channel block).
template <int M>
FERRY_AVX2 void InputItems(const RunArgs& a, int64_t b, int64_t e) {
  constexpr int A = M + 2;
  const WinogradShape& s = *a.s;
  const int64_t cb_n = a.cp / 8, per_image = a.th * a.tw;
  alignas(32) float buf[A * A * 8];
  for (int64_t item = b; item < e; ++item) {
    const int64_t t = item / cb_n, cb = item % cb_n;
    const int64_t n = t / per_image, ty = t % per_image / a.tw, tx = t % a.tw;
    const int64_t iy0 = ty * M - s.pad_t, ix0 = tx * M - s.pad_l;
    const float* plane = a.x + n * a.x_img + cb * a.x_cb;
    float* dst = a.v + (t - a.t_base) * a.cp + cb * 8;
    if (iy0 >= 0 && ix0 >= 0 && iy0 + A <= s.h && ix0 + A <= s.w) {
      InputTile<M>(plane + iy0 * a.x_row + ix0 * a.x_pix, a.x_row, a.x_pix, dst, a.vt * a.cp);
      continue;
    }
    std::memset(buf, 0, sizeof(buf));
    for (int64_t i = 0; i < A; ++i) {
      const int64_t iy = iy0 + i;
      if (iy < 0 || iy >= s.h) continue;
      const int64_t j0 = std::max<int64_t>(0, -ix0), j1 = std::min<int64_t>(A, s.w - ix0);
      for (int64_t j = j0; j < j1; ++j)
        std::memcpy(buf + (i * A + j) * 8, plane + iy * a.x_row + (ix0 + j) * a.x_pix,
                    8 * sizeof(float));
    }
    InputTile<M>(buf, A * 8, 8, dst, a.vt * a.cp);
  }
}

// GEMM of work items [b, e) (item = position * K/16 + output channel block) for the rows of
// tiles [t0, t1) of v and m.
FERRY_AVX2 void GemmItems(const RunArgs& a, int64_t b, int64_t e, int64_t t0, int64_t t1) {
  const int64_t kb_n = a.kp / kGemmCols;
  for (int64_t item = b; item < e; ++item) {
    const int64_t p = item / kb_n, kb = item % kb_n;
    const float* vp = a.v + p * a.vt * a.cp;
    const float* up = a.u + (p * kb_n + kb) * a.cp * kGemmCols;
    float* mp = a.m + p * a.vt * a.kp + kb * kGemmCols;
    int64_t t = t0;
    for (; t + kGemmRows <= t1; t += kGemmRows)
      GemmStep<kGemmRows>(vp + t * a.cp, a.cp, up, a.cp, mp + t * a.kp, a.kp);
    const float* vt = vp + t * a.cp;
    float* mt = mp + t * a.kp;
    switch (t1 - t) {
      case 5:
        GemmStep<5>(vt, a.cp, up, a.cp, mt, a.kp);
        break;
      case 4:
        GemmStep<4>(vt, a.cp, up, a.cp, mt, a.kp);
        break;
      case 3:
        GemmStep<3>(vt, a.cp, up, a.cp, mt, a.kp);
        break;
      case 2:
        GemmStep<2>(vt, a.cp, up, a.cp, mt, a.kp);
        break;
      case 1:
        GemmStep<1>(vt, a.cp, up, a.cp, mt, a.kp);
        break;
      default:
        break;
    }
  }
}

// AVX-512: out[r][0..16P) = sum_i v[r * vs + i] * u[p * us + i * 16 + 0..16) for r < R, p < P
// (R tiles, P panels of 16 output channels, one register each: R * P accumulators).
template <int R, int P>
FERRY_AVX512 void GemmStep512(const float* v, int64_t vs, const float* u, int64_t us, int64_t c,
                              float* out, int64_t os) {
  __m512 acc[P][R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) acc[p][r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < c; ++i) {
    __m512 w[P];
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) w[p] = _mm512_loadu_ps(u + p * us + i * 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(v[r * vs + i]);
#pragma GCC unroll 2
      for (int p = 0; p < P; ++p) acc[p][r] = _mm512_fmadd_ps(b, w[p], acc[p][r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(out + r * os + p * 16, acc[p][r]);
}

constexpr int kRows512 = 14;  // tiles per AVX-512 GEMM step (x 2 panels: 28 accumulators)

template <int P, int... R>
FERRY_AVX512 void GemmTail512(int rows, const float* v, int64_t vs, const float* u, int64_t us,
                              int64_t c, float* out, int64_t os, std::integer_sequence<int, R...>) {
  // rows in [1, kRows512): the step with exactly that many rows.
  ((rows == R + 1 ? GemmStep512<R + 1, P>(v, vs, u, us, c, out, os) : void()), ...);
}

// AVX-512 GEMM of work items [b, e) (item = position * ceil(K/32) + pair of 16-channel panels)
// for the rows of tiles [t0, t1) of v and m.
FERRY_AVX512 void GemmItems512(const RunArgs& a, int64_t b, int64_t e, int64_t t0, int64_t t1) {
  const int64_t kb_n = a.kp / kGemmCols, pairs = (kb_n + 1) / 2, us = a.cp * kGemmCols;
  for (int64_t item = b; item < e; ++item) {
    const int64_t p = item / pairs, kb = item % pairs * 2;
    const bool two = kb + 1 < kb_n;
    const float* vp = a.v + p * a.vt * a.cp;
    const float* up = a.u + (p * kb_n + kb) * us;
    float* mp = a.m + p * a.vt * a.kp + kb * kGemmCols;
    int64_t t = t0;
    for (; t + kRows512 <= t1; t += kRows512) {
      if (two)
        GemmStep512<kRows512, 2>(vp + t * a.cp, a.cp, up, us, a.cp, mp + t * a.kp, a.kp);
      else
        GemmStep512<kRows512, 1>(vp + t * a.cp, a.cp, up, us, a.cp, mp + t * a.kp, a.kp);
    }
    const int rows = static_cast<int>(t1 - t);
    if (rows == 0) continue;
    if (two)
      GemmTail512<2>(rows, vp + t * a.cp, a.cp, up, us, a.cp, mp + t * a.kp, a.kp,
                     std::make_integer_sequence<int, kRows512 - 1>{});
    else
      GemmTail512<1>(rows, vp + t * a.cp, a.cp, up, us, a.cp, mp + t * a.kp, a.kp,
                     std::make_integer_sequence<int, kRows512 - 1>{});
  }
}

// bias + residual, activation, store: one output pixel of 8 channels in nChw8c.
FERRY_AVX2_INLINE void Put(__m256 val, __m256 bias, const float* res, __m256 lo, __m256 hi,
                           float* y) {
  val = _mm256_add_ps(val, bias);
  if (res) val = _mm256_add_ps(val, _mm256_loadu_ps(res));
  // max/min return their second operand when either is NaN: NaN propagates.
  val = _mm256_min_ps(hi, _mm256_max_ps(lo, val));
  _mm256_storeu_ps(y, val);
}

// Output transform of work items [b, e) (item = tile * ceil(K/8) + output channel block).
template <int M>
FERRY_AVX2 void OutputItems(const RunArgs& a, int64_t b, int64_t e) {
  const WinogradShape& s = *a.s;
  const int64_t kb_n = (s.k + 7) / 8, per_image = a.th * a.tw;
  const bool fast = a.y_fast;
  const __m256 lo = _mm256_set1_ps(a.lo), hi = _mm256_set1_ps(a.hi);
  alignas(32) float tmp[M * M * 8];
  for (int64_t item = b; item < e; ++item) {
    const int64_t t = item / kb_n, kb = item % kb_n;
    const int64_t n = t / per_image, ty = t % per_image / a.tw, tx = t % a.tw;
    const int64_t oy0 = ty * M, ox0 = tx * M;
    const int64_t ny = std::min<int64_t>(M, s.oh - oy0), nx = std::min<int64_t>(M, s.ow - ox0);
    __m256 o[M][M];
    OutputTile<M>(a.m + (t - a.t_base) * a.kp + kb * 8, a.vt * a.kp, o);
    const __m256 bias = _mm256_loadu_ps(a.bias + kb * 8);
    if (fast) {
      const int64_t base = n * a.y_img + kb * a.y_cb + oy0 * a.y_row + ox0 * a.y_pix;
      float* yb = a.y + base;
      const float* rb = a.res ? a.res + base : nullptr;
      if (ny == M && nx == M) {
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
          for (int j = 0; j < M; ++j) {
            const int64_t off = i * a.y_row + j * a.y_pix;
            Put(o[i][j], bias, rb ? rb + off : nullptr, lo, hi, yb + off);
          }
      } else {
        for (int64_t i = 0; i < ny; ++i)
          for (int64_t j = 0; j < nx; ++j) {
            const int64_t off = i * a.y_row + j * a.y_pix;
            Put(o[i][j], bias, rb ? rb + off : nullptr, lo, hi, yb + off);
          }
      }
      continue;
    }
    // Other layouts: bias (and the activation when there is no residual) in registers, then
    // one channel at a time.
    const bool act_now = !a.res;
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
      for (int j = 0; j < M; ++j) {
        __m256 val = _mm256_add_ps(o[i][j], bias);
        if (act_now) val = _mm256_min_ps(hi, _mm256_max_ps(lo, val));
        _mm256_store_ps(tmp + (i * M + j) * 8, val);
      }
    const int64_t lanes = std::min<int64_t>(8, s.k - kb * 8);
    auto finish = [&](float val, float r) {
      val += r;
      // Same NaN behaviour as the vector path: max/min return the value when it is NaN.
      return std::isnan(val) ? val : std::min(a.hi, std::max(a.lo, val));
    };
    if (a.out == Layout::kPlain && (!a.res || a.res_layout == Layout::kPlain)) {
      for (int64_t l = 0; l < lanes; ++l) {
        const int64_t at = ((n * s.k + kb * 8 + l) * s.oh + oy0) * s.ow + ox0;
        float* yc = a.y + at;
        const float* rc = a.res ? a.res + at : nullptr;
        for (int64_t i = 0; i < ny; ++i)
          for (int64_t j = 0; j < nx; ++j) {
            const float val = tmp[(i * M + j) * 8 + l];
            yc[i * s.ow + j] = rc ? finish(val, rc[i * s.ow + j]) : val;
          }
      }
      continue;
    }
    for (int64_t i = 0; i < ny; ++i)
      for (int64_t j = 0; j < nx; ++j)
        for (int64_t l = 0; l < lanes; ++l) {
          const int64_t c = kb * 8 + l;
          float val = tmp[(i * M + j) * 8 + l];
          if (a.res)
            val = finish(val,
                         a.res[LayoutIndex(a.res_layout, s.k, s.oh, s.ow, n, c, oy0 + i, ox0 + j)]);
          a.y[LayoutIndex(a.out, s.k, s.oh, s.ow, n, c, oy0 + i, ox0 + j)] = val;
        }
  }
}

// Runs fn(begin, end) over [0, n) in about 16 chunks per thread, handed out dynamically (a
// thread that is descheduled on a busy machine does not hold the others up). Inside an OpenMP
// parallel region; the implicit barrier at the end separates the phases.
template <typename F>
void ForChunks(int64_t n, F&& fn) {
#ifdef _OPENMP
  const int64_t chunk = std::max<int64_t>(1, n / (16 * omp_get_num_threads()));
  const int64_t chunks = (n + chunk - 1) / chunk;
#pragma omp for schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; ++c) fn(c * chunk, std::min(n, (c + 1) * chunk));
#else
  fn(int64_t{0}, n);
#endif
}

// The GEMM's work items, positions x output channel panels (x panel pairs with AVX-512), and
// items [b, e) of them for the rows of tiles [t0, t1) of v and m, on the kernel WinogradAvx512
// picks.
template <int M>
int64_t GemmItemCount(const RunArgs& a, bool wide) {
  const int64_t kb_n = a.kp / kGemmCols;
  return (M + 2) * (M + 2) * (wide ? (kb_n + 1) / 2 : kb_n);
}
void Gemm(const RunArgs& a, bool wide, int64_t b, int64_t e, int64_t t0, int64_t t1) {
  if (wide)
    GemmItems512(a, b, e, t0, t1);
  else
    GemmItems(a, b, e, t0, t1);
}

// The three phases in one OpenMP region (a barrier between them).
template <int M>
void RunPhases(const RunArgs& a) {
  const bool wide = WinogradAvx512();
  const int64_t n_in = a.t * (a.cp / 8), n_gemm = GemmItemCount<M>(a, wide),
                n_out = a.t * ((a.s->k + 7) / 8);
  auto gemm = [&](int64_t b, int64_t e) { Gemm(a, wide, b, e, 0, a.t); };
#ifdef _OPENMP
  if (omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel
    {
      ForChunks(n_in, [&](int64_t b, int64_t e) { InputItems<M>(a, b, e); });
      ForChunks(n_gemm, gemm);
      ForChunks(n_out, [&](int64_t b, int64_t e) { OutputItems<M>(a, b, e); });
    }
    return;
  }
#endif
  InputItems<M>(a, 0, n_in);
  gemm(0, n_gemm);
  OutputItems<M>(a, 0, n_out);
}

// The tiles in chunks of `chunk`: each chunk's input transform, GEMM and output transform run
// one after the other on one thread, in that thread's v and m (`slots` of them, each `vt` =
// chunk tiles per position; a.v and a.m point at slot 0, slot_v / slot_m floats apart), chunks
// handed out dynamically: one barrier per convolution instead of three, and a chunk's transformed
// tiles stay in the core's cache. Every tile's arithmetic is the same as in RunPhases.
template <int M>
void RunChunks(const RunArgs& a, int64_t chunk, int slots, size_t slot_v, size_t slot_m) {
  const bool wide = WinogradAvx512();
  const int64_t cb_n = a.cp / 8, ko_n = (a.s->k + 7) / 8, n_gemm = GemmItemCount<M>(a, wide);
  const int64_t chunks = (a.t + chunk - 1) / chunk;
  auto run = [&](int slot, int64_t c) {
    RunArgs mine = a;
    mine.v = a.v + slot * slot_v;
    mine.m = a.m + slot * slot_m;
    mine.t_base = c * chunk;
    const int64_t t0 = c * chunk, t1 = std::min(a.t, t0 + chunk);
    InputItems<M>(mine, t0 * cb_n, t1 * cb_n);
    Gemm(mine, wide, 0, n_gemm, 0, t1 - t0);
    OutputItems<M>(mine, t0 * ko_n, t1 * ko_n);
  };
#ifdef _OPENMP
  const int threads =
      static_cast<int>(std::min<int64_t>(std::min(omp_get_max_threads(), slots), chunks));
  if (threads > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(threads)
    {
      const int slot = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
      for (int64_t c = 0; c < chunks; ++c) run(slot, c);
    }
    return;
  }
#endif
  for (int64_t c = 0; c < chunks; ++c) run(0, c);
}

// Filter transform of 16 output channels x one input channel: U = G g G^T in double (the inner
// loops over the 16 channels vectorise). w: [K][C][3][3]; writes u[p][kb][c][16] for every
// position p.
template <int A>
FERRY_AVX2 void FilterBlock(const double (*g)[3], const float* w, int64_t K, int64_t C, int64_t kb,
                            int64_t c, int64_t cp, int64_t kb_n, float* u) {
  double in[9][16], tmp[A][3][16];
  for (int kk = 0; kk < 16; ++kk) {
    const int64_t k = kb * 16 + kk;
    for (int e = 0; e < 9; ++e) in[e][kk] = k < K ? w[(k * C + c) * 9 + e] : 0.0;
  }
  for (int i = 0; i < A; ++i)
    for (int col = 0; col < 3; ++col)
      for (int kk = 0; kk < 16; ++kk)
        tmp[i][col][kk] =
            g[i][0] * in[col][kk] + g[i][1] * in[3 + col][kk] + g[i][2] * in[6 + col][kk];
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < A; ++j) {
      float* dst = u + (((i * A + j) * kb_n + kb) * cp + c) * 16;
      for (int kk = 0; kk < 16; ++kk)
        dst[kk] = static_cast<float>(g[j][0] * tmp[i][0][kk] + g[j][1] * tmp[i][1][kk] +
                                     g[j][2] * tmp[i][2][kk]);
    }
}

constexpr double kG2[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                              {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                              {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                              {1.0 / 24, 1.0 / 12, 1.0 / 6},
                              {1.0 / 24, -1.0 / 12, 1.0 / 6},
                              {0, 0, 1}};

}  // namespace

void SetConvAlgoOverride(ConvAlgo a) {
  g_override.store(static_cast<int>(a));
}

ConvAlgo ConvAlgoOverride() {
  const int forced = g_override.load();
  if (forced >= 0) return static_cast<ConvAlgo>(forced);
  static const ConvAlgo from_env = [] {
    const char* e = std::getenv("FERRY_CONV_ALGO");
    const std::string_view v = e ? e : "";
    if (v == "direct") return ConvAlgo::kDirect;
    if (v == "winograd2") return ConvAlgo::kWinograd2;
    if (v == "winograd4") return ConvAlgo::kWinograd4;
    if (v == "gemm") return ConvAlgo::kGemm;
    return ConvAlgo::kAuto;
  }();
  return from_env;
}

uint64_t WinogradRuns() {
  return g_runs.load();
}

void SetWinogradSplit(int chunks) {
  g_split.store(chunks);
}

void SetWinogradAvx512(int on) {
  g_gemm_isa.store(on);
}

bool WinogradAvx512() {
  static const bool cpu = [] {
    if (!__builtin_cpu_supports("avx512f")) return false;
    const char* e = std::getenv("FERRY_WINOGRAD_ISA");
    return !(e && std::string_view(e) == "avx2");
  }();
  const int forced = g_gemm_isa.load(std::memory_order_relaxed);
  return forced < 0 ? cpu : (forced == 1 && __builtin_cpu_supports("avx512f"));
}

bool WinogradSupported() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

constexpr int64_t kThreadedMinMacs = 30'000'000;

int64_t WinogradChunk(const WinogradShape& s, int m, int threads) {
  // SetWinogradSplit, else FERRY_WINOGRAD_SPLIT=chunks|phases (read once), else the rule.
  static const int from_env = [] {
    const char* e = std::getenv("FERRY_WINOGRAD_SPLIT");
    const std::string_view v = e ? e : "";
    return v == "chunks" ? 1 : v == "phases" ? 0 : -1;
  }();
  const int set = g_split.load(std::memory_order_relaxed);
  const int forced = set >= 0 ? set : from_env;
  const int64_t tiles = s.n * ((s.oh + m - 1) / m) * ((s.ow + m - 1) / m);
  if (tiles < 1) return 0;
  // Every chunk reads all of the transformed weights U (positions x C x K floats), the phases
  // read them once; chunks keep each tile's V and M in the core's cache and need no barriers
  // between the phases. By measurement (src/ops/cpu/README.md): at one thread, chunks while U
  // fits the 2 MB L2 beside a chunk's buffers (ResNet-18's 56x56 convs, U 0.6 MB, 0.71-0.80;
  // VGG-11's 112x112 64 -> 128, 1.2 MB, 0.68; its 56x56 128 -> 256, 4.7 MB, 1.01; Wide-ResNet's
  // 28x28 256 -> 256, 9.4 MB, 1.41-1.52); at 2 threads up to 12 MB (ResNet-18's 28x28 / 14x14,
  // 2.4 / 4.2 MB, 0.87-0.93; 9.4 MB 0.94-0.97; 14x14 512 -> 512, 16.8 MB, 0.96-1.07).
  const double u_bytes = 4.0 * (m + 2) * (m + 2) * s.c * s.k;
  const bool want = forced >= 0 ? forced == 1 : u_bytes <= (threads > 1 ? 12e6 : 1.5e6);
  if (!want) return 0;
  // About 28 tiles (two AVX-512 GEMM steps) per chunk, the count a multiple of the threads.
  const int64_t t = std::max(1, threads);
  int64_t n_chunks = std::max<int64_t>(1, (tiles + 14) / 28);
  n_chunks = (n_chunks + t - 1) / t * t;
  return (tiles + n_chunks - 1) / n_chunks;
}

ConvAlgo ChooseConvAlgo(const WinogradShape& s, int threads) {
  // Measured on ResNet-18's shapes (src/ops/cpu/README.md). Few channels (not measured): the
  // transforms are a large share of the work. Outputs smaller than 2x2: F(2x2) computes 16
  // products where the direct convolution needs 9. F(4x4) needs at least ~20x20 outputs: its
  // transformed weights (36 x C x K) are 4x the direct ones and stream from memory once per run,
  // shared by fewer tiles on small images (ResNet-18's 14x14 and 7x7 layers: F(2x2)).
  if (s.c < 16 || s.k < 16 || s.oh < 2 || s.ow < 2) return ConvAlgo::kDirect;
  // With AVX-512 (the GEMM 16 lanes wide, NHWC in and out; ferry_micro, 1 thread, Xeon, CPU
  // time per conv, direct / Winograd): 56x56 1.65 / 1.05 ms (F(4x4)), 28x28 1.63 / 0.79 (F(4x4)),
  // 14x14 1.71 / 1.14 (F(2x2)), 7x7 2.68 / 2.88 (F(2x2)): the 7x7 layers do not run Winograd
  // (the transformed weights stream from memory for only 16 tiles). With 64+ channels they run
  // the own im2col GEMM (conv_gemm.h; ResNet-18's layer4 x4, 1 thread, 10 alternating rounds,
  // medians: 123 GFLOP/s vs oneDNN's 111), else oneDNN.
  if (WinogradAvx512() && s.oh * s.ow < 100)
    return s.c >= 64 && s.k >= 64 ? ConvAlgo::kGemm : ConvAlgo::kDirect;
  // Images under 20x20 (F(2x2)) with at most 32 input channels: too little work for the
  // transforms and the three phases' barriers (GoogLeNet's 14x14 branch convs, 16-32 -> 48-128
  // channels, per node own / oneDNN direct: 1.06-1.24 at 1 thread, 1.4-2.3 at 2; 28x28 ones with
  // F(4x4) win, 0.76-0.85).
  if (s.oh * s.ow < 400 && s.c <= 32) return ConvAlgo::kDirect;
  // With 2+ threads, convolutions under 30 M multiply-adds that would run in phases (WinogradChunk
  // 0): the phases' barriers cost more than the transforms save (in phases Winograd scaled
  // 1.06-1.37x at 2 threads on SqueezeNet 1.1's 3x3 convs, 14-28 M, oneDNN's direct convolution
  // 1.6-1.9x: per node, direct / Winograd at 2 threads 55x55 16 -> 64 0.76-0.78, 13x13 0.68-0.84,
  // 27x27 1.03). In chunks they run Winograd (SqueezeNet 1.1's 3x3 expands and Concats 0.72 of
  // direct at 2 threads), and the same algorithm at any thread count.
  const int m = s.oh * s.ow >= 400 ? 4 : 2;
  if (threads > 1 && s.n * s.oh * s.ow * s.c * s.k * 9 < kThreadedMinMacs &&
      WinogradChunk(s, m, threads) == 0)
    return ConvAlgo::kDirect;
  return m == 4 ? ConvAlgo::kWinograd4 : ConvAlgo::kWinograd2;
}

WinogradConv::WinogradConv(const WinogradShape& s, int tile, Layout in, Layout out, Layout res,
                           const Fusion& fusion)
    : s_(s), m_(tile), a_(tile + 2), in_(in), out_(out), res_(res), fusion_(fusion) {
  cp_ = RoundUp(s.c, 8);
  kp_ = RoundUp(s.k, kGemmCols);
  th_ = (s.oh + m_ - 1) / m_;
  tw_ = (s.ow + m_ - 1) / m_;
  t_ = s.n * th_ * tw_;
  const int64_t positions = int64_t{a_} * a_;
  packed_floats_ = static_cast<size_t>(positions * kp_ * cp_);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off += Align64(bytes);
    return at;
  };
  off_x_ = take(DirectInput() ? 0 : sizeof(float) * s.n * cp_ * s.h * s.w);
  // Chunks (WinogradChunk): each thread's v and m for one chunk of tiles; else the whole image's.
  // The rule for the session's thread count; a v / m slot for every thread a run may use.
  chunk_ = WinogradChunk(s, m_, omp_get_max_threads());
  slots_ = chunk_ > 0 ? std::max({1, omp_get_max_threads(), omp_get_num_procs()}) : 1;
  const int64_t vt = chunk_ > 0 ? chunk_ : t_;
  off_v_ = take(sizeof(float) * positions * vt * cp_ * slots_);
  off_m_ = take(sizeof(float) * positions * vt * kp_ * slots_);
  off_r_ = take(fusion_.sum && res_ != out_ ? sizeof(float) * s.n * s.k * s.oh * s.ow : 0);
  off_b_ = take(sizeof(float) * kp_);
  total_ = off;
}

bool WinogradConv::DirectInput() const {
  return in_ == Layout::kBlocked8 || (in_ == Layout::kNhwc && s_.c % 8 == 0);
}

size_t WinogradConv::scratch_bytes() const {
  return total_;
}

PackedPtr WinogradConv::Pack(const float* w) const {
  auto packed = std::make_shared<PackedFloats>(packed_floats_);
  float* u = packed->data();
  const int64_t kb_n = kp_ / 16, cp = cp_, c_n = s_.c, k_n = s_.k;
  const int a = a_;
  ParallelRange(kb_n * c_n, 64, [&](int64_t b, int64_t e) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t kb = item / c_n, c = item % c_n;
      if (a == 4)
        FilterBlock<4>(kG2, w, k_n, c_n, kb, c, cp, kb_n, u);
      else
        FilterBlock<6>(kG4, w, k_n, c_n, kb, c, cp, kb_n, u);
    }
  });
  return packed;
}

std::string WinogradConv::PackTag() const {
  return fmt::format("wino a{} c{} k{}", a_, s_.c, s_.k);
}

void WinogradConv::Run(const float* x, const float* bias, const float* res, float* y, void* scratch,
                       int64_t ldy) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  auto* sb = static_cast<std::byte*>(scratch);
  const WinogradShape& s = s_;
  RunArgs a;
  a.s = &s_;
  a.cp = cp_;
  a.kp = kp_;
  a.th = th_;
  a.tw = tw_;
  a.t = t_;
  a.u = u_->data();
  a.v = reinterpret_cast<float*>(sb + off_v_);
  a.m = reinterpret_cast<float*>(sb + off_m_);
  a.vt = chunk_ > 0 ? chunk_ : t_;
  a.t_base = 0;
  a.y = y;
  a.out = out_;
  a.res_layout = res_;
  const bool res_ok = !fusion_.sum || res_ == out_;
  if (out_ == Layout::kNhwc && s.k % 8 == 0 && res_ok) {
    const int64_t ld = ldy > 0 ? ldy : s.k;
    a.y_fast = true;
    a.y_img = s.oh * s.ow * ld;
    a.y_cb = 8;
    a.y_row = s.ow * ld;
    a.y_pix = ld;
  } else {
    a.y_fast = out_ == Layout::kBlocked8 && res_ok;
    a.y_img = RoundUp(s.k, 8) * s.oh * s.ow;
    a.y_cb = s.oh * s.ow * 8;
    a.y_row = s.ow * 8;
    a.y_pix = 8;
  }
  // Input: nChw8c with C rounded up to 8 (zeros in the padding channels).
  a.x = x;
  if (in_ == Layout::kNhwc && s.c % 8 == 0) {
    a.x_img = s.h * s.w * s.c;
    a.x_cb = 8;
    a.x_row = s.w * s.c;
    a.x_pix = s.c;
  } else {
    a.x_img = cp_ * s.h * s.w;
    a.x_cb = s.h * s.w * 8;
    a.x_row = s.w * 8;
    a.x_pix = 8;
  }
  if (!DirectInput()) {
    auto* xb = reinterpret_cast<float*>(sb + off_x_);
    const int64_t cb_n = cp_ / 8;
    ParallelRange(s.n * cb_n * s.h, 16, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        const int64_t iy = row % s.h, cb = row / s.h % cb_n, n = row / s.h / cb_n;
        float* dst = xb + row * s.w * 8;
        for (int64_t l = 0; l < 8; ++l) {
          const int64_t c = cb * 8 + l;
          if (c >= s.c) {
            for (int64_t ix = 0; ix < s.w; ++ix) dst[ix * 8 + l] = 0.f;
          } else if (in_ == Layout::kPlain) {
            const float* src = x + ((n * s.c + c) * s.h + iy) * s.w;
            for (int64_t ix = 0; ix < s.w; ++ix) dst[ix * 8 + l] = src[ix];
          } else {
            for (int64_t ix = 0; ix < s.w; ++ix)
              dst[ix * 8 + l] = x[LayoutIndex(in_, s.c, s.h, s.w, n, c, iy, ix)];
          }
        }
      }
    });
    a.x = xb;
  }
  auto* bp = reinterpret_cast<float*>(sb + off_b_);
  for (int64_t k = 0; k < kp_; ++k) bp[k] = bias && k < s.k ? bias[k] : 0.f;
  a.bias = bp;
  a.res = nullptr;
  if (fusion_.sum) {
    a.res = res;
    if (res_ != out_ && res == y) {  // written in another layout: read from a copy
      auto* rc = reinterpret_cast<float*>(sb + off_r_);
      std::memcpy(rc, res, sizeof(float) * s.n * s.k * s.oh * s.ow);
      a.res = rc;
    }
  }
  std::tie(a.lo, a.hi) = fusion_.bounds();
  const size_t positions = static_cast<size_t>(a_) * a_;
  const size_t slot_v = positions * chunk_ * cp_, slot_m = positions * chunk_ * kp_;
  if (chunk_ > 0 && m_ == 2)
    RunChunks<2>(a, chunk_, slots_, slot_v, slot_m);
  else if (chunk_ > 0)
    RunChunks<4>(a, chunk_, slots_, slot_v, slot_m);
  else if (m_ == 2)
    RunPhases<2>(a);
  else
    RunPhases<4>(a);
}

}  // namespace ferry::ops::cpu
