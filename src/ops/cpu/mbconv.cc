// The inverted residual block of MobileNetV2 / V3, MnasNet, EfficientNet (1x1 expand -> act ->
// depthwise -> act -> [Squeeze-Excitation] -> 1x1 project [-> + x] [-> act]) as one pattern
// kernel.
//
// Run as separate convolutions, the block writes its expanded tensor (4-6x the block's input
// channels) to memory and reads it back twice, each conv is its own parallel region and each
// splits the image its own way, so at 2 threads the rows a thread reads were mostly written by
// the other one. Here, on images of 14x14 and up, each thread takes a contiguous range of output
// rows and walks it in strips of `band` rows: it expands the input rows the strip's depthwise
// window needs into a thread-local buffer (rows the previous strip already expanded are moved to
// its front, not computed again), runs the depthwise rows on it into a second buffer, and
// projects those rows into the output, adding the residual. Both buffers stay in the core's L2;
// one parallel region per block. Smaller images go by channel groups (RunByChannels). The steps
// are the own kernels (pointwise.h, dwconv.h) on the calling thread; every output element is
// summed in an order fixed by the shapes, not the thread count.
//
// params: Param below; inputs: {x, W1, B1, Wd, Bd, W2, B2 [, FC1 W, FC1 B, FC2 W, FC2 B]}
// (absent biases: -1; the last four with Squeeze-Excitation).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>

#include "ops/cpu/act512.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/dwconv.h"
#include "ops/cpu/families.h"
#include "ops/cpu/gemm_avx2.h"
#include "ops/cpu/pointwise.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

enum Param : size_t {
  kKh,
  kKw,
  kSh,
  kSw,
  kPt,
  kPl,
  kPb,
  kPr,
  kAct1,
  kLo1,
  kHi1,
  kAct2,
  kLo2,
  kHi2,
  kAct3,
  kLo3,
  kHi3,
  kResidual,
  kSe,     // 1: Squeeze-Excitation between the depthwise conv and the projection
  kSeAct,  // its first FC's activation (act, lo, hi)
  kSeLo,
  kSeHi,
  kSeGate,  // 0 Sigmoid, 1 HardSigmoid (alpha, beta)
  kSeAlpha,
  kSeBeta,
  kNumParams
};

// Output images under this many pixels go by channel groups (RunByChannels), kGroups of them
// (fewer when E has fewer 16-channel vectors). MnasNet's 7x7 blocks at 2 threads: 0.77-0.85 of
// the separate convs (strips: 1.0-1.09, the 5x5 window's halo rows expanded by both threads); its
// 14x14 ones did better in strips (0.75-0.86; by channels 4% slower).
constexpr int64_t kChannelSplitPixels = 196;
constexpr int64_t kGroups = 4;
constexpr int64_t kSeOneThreadPixels = 784;

// Bytes of expanded rows a strip may hold (the buffer stays in L2 with the depthwise output);
// SetMbConvStripBytesForTesting overrides it.
constexpr int64_t kStripBytes = 384 * 1024;
std::atomic<int64_t> g_strip_bytes{0};

bool Enabled() {
  static const bool on = KernelModeFromEnv("FERRY_MBCONV") != 0;
  return on && PointwiseSupported() && DwConvSupported();
}

bool Pointwise1x1(const ConvAt& c) {
  return c.group == 1 && c.w->dim(2) == 1 && c.w->dim(3) == 1 && c.strides[0] == 1 &&
         c.strides[1] == 1 && c.pads == std::vector<int64_t>{0, 0, 0, 0};
}

const KernelDef* MbConvKernel();

// Squeeze-Excitation on value v (E channels): GlobalAveragePool(v) -> Conv 1x1 (E -> S) -> act
// -> Conv 1x1 (S -> E) -> Sigmoid | HardSigmoid -> Mul(v, gate), the pool and the Mul v's only
// readers. Adds its steps, sets *v to the Mul's output and fills the FCs' steps and params.
struct SeAt {
  size_t fc1 = 0, fc2 = 0;
  Fusion act;
  int gate = 0;  // 0 Sigmoid, 1 HardSigmoid
  float alpha = 0.f, beta = 0.f;
};
bool TakeSe(const GraphView& g, int* v, int64_t e, SeAt* se, std::vector<size_t>* steps) {
  const std::vector<size_t> r = g.readers(*v);
  if (r.size() != 2) return false;
  for (auto [gap, mul] : {std::pair{r[0], r[1]}, std::pair{r[1], r[0]}}) {
    const ir::Node& gn = g.node(gap);
    const ir::Node& mn = g.node(mul);
    if (!IsOnnxOp(gn, "GlobalAveragePool") || !IsOnnxOp(mn, "Mul") || g.opset(mul) < 7 ||
        g.output(gap, 0) < 0 || g.output(mul, 0) < 0)
      continue;
    std::vector<size_t> mine = {gap};
    ConvAt c1, c2;
    size_t f1 = 0, f2 = 0, gs = 0, at = 0;
    if (!OnlyReader(g, g.output(gap, 0), &f1) || !ConvStep(g, f1, &c1) || !Pointwise1x1(c1) ||
        g.input(f1, 0) != g.output(gap, 0) || c1.w->dim(1) != e)
      return false;
    mine.push_back(f1);
    int hv = g.output(f1, 0);
    if (!TakeAct(g, &hv, &se->act, &mine, true)) return false;
    if (!OnlyReader(g, hv, &f2) || !ConvStep(g, f2, &c2) || !Pointwise1x1(c2) ||
        g.input(f2, 0) != hv || c2.w->dim(0) != e || c2.w->dim(1) != c1.w->dim(0))
      return false;
    mine.push_back(f2);
    if (!OnlyReader(g, g.output(f2, 0), &gs)) return false;
    const ir::Node& gate = g.node(gs);
    if (IsOnnxOp(gate, "Sigmoid") && g.opset(gs) >= 6) {
      se->gate = 0;
    } else if (IsOnnxOp(gate, "HardSigmoid") && g.opset(gs) >= 6) {
      se->gate = 1;
      se->alpha = gate.attr_float("alpha", 0.2f);
      se->beta = gate.attr_float("beta", 0.5f);
    } else {
      return false;
    }
    const int gv = g.output(gs, 0);
    if (gv < 0 || !OnlyReader(g, gv, &at) || at != mul || Other(g, mul, *v) != gv) return false;
    mine.push_back(gs);
    mine.push_back(mul);
    se->fc1 = f1;
    se->fc2 = f2;
    steps->insert(steps->end(), mine.begin(), mine.end());
    *v = g.output(mul, 0);
    return true;
  }
  return false;
}

bool MatchMbConv(const GraphView& g, size_t host, PatternMatch* m) {
  ConvAt e, d, p;
  if (!Enabled() || !ConvStep(g, host, &e) || !Pointwise1x1(e)) return false;
  const int x = g.input(host, 0);
  std::vector<size_t> steps;
  Fusion f1, f2, f3;
  int v = g.output(host, 0);
  if (!TakeAct(g, &v, &f1, &steps, true)) return false;
  // The depthwise conv, 3x3 or 5x5, stride 1 or 2.
  size_t dw_step = 0;
  if (!OnlyReader(g, v, &dw_step) || !ConvStep(g, dw_step, &d) || g.input(dw_step, 0) != v)
    return false;
  const int64_t exp = e.w->dim(0), c = e.w->dim(1);
  const int64_t kh = d.w->dim(2), kw = d.w->dim(3);
  if (d.group != exp || d.w->dim(0) != exp || d.w->dim(1) != 1 || kh != kw ||
      (kh != 3 && kh != 5) || d.strides[0] != d.strides[1] || d.strides[0] < 1 || d.strides[0] > 2)
    return false;
  for (int64_t pd : d.pads)
    if (pd < 0 || pd >= kh) return false;
  steps.push_back(dw_step);
  v = g.output(dw_step, 0);
  if (!TakeAct(g, &v, &f2, &steps, true)) return false;
  SeAt se;
  const bool has_se = g.readers(v).size() == 2;
  if (has_se && !TakeSe(g, &v, exp, &se, &steps)) return false;
  // The projection.
  size_t proj_step = 0;
  if (!OnlyReader(g, v, &proj_step) || !ConvStep(g, proj_step, &p) || !Pointwise1x1(p) ||
      g.input(proj_step, 0) != v || p.w->dim(1) != exp)
    return false;
  steps.push_back(proj_step);
  v = g.output(proj_step, 0);
  // The residual: Add(projection, x) as the projection's only reader.
  bool residual = false;
  size_t a = 0;
  if (OnlyReader(g, v, &a) && p.w->dim(0) == c && d.strides[0] == 1 &&
      d.pads[0] + d.pads[2] == kh - 1 && d.pads[1] + d.pads[3] == kw - 1) {
    const ir::Node& an = g.node(a);
    if (IsOnnxOp(an, "Add") && g.opset(a) >= 7 && an.inputs.size() == 2 && g.output(a, 0) >= 0 &&
        Other(g, a, v) == x) {
      residual = true;
      steps.push_back(a);
      v = g.output(a, 0);
    }
  }
  // An activation of the result (ShuffleNetV2's branches end in a Relu).
  if (g.readers(v).size() == 1 && !TakeAct(g, &v, &f3, &steps, false)) return false;
  auto bias = [&](size_t s) { return g.node(s).inputs.size() > 2 ? g.input(s, 2) : -1; };
  m->kernel = MbConvKernel();
  m->absorbed = steps;
  m->inputs = {x,
               g.input(host, 1),
               bias(host),
               g.input(dw_step, 1),
               bias(dw_step),
               g.input(proj_step, 1),
               bias(proj_step)};
  if (has_se)
    m->inputs.insert(m->inputs.end(),
                     {g.input(se.fc1, 1), bias(se.fc1), g.input(se.fc2, 1), bias(se.fc2)});
  m->output = v;
  m->params = {static_cast<float>(kh),           static_cast<float>(kw),
               static_cast<float>(d.strides[0]), static_cast<float>(d.strides[1]),
               static_cast<float>(d.pads[0]),    static_cast<float>(d.pads[1]),
               static_cast<float>(d.pads[2]),    static_cast<float>(d.pads[3])};
  for (const Fusion* f : {&f1, &f2, &f3})
    m->params.insert(m->params.end(), {static_cast<float>(f->act), f->lo, f->hi});
  m->params.push_back(residual ? 1.f : 0.f);
  m->params.insert(m->params.end(), {has_se ? 1.f : 0.f, static_cast<float>(se.act.act), se.act.lo,
                                     se.act.hi, static_cast<float>(se.gate), se.alpha, se.beta});
  return true;
}

// The three convs on the expanded channels [e0, e1): the whole block, or one channel group.
struct Stage {
  int64_t e0 = 0, e1 = 0;
  DwShape s;  // the depthwise conv on these channels (one image: RunRows)
  std::unique_ptr<Pointwise> expand, project;
  std::unique_ptr<DwConv> dw;
  std::vector<float> dw_bias;  // padded to dw->padded_channels(), plus alignment slack
  size_t dw_bias_off = 0;
  size_t off_e = 0, off_d = 0, off_p = 0;  // channel groups: their buffers in the scratch
  const float* bias() const { return dw_bias.data() + dw_bias_off; }
};

struct MbState : KernelState {
  StateKey key;
  DwShape s;      // the depthwise conv on the whole image
  int64_t k = 0;  // output channels (s.c: the expanded ones)
  bool residual = false;
  Fusion act3;  // the channel groups' final pass (Relu / Clip)
  // Large images: one stage, strips of `band` output rows, per-thread buffers of ebuf + dbuf
  // bytes. Small ones: a stage per channel group, `scratch` bytes for all their buffers.
  std::vector<Stage> stages;
  bool by_channels = false;
  int64_t band = 1;
  size_t ebuf = 0, dbuf = 0, scratch = 0;
  // Squeeze-Excitation (inputs 7-10: the FCs' weights and biases): S squeezed channels; in the
  // provider's scratch 1: the whole depthwise output (strips; channel groups keep theirs), its
  // channel sums (strips: per output row), the hidden FC values and the gates.
  bool se = false;
  int64_t sq = 0;
  Fusion se_act;
  int se_gate = 0;
  float se_alpha = 0.f, se_beta = 0.f;
  size_t off_dfull = 0, off_sums = 0, off_hid = 0, off_gate = 0, se_bytes = 0;
  const void* packed_from = nullptr;
};

size_t Align64(size_t b) {
  return (b + 63) / 64 * 64;
}

Fusion ActOf(const std::vector<float>& p, size_t at) {
  Fusion f;
  f.act = static_cast<Fusion::Act>(static_cast<int>(p[at]));
  f.lo = p[at + 1];
  f.hi = p[at + 2];
  return f;
}

// Builds stage [e0, e1) of the block; `project` carries the projection's post-ops.
Stage MakeStage(const MbState& st, int64_t cin, int64_t e0, int64_t e1, const Fusion& act1,
                const Fusion& act2, const Fusion& project) {
  Stage g;
  g.e0 = e0;
  g.e1 = e1;
  g.s = st.s;
  g.s.c = e1 - e0;
  g.s.n = 1;
  const int64_t n = st.s.n;
  g.expand = std::make_unique<Pointwise>(n * st.s.h * st.s.w, cin, g.s.c, act1);
  g.dw = std::make_unique<DwConv>(g.s, Layout::kNhwc, Layout::kNhwc, Layout::kNhwc, act2);
  g.project = std::make_unique<Pointwise>(n * st.s.oh * st.s.ow, g.s.c, st.k, project);
  g.dw_bias.assign(static_cast<size_t>(g.dw->padded_channels() + 16), 0.f);
  g.dw_bias_off = ((64 - reinterpret_cast<uintptr_t>(g.dw_bias.data()) % 64) % 64) / sizeof(float);
  return g;
}

// y = clamp(p[0] + ... + p[groups - 1] (+ res)), m floats each (the channel groups' partial
// projections, in group order: the same sums at any thread count).
FERRY_AVX512 void SumPartials(const float* const* p, int groups, const float* res, float lo,
                              float hi, float* y, int64_t m) {
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (int64_t i = 0; i < m; i += 16) {
    const __mmask16 mk = act512::FirstLanes(m - i);
    __m512 v = _mm512_maskz_loadu_ps(mk, p[0] + i);
    for (int g = 1; g < groups; ++g) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, p[g] + i));
    if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, res + i));
    _mm512_mask_storeu_ps(y + i, mk, act512::Apply<act512::Act::kClamp>(v, vlo, vhi));
  }
}

Status PrepareMbConv(OpContext& ctx, NodeSlot& slot) {
  const std::vector<float>& p = slot.params;
  const bool se = p.size() == kNumParams && p[kSe] != 0.f;
  const size_t n_in = se ? 11 : 7;
  bool ok = p.size() == kNumParams && ctx.num_inputs() == n_in && !slot.nhwc_ok.empty() &&
            slot.nhwc_ok[0] && !slot.in_layouts.empty() && slot.in_layouts[0] == Layout::kNhwc;
  for (size_t i : {size_t{0}, size_t{1}, size_t{3}, size_t{5}})
    ok = ok && ctx.input_is_tensor(i) && ctx.input(i).dtype() == DType::kFloat &&
         ctx.input(i).rank() == 4;
  for (size_t i = 1; i < n_in; ++i)
    ok = ok && slot.const_inputs.size() > i && (ctx.has_input(i) ? slot.const_inputs[i] : true);
  for (size_t i : {size_t{2}, size_t{4}, size_t{6}, size_t{8}, size_t{10}})
    ok = ok && (i >= n_in || !ctx.has_input(i) ||
                (ctx.input(i).dtype() == DType::kFloat && ctx.input(i).rank() == 1));
  if (se)
    for (size_t i : {size_t{7}, size_t{9}})
      ok = ok && ctx.input_is_tensor(i) && ctx.input(i).dtype() == DType::kFloat &&
           ctx.input(i).rank() == 4;
  if (!ok) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<MbState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    const Tensor &x = ctx.input(0), &w1 = ctx.input(1), &wd = ctx.input(3), &w2 = ctx.input(5);
    auto fresh = std::make_unique<MbState>();
    fresh->key = key;
    DwShape& s = fresh->s;
    s.n = x.dim(0);
    s.c = wd.dim(0);
    s.h = x.dim(2);
    s.w = x.dim(3);
    s.kh = static_cast<int64_t>(p[kKh]);
    s.kw = static_cast<int64_t>(p[kKw]);
    s.sh = static_cast<int64_t>(p[kSh]);
    s.sw = static_cast<int64_t>(p[kSw]);
    s.pad_t = static_cast<int64_t>(p[kPt]);
    s.pad_l = static_cast<int64_t>(p[kPl]);
    const int64_t pb = static_cast<int64_t>(p[kPb]), pr = static_cast<int64_t>(p[kPr]);
    const int64_t span_h = s.h + s.pad_t + pb - s.kh, span_w = s.w + s.pad_l + pr - s.kw;
    s.oh = span_h < 0 ? 0 : span_h / s.sh + 1;
    s.ow = span_w < 0 ? 0 : span_w / s.sw + 1;
    fresh->k = w2.dim(0);
    fresh->residual = p[kResidual] != 0.f;
    const auto bias_ok = [&](size_t i, int64_t n) {
      return !ctx.has_input(i) || ctx.input(i).dim(0) == n;
    };
    // Shapes the steps would reject (they report the error when run one by one).
    if (w1.dim(0) != s.c || w1.dim(1) != x.dim(1) || w1.dim(2) != 1 || w1.dim(3) != 1 ||
        wd.dim(1) != 1 || wd.dim(2) != s.kh || wd.dim(3) != s.kw || w2.dim(1) != s.c ||
        w2.dim(2) != 1 || w2.dim(3) != 1 || !bias_ok(2, s.c) || !bias_ok(4, s.c) ||
        !bias_ok(6, fresh->k) || s.n < 1 || s.oh < 1 || s.ow < 1 || x.dim(1) < 1 ||
        (fresh->residual && (fresh->k != x.dim(1) || s.oh != s.h || s.ow != s.w))) {
      slot.declined = true;
      return Status::Ok();
    }
    if (se) {
      const Tensor &f1 = ctx.input(7), &f2 = ctx.input(9);
      fresh->se = true;
      fresh->sq = f1.dim(0);
      if (fresh->sq < 1 || f1.dim(1) != s.c || f1.dim(2) != 1 || f1.dim(3) != 1 ||
          f2.dim(0) != s.c || f2.dim(1) != fresh->sq || f2.dim(2) != 1 || f2.dim(3) != 1 ||
          !bias_ok(8, fresh->sq) || !bias_ok(10, s.c)) {
        slot.declined = true;
        return Status::Ok();
      }
      fresh->se_act = ActOf(p, kSeAct);
      fresh->se_gate = static_cast<int>(p[kSeGate]);
      fresh->se_alpha = p[kSeAlpha];
      fresh->se_beta = p[kSeBeta];
    }
    const Fusion act1 = ActOf(p, kAct1), act2 = ActOf(p, kAct2);
    fresh->act3 = ActOf(p, kAct3);
    // One thread and Squeeze-Excitation on an image under 28x28: the separate ops (the
    // projection and 5x5 depthwise on the own kernels lose there what fusing wins back only with
    // a second thread: EfficientNet-B0's 7x7 blocks 1.18-1.38 of the separate ops at 1 thread,
    // 0.78-0.85 at 2).
    if (fresh->se && s.oh * s.ow < kSeOneThreadPixels && omp_get_max_threads() == 1) {
      slot.declined = true;
      return Status::Ok();
    }
    fresh->by_channels = s.oh * s.ow < kChannelSplitPixels;
    if (fresh->by_channels) {
      // Groups of whole 16-channel vectors, their number fixed by E alone.
      const int64_t units = (s.c + 15) / 16, groups = std::min<int64_t>(kGroups, units);
      size_t off = 0;
      auto take = [&](int64_t floats) {
        const size_t at = off;
        off += Align64(sizeof(float) * static_cast<size_t>(floats));
        return at;
      };
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t e0 = std::min(s.c, units * g / groups * 16);
        const int64_t e1 = std::min(s.c, units * (g + 1) / groups * 16);
        Stage st = MakeStage(*fresh, x.dim(1), e0, e1, act1, act2, Fusion{});
        st.off_e = take(s.n * s.h * s.w * (e1 - e0));
        st.off_d = take(s.n * s.oh * s.ow * (e1 - e0));
        st.off_p = take(s.n * s.oh * s.ow * fresh->k);
        fresh->stages.push_back(std::move(st));
      }
      fresh->scratch = off;
    } else {
      Fusion pf = fresh->act3;
      pf.sum = fresh->residual;
      fresh->stages.push_back(MakeStage(*fresh, x.dim(1), 0, s.c, act1, act2, pf));
      // Strip height: as many output rows as keep the expanded rows within the budget.
      const int64_t row_bytes = s.w * s.c * static_cast<int64_t>(sizeof(float));
      const int64_t budget = g_strip_bytes.load() > 0 ? g_strip_bytes.load() : kStripBytes;
      const int64_t rows = std::max<int64_t>(s.kh, budget / std::max<int64_t>(row_bytes, 1));
      fresh->band = std::clamp<int64_t>((rows - s.kh) / s.sh + 1, 1, s.oh);
      fresh->ebuf = Align64(static_cast<size_t>(((fresh->band - 1) * s.sh + s.kh) * row_bytes));
      // (With Squeeze-Excitation the depthwise rows go to the whole-image buffer instead.)
      fresh->dbuf =
          fresh->se ? 0 : Align64(sizeof(float) * static_cast<size_t>(fresh->band * s.ow * s.c));
    }
    if (fresh->se) {
      size_t off = 0;
      auto take = [&](int64_t floats) {
        const size_t at = off;
        off += Align64(sizeof(float) * static_cast<size_t>(floats));
        return at;
      };
      fresh->off_dfull = take(fresh->by_channels ? 0 : s.n * s.oh * s.ow * s.c);
      fresh->off_sums = take((fresh->by_channels ? s.n : s.n * s.oh) * s.c);
      fresh->off_hid = take(s.n * fresh->sq);
      fresh->off_gate = take(s.n * s.c);
      fresh->se_bytes = off;
    }
    slot.state = std::move(fresh);
    st = static_cast<MbState*>(slot.state.get());
  }
  const void* wptr = ctx.input(3).raw();
  if (st->packed_from != wptr) {
    const float* w1 = ctx.input(1).data<float>();
    const float* wd = ctx.input(3).data<float>();
    const float* w2 = ctx.input(5).data<float>();
    const float* bd = ctx.has_input(4) ? ctx.input(4).data<float>() : nullptr;
    const int64_t cin = ctx.input(0).dim(1), taps = st->s.kh * st->s.kw;
    // The three weights, packed per stage (channel range [e0, e1)); shared when constant.
    const bool wc = ConstInput(slot, 1) && ConstInput(slot, 3) && ConstInput(slot, 5);
    for (Stage& g : st->stages) {
      const int64_t eg = g.e1 - g.e0;
      const std::string range = fmt::format("mb {}-{} ", g.e0, g.e1);
      g.expand->SetPacked(SharedPack<PackedFloats>(slot, wc, w1, range + g.expand->PackTag(), [&] {
        return g.expand->Pack(w1 + g.e0 * cin);
      }));
      g.dw->SetPacked(SharedPack<PackedFloats>(slot, wc, wd, range + g.dw->PackTag(),
                                               [&] { return g.dw->Pack(wd + g.e0 * taps); }));
      g.project->SetPacked(
          SharedPack<PackedFloats>(slot, wc, w2, range + g.project->PackTag(), [&] {
            std::vector<float> slice(static_cast<size_t>(st->k * eg));
            for (int64_t o = 0; o < st->k; ++o)
              std::copy_n(w2 + o * st->s.c + g.e0, eg, slice.data() + o * eg);
            return g.project->Pack(slice.data());
          }));
      float* bias = g.dw_bias.data() + g.dw_bias_off;
      for (int64_t c = 0; c < eg; ++c) bias[c] = bd ? bd[g.e0 + c] : 0.f;
    }
    st->packed_from = wptr;
  }
  ctx.set_output(0, DType::kFloat, {st->s.n, st->k, st->s.oh, st->s.ow});
  slot.out_layouts.assign(1, Layout::kNhwc);
  return Status::Ok();
}

// out[c] = sum over `pixels` NHWC pixels of d[p][c] (c < e), in pixel order.
FERRY_AVX512 void ChannelTotals(const float* d, int64_t pixels, int64_t e, float* out) {
  for (int64_t c = 0; c < e; c += 16) {
    const __mmask16 mk = act512::FirstLanes(e - c);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t q = 0; q < pixels; ++q)
      acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(mk, d + q * e + c));
    _mm512_mask_storeu_ps(out + c, mk, acc);
  }
}

// d[p][c] *= scale[c] over `pixels` NHWC pixels of e channels.
FERRY_AVX512 void ScaleChannels(float* d, int64_t pixels, int64_t e, const float* scale) {
  for (int64_t q = 0; q < pixels; ++q)
    for (int64_t c = 0; c < e; c += 16) {
      const __mmask16 mk = act512::FirstLanes(e - c);
      float* at = d + q * e + c;
      _mm512_mask_storeu_ps(
          at, mk,
          _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, at), _mm512_maskz_loadu_ps(mk, scale + c)));
    }
}

// The block's inputs a run reads.
struct RunArgs {
  const float *x, *b1, *b2;
  const float *fc1, *fb1, *fc2, *fb2;  // Squeeze-Excitation
  float* y;
};

// Squeeze-Excitation's gates from the channel totals of each image (image n's E totals at sums +
// n * stride): the mean, FC1 + its activation, FC2 + Sigmoid / HardSigmoid, on the calling thread.
void SeGates(const MbState& st, const RunArgs& a, float* sums, int64_t stride, float* hid,
             float* gate) {
  const DwShape& s = st.s;
  const float inv = 1.f / static_cast<float>(s.oh * s.ow);
  GemmEpilogue e1, e2;
  e1.bias = a.fb1;
  e1.bias_cs = a.fb1 ? 1 : 0;
  if (st.se_act.act == Fusion::Act::kRelu || st.se_act.act == Fusion::Act::kClip) {
    e1.act =
        st.se_act.act == Fusion::Act::kRelu ? GemmEpilogue::Act::kRelu : GemmEpilogue::Act::kClip;
    e1.lo = st.se_act.lo;
    e1.hi = st.se_act.hi;
  }
  e2.bias = a.fb2;
  e2.bias_cs = a.fb2 ? 1 : 0;
  for (int64_t n = 0; n < s.n; ++n) {
    float* mean = sums + n * stride;
    for (int64_t c = 0; c < s.c; ++c) mean[c] *= inv;
    float* h = hid + n * st.sq;
    GemvTransB(mean, 1, s.c, a.fc1, s.c, st.sq, h, e1, 1);
    if (st.se_act.act == Fusion::Act::kSwish || st.se_act.act == Fusion::Act::kHardSwish)
      Vec().unary[static_cast<int>(st.se_act.act == Fusion::Act::kSwish ? UnOp::kSilu
                                                                        : UnOp::kHardSwish)](
          h, h, st.sq, 0.f, 0.f);
    float* g = gate + n * s.c;
    GemvTransB(h, 1, st.sq, a.fc2, st.sq, s.c, g, e2, 1);
    if (st.se_gate == 0)
      Vec().unary[static_cast<int>(UnOp::kSigmoid)](g, g, s.c, 0.f, 0.f);
    else
      Vec().unary[static_cast<int>(UnOp::kHardSigmoid)](g, g, s.c, st.se_alpha, st.se_beta);
  }
}

// Small images: each channel group's expand, depthwise and partial projection on one thread
// (no rows computed twice for the window's halo, as strips of a 7x7 image would), then the
// partials summed with the residual and the activation, over the pixels. With
// Squeeze-Excitation the groups also total their channels, the gates are computed between the
// depthwise conv and the projection, and each group scales its depthwise output by them.
void RunByChannels(const MbState& st, const RunArgs& a, std::byte* scratch, std::byte* se_buf) {
  const DwShape& s = st.s;
  const int64_t in_px = s.h * s.w, out_px = s.oh * s.ow;
  const auto groups = static_cast<int64_t>(st.stages.size());
  float* sums = st.se ? reinterpret_cast<float*>(se_buf + st.off_sums) : nullptr;
  float* gate = st.se ? reinterpret_cast<float*>(se_buf + st.off_gate) : nullptr;
  auto project = [&](int64_t gi) {
    const Stage& g = st.stages[static_cast<size_t>(gi)];
    const int64_t eg = g.e1 - g.e0;
    auto* db = reinterpret_cast<float*>(scratch + g.off_d);
    if (gate)
      for (int64_t n = 0; n < s.n; ++n)
        ScaleChannels(db + n * out_px * eg, out_px, eg, gate + n * s.c + g.e0);
    g.project->RunSerial(db, gi == 0 ? a.b2 : nullptr, nullptr,
                         reinterpret_cast<float*>(scratch + g.off_p), s.n * out_px);
  };
  ParallelRange(groups, 1, [&](int64_t gb, int64_t ge) {
    for (int64_t gi = gb; gi < ge; ++gi) {
      const Stage& g = st.stages[static_cast<size_t>(gi)];
      const int64_t eg = g.e1 - g.e0;
      auto* eb = reinterpret_cast<float*>(scratch + g.off_e);
      auto* db = reinterpret_cast<float*>(scratch + g.off_d);
      g.expand->RunSerial(a.x, a.b1 ? a.b1 + g.e0 : nullptr, nullptr, eb, s.n * in_px);
      for (int64_t n = 0; n < s.n; ++n) {
        g.dw->RunRows(g.s, eb + n * in_px * eg, g.bias(), db + n * out_px * eg, 0, s.oh);
        if (sums) ChannelTotals(db + n * out_px * eg, out_px, eg, sums + n * s.c + g.e0);
      }
      if (!st.se) project(gi);
    }
  });
  if (st.se) {
    SeGates(st, a, sums, s.c, reinterpret_cast<float*>(se_buf + st.off_hid), gate);
    ParallelRange(groups, 1, [&](int64_t gb, int64_t ge) {
      for (int64_t gi = gb; gi < ge; ++gi) project(gi);
    });
  }
  std::vector<const float*> parts;
  for (const Stage& g : st.stages)
    parts.push_back(reinterpret_cast<const float*>(scratch + g.off_p));
  // Plain names, not a structured binding: clang before 16 cannot capture bindings in lambdas.
  const auto bounds = st.act3.bounds();
  const float lo = bounds.first, hi = bounds.second;
  const int64_t total = s.n * out_px * st.k;
  // 16-float pieces, so no two threads write one cache line's vector.
  ParallelRange((total + 15) / 16, 64, [&](int64_t b, int64_t e) {
    std::vector<const float*> at(parts.size());
    for (size_t g = 0; g < parts.size(); ++g) at[g] = parts[g] + b * 16;
    SumPartials(at.data(), static_cast<int>(at.size()), st.residual ? a.x + b * 16 : nullptr, lo,
                hi, a.y + b * 16, std::min(total, e * 16) - b * 16);
  });
}

// Large images: strips of output rows per thread (see the top). With Squeeze-Excitation the
// depthwise rows go to the whole-image buffer with each row's channel totals; after the gates,
// a second pass over the same rows scales them and projects.
void RunStrips(const MbState& st, const RunArgs& a, std::byte* scratch, std::byte* se_buf) {
  const DwShape& s = st.s;
  const Stage& g = st.stages[0];
  const int64_t cin = g.expand->channels_in(), e = s.c, k = st.k;
  const size_t per_thread = st.ebuf + st.dbuf;
  float* dfull = st.se ? reinterpret_cast<float*>(se_buf + st.off_dfull) : nullptr;
  float* sums = st.se ? reinterpret_cast<float*>(se_buf + st.off_sums) : nullptr;
  const int64_t row = s.w * e;  // floats per expanded row
  // Rows [a, b) of image n into y (their depthwise output at d).
  auto project = [&](const float* d, int64_t n, int64_t oa, int64_t ob) {
    const int64_t out_at = (n * s.oh + oa) * s.ow;
    g.project->RunSerial(d, a.b2, st.residual ? a.x + out_at * cin : nullptr, a.y + out_at * k,
                         (ob - oa) * s.ow);
  };
  ParallelRange(s.n * s.oh, 1, [&](int64_t begin, int64_t end) {
    std::byte* mine = scratch + per_thread * static_cast<size_t>(omp_get_thread_num());
    auto* eb = reinterpret_cast<float*>(mine);
    auto* db = reinterpret_cast<float*>(mine + st.ebuf);
    int64_t have_n = -1, have0 = 0, have1 = 0;  // eb holds rows [have0, have1) of image have_n
    for (int64_t item = begin; item < end;) {
      const int64_t n = item / s.oh, oa = item % s.oh;
      const int64_t ob = std::min({s.oh, oa + st.band, oa + (end - item)});
      // The input rows the strip's window reads.
      const int64_t i0 = std::max<int64_t>(0, oa * s.sh - s.pad_t);
      const int64_t i1 = std::min(s.h, (ob - 1) * s.sh - s.pad_t + s.kh);
      int64_t from = i0;
      if (have_n == n && have0 <= i0 && i0 < have1) {
        std::memmove(eb, eb + (i0 - have0) * row,
                     sizeof(float) * static_cast<size_t>((have1 - i0) * row));
        from = have1;
      }
      if (from < i1)
        g.expand->RunSerial(a.x + (n * s.h + from) * s.w * cin, a.b1, nullptr,
                            eb + (from - i0) * row, (i1 - from) * s.w);
      have_n = n;
      have0 = i0;
      have1 = i1;
      DwShape strip = g.s;
      strip.h = i1 - i0;
      strip.oh = ob - oa;
      strip.pad_t = s.pad_t - oa * s.sh + i0;
      float* d = dfull ? dfull + (n * s.oh + oa) * s.ow * e : db;
      g.dw->RunRows(strip, eb, g.bias(), d, 0, ob - oa);
      if (dfull) {
        for (int64_t oy = oa; oy < ob; ++oy)
          ChannelTotals(d + (oy - oa) * s.ow * e, s.ow, e, sums + (n * s.oh + oy) * e);
      } else {
        project(d, n, oa, ob);
      }
      item += ob - oa;
    }
  });
  if (!dfull) return;
  // Each image's totals into its first row's, its rows' in order (the same sums at any thread
  // count).
  for (int64_t n = 0; n < s.n; ++n) {
    float* total = sums + n * s.oh * e;
    for (int64_t oy = 1; oy < s.oh; ++oy) {
      const float* r = sums + (n * s.oh + oy) * e;
      for (int64_t c = 0; c < e; ++c) total[c] += r[c];
    }
  }
  float* gate = reinterpret_cast<float*>(se_buf + st.off_gate);
  SeGates(st, a, sums, s.oh * e, reinterpret_cast<float*>(se_buf + st.off_hid), gate);
  ParallelRange(s.n * s.oh, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end;) {
      const int64_t n = item / s.oh, oa = item % s.oh;
      const int64_t ob = std::min({s.oh, oa + st.band, oa + (end - item)});
      float* d = dfull + (n * s.oh + oa) * s.ow * e;
      ScaleChannels(d, (ob - oa) * s.ow, e, gate + n * e);
      project(d, n, oa, ob);
      item += ob - oa;
    }
  });
}

void RunMbConv(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const MbState*>(slot.state.get());
  auto in = [&](size_t i) { return ctx.has_input(i) ? ctx.input(i).data<float>() : nullptr; };
  RunArgs a{in(0), in(2), in(6), nullptr, nullptr, nullptr, nullptr, ctx.output(0).data<float>()};
  std::byte* se_buf = nullptr;
  if (st->se) {
    a.fc1 = in(7);
    a.fb1 = in(8);
    a.fc2 = in(9);
    a.fb2 = in(10);
    se_buf = static_cast<std::byte*>(slot.provider->Scratch(1, st->se_bytes));
  }
  if (st->by_channels) {
    RunByChannels(*st, a, static_cast<std::byte*>(slot.provider->Scratch(0, st->scratch)), se_buf);
    return;
  }
  const size_t per_thread = st->ebuf + st->dbuf;
  RunStrips(*st, a,
            static_cast<std::byte*>(
                slot.provider->Scratch(0, per_thread * static_cast<size_t>(omp_get_max_threads()))),
            se_buf);
}

constexpr KernelDef kMbConv = {"", "MbConv (pattern)", 1,        1000, nullptr, 0,
                               0,  PrepareMbConv,      RunMbConv};

const KernelDef* MbConvKernel() {
  return &kMbConv;
}

constexpr Pattern kPatterns[] = {{"MbConv", MatchMbConv}};

}  // namespace

void SetMbConvStripBytesForTesting(int64_t bytes) {
  g_strip_bytes.store(bytes);
}

std::span<const Pattern> MbConvPatterns() {
  return kPatterns;
}

}  // namespace ferry::ops::cpu
