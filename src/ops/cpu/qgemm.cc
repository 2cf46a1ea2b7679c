// Own int8 GEMM: see qgemm.h. Compiled with -ffp-contract=off (src/CMakeLists.txt): the float
// epilogue must stay a multiply then an add, as the reference Mul and Add nodes compute it.
#include "ops/cpu/qgemm.h"

// GCC 12 reports the _mm512_undefined_ps() inside _mm512_cvtepi32_ps as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/cpu/dnnl_util.h"

#define FERRY_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define FERRY_AVX2 __attribute__((target("avx2")))

namespace ferry::ops::cpu {

namespace {

std::atomic<int> g_cap{-1};

QIsa Detect() {
  __builtin_cpu_init();
  QIsa best = QIsa::kNone;
  if (__builtin_cpu_supports("avx2")) best = QIsa::kAvx2;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    best = QIsa::kAvx512Vnni;
  // FERRY_INT8_ISA=avx2 / none caps the path (benchmarks of the widening path on a VNNI CPU).
  if (const char* e = std::getenv("FERRY_INT8_ISA")) {
    std::string_view v(e);
    if (v == "avx2" && best != QIsa::kNone) best = QIsa::kAvx2;
    if (v == "none") best = QIsa::kNone;
  }
  return best;
}

// ISA parameters: W columns per panel, KG k values per group, MR rows per tile, NP panels.
template <QIsa I>
struct P;
template <>
struct P<QIsa::kAvx512Vnni> {
  static constexpr int W = 16, KG = 4, MR = 8, NP = 2;
  using AT = uint8_t;  // packed A element
  using BT = int8_t;   // packed B element
};
template <>
struct P<QIsa::kAvx2> {
  static constexpr int W = 8, KG = 2, MR = 6, NP = 2;
  using AT = int16_t;
  using BT = int16_t;
};
// AVX2 with every B' within +-64 (weights quantized with a reduced range): u8 x s8 pairs summed
// by vpmaddubsw cannot leave int16 (2 * 255 * 64 < 32767), then vpmaddwd by ones into int32 —
// VNNI's layout (4-byte k groups) at twice the widening path's products per instruction. The
// packed B's `isa` holds this private value; QGemmIsa() never returns it.
constexpr QIsa kAvx2Narrow = static_cast<QIsa>(3);
template <>
struct P<kAvx2Narrow> {
  static constexpr int W = 8, KG = 4, MR = 4, NP = 2;
  using AT = uint8_t;
  using BT = int8_t;
};

std::shared_ptr<int8_t[]> AlignedBytes(size_t bytes) {
  auto* p =
      static_cast<int8_t*>(::operator new[](std::max<size_t>(bytes, 64), std::align_val_t(64)));
  std::memset(p, 0, std::max<size_t>(bytes, 64));
  return std::shared_ptr<int8_t[]>(p,
                                   [](int8_t* q) { ::operator delete[](q, std::align_val_t(64)); });
}

template <QIsa I>
void PackBImpl(const void* b, bool b_signed, int64_t ldb, QPackedB* o) {
  using Q = P<I>;
  using BT = typename Q::BT;
  const int64_t k = o->k, n = o->n, kp = o->kp;
  o->data = AlignedBytes(static_cast<size_t>(o->npad * kp) * sizeof(BT));
  auto* d = reinterpret_cast<BT*>(o->data.get());
  const auto* bs = static_cast<const int8_t*>(b);
  const auto* bu = static_cast<const uint8_t*>(b);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j) {
      const int v = b_signed ? bs[kk * ldb + j] : static_cast<int>(bu[kk * ldb + j]) - 128;
      const int64_t p = j / Q::W, c = j % Q::W;
      d[p * kp * Q::W + (kk / Q::KG) * Q::W * Q::KG + c * Q::KG + kk % Q::KG] = static_cast<BT>(v);
      o->colsum[static_cast<size_t>(j)] = static_cast<int32_t>(
          static_cast<uint32_t>(o->colsum[static_cast<size_t>(j)]) + static_cast<uint32_t>(v));
    }
}

struct Ctx {
  const QPackedB* b;
  int64_t m;
  const void* ap;          // packed A: m rows of kp
  const int32_t *s1, *s2;  // per row: -za', K za' - rowsum(A')
  bool zb_zero;
  QOutput out;
};

// ---- AVX512-VNNI ----
template <int MR, int NP>
FERRY_VNNI void TileVnni(const Ctx& x, int64_t m0, int64_t p0) {
  constexpr int W = 16;
  const int64_t kp = x.b->kp, n = x.b->n;
  const auto* a = static_cast<const uint8_t*>(x.ap) + m0 * kp;
  const int8_t* b = x.b->data.get() + p0 * kp * W;
  __m512i c[MR][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) c[r][p] = _mm512_setzero_si512();
  for (int64_t k = 0; k < kp; k += 4) {
    __m512i bv[NP];
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) bv[p] = _mm512_load_si512(b + p * kp * W + k * W);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t w;
      std::memcpy(&w, a + r * kp + k, 4);
      const __m512i av = _mm512_set1_epi32(w);
      // acc += dpbusd(a, b) in place: with the intrinsic GCC 12 copies every accumulator
      // through another register and the stack on each k step.
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p) asm("vpdpbusd %2, %1, %0" : "+v"(c[r][p]) : "v"(av), "v"(bv[p]));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const int64_t row = m0 + r;
    const __m512i s1 = _mm512_set1_epi32(x.s1[row]), s2 = _mm512_set1_epi32(x.s2[row]);
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      const int64_t col = (p0 + p) * W;
      if (col >= n) break;
      const __mmask16 mask = col + W <= n ? static_cast<__mmask16>(0xFFFF)
                                          : static_cast<__mmask16>((1u << (n - col)) - 1);
      __m512i v = _mm512_add_epi32(
          c[r][p], _mm512_mullo_epi32(s1, _mm512_loadu_si512(x.b->colsum.data() + col)));
      if (!x.zb_zero)
        v = _mm512_add_epi32(v, _mm512_mullo_epi32(s2, _mm512_loadu_si512(x.b->zb.data() + col)));
      if (x.out.i32) {
        _mm512_mask_storeu_epi32(x.out.i32 + row * x.out.ldc + col, mask, v);
      } else {
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_loadu_ps(x.out.scale + col));
        if (x.out.bias) f = _mm512_add_ps(f, _mm512_loadu_ps(x.out.bias + col));
        _mm512_mask_storeu_ps(x.out.f32 + row * x.out.ldc + col, mask, f);
      }
    }
  }
}

// ---- AVX2 (int16 widening, vpmaddwd) ----
template <int MR, int NP>
FERRY_AVX2 void TileAvx2(const Ctx& x, int64_t m0, int64_t p0) {
  constexpr int W = 8;
  const int64_t kp = x.b->kp, n = x.b->n;
  const auto* a = static_cast<const int16_t*>(x.ap) + m0 * kp;
  const auto* b = reinterpret_cast<const int16_t*>(x.b->data.get()) + p0 * kp * W;
  __m256i c[MR][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) c[r][p] = _mm256_setzero_si256();
  for (int64_t k = 0; k < kp; k += 2) {
    __m256i bv[NP];
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p)
      bv[p] = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + p * kp * W + k * W));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t w;
      std::memcpy(&w, a + r * kp + k, 4);
      const __m256i av = _mm256_set1_epi32(w);
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p)
        c[r][p] = _mm256_add_epi32(c[r][p], _mm256_madd_epi16(av, bv[p]));
    }
  }
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const int64_t row = m0 + r;
    const __m256i s1 = _mm256_set1_epi32(x.s1[row]), s2 = _mm256_set1_epi32(x.s2[row]);
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      const int64_t col = (p0 + p) * W;
      if (col >= n) break;
      const __m256i mask = _mm256_cmpgt_epi32(
          _mm256_set1_epi32(static_cast<int>(std::min<int64_t>(W, n - col))), lanes);
      const auto* cs = reinterpret_cast<const __m256i*>(x.b->colsum.data() + col);
      __m256i v = _mm256_add_epi32(c[r][p], _mm256_mullo_epi32(s1, _mm256_loadu_si256(cs)));
      if (!x.zb_zero) {
        const auto* zb = reinterpret_cast<const __m256i*>(x.b->zb.data() + col);
        v = _mm256_add_epi32(v, _mm256_mullo_epi32(s2, _mm256_loadu_si256(zb)));
      }
      if (x.out.i32) {
        _mm256_maskstore_epi32(x.out.i32 + row * x.out.ldc + col, mask, v);
      } else {
        __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(x.out.scale + col));
        if (x.out.bias) f = _mm256_add_ps(f, _mm256_loadu_ps(x.out.bias + col));
        _mm256_maskstore_ps(x.out.f32 + row * x.out.ldc + col, mask, f);
      }
    }
  }
}

// ---- AVX2, B' within +-64 (vpmaddubsw, then vpmaddwd by ones) ----
template <int MR, int NP>
FERRY_AVX2 void TileAvx2Narrow(const Ctx& x, int64_t m0, int64_t p0) {
  constexpr int W = 8;
  const int64_t kp = x.b->kp, n = x.b->n;
  const auto* a = static_cast<const uint8_t*>(x.ap) + m0 * kp;
  const int8_t* b = x.b->data.get() + p0 * kp * W;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[MR][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) c[r][p] = _mm256_setzero_si256();
  for (int64_t k = 0; k < kp; k += 4) {
    __m256i bv[NP];
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p)
      bv[p] = _mm256_load_si256(reinterpret_cast<const __m256i*>(b + p * kp * W + k * W));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t w;
      std::memcpy(&w, a + r * kp + k, 4);
      const __m256i av = _mm256_set1_epi32(w);
#pragma GCC unroll 2
      for (int p = 0; p < NP; ++p)
        c[r][p] =
            _mm256_add_epi32(c[r][p], _mm256_madd_epi16(_mm256_maddubs_epi16(av, bv[p]), ones));
    }
  }
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const int64_t row = m0 + r;
    const __m256i s1 = _mm256_set1_epi32(x.s1[row]), s2 = _mm256_set1_epi32(x.s2[row]);
#pragma GCC unroll 2
    for (int p = 0; p < NP; ++p) {
      const int64_t col = (p0 + p) * W;
      if (col >= n) break;
      const __m256i mask = _mm256_cmpgt_epi32(
          _mm256_set1_epi32(static_cast<int>(std::min<int64_t>(W, n - col))), lanes);
      const auto* cs = reinterpret_cast<const __m256i*>(x.b->colsum.data() + col);
      __m256i v = _mm256_add_epi32(c[r][p], _mm256_mullo_epi32(s1, _mm256_loadu_si256(cs)));
      if (!x.zb_zero) {
        const auto* zb = reinterpret_cast<const __m256i*>(x.b->zb.data() + col);
        v = _mm256_add_epi32(v, _mm256_mullo_epi32(s2, _mm256_loadu_si256(zb)));
      }
      if (x.out.i32) {
        _mm256_maskstore_epi32(x.out.i32 + row * x.out.ldc + col, mask, v);
      } else {
        __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(x.out.scale + col));
        if (x.out.bias) f = _mm256_add_ps(f, _mm256_loadu_ps(x.out.bias + col));
        _mm256_maskstore_ps(x.out.f32 + row * x.out.ldc + col, mask, f);
      }
    }
  }
}

using TileFn = void (*)(const Ctx&, int64_t, int64_t);

template <QIsa I, int MR, int NP>
constexpr TileFn Tile() {
  if constexpr (I == QIsa::kAvx512Vnni)
    return TileVnni<MR, NP>;
  else if constexpr (I == kAvx2Narrow)
    return TileAvx2Narrow<MR, NP>;
  else
    return TileAvx2<MR, NP>;
}

template <QIsa I, int... R>
constexpr std::array<std::array<TileFn, 2>, sizeof...(R)> Tiles(std::integer_sequence<int, R...>) {
  return {{{Tile<I, R + 1, 1>(), Tile<I, R + 1, 2>()}...}};
}

template <QIsa I>
void GemmImpl(const QPackedB& b, const void* a, bool a_signed, int64_t m, int64_t lda,
              const int32_t* za, bool za_scalar, const QOutput& out) {
  using Q = P<I>;
  using AT = typename Q::AT;
  static constexpr auto kTiles = Tiles<I>(std::make_integer_sequence<int, Q::MR>());
  const int64_t k = b.k, kp = b.kp;
  // A uint8 with rows already of kp bytes is its own packed form (VNNI's and the narrow AVX2
  // path's 4-byte k groups are A's row order): only the row sums are needed. Otherwise A is
  // copied into this thread's buffer (kept between calls; a fresh zeroed vector per GEMM cost
  // BERT's dynamic int8 MatMuls ~5% of the model's run).
  const bool in_place = std::is_same_v<AT, uint8_t> && !a_signed && kp == k && lda == k;
  thread_local std::vector<AT> ap_buf;
  thread_local std::vector<int32_t> s1, s2;
  if (!in_place && ap_buf.size() < static_cast<size_t>(m * kp))
    ap_buf.resize(static_cast<size_t>(m * kp));
  s1.resize(static_cast<size_t>(m));
  s2.resize(static_cast<size_t>(m));
  AT* ap = ap_buf.data();
  int32_t* s1p = s1.data();
  int32_t* s2p = s2.data();
  const auto* as = static_cast<const int8_t*>(a);
  const auto* au = static_cast<const uint8_t*>(a);
  ParallelRange(
      m, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, kp)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          uint32_t sum = 0;
          if (in_place) {
            const uint8_t* row = au + r * lda;
#pragma omp simd reduction(+ : sum)
            for (int64_t kk = 0; kk < k; ++kk) sum += row[kk];
          } else if (a_signed) {
            AT* d = ap + r * kp;
            const int8_t* row = as + r * lda;
#pragma omp simd reduction(+ : sum)
            for (int64_t kk = 0; kk < k; ++kk) {
              const int v = row[kk] + 128;
              d[kk] = static_cast<AT>(v);
              sum += static_cast<uint32_t>(v);
            }
            for (int64_t kk = k; kk < kp; ++kk) d[kk] = 0;
          } else {
            AT* d = ap + r * kp;
            const uint8_t* row = au + r * lda;
#pragma omp simd reduction(+ : sum)
            for (int64_t kk = 0; kk < k; ++kk) {
              d[kk] = static_cast<AT>(row[kk]);
              sum += row[kk];
            }
            for (int64_t kk = k; kk < kp; ++kk) d[kk] = 0;
          }
          const uint32_t z =
              static_cast<uint32_t>(za ? za[za_scalar ? 0 : r] : 0) + (a_signed ? 128u : 0u);
          s1p[r] = static_cast<int32_t>(0u - z);
          s2p[r] = static_cast<int32_t>(static_cast<uint32_t>(k) * z - sum);
        }
      });
  bool zb_zero = true;
  for (int32_t z : b.zb) zb_zero = zb_zero && z == 0;
  const Ctx x{&b, m, in_place ? a : static_cast<const void*>(ap), s1p, s2p, zb_zero, out};
  const int64_t mblocks = (m + Q::MR - 1) / Q::MR;
  const int64_t panels = b.npad / Q::W;
  const int64_t groups = (panels + Q::NP - 1) / Q::NP;
  const int64_t tile_macs = int64_t{Q::MR} * Q::W * Q::NP * std::max<int64_t>(kp, 1);
  ParallelRange(mblocks * groups, std::max<int64_t>(1, (int64_t{1} << 18) / tile_macs),
                [&](int64_t t0, int64_t t1) {
                  for (int64_t t = t0; t < t1; ++t) {
                    const int64_t g = t / mblocks, mb = t % mblocks;
                    const int64_t m0 = mb * Q::MR, p0 = g * Q::NP;
                    const int mr = static_cast<int>(std::min<int64_t>(Q::MR, m - m0));
                    const int np = static_cast<int>(std::min<int64_t>(Q::NP, panels - p0));
                    kTiles[static_cast<size_t>(mr - 1)][static_cast<size_t>(np - 1)](x, m0, p0);
                  }
                });
}

}  // namespace

QIsa QGemmIsa() {
  static const QIsa best = Detect();
  const int cap = g_cap.load();
  if (cap >= 0 && cap < static_cast<int>(best)) return static_cast<QIsa>(cap);
  return best;
}

void SetQGemmIsaForTesting(int isa) {
  g_cap.store(isa);
}

namespace {
std::atomic<bool> g_onednn{true};
}

bool QGemmUseOneDnn() {
  static const bool ok = [] {
    const char* e = std::getenv("FERRY_INT8_GEMM");
    if (e != nullptr && std::string_view(e) == "own") return false;
    // oneDNN's own ISA cap (ONEDNN_MAX_CPU_ISA=AVX2 on a VNNI CPU) would bring back the
    // saturating vpmaddubsw: take oneDNN only when it will run VNNI or AMX code.
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
           isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return ok && g_onednn.load() && QGemmIsa() == QIsa::kAvx512Vnni;
}

void SetQGemmOneDnnForTesting(bool allowed) {
  g_onednn.store(allowed);
}

void QEpilogue(const int32_t* acc, int64_t rows, int64_t n, const QOutput& out) {
  ParallelRange(rows, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, n)),
                [&](int64_t r0, int64_t r1) {
                  for (int64_t r = r0; r < r1; ++r) {
                    const int32_t* a = acc + r * n;
                    float* y = out.f32 + r * n;
                    if (out.bias) {
                      for (int64_t j = 0; j < n; ++j)
                        y[j] = static_cast<float>(a[j]) * out.scale[j] + out.bias[j];
                    } else {
                      for (int64_t j = 0; j < n; ++j)
                        y[j] = static_cast<float>(a[j]) * out.scale[j];
                    }
                  }
                });
}

namespace {

// Whether an int8 B [k, n] (row stride ldb) lies within +-64 (the narrow AVX2 path is exact);
// FERRY_INT8_AVX2=wide keeps the widening path.
bool NarrowB(const void* b, bool b_signed, int64_t k, int64_t n, int64_t ldb) {
  static const bool off = [] {
    const char* e = std::getenv("FERRY_INT8_AVX2");
    return e != nullptr && std::string_view(e) == "wide";
  }();
  if (!b_signed || off) return false;
  const auto* bs = static_cast<const int8_t*>(b);
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t j = 0; j < n; ++j)
      if (bs[kk * ldb + j] < -64 || bs[kk * ldb + j] > 64) return false;
  return true;
}

}  // namespace

void QPackB(QIsa isa, const void* b, bool b_signed, int64_t k, int64_t n, int64_t ldb,
            const int32_t* zb, bool zb_scalar, QPackedB* out) {
  if (isa == QIsa::kAvx2 && NarrowB(b, b_signed, k, n, ldb)) isa = kAvx2Narrow;
  const int w = isa == QIsa::kAvx512Vnni ? 16 : 8;
  const int kg = isa == QIsa::kAvx2 ? 2 : 4;
  out->isa = isa;
  out->k = k;
  out->n = n;
  out->kp = (k + kg - 1) / kg * kg;
  out->npad = std::max<int64_t>(1, (n + w - 1) / w) * w;
  out->colsum.assign(static_cast<size_t>(out->npad), 0);
  out->zb.assign(static_cast<size_t>(out->npad), 0);
  for (int64_t j = 0; j < n; ++j)
    out->zb[static_cast<size_t>(j)] = (zb ? zb[zb_scalar ? 0 : j] : 0) - (b_signed ? 0 : 128);
  if (isa == QIsa::kAvx512Vnni)
    PackBImpl<QIsa::kAvx512Vnni>(b, b_signed, ldb, out);
  else if (isa == kAvx2Narrow)
    PackBImpl<kAvx2Narrow>(b, b_signed, ldb, out);
  else
    PackBImpl<QIsa::kAvx2>(b, b_signed, ldb, out);
}

void QGemm(const QPackedB& b, const void* a, bool a_signed, int64_t m, int64_t lda,
           const int32_t* za, bool za_scalar, const QOutput& out) {
  if (m <= 0 || b.n <= 0) return;
  if (b.isa == QIsa::kAvx512Vnni)
    GemmImpl<QIsa::kAvx512Vnni>(b, a, a_signed, m, lda, za, za_scalar, out);
  else if (b.isa == kAvx2Narrow)
    GemmImpl<kAvx2Narrow>(b, a, a_signed, m, lda, za, za_scalar, out);
  else
    GemmImpl<QIsa::kAvx2>(b, a, a_signed, m, lda, za, za_scalar, out);
}

}  // namespace ferry::ops::cpu
