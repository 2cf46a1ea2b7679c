// A network's first convolution (few input channels, plain input) with an own AVX-512 kernel
// (see stem.h).
#include "ops/cpu/stem.h"

#include <immintrin.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "ops/cpu/act512.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/pool.h"
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

// Output row (n, oy), pixels [ox0, ox0 + R), written to yrow (the row's first pixel). kBorder:
// some tap of some pixel falls outside the row (checked per pixel; the others read without
// checks).
template <int R, int P, Act A, bool kBorder>
FERRY_AVX512 inline __attribute__((always_inline)) void Tile(const Args& g, int64_t n, int64_t oy,
                                                             int64_t ox0, float* yrow) {
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
    float* yp = yrow + (ox0 + r) * s.k;
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

// Output rows [r0, r1) (counted over the images: row = n * oh + oy); with `dst`, written there one
// after the other (row r0 first), else to g.y.
template <int P, Act A>
FERRY_AVX512 void Rows(const Args& g, int64_t r0, int64_t r1, float* dst) {
  constexpr int R = RowsFor(P);
  const StemShape& s = *g.s;
  // Output columns whose taps all fall inside the row: [in0, in1).
  const int64_t in0 = std::min(s.ow, (s.pad_l + s.sw - 1) / s.sw);
  const int64_t last = s.w + s.pad_l - s.kw;  // the last pixel's leftmost tap, if >= 0
  const int64_t in1 = last < 0 ? in0 : std::max(in0, std::min(s.ow, last / s.sw + 1));
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t n = row / s.oh, oy = row % s.oh;
    float* yrow = (dst ? dst + (row - r0) * s.ow * s.k : g.y + row * s.ow * s.k);
    int64_t ox = 0;
    for (; ox < in0; ++ox) Tile<1, P, A, true>(g, n, oy, ox, yrow);
    for (; ox + R <= in1; ox += R) Tile<R, P, A, false>(g, n, oy, ox, yrow);
    for (; ox < in1; ++ox) Tile<1, P, A, false>(g, n, oy, ox, yrow);
    for (; ox < s.ow; ++ox) Tile<1, P, A, true>(g, n, oy, ox, yrow);
  }
}

using RowsFn = void (*)(const Args&, int64_t, int64_t, float*);

template <Act A>
RowsFn RowsOf(int64_t vecs) {
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

bool StemTakes(const StemShape& s, const Fusion& fusion) {
  return StemSupported() && !fusion.sum && fusion.act != Fusion::Act::kGelu && s.c >= 1 &&
         s.c <= 4 && s.k >= 1 && s.k <= 64 && s.kh >= 1 && s.kw >= 1 && s.kh <= 11 && s.kw <= 11 &&
         s.sh >= 1 && s.sw >= 1 && s.oh > 0 && s.ow > 0 && s.n > 0;
}

bool StemWanted(const StemShape& s, const Fusion& fusion) {
  if (!StemTakes(s, fusion)) return false;
  if (ForcedOn()) return true;
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
  packed_floats_ = static_cast<size_t>(s.c * s.kh * s.kw * vecs_ * 16);
}

PackedPtr StemConv::Pack(const float* w) const {
  auto packed = std::make_shared<PackedFloats>(packed_floats_);
  float* dst = packed->data();
  const int64_t width = vecs_ * 16, taps = s_.kh * s_.kw;
  for (int64_t c = 0; c < s_.c; ++c)
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t j = 0; j < width; ++j)
        dst[(c * taps + t) * width + j] = j < s_.k ? w[(j * s_.c + c) * taps + t] : 0.f;
  return packed;
}

std::string StemConv::PackTag() const {
  return fmt::format("stem c{} {}x{} k{}", s_.c, s_.kh, s_.kw, s_.k);
}

void StemConv::RunRows(const float* x, const float* bias, float* y, int64_t r0, int64_t r1,
                       float* dst) const {
  Args g;
  g.s = &s_;
  g.x = x;
  g.w = w_->data();
  g.bias = bias;
  g.y = y;
  std::tie(g.lo, g.hi) = fusion_.bounds();
  g.tail = s_.k % 16 == 0 ? static_cast<__mmask16>(0xffff)
                          : static_cast<__mmask16>((1u << static_cast<unsigned>(s_.k % 16)) - 1);
  const RowsFn rows = fusion_.act == Fusion::Act::kSwish       ? RowsOf<Act::kSwish>(vecs_)
                      : fusion_.act == Fusion::Act::kHardSwish ? RowsOf<Act::kHardSwish>(vecs_)
                                                               : RowsOf<Act::kClamp>(vecs_);
  rows(g, r0, r1, dst);
}

void StemConv::Run(const float* x, const float* bias, float* y) const {
  g_runs.fetch_add(1, std::memory_order_relaxed);
  ParallelRange(s_.n * s_.oh, 2, [&](int64_t b, int64_t e) { RunRows(x, bias, y, b, e, nullptr); });
}

// ---- The first conv, its activation and the MaxPool after it, as one pattern kernel ----
//
// Conv (the own kernel's shapes) -> [Relu / Clip / SiLU / HardSwish] -> MaxPool (2-D, no
// dilation, no Indices output): the conv's output rows are computed into a thread-local buffer
// and pooled from there, so the conv output (ResNet-18's 112x112x64: 3.2 MB) is never written
// to memory and read back. Each thread takes a contiguous range of pooled rows and walks it in
// strips; the conv rows a strip shares with the previous one (the pool windows' overlap) are
// moved to the buffer's front, not computed again. Every output element is the one the two
// kernels compute separately (the same conv tiles, the same max order).

namespace {

enum PoolParam : size_t {
  kAct,
  kLo,
  kHi,
  kPkh,
  kPkw,
  kPsh,
  kPsw,
  kPpt,
  kPpl,
  kPpb,
  kPpr,
  kCeil,
  kNumPoolParams
};

std::atomic<int> g_pool_forced{-1};  // SetStemPoolModeForTesting
std::atomic<uint64_t> g_pool_runs{0};

// FERRY_STEM_POOL: onednn (never), own (every shape the kernel takes), else the rule; read once.
int PoolMode() {
  const int f = g_pool_forced.load();
  if (f >= 0) return f;
  static const int m = KernelModeFromEnv("FERRY_STEM_POOL");
  return m;
}

// Conv rows a strip's buffer may hold (bytes; at least one strip of one pooled row); the buffer
// stays in L2. SetStemPoolStripBytesForTesting overrides it.
constexpr int64_t kStripBytes = 256 * 1024;
std::atomic<int64_t> g_strip_bytes{0};

const KernelDef* StemPoolKernel();

bool MatchStemPool(const GraphView& g, size_t host, PatternMatch* m) {
  ConvAt c;
  if (PoolMode() == 0 || !StemSupported() || !ConvStep(g, host, &c) || c.group != 1 ||
      c.w->dim(0) < 1 || c.w->dim(0) > 64 || c.w->dim(1) < 1 || c.w->dim(1) > 4 ||
      c.w->dim(2) > 11 || c.w->dim(3) > 11)
    return false;
  std::vector<size_t> steps;
  Fusion f;
  int v = g.output(host, 0);
  if (!TakeAct(g, &v, &f, &steps, true)) return false;
  size_t ps = 0;
  if (!OnlyReader(g, v, &ps) || !IsOp(g, ps, "MaxPool") || g.input(ps, 0) != v ||
      g.output(ps, 0) < 0 || (g.node(ps).outputs.size() > 1 && g.output(ps, 1) >= 0))
    return false;
  const ir::Node& pn = g.node(ps);
  const std::vector<int64_t> k = pn.attr_ints("kernel_shape");
  std::vector<int64_t> st = pn.attr_ints("strides"), pads = pn.attr_ints("pads");
  const std::string auto_pad = pn.attr_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID")
    pads = {0, 0, 0, 0};
  else if (auto_pad != "NOTSET" && !auto_pad.empty())
    return false;
  if (st.empty()) st = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  for (int64_t d : pn.attr_ints("dilations"))
    if (d != 1) return false;
  if (k.size() != 2 || st.size() != 2 || pads.size() != 4 || k[0] < 1 || k[1] < 1 ||
      k[0] * k[1] > kMaxTaps || st[0] < 1 || st[1] < 1 || pn.attr_int("storage_order", 0) != 0)
    return false;
  for (int64_t p : pads)
    if (p < 0) return false;
  steps.push_back(ps);
  m->kernel = StemPoolKernel();
  m->absorbed = steps;
  const bool bias = g.node(host).inputs.size() > 2 && g.input(host, 2) >= 0;
  m->inputs = {g.input(host, 0), g.input(host, 1), bias ? g.input(host, 2) : -1};
  m->output = g.output(ps, 0);
  m->params = {static_cast<float>(f.act), f.lo, f.hi};
  for (int64_t a : {k[0], k[1], st[0], st[1], pads[0], pads[1], pads[2], pads[3]})
    m->params.push_back(static_cast<float>(a));
  m->params.push_back(pn.attr_int("ceil_mode", 0) != 0 ? 1.f : 0.f);
  return true;
}

// The pooled size along one axis as the reference MaxPool computes it (ceil_mode drops a last
// window that would start in the end padding); 0 when some window covers no input element (the
// reference rejects that: the steps then run one by one and report it).
int64_t PooledSize(int64_t in, int64_t k, int64_t s, int64_t begin, int64_t end, bool ceil) {
  const int64_t span = in + begin + end - k;
  if (span < 0) return 0;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + begin) --out;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t first = o * s - begin;
    if (first + k - 1 < 0 || first >= in) return 0;
  }
  return out;
}

struct StemPoolState : KernelState {
  StateKey key;
  std::unique_ptr<StemConv> conv;
  VecPoolGeom pool;      // over one image of the conv output
  int64_t strip = 1;     // pooled rows per strip
  int64_t buf_rows = 1;  // conv rows a strip's buffer holds
  const void* packed_from = nullptr;
};

Status PrepareStemPool(OpContext& ctx, NodeSlot& slot) {
  const std::vector<float>& p = slot.params;
  bool ok = p.size() == kNumPoolParams && ctx.num_inputs() == 3 && !slot.nhwc_ok.empty() &&
            slot.nhwc_ok[0] && (slot.in_layouts.empty() || slot.in_layouts[0] == Layout::kPlain);
  for (size_t i : {size_t{0}, size_t{1}})
    ok = ok && ctx.input_is_tensor(i) && ctx.input(i).dtype() == DType::kFloat &&
         ctx.input(i).rank() == 4;
  ok = ok && slot.const_inputs.size() > 2 && slot.const_inputs[1] &&
       (!ctx.has_input(2) || (slot.const_inputs[2] && ctx.input(2).dtype() == DType::kFloat &&
                              ctx.input(2).rank() == 1));
  if (!ok) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<StemPoolState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    const Tensor &x = ctx.input(0), &w = ctx.input(1);
    auto fresh = std::make_unique<StemPoolState>();
    fresh->key = key;
    // The conv (the host step: its attributes; ConvStep checked dilations and auto_pad).
    std::vector<int64_t> cs = ctx.attr_ints("strides"), cp = ctx.attr_ints("pads");
    if (cs.empty()) cs = {1, 1};
    if (cp.empty()) cp = {0, 0, 0, 0};
    bool geometry_ok = cs.size() == 2 && cp.size() == 4 && cs[0] >= 1 && cs[1] >= 1;
    for (int64_t v : cp) geometry_ok = geometry_ok && v >= 0;
    if (!geometry_ok) {  // the Conv step reports it
      slot.declined = true;
      return Status::Ok();
    }
    StemShape sh;
    sh.n = x.dim(0);
    sh.c = x.dim(1);
    sh.h = x.dim(2);
    sh.w = x.dim(3);
    sh.kh = w.dim(2);
    sh.kw = w.dim(3);
    sh.sh = cs[0];
    sh.sw = cs[1];
    sh.pad_t = cp[0];
    sh.pad_l = cp[1];
    sh.k = w.dim(0);
    const int64_t span_h = sh.h + cp[0] + cp[2] - sh.kh, span_w = sh.w + cp[1] + cp[3] - sh.kw;
    sh.oh = span_h < 0 ? 0 : span_h / sh.sh + 1;
    sh.ow = span_w < 0 ? 0 : span_w / sh.sw + 1;
    Fusion f;
    f.act = static_cast<Fusion::Act>(static_cast<int>(p[kAct]));
    f.lo = p[kLo];
    f.hi = p[kHi];
    VecPoolGeom& g = fresh->pool;
    g.images = 1;
    g.vc = sh.k;
    g.h = sh.oh;
    g.w = sh.ow;
    g.kh = static_cast<int64_t>(p[kPkh]);
    g.kw = static_cast<int64_t>(p[kPkw]);
    g.sh = static_cast<int64_t>(p[kPsh]);
    g.sw = static_cast<int64_t>(p[kPsw]);
    g.dh = g.dw = 1;
    g.pt = static_cast<int64_t>(p[kPpt]);
    g.pl = static_cast<int64_t>(p[kPpl]);
    const bool ceil = p[kCeil] != 0.f;
    g.oh = PooledSize(sh.oh, g.kh, g.sh, g.pt, static_cast<int64_t>(p[kPpb]), ceil);
    g.ow = PooledSize(sh.ow, g.kw, g.sw, g.pl, static_cast<int64_t>(p[kPpr]), ceil);
    // Shapes the steps would reject (they report the error when run one by one), and shapes
    // the rule leaves to the separate kernels.
    if (w.dim(1) != sh.c || sh.n < 1 || sh.c < 1 || sh.oh < 1 || sh.ow < 1 || g.oh < 1 ||
        g.ow < 1 || (ctx.has_input(2) && ctx.input(2).dim(0) != sh.k) || !StemPoolWanted(sh, f)) {
      slot.declined = true;
      return Status::Ok();
    }
    fresh->conv = std::make_unique<StemConv>(sh, f);
    const int64_t row_bytes = sh.ow * sh.k * static_cast<int64_t>(sizeof(float));
    const int64_t forced = g_strip_bytes.load();
    const int64_t strip_bytes = forced > 0 ? forced : kStripBytes;
    fresh->strip = std::max<int64_t>(1, (strip_bytes / row_bytes - g.kh) / g.sh + 1);
    fresh->strip = std::min(fresh->strip, g.oh);
    fresh->buf_rows = (fresh->strip - 1) * g.sh + g.kh;
    slot.state = std::move(fresh);
    st = static_cast<StemPoolState*>(slot.state.get());
  }
  const void* wptr = ctx.input(1).raw();
  if (st->packed_from != wptr) {
    PackFor(*st->conv, slot, ConstInput(slot, 1), ctx.input(1).data<float>());
    st->packed_from = wptr;
  }
  const StemShape& sh = st->conv->shape();
  ctx.set_output(0, DType::kFloat, {sh.n, sh.k, st->pool.oh, st->pool.ow});
  slot.out_layouts.assign(1, Layout::kNhwc);
  return Status::Ok();
}

void RunStemPool(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const StemPoolState*>(slot.state.get());
  const StemShape& sh = st->conv->shape();
  const VecPoolGeom& pg = st->pool;
  const float* x = ctx.input(0).data<float>();
  const float* bias = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  float* y = ctx.output(0).data<float>();
  const int64_t row_floats = sh.ow * sh.k;
  const size_t per_thread = (sizeof(float) * st->buf_rows * row_floats + 63) / 64 * 64;
  auto* scratch = static_cast<std::byte*>(
      slot.provider->Scratch(0, per_thread * static_cast<size_t>(omp_get_max_threads())));
  const VecMaxPoolRowFn pool_row = VecMaxPoolRow();
  g_pool_runs.fetch_add(1, std::memory_order_relaxed);
  ParallelRange(sh.n * pg.oh, 1, [&](int64_t b, int64_t e) {
    auto* buf = reinterpret_cast<float*>(scratch + per_thread * omp_get_thread_num());
    int64_t have_n = -1, have_lo = 0, have_hi = 0;  // conv rows [have_lo, have_hi) in buf
    for (int64_t q = b; q < e;) {
      const int64_t n = q / pg.oh, q0 = q % pg.oh;
      const int64_t q1 = std::min({pg.oh, q0 + st->strip, q0 + (e - q)});
      // The conv rows the strip's windows cover.
      const int64_t lo = std::max<int64_t>(0, q0 * pg.sh - pg.pt);
      const int64_t hi = std::min(sh.oh, (q1 - 1) * pg.sh - pg.pt + pg.kh);
      int64_t from = lo;
      if (have_n == n && have_lo <= lo && lo < have_hi) {
        std::memmove(buf, buf + (lo - have_lo) * row_floats,
                     sizeof(float) * (have_hi - lo) * row_floats);
        from = have_hi;
      }
      if (from < hi)
        st->conv->RunRows(x, bias, nullptr, n * sh.oh + from, n * sh.oh + hi,
                          buf + (from - lo) * row_floats);
      have_n = n;
      have_lo = lo;
      have_hi = hi;
      // Pool rows [q0, q1) from the buffer: an "image" of rows [lo, hi), the pads shifted.
      VecPoolGeom g = pg;
      g.h = hi - lo;
      g.pt = lo + pg.pt - q0 * pg.sh;
      float* yq = y + (n * pg.oh + q0) * pg.ow * sh.k;
      for (int64_t oy = 0; oy < q1 - q0; ++oy) pool_row(buf, yq, g, 0, oy);
      q += q1 - q0;
    }
  });
}

constexpr KernelDef kStemPool = {"", "StemPool (pattern)", 1,          1000, nullptr, 0,
                                 0,  PrepareStemPool,      RunStemPool};

const KernelDef* StemPoolKernel() {
  return &kStemPool;
}

constexpr Pattern kPatterns[] = {{"StemPool", MatchStemPool}};

}  // namespace

bool StemPoolWanted(const StemShape& s, const Fusion& fusion) {
  if (PoolMode() == 0 || !StemTakes(s, fusion)) return false;
  if (PoolMode() == 1) return true;
  // Measured (per node, conv + pool, this pattern / the conv and the own pool separately; medians
  // of 6 rounds, the order reversed every other round, other nodes of the model at 0.96-1.05):
  // SqueezeNet 1.1's 3x3 stride 2 K 64 0.77 at 1 thread, 0.88 at 2; with the 7x7 stem oneDNN runs
  // on its own, ResNet-18 0.91 / 0.85 (the 112x112x64 conv output never goes to memory). In 7
  // rounds of a fixed order (which may favour either side by up to ~7% on this VM): ShuffleNetV2's
  // K 24 0.92 / 0.95, GoogLeNet's 7x7 0.91 / 0.95. Not measured: 11x11 (AlexNet, stride 4) stays
  // separate.
  const bool gate = fusion.act == Fusion::Act::kSwish || fusion.act == Fusion::Act::kHardSwish;
  return s.kh <= 7 && s.kw <= 7 && (s.k >= 24 || gate);
}

void SetStemPoolStripBytesForTesting(int64_t bytes) {
  g_strip_bytes.store(bytes);
}

uint64_t StemPoolRuns() {
  return g_pool_runs.load();
}

void SetStemPoolModeForTesting(int mode) {
  g_pool_forced.store(mode);
}

std::span<const Pattern> StemPoolPatterns() {
  return kPatterns;
}

}  // namespace ferry::ops::cpu
