// The packed GEMM and its 6x16 AVX2/FMA microkernel (see gemm_avx2.h).
#include "ops/cpu/gemm_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string_view>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace ferry::ops::cpu {

namespace {

#define FERRY_AVX2 __attribute__((target("avx2,fma")))

std::atomic<int> g_override{-1};
std::atomic<uint64_t> g_runs{0};

// K block: a panel block of kKc x 16 floats (16 KiB) stays in L1 across the row tiles.
constexpr int64_t kKc = 256;
constexpr int kMr = 6, kNr = 16;

// The tile's epilogue, already offset to the tile's first row and column.
struct TileEpi {
  const float* bias;
  int64_t bias_rs, bias_cs;
  const float* res;
  int64_t ldr;
  GemmEpilogue::Act act;
  float lo, hi;
};

FERRY_AVX2 inline __m256i Mask(int n) {
  // Lanes [0, n) set, n in [0, 8].
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

// The epilogue (last K block) and the store of a tile's accumulators: rows < R of c.
template <int R>
FERRY_AVX2 inline __attribute__((always_inline)) void Finish(__m256* lo, __m256* hi, float* c,
                                                             int64_t ldc, int rows, int cols,
                                                             const TileEpi* e) {
  const __m256i m0 = Mask(std::min(cols, 8)), m1 = Mask(std::max(cols - 8, 0));
  const bool full = cols == kNr;
  if (e) {
    const __m256 vlo = _mm256_set1_ps(e->lo), vhi = _mm256_set1_ps(e->hi);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      if (r >= rows) break;
      if (e->bias) {
        const float* p = e->bias + r * e->bias_rs;
        __m256 c0, c1;
        if (e->bias_cs == 0) {
          c0 = c1 = _mm256_broadcast_ss(p);
        } else {
          c0 = _mm256_maskload_ps(p, m0);
          c1 = _mm256_maskload_ps(p + 8, m1);
        }
        lo[r] = _mm256_add_ps(lo[r], c0);
        hi[r] = _mm256_add_ps(hi[r], c1);
      }
      if (e->res) {
        const float* p = e->res + r * e->ldr;
        lo[r] = _mm256_add_ps(lo[r], _mm256_maskload_ps(p, m0));
        hi[r] = _mm256_add_ps(hi[r], _mm256_maskload_ps(p + 8, m1));
      }
      if (e->act == GemmEpilogue::Act::kRelu) {
        lo[r] = _mm256_max_ps(lo[r], _mm256_setzero_ps());
        hi[r] = _mm256_max_ps(hi[r], _mm256_setzero_ps());
      } else if (e->act == GemmEpilogue::Act::kClip) {
        lo[r] = _mm256_min_ps(_mm256_max_ps(lo[r], vlo), vhi);
        hi[r] = _mm256_min_ps(_mm256_max_ps(hi[r], vlo), vhi);
      }
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    if (r >= rows) break;
    if (full) {
      _mm256_storeu_ps(c + r * ldc, lo[r]);
      _mm256_storeu_ps(c + r * ldc + 8, hi[r]);
    } else {
      _mm256_maskstore_ps(c + r * ldc, m0, lo[r]);
      _mm256_maskstore_ps(c + r * ldc + 8, m1, hi[r]);
    }
  }
}

// The microkernel: R accumulator rows x 16 columns over k steps. A's element (row r, step i)
// is a[r * ars + i * kAis]: a row-major A (ars = lda, kAis = 1) or a packed 6-row panel
// (ars = 1, kAis = 6). Only the first `rows` rows and `cols` columns of c are read / written.
template <int R, int64_t kAis>
FERRY_AVX2 void Tile(const float* a, int64_t ars, const float* b, int64_t k, float* c, int64_t ldc,
                     int rows, int cols, bool accumulate, const TileEpi* e) {
  __m256 lo[R], hi[R];
  const __m256i m0 = Mask(std::min(cols, 8)), m1 = Mask(std::max(cols - 8, 0));
  const bool full = cols == kNr;
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    lo[r] = hi[r] = _mm256_setzero_ps();
    if (accumulate && r < rows) {
      lo[r] = full ? _mm256_loadu_ps(c + r * ldc) : _mm256_maskload_ps(c + r * ldc, m0);
      hi[r] = full ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_maskload_ps(c + r * ldc + 8, m1);
    }
  }
#pragma GCC unroll 4
  for (int64_t i = 0; i < k; ++i) {
    const __m256 b0 = _mm256_loadu_ps(b + i * kNr), b1 = _mm256_loadu_ps(b + i * kNr + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * ars + i * kAis);
      lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
      hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
    }
  }
  Finish<R>(lo, hi, c, ldc, rows, cols, e);
}

// One row of A against P panels at once (a GEMV at batch 1): P independent accumulator pairs
// instead of one dependent FMA chain. a steps by kAis; panel q's B is b + q * pstride; each
// output sums in Tile's order, so its bits equal Tile's.
template <int P, int64_t kAis>
FERRY_AVX2 void RowPanels(const float* a, const float* b, int64_t pstride, int64_t k, float* c,
                          const int* cols, bool accumulate, const TileEpi* e) {
  __m256 lo[P], hi[P];
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q) {
    lo[q] = hi[q] = _mm256_setzero_ps();
    if (accumulate) {
      lo[q] = _mm256_maskload_ps(c + q * kNr, Mask(std::min(cols[q], 8)));
      hi[q] = _mm256_maskload_ps(c + q * kNr + 8, Mask(std::max(cols[q] - 8, 0)));
    }
  }
#pragma GCC unroll 2
  for (int64_t i = 0; i < k; ++i) {
    const __m256 av = _mm256_broadcast_ss(a + i * kAis);
#pragma GCC unroll 4
    for (int q = 0; q < P; ++q) {
      lo[q] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + q * pstride + i * kNr), lo[q]);
      hi[q] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + q * pstride + i * kNr + 8), hi[q]);
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q)
    Finish<1>(&lo[q], &hi[q], c + q * kNr, 0, 1, cols[q], e ? &e[q] : nullptr);
}

// Packs rows [r0, r0 + 6) x columns [0, k) of A (row stride lda, m rows) into ap[i * 6 + r]
// (rows past m are zero).
void PackATile(const float* a, int64_t m, int64_t lda, int64_t k, int64_t r0, float* ap) {
  const int rows = static_cast<int>(std::min<int64_t>(kMr, m - r0));
  for (int r = 0; r < kMr; ++r) {
    const float* src = a + (r0 + r) * lda;
    if (r < rows)
      for (int64_t i = 0; i < k; ++i) ap[i * kMr + r] = src[i];
    else
      for (int64_t i = 0; i < k; ++i) ap[i * kMr + r] = 0.f;
  }
}

constexpr int kRowPanels = 4;

// The epilogue of the tile at row r0, panel p: the offsets into bias and residual.
inline TileEpi MakeEpi(const GemmEpilogue& e, int64_t r0, int64_t p, int64_t n) {
  TileEpi te;
  te.bias = e.bias ? e.bias + r0 * e.bias_rs + p * kNr * e.bias_cs : nullptr;
  te.bias_rs = e.bias_rs;
  te.bias_cs = e.bias_cs;
  te.res = e.residual ? e.residual + r0 * n + p * kNr : nullptr;
  te.ldr = n;
  te.act = e.act;
  te.lo = e.lo;
  te.hi = e.hi;
  return te;
}

// Tile instantiated for the rows the tile has (1..6): a row-major A (kAis = 1, ars = lda) or a
// packed 6-row panel (kAis = 6, ars = 1).
template <int64_t kAis>
FERRY_AVX2 inline void TileRows(int rows, const float* a, int64_t ars, const float* b, int64_t k,
                                float* c, int64_t ldc, int cols, bool accumulate,
                                const TileEpi* e) {
  switch (rows) {
    case 1:
      return Tile<1, kAis>(a, ars, b, k, c, ldc, rows, cols, accumulate, e);
    case 2:
      return Tile<2, kAis>(a, ars, b, k, c, ldc, rows, cols, accumulate, e);
    case 3:
      return Tile<3, kAis>(a, ars, b, k, c, ldc, rows, cols, accumulate, e);
    case 4:
      return Tile<4, kAis>(a, ars, b, k, c, ldc, rows, cols, accumulate, e);
    case 5:
      return Tile<5, kAis>(a, ars, b, k, c, ldc, rows, cols, accumulate, e);
    default:
      return Tile<kMr, kAis>(a, ars, b, k, c, ldc, rows, cols, accumulate, e);
  }
}

// Panels [p0, p1) x row tiles [t0, t1) of the product. Per K block, the thread first packs its
// row tiles' slice of A into 6-row panels [tile][kc][6] (one sequential stream per tile, kept in
// L2 while the B panels pass through L1).
void Block(const float* a, int64_t m, int64_t lda, const PackedB& b, float* y,
           const GemmEpilogue& e, int64_t p0, int64_t p1, int64_t t0, int64_t t1) {
  const int64_t k = b.k(), n = b.n();
  if (k == 0) {
    // No products: the epilogue alone (a zero accumulator).
    for (int64_t r = t0 * kMr; r < std::min(m, t1 * kMr); ++r)
      for (int64_t j = p0 * kNr; j < std::min(n, p1 * kNr); ++j) {
        float v = 0.f;
        if (e.bias) v += e.bias[r * e.bias_rs + j * e.bias_cs];
        if (e.residual) v += e.residual[r * n + j];
        if (e.act == GemmEpilogue::Act::kRelu) v = std::max(v, 0.f);
        if (e.act == GemmEpilogue::Act::kClip) v = std::min(std::max(v, e.lo), e.hi);
        y[r * n + j] = v;
      }
    return;
  }
  thread_local std::vector<float> packed_a;
  const size_t need = static_cast<size_t>((t1 - t0) * std::min(k, kKc) * kMr);
  if (packed_a.size() < need) packed_a.resize(need);
  float* ap = packed_a.data();
  for (int64_t k0 = 0; k0 < k; k0 += kKc) {
    const int64_t kc = std::min(kKc, k - k0);
    const bool last = k0 + kc == k;
    for (int64_t t = t0; t < t1; ++t)
      PackATile(a + k0, m, lda, kc, t * kMr, ap + (t - t0) * kc * kMr);
    int64_t p = p0;
    if (t1 - t0 == 1 && m - t0 * kMr == 1) {
      // One row (a GEMV at batch 1): four panels at a time.
      for (; p + kRowPanels <= p1; p += kRowPanels) {
        int cols[kRowPanels];
        TileEpi te[kRowPanels];
        for (int q = 0; q < kRowPanels; ++q) {
          cols[q] = static_cast<int>(std::min<int64_t>(kNr, n - (p + q) * kNr));
          te[q] = MakeEpi(e, t0 * kMr, p + q, n);
        }
        RowPanels<kRowPanels, kMr>(ap, b.data() + (p * k + k0) * kNr, k * kNr, kc,
                                   y + t0 * kMr * n + p * kNr, cols, k0 > 0, last ? te : nullptr);
      }
    }
    for (; p < p1; ++p) {
      const float* bp = b.data() + (p * k + k0) * kNr;
      const int cols = static_cast<int>(std::min<int64_t>(kNr, n - p * kNr));
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t r0 = t * kMr;
        const int rows = static_cast<int>(std::min<int64_t>(kMr, m - r0));
        const TileEpi te = MakeEpi(e, r0, p, n);
        // A short last tile (m % 6 rows, or m < 6) runs only its rows' FMAs: Tile<6> on one
        // row did six times the arithmetic of the product.
        TileRows<kMr>(rows, ap + (t - t0) * kc * kMr, 1, bp, kc, y + r0 * n + p * kNr, n, cols,
                      k0 > 0, last ? &te : nullptr);
      }
    }
  }
}

}  // namespace

bool GemmAvx2Supported() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

void GemmTile6x16(const float* a, int64_t lda, const float* b, int64_t k, float* c, int64_t ldc,
                  int rows, int cols, bool accumulate) {
  TileRows<1>(rows, a, lda, b, k, c, ldc, cols, accumulate, nullptr);
}

void PackedB::Free::operator()(float* p) const {
  std::free(p);
}

size_t PackedB::bytes() const {
  return static_cast<size_t>((n_ + kNr - 1) / kNr * k_ * kNr) * sizeof(float);
}

void PackedB::Pack(const float* b, int64_t k, int64_t n, bool trans) {
  const int64_t panels = (n + kNr - 1) / kNr;
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(panels * k * kNr, 1)) * sizeof(float);
  void* mem = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!mem) throw std::bad_alloc();
  data_.reset(static_cast<float*>(mem));
  k_ = k;
  n_ = n;
  float* d = data_.get();
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t i = 0; i < k; ++i) {
      float* row = d + (p * k + i) * kNr;
      for (int64_t j = 0; j < kNr; ++j) {
        const int64_t col = p * kNr + j;
        row[j] = col >= n ? 0.f : trans ? b[col * k + i] : b[i * n + col];
      }
    }
}

namespace {

// Runs part(0) .. part(nt - 1), on nt OpenMP threads when nt > 1 (each part a fixed, contiguous
// piece of the work: the results do not depend on which thread runs it).
template <typename F>
void RunParts(int nt, F&& part) {
#ifdef _OPENMP
  if (nt > 1) {
#pragma omp parallel num_threads(nt)
    for (int id = omp_get_thread_num(); id < nt; id += omp_get_num_threads()) part(id);
    return;
  }
#endif
  for (int id = 0; id < nt; ++id) part(id);
}

}  // namespace

void PackedGemm(const float* a, int64_t m, int64_t lda, const PackedB& b, float* y,
                const GemmEpilogue& e, int threads) {
  const int64_t panels = (b.n() + kNr - 1) / kNr, tiles = (m + kMr - 1) / kMr;
  // Split the panels in contiguous chunks (each thread streams only its part of B); with fewer
  // panels than threads, split the row tiles instead.
  const bool by_panels = panels >= threads;
  const int64_t total = by_panels ? panels : tiles;
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, total)));
  auto part = [&](int id) {
    const int64_t lo = total * id / nt, hi = total * (id + 1) / nt;
    if (by_panels)
      Block(a, m, lda, b, y, e, lo, hi, 0, tiles);
    else
      Block(a, m, lda, b, y, e, 0, panels, lo, hi);
  };
  RunParts(nt, part);
  g_runs.fetch_add(1);
}

namespace {

__attribute__((target("avx2,fma"))) inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// out[r * n + j] = a_r . b_j for r < M, j in [j0, j1): J rows of b at a time, 8 floats of k per
// step, the k tail in scalar; each dot product sums in the same order whatever the chunk.
template <int M, int J>
__attribute__((target("avx2,fma"))) void DotBlock(const float* a, int64_t lda, const float* b,
                                                  int64_t k, int64_t n, int64_t j0, int64_t j1,
                                                  float* out) {
  const int64_t k8 = k & ~int64_t{7};
  int64_t j = j0;
  for (; j + J <= j1; j += J) {
    __m256 acc[M][J];
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < J; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < k8; i += 8) {
      __m256 bv[J];
      for (int c = 0; c < J; ++c) bv[c] = _mm256_loadu_ps(b + (j + c) * k + i);
      for (int r = 0; r < M; ++r) {
        const __m256 av = _mm256_loadu_ps(a + r * lda + i);
        for (int c = 0; c < J; ++c) acc[r][c] = _mm256_fmadd_ps(av, bv[c], acc[r][c]);
      }
    }
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < J; ++c) {
        float t = HorizontalSum(acc[r][c]);
        for (int64_t i = k8; i < k; ++i) t += a[r * lda + i] * b[(j + c) * k + i];
        out[r * n + j + c] = t;
      }
  }
  for (; j < j1; ++j)  // fewer than J rows of b left
    DotBlock<M, 1>(a, lda, b, k, n, j, j + 1, out);
}

// The AVX-512 form: 16 floats of k per step, J rows of b streamed at once (more streams in
// flight: the product is bound by reading b), the next lines of each prefetched.
template <int M, int J>
__attribute__((target("avx512f,avx2,fma"))) void DotBlock512(const float* a, int64_t lda,
                                                             const float* b, int64_t k, int64_t n,
                                                             int64_t j0, int64_t j1, float* out) {
  const int64_t k16 = k & ~int64_t{15};
  int64_t j = j0;
  for (; j + J <= j1; j += J) {
    __m512 acc[M][J];
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < J; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < k16; i += 16) {
      __m512 bv[J];
      for (int c = 0; c < J; ++c) {
        const float* row = b + (j + c) * k + i;
        _mm_prefetch(reinterpret_cast<const char*>(row + 256), _MM_HINT_T0);
        bv[c] = _mm512_loadu_ps(row);
      }
      for (int r = 0; r < M; ++r) {
        const __m512 av = _mm512_loadu_ps(a + r * lda + i);
        for (int c = 0; c < J; ++c) acc[r][c] = _mm512_fmadd_ps(av, bv[c], acc[r][c]);
      }
    }
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < J; ++c) {
        // Stored and summed in halves (the 512-bit extract intrinsics trip GCC 12's
        // -Wmaybe-uninitialized).
        alignas(64) float lanes[16];
        _mm512_store_ps(lanes, acc[r][c]);
        float t = HorizontalSum(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
        for (int64_t i = k16; i < k; ++i) t += a[r * lda + i] * b[(j + c) * k + i];
        out[r * n + j + c] = t;
      }
  }
  for (; j < j1; ++j) DotBlock512<M, 1>(a, lda, b, k, n, j, j + 1, out);
}

bool GemvAvx512() {
  static const bool ok = __builtin_cpu_supports("avx512f") && !std::getenv("FERRY_GEMV_AVX2");
  return ok;
}

template <int M>
void DotRange(const float* a, int64_t lda, const float* b, int64_t k, int64_t n, int64_t j0,
              int64_t j1, float* out) {
  if (GemvAvx512())
    DotBlock512<M, (M <= 2 ? 8 : 4)>(a, lda, b, k, n, j0, j1, out);
  else
    DotBlock<M, (M <= 2 ? 4 : 2)>(a, lda, b, k, n, j0, j1, out);
}

}  // namespace

std::atomic<uint64_t> g_gemv_runs{0};

uint64_t GemvRuns() {
  return g_gemv_runs.load();
}

void GemvTransB(const float* a, int64_t m, int64_t lda, const float* b, int64_t k, int64_t n,
                float* y, const GemmEpilogue& e, int threads) {
  g_gemv_runs.fetch_add(1);
  auto range = [&](int64_t j0, int64_t j1) {
    switch (m) {
      case 1:
        DotRange<1>(a, lda, b, k, n, j0, j1, y);
        break;
      case 2:
        DotRange<2>(a, lda, b, k, n, j0, j1, y);
        break;
      case 3:
        DotRange<3>(a, lda, b, k, n, j0, j1, y);
        break;
      default:
        DotRange<4>(a, lda, b, k, n, j0, j1, y);
        break;
    }
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = j0; j < j1; ++j) {
        float v = y[r * n + j];
        if (e.bias) v += e.bias[r * e.bias_rs + j * e.bias_cs];
        if (e.residual) v += e.residual[r * n + j];
        if (e.act == GemmEpilogue::Act::kRelu) v = v < 0.f ? 0.f : v;
        if (e.act == GemmEpilogue::Act::kClip) v = std::min(std::max(v, e.lo), e.hi);
        y[r * n + j] = v;
      }
  };
  const int nt = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n / 64)));
  RunParts(nt, [&](int id) { range(n * id / nt, n * (id + 1) / nt); });
}

void SetPackedGemmOverride(int v) {
  g_override.store(v);
}
int PackedGemmOverride() {
  const int forced = g_override.load();
  if (forced >= 0) return forced;
  static const int from_env = [] {
    const char* v = std::getenv("FERRY_GEMM");
    const std::string_view s = v ? v : "";
    return s == "onednn" ? 0 : s == "packed" ? 1 : -1;
  }();
  return from_env;
}
uint64_t PackedGemmRuns() {
  return g_runs.load();
}

}  // namespace ferry::ops::cpu
