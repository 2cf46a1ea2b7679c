// 1x1 convolution on large channels-last images with an own AVX-512 kernel (see pointwise.h).
#include "ops/cpu/pointwise.h"

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

constexpr int64_t kBlock = 64;  // output channels per block (4 zmm)

// -1 auto, 0 off (onednn), 1 every eligible conv (own): FERRY_PW, read once.
int Mode() {
  static const int m = KernelModeFromEnv("FERRY_PW");
  return m;
}

struct Args {
  int64_t c, k;
  const float* x;
  const float* w;  // packed, block b at w + off[b]
  const int64_t* off;
  const float* bias;  // [k] or null
  const float* res;   // [m][k] or null
  float* y;
  int64_t ldy;  // floats between y's pixels (k, or a wider tensor's channels)
  float lo, hi;
};

// Pixels [p0, p0 + R) x output block starting at channel k0 with P vectors (the last one masked
// by `tail`).
template <int R, int P, Act A>
FERRY_AVX512 inline __attribute__((always_inline)) void Tile(const Args& g, int64_t p0, int64_t k0,
                                                             const float* wb, __mmask16 tail) {
  __m512 acc[R][P];
#pragma GCC unroll 4
  for (int j = 0; j < P; ++j) {
    const __mmask16 mk = j == P - 1 ? tail : static_cast<__mmask16>(0xffff);
    const __m512 b = g.bias ? _mm512_maskz_loadu_ps(mk, g.bias + k0 + j * 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) acc[r][j] = b;
  }
  const float* xp = g.x + p0 * g.c;
  for (int64_t i = 0; i < g.c; ++i) {
    __m512 w[P];
#pragma GCC unroll 4
    for (int j = 0; j < P; ++j) w[j] = _mm512_load_ps(wb + i * P * 16 + j * 16);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(xp[r * g.c + i]);
#pragma GCC unroll 4
      for (int j = 0; j < P; ++j) acc[r][j] = _mm512_fmadd_ps(a, w[j], acc[r][j]);
    }
  }
  const __m512 lo = _mm512_set1_ps(g.lo), hi = _mm512_set1_ps(g.hi);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    float* yp = g.y + (p0 + r) * g.ldy + k0;
    const float* rp = g.res ? g.res + (p0 + r) * g.k + k0 : nullptr;
#pragma GCC unroll 4
    for (int j = 0; j < P; ++j) {
      const __mmask16 mk = j == P - 1 ? tail : static_cast<__mmask16>(0xffff);
      __m512 v = acc[r][j];
      if (rp) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, rp + j * 16));
      _mm512_mask_storeu_ps(yp + j * 16, mk, Apply<A>(v, lo, hi));
    }
  }
}

// Rows of a full tile for P vectors: 24 accumulators (+ P weights + 1 broadcast).
constexpr int RowsFor(int p) {
  return p == 4 ? 6 : p == 3 ? 8 : 12;
}

template <int P, Act A>
FERRY_AVX512 void Blocks(const Args& g, int64_t p_begin, int64_t p_end, int64_t k0, const float* wb,
                         __mmask16 tail) {
  constexpr int R = RowsFor(P);
  int64_t p = p_begin;
  for (; p + R <= p_end; p += R) Tile<R, P, A>(g, p, k0, wb, tail);
  for (; p < p_end; ++p) Tile<1, P, A>(g, p, k0, wb, tail);
}

template <Act A>
FERRY_AVX512 void Range(const Args& g, int64_t p_begin, int64_t p_end) {
  // Pixel chunks small enough that their inputs stay in L1 while every output block runs.
  const int64_t chunk = std::max<int64_t>(12, 12 * (8192 / (12 * std::max<int64_t>(g.c, 1))));
  const int64_t blocks = (g.k + kBlock - 1) / kBlock;
  for (int64_t p0 = p_begin; p0 < p_end; p0 += chunk) {
    const int64_t p1 = std::min(p_end, p0 + chunk);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k0 = b * kBlock, cols = std::min(kBlock, g.k - k0);
      const int vecs = static_cast<int>((cols + 15) / 16);
      const __mmask16 tail =
          cols % 16 == 0 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>((1u << static_cast<unsigned>(cols % 16)) - 1);
      const float* wb = g.w + g.off[b];
      switch (vecs) {
        case 4:
          Blocks<4, A>(g, p0, p1, k0, wb, tail);
          break;
        case 3:
          Blocks<3, A>(g, p0, p1, k0, wb, tail);
          break;
        case 2:
          Blocks<2, A>(g, p0, p1, k0, wb, tail);
          break;
        default:
          Blocks<1, A>(g, p0, p1, k0, wb, tail);
          break;
      }
    }
  }
}

}  // namespace

bool PointwiseSupported() {
  return Mode() != 0 && WinogradAvx512();
}

bool PointwiseWanted(int64_t pixels_per_image, int64_t c, int64_t k, const Fusion& fusion) {
  if (!PointwiseSupported() || c < 1 || k < 1) return false;
  if (Mode() == 1) return true;
  // Plain projections to few channels (no post-op, K < 48) stay on oneDNN: EfficientNet-B0's
  // 32 -> 16 at 112x112 0.159 vs 0.176 ms, MnasNet's 16 -> 8 0.070 vs 0.086 (1 thread).
  // 14x14 images too when expanding from at most 128 channels with SiLU / HardSwish, the post-ops
  // oneDNN is slowest with (EfficientNet-B0's 80 -> 480 and 112 -> 672, 0.81-0.92 of oneDNN; the
  // projections back, 672 -> 112, 1.02-1.08). MobileNetV2's Clip expansions there measured level
  // with oneDNN at 2 threads (whole model 0.93-0.98 either way) and stay on it.
  const bool gate = fusion.act == Fusion::Act::kSwish || fusion.act == Fusion::Act::kHardSwish;
  const bool shape = (pixels_per_image >= 784 && c <= 256 && k <= 256) ||
                     (pixels_per_image >= 196 && c <= 128 && k <= 1024 && gate);
  // Few output channels (one or two vectors per pixel: broadcast-bound) only with a residual or
  // a SiLU / HardSwish: SqueezeNet's 128 -> 16 + Relu at 55x55 lost (0.146 vs 0.184 ms), a
  // MobileNetV3-L 16 -> 16 + residual won (0.151 -> 0.111).
  return shape && (k >= 48 || gate || fusion.sum || (fusion.any() && k >= 24));
}

uint64_t PointwiseRuns() {
  return g_runs.load();
}

Pointwise::Pointwise(int64_t m, int64_t c, int64_t k, const Fusion& fusion)
    : m_(m), c_(c), k_(k), fusion_(fusion) {
  int64_t total = 0;
  for (int64_t k0 = 0; k0 < k; k0 += kBlock) {
    block_off_.push_back(total);
    total += c * (std::min(kBlock, k - k0) + 15) / 16 * 16;
  }
  packed_floats_ = static_cast<size_t>(total);
}

PackedPtr Pointwise::Pack(const float* w) const {
  auto packed = std::make_shared<PackedFloats>(packed_floats_);
  float* base = packed->data();
  for (size_t b = 0; b < block_off_.size(); ++b) {
    const int64_t k0 = static_cast<int64_t>(b) * kBlock, cols = std::min(kBlock, k_ - k0);
    const int64_t width = (cols + 15) / 16 * 16;
    float* dst = base + block_off_[b];
    for (int64_t i = 0; i < c_; ++i)
      for (int64_t j = 0; j < width; ++j)
        dst[i * width + j] = j < cols ? w[(k0 + j) * c_ + i] : 0.f;
  }
  return packed;
}

std::string Pointwise::PackTag() const {
  return fmt::format("pw c{} k{}", c_, k_);
}

void Pointwise::Go(const float* x, const float* bias, const float* res, float* y, int64_t ldy,
                   int64_t m, bool parallel) const {
  Args g;
  g.c = c_;
  g.k = k_;
  g.x = x;
  g.w = w_->data();
  g.off = block_off_.data();
  g.bias = bias;
  g.res = fusion_.sum ? res : nullptr;
  g.y = y;
  g.ldy = ldy > 0 ? ldy : k_;
  std::tie(g.lo, g.hi) = fusion_.bounds();
  // (A residual aliasing y is read at each pixel before that pixel's store: in place is safe.)
  void (*range)(const Args&, int64_t, int64_t) =
      fusion_.act == Fusion::Act::kSwish       ? Range<Act::kSwish>
      : fusion_.act == Fusion::Act::kHardSwish ? Range<Act::kHardSwish>
                                               : Range<Act::kClamp>;
  if (!parallel) return range(g, 0, m);
  // Contiguous pixel ranges per thread, in multiples of 12 (every tile height divides it).
  const int64_t units = (m + 11) / 12;
  // (Every unit is 12 pixels x C x K multiply-adds, 200 K and up on the shapes the rule takes: a
  // 14x14 image's 17 units split too. With a minimum of 16 units per thread those ran on one
  // thread, and MobileNetV2's 14x14 expansions at 2 threads lost 13-38% to oneDNN.)
  ParallelRange(units, 1, [&](int64_t b, int64_t e) { range(g, b * 12, std::min(m, e * 12)); });
}

void Pointwise::Run(const float* x, const float* bias, const float* res, float* y,
                    int64_t ldy) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  Go(x, bias, res, y, ldy, m_, true);
}

void Pointwise::RunSerial(const float* x, const float* bias, const float* res, float* y,
                          int64_t m) const {
  Go(x, bias, res, y, 0, m, false);
}

}  // namespace ferry::ops::cpu
