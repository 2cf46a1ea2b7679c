// 3x3 stride-1 convolution as one im2col GEMM with an own AVX-512 kernel (see conv_gemm.h).
#include "ops/cpu/conv_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/vec.h"

#define FERRY_AVX512 __attribute__((target("avx512f,avx2,fma")))

namespace ferry::ops::cpu {

namespace {

std::atomic<uint64_t> g_runs{0};

constexpr int64_t kRows = 6;     // output pixels per register tile
constexpr int64_t kCols = 64;    // output channels per panel (four zmm registers)
constexpr int64_t kChunk = 128;  // GEMM depth per pass: 128 x 64 floats of B (32 KB) stay in L1
constexpr int64_t kLine = 64;    // bytes per cache line
constexpr int64_t kAhead = 2;    // B is prefetched this many chunks ahead

size_t Align64(size_t b) {
  return (b + 63) / 64 * 64;
}

// c[r][0..64) += sum_i a[i * R + r] * b[i * 64 + 0..64) for r < R, i < n: R x 4 accumulators
// (24 with R = 6, plus 4 for B and 1 for the broadcast: no spills; 7 rows would need 33
// registers and GCC spills). While B streams from L1, a line of a later chunk is prefetched into
// L2 every `every` steps (npf lines from pf).
template <int R>
FERRY_AVX512 void Tile(const float* a, int64_t rs, int64_t is, const float* b, int64_t n, float* c,
                       const char* pf, int64_t npf, int64_t every) {
  __m512 acc[R][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) acc[r][p] = _mm512_loadu_ps(c + r * kCols + p * 16);
  for (int64_t i = 0; i < n; ++i) {
    const __m512 w0 = _mm512_loadu_ps(b), w1 = _mm512_loadu_ps(b + 16),
                 w2 = _mm512_loadu_ps(b + 32), w3 = _mm512_loadu_ps(b + 48);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 v = _mm512_set1_ps(a[r * rs]);
      acc[r][0] = _mm512_fmadd_ps(v, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(v, w1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(v, w2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(v, w3, acc[r][3]);
    }
    if (i % every == 0 && i / every < npf) _mm_prefetch(pf + i / every * kLine, _MM_HINT_T1);
    b += kCols;
    a += is;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) _mm512_storeu_ps(c + r * kCols + p * 16, acc[r][p]);
}

FERRY_AVX512 void TileRows(int64_t rows, const float* a, int64_t rs, int64_t is, const float* b,
                           int64_t n, float* c, const char* pf, int64_t npf, int64_t every) {
  switch (rows) {
    case 6:
      Tile<6>(a, rs, is, b, n, c, pf, npf, every);
      break;
    case 5:
      Tile<5>(a, rs, is, b, n, c, pf, npf, every);
      break;
    case 4:
      Tile<4>(a, rs, is, b, n, c, pf, npf, every);
      break;
    case 3:
      Tile<3>(a, rs, is, b, n, c, pf, npf, every);
      break;
    case 2:
      Tile<2>(a, rs, is, b, n, c, pf, npf, every);
      break;
    case 1:
      Tile<1>(a, rs, is, b, n, c, pf, npf, every);
      break;
    default:
      break;
  }
}

struct Args {
  const WinogradShape* s;
  int64_t m, kk, panels;
  const float* xs;    // the input in NHWC
  const float* b;     // packed B: [panels][kk][64]
  const float* bias;  // panels * 64 floats
  float* c;           // C tiles: [panels][m][64]
  const float* res;   // residual (fusion.sum) or null, in layout res_layout
  float* y;
  Layout out, res_layout;
  float lo, hi;
  VecOps::UnaryRow act;  // SiLU / HardSwish over each stored row, or null
};

// Packs pixel blocks [b0, b1) of A from the NHWC input: block [p0, p0 + R) at a + p0 * kk,
// [kk][R].
void PackA(const Args& g, float* a, int64_t b0, int64_t b1) {
  const WinogradShape& s = *g.s;
  const int64_t hw = s.oh * s.ow, C = s.c;
  for (int64_t blk = b0; blk < b1; ++blk) {
    const int64_t p0 = blk * kRows, rows = std::min(kRows, g.m - p0);
    float* base = a + p0 * g.kk;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t p = p0 + r, n = p / hw, oy = p % hw / s.ow, ox = p % s.ow;
      for (int64_t t = 0; t < s.r * s.r; ++t) {
        const int64_t iy = oy + t / s.r - s.pad_t, ix = ox + t % s.r - s.pad_l;
        float* dst = base + t * C * rows + r;
        if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) {
          for (int64_t c = 0; c < C; ++c) dst[c * rows] = 0.f;
          continue;
        }
        const float* src = g.xs + ((n * s.h + iy) * s.w + ix) * C;
        for (int64_t c = 0; c < C; ++c) dst[c * rows] = src[c];
      }
    }
  }
}

// Residual, activation and store of panel np's C tile.
FERRY_AVX512 void Epilogue(const Args& g, int64_t np) {
  const WinogradShape& s = *g.s;
  const float* cp = g.c + np * g.m * kCols;
  const int64_t col0 = np * kCols, cols = std::min(kCols, s.k - col0);
  if (g.out == Layout::kNhwc && (!g.res || g.res_layout == Layout::kNhwc)) {
    const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
    for (int64_t p = 0; p < g.m; ++p) {
      float* yp = g.y + p * s.k + col0;
      const float* rp = g.res ? g.res + p * s.k + col0 : nullptr;
      for (int64_t j = 0; j < cols; j += 16) {
        const int64_t left = std::min<int64_t>(16, cols - j);
        const __mmask16 mk = static_cast<__mmask16>((1u << left) - 1);
        __m512 v = _mm512_loadu_ps(cp + p * kCols + j);
        if (rp) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, rp + j));
        // max/min return their second operand when either is NaN: NaN propagates. (The
        // maskz forms: GCC 12 warns about the undefined source of the plain ones.)
        v = _mm512_maskz_min_ps(0xffff, hi, _mm512_maskz_max_ps(0xffff, lo, v));
        _mm512_mask_storeu_ps(yp + j, mk, v);
      }
      if (g.act) g.act(yp, yp, cols, 0.f, 0.f);  // while the row is in L1
    }
    return;
  }
  const int64_t hw = s.oh * s.ow;
  for (int64_t p = 0; p < g.m; ++p) {
    const int64_t n = p / hw, oy = p % hw / s.ow, ox = p % s.ow;
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t k = col0 + j;
      float v = cp[p * kCols + j];
      if (g.res) v += g.res[LayoutIndex(g.res_layout, s.k, s.oh, s.ow, n, k, oy, ox)];
      if (!std::isnan(v)) v = std::min(g.hi, std::max(g.lo, v));
      if (g.act) g.act(&v, &v, 1, 0.f, 0.f);
      g.y[LayoutIndex(g.out, s.k, s.oh, s.ow, n, k, oy, ox)] = v;
    }
  }
}

// Panel np: C = bias, then the K chunks, each over every pixel block, then the epilogue.
FERRY_AVX512 void Panel(const Args& g, const float* a, int64_t np) {
  float* cp = g.c + np * g.m * kCols;
  for (int64_t p = 0; p < g.m; ++p) std::memcpy(cp + p * kCols, g.bias + np * kCols, kCols * 4);
  const int64_t blocks = (g.m + kRows - 1) / kRows;
  for (int64_t k0 = 0; k0 < g.kk; k0 += kChunk) {
    const int64_t n = std::min(kChunk, g.kk - k0);
    const float* bp = g.b + (np * g.kk + k0) * kCols;
    // The chunk kAhead ahead (of this panel or the next ones; all but the last chunk of a panel
    // are n long) into L2, its lines spread evenly over the passes of this one. Measured on
    // ResNet-18's layer4 (ferry_micro, 1 thread, alternating, 5 rounds): no prefetch 64-78
    // GFLOP/s; the next chunk, one line per step in the first passes, 77-103 (mean 88); two
    // ahead and spread 82-114 (mean 96); B resident in L2 (one panel's B for all, wrong
    // results) 103-129.
    const int64_t ahead = (np * g.kk + k0 + kAhead * n) * kCols, total = g.panels * g.kk * kCols;
    const int64_t lines =
        ahead < total ? std::min<int64_t>(n * kCols, total - ahead) * 4 / kLine : 0;
    const char* next = lines > 0 ? reinterpret_cast<const char*>(g.b + ahead) : nullptr;
    const int64_t per_pass = (lines + blocks - 1) / blocks;
    const int64_t every = std::max<int64_t>(1, n / std::max<int64_t>(1, per_pass));
    const int64_t per = n / every;
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t p0 = blk * kRows, rows = std::min(kRows, g.m - p0);
      const int64_t npf = std::clamp<int64_t>(lines - blk * per, 0, per);
      // A packed per block ([kk][rows]), or (1x1) the NHWC input's pixel rows themselves.
      if (g.s->r == 1)
        TileRows(rows, g.xs + p0 * g.kk + k0, g.kk, 1, bp, n, cp + p0 * kCols,
                 npf > 0 ? next + blk * per * kLine : nullptr, npf, every);
      else
        TileRows(rows, a + p0 * g.kk + k0 * rows, 1, rows, bp, n, cp + p0 * kCols,
                 npf > 0 ? next + blk * per * kLine : nullptr, npf, every);
    }
  }
  Epilogue(g, np);
}

}  // namespace

bool ConvGemmSupported() {
  return WinogradAvx512();
}

bool PointwiseGemm(const WinogradShape& s) {
  static const int forced = KernelModeFromEnv("FERRY_CONV1X1", "gemm");
  if (!ConvGemmSupported()) return false;
  if (forced >= 0) return forced == 1;
  return s.oh * s.ow < 100 && s.c >= 64 && (s.k % 64 == 0 || s.k >= 256);
}

uint64_t ConvGemmRuns() {
  return g_runs.load();
}

ConvGemm::ConvGemm(const WinogradShape& s, Layout in, Layout out, Layout res, const Fusion& fusion)
    : s_(s), in_(in), out_(out), res_(res), fusion_(fusion) {
  m_ = s.n * s.oh * s.ow;
  kk_ = s.r * s.r * s.c;
  panels_ = (s.k + kCols - 1) / kCols;
  packed_floats_ = static_cast<size_t>(panels_ * kk_ * kCols);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off += Align64(bytes);
    return at;
  };
  off_x_ = take(in_ == Layout::kNhwc ? 0 : sizeof(float) * s.n * s.h * s.w * s.c);
#ifdef _OPENMP
  // (The run's thread count is set when it starts; more threads than panels would idle.)
  threads_ = static_cast<int>(
      std::clamp<int64_t>(std::max(omp_get_max_threads(), omp_get_num_procs()), 1, panels_));
#endif
  off_a_ = take(s.r == 1 ? 0 : sizeof(float) * m_ * kk_ * threads_);
  off_c_ = take(sizeof(float) * panels_ * m_ * kCols);
  off_r_ = take(fusion_.sum && res_ != out_ ? sizeof(float) * s.n * s.k * s.oh * s.ow : 0);
  off_bias_ = take(sizeof(float) * panels_ * kCols);
  total_ = off;
}

PackedPtr ConvGemm::Pack(const float* w) const {
  auto packed = std::make_shared<PackedFloats>(packed_floats_);
  float* b = packed->data();
  const int64_t C = s_.c, K = s_.k, kk = kk_, taps = s_.r * s_.r;
  ParallelRange(panels_ * C, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t np = item / C, c = item % C;
      for (int64_t t = 0; t < taps; ++t) {
        float* dst = b + (np * kk + t * C + c) * kCols;
        for (int64_t j = 0; j < kCols; ++j) {
          const int64_t k = np * kCols + j;
          dst[j] = k < K ? w[(k * C + c) * taps + t] : 0.f;
        }
      }
    }
  });
  return packed;
}

std::string ConvGemm::PackTag() const {
  return fmt::format("gemm r{} c{} k{}", s_.r, s_.c, s_.k);
}

void ConvGemm::Run(const float* x, const float* bias, const float* res, float* y,
                   void* scratch) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  auto* sb = static_cast<std::byte*>(scratch);
  const WinogradShape& s = s_;
  Args g;
  g.s = &s_;
  g.m = m_;
  g.kk = kk_;
  g.panels = panels_;
  auto* a = reinterpret_cast<float*>(sb + off_a_);
  g.b = b_->data();
  g.c = reinterpret_cast<float*>(sb + off_c_);
  g.y = y;
  g.out = out_;
  g.res_layout = res_;
  g.xs = x;
  if (in_ != Layout::kNhwc) {  // to NHWC first
    auto* xs = reinterpret_cast<float*>(sb + off_x_);
    const int64_t hw = s.h * s.w;
    ParallelRange(s.n * s.c, 16, [&](int64_t lo, int64_t hi) {
      for (int64_t item = lo; item < hi; ++item) {
        const int64_t n = item / s.c, c = item % s.c;
        float* dst = xs + n * hw * s.c + c;
        if (in_ == Layout::kPlain) {
          const float* src = x + item * hw;
          for (int64_t i = 0; i < hw; ++i) dst[i * s.c] = src[i];
        } else {
          for (int64_t i = 0; i < hw; ++i)
            dst[i * s.c] = x[LayoutIndex(in_, s.c, s.h, s.w, n, c, i / s.w, i % s.w)];
        }
      }
    });
    g.xs = xs;
  }
  auto* bp = reinterpret_cast<float*>(sb + off_bias_);
  for (int64_t k = 0; k < panels_ * kCols; ++k) bp[k] = bias && k < s.k ? bias[k] : 0.f;
  g.bias = bp;
  g.res = nullptr;
  if (fusion_.sum) {
    g.res = res;
    if (res_ != out_ && res == y) {  // written in another layout: read from a copy
      auto* rc = reinterpret_cast<float*>(sb + off_r_);
      std::memcpy(rc, res, sizeof(float) * s.n * s.k * s.oh * s.ow);
      g.res = rc;
    }
  }
  std::tie(g.lo, g.hi) = fusion_.bounds();
  g.act = fusion_.act == Fusion::Act::kSwish       ? Vec().unary[static_cast<int>(UnOp::kSilu)]
          : fusion_.act == Fusion::Act::kHardSwish ? Vec().unary[static_cast<int>(UnOp::kHardSwish)]
                                                   : nullptr;
  const int64_t blocks = (m_ + kRows - 1) / kRows;
#ifdef _OPENMP
  const int threads = std::min(omp_get_max_threads(), threads_);
  if (threads > 1 && !omp_in_parallel()) {
    // Every thread packs its own copy of A (a few % more work, but no barrier between the
    // phases: on a busy machine a descheduled thread costs a time slice at each one); the
    // panels are handed out one at a time, each computed by one thread in a fixed order.
#pragma omp parallel num_threads(threads)
    {
      float* mine = a + static_cast<size_t>(omp_get_thread_num()) * m_ * kk_;
      if (s.r != 1) PackA(g, mine, 0, blocks);
#pragma omp for schedule(dynamic, 1)
      for (int64_t np = 0; np < panels_; ++np) Panel(g, mine, np);
    }
    return;
  }
#endif
  if (s.r != 1) PackA(g, a, 0, blocks);
  for (int64_t np = 0; np < panels_; ++np) Panel(g, a, np);
}

}  // namespace ferry::ops::cpu
