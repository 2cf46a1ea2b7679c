// cpu kernel: inference BatchNormalization (float32, rank >= 2) as a per-channel affine
// y = x * a[c] + b[c] with a = scale / sqrt(var + eps), b = B - mean * a, in any Layout, with
// the runtime's post-op fusion (residual Add, then Relu/Clip). Exporters fold a BN that follows
// a Conv; the ones left (DenseNet's BN -> Relu -> Conv pre-activations, BN after a Concat or an
// Add) run here without leaving the convolution library's layout.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

struct BnState : KernelState {
  StateKey key;
  Layout layout = Layout::kPlain;  // the input's; computed in it
  bool to_plain = false;           // the output must be plain: converted at the end
  bool sum = false;                // fused residual
  Fusion::Act act = Fusion::Act::kNone;
  float lo = 0, hi = 0;
  std::vector<float> a, b;  // per channel; recomputed when the statistics are not constant
};

bool AcceptsBn(const ir::Node& n) {
  // Training mode (opset 14+) and the pre-9 per-activation form (spatial = 0) stay reference.
  return n.attr_int("training_mode", 0) == 0 && n.attr_int("spatial", 1) == 1 &&
         n.outputs.size() <= 1;
}

constexpr int kResidualInput = 5;  // X, scale, B, mean, var, then the fused residual

Status PrepareBn(OpContext& ctx, NodeSlot& slot) {
  for (size_t i = 0; i < 5; ++i)
    if (!ctx.has_input(i) || !ctx.input_is_tensor(i) || ctx.input(i).dtype() != DType::kFloat) {
      slot.declined = true;
      return Status::Ok();
    }
  const Tensor& x = ctx.input(0);
  const Layout in = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  const bool nhwc_ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
  if (x.rank() < 2) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<BnState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_RETURN_IF_ERROR(ReferenceDeclare(ctx, slot, 5).status());
    auto fresh = std::make_unique<BnState>();
    fresh->key = key;
    fresh->layout = in;
    fresh->to_plain = in != Layout::kPlain && !nhwc_ok;
    const Fusion& f = slot.fusion;
    bool fuse = f.any() && f.act != Fusion::Act::kSwish && f.act != Fusion::Act::kHardSwish &&
                f.act != Fusion::Act::kGelu;
    if (fuse && f.sum) {
      const size_t r = static_cast<size_t>(kResidualInput);
      fuse = ctx.num_inputs() > r && ctx.input_is_tensor(r) &&
             ctx.input(r).dtype() == DType::kFloat && ctx.input(r).shape() == x.shape() &&
             slot.in_layouts.size() > r && slot.in_layouts[r] == in;
    }
    if (fuse) {
      fresh->sum = f.sum;
      fresh->act = f.act;
      fresh->lo = f.lo;
      fresh->hi = f.hi;
    }
    slot.state = std::move(fresh);
    st = static_cast<BnState*>(slot.state.get());
  }
  slot.fused = st->sum || st->act != Fusion::Act::kNone;
  ctx.set_output(0, DType::kFloat, x.shape());
  slot.out_layouts.assign(1, st->to_plain ? Layout::kPlain : st->layout);
  return Status::Ok();
}

// The loops, one pass each (affine, residual, clamp), compiled for AVX-512, AVX2 and the baseline
// and picked at load time by the CPU (FERRY_TARGET_CLONES, vec.h): 16 lanes on AVX-512 CPUs.
// d[j] = s[j] * a[j] + b[j] (+ r[j]) (clamped) for j < len: a channel-last row.
FERRY_TARGET_CLONES void RowVV(const float* s, const float* a, const float* b, const float* r,
                               float* d, int64_t len, bool clamp, float lo, float hi) {
  if (r) {
    if (clamp) {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j)
        d[j] = std::min(std::max(s[j] * a[j] + b[j] + r[j], lo), hi);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) d[j] = s[j] * a[j] + b[j] + r[j];
    }
  } else if (clamp) {
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) d[j] = std::min(std::max(s[j] * a[j] + b[j], lo), hi);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) d[j] = s[j] * a[j] + b[j];
  }
}

// RowVV without the residual over `rows` rows: d[r * ds + j] = clamp(s[r * ss + j] * a[j] + b[j])
// (ConcatBn's NHWC inputs: a call per input and thread, not per pixel — DenseNet's 32-channel
// inputs made the call and loop set-up a large share of the work).
FERRY_TARGET_CLONES void RowsVV(const float* s, int64_t ss, const float* a, const float* b,
                                float* d, int64_t ds, int64_t len, int64_t rows, bool clamp,
                                float lo, float hi) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* sr = s + r * ss;
    float* dr = d + r * ds;
    if (clamp) {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) dr[j] = std::min(std::max(sr[j] * a[j] + b[j], lo), hi);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) dr[j] = sr[j] * a[j] + b[j];
    }
  }
}

// d[p * blk + j] = s[p * blk + j] * a[j] + b[j] (...) for p < sp: one channel block.
template <int kBlk>
__attribute__((always_inline)) inline void RowBlockedN(const float* s, const float* a,
                                                       const float* b, const float* r, float* d,
                                                       int64_t sp, bool clamp, float lo, float hi) {
  for (int64_t p = 0; p < sp; ++p) {
    const float* sp_ = s + p * kBlk;
    float* dp = d + p * kBlk;
    if (r) {
      const float* rp = r + p * kBlk;
#pragma omp simd
      for (int j = 0; j < kBlk; ++j)
        dp[j] = clamp ? std::min(std::max(sp_[j] * a[j] + b[j] + rp[j], lo), hi)
                      : sp_[j] * a[j] + b[j] + rp[j];
    } else if (clamp) {
#pragma omp simd
      for (int j = 0; j < kBlk; ++j) dp[j] = std::min(std::max(sp_[j] * a[j] + b[j], lo), hi);
    } else {
#pragma omp simd
      for (int j = 0; j < kBlk; ++j) dp[j] = sp_[j] * a[j] + b[j];
    }
  }
}
FERRY_TARGET_CLONES void RowBlocked(const float* s, const float* a, const float* b, const float* r,
                                    float* d, int64_t sp, int64_t blk, bool clamp, float lo,
                                    float hi) {
  if (blk == 8)
    RowBlockedN<8>(s, a, b, r, d, sp, clamp, lo, hi);
  else
    RowBlockedN<16>(s, a, b, r, d, sp, clamp, lo, hi);
}

// d[p] = s[p] * a + b (...) for p < sp: one plain channel plane.
FERRY_TARGET_CLONES void RowVS(const float* s, float a, float b, const float* r, float* d,
                               int64_t sp, bool clamp, float lo, float hi) {
  if (r) {
#pragma omp simd
    for (int64_t p = 0; p < sp; ++p) {
      const float v = s[p] * a + b + r[p];
      d[p] = clamp ? std::min(std::max(v, lo), hi) : v;
    }
  } else if (clamp) {
#pragma omp simd
    for (int64_t p = 0; p < sp; ++p) d[p] = std::min(std::max(s[p] * a + b, lo), hi);
  } else {
#pragma omp simd
    for (int64_t p = 0; p < sp; ++p) d[p] = s[p] * a + b;
  }
}

// y = x * a[c] + b[c] (+ residual, then clamped to [lo, hi]) over `dst`, in `layout`.
void Affine(Layout layout, int64_t n, int64_t c, int64_t sp, const float* a, const float* b,
            const float* src, const float* res, float* dst, bool clamp, float lo, float hi) {
  if (layout == Layout::kNhwc) {  // [N, pixels, C]: rows of C channels
    ParallelRange(n * sp, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        RowVV(src + r * c, a, b, res ? res + r * c : nullptr, dst + r * c, c, clamp, lo, hi);
    });
    return;
  }
  if (layout == Layout::kBlocked8 || layout == Layout::kBlocked16) {
    const int64_t blk = layout == Layout::kBlocked8 ? 8 : 16, cb = c / blk;
    ParallelRange(n * cb, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t off = r * sp * blk;
        RowBlocked(src + off, a + (r % cb) * blk, b + (r % cb) * blk, res ? res + off : nullptr,
                   dst + off, sp, blk, clamp, lo, hi);
      }
    });
    return;
  }
  ParallelRange(n * c, std::max<int64_t>(1, 4096 / std::max<int64_t>(sp, 1)),
                [&](int64_t r0, int64_t r1) {
                  for (int64_t r = r0; r < r1; ++r)
                    RowVS(src + r * sp, a[r % c], b[r % c], res ? res + r * sp : nullptr,
                          dst + r * sp, sp, clamp, lo, hi);
                });
}

void RunBn(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<BnState*>(slot.state.get());
  const Tensor& x = ctx.input(0);
  const int64_t n = x.dim(0), c = x.dim(1), sp = x.size() / std::max<int64_t>(1, n * c);
  // The statistics are usually initializers; recomputing C values per run costs nothing.
  const float eps = ctx.attr_float("epsilon", 1e-5f);
  const float* scale = ctx.input(1).data<float>();
  const float* bias = ctx.input(2).data<float>();
  const float* mean = ctx.input(3).data<float>();
  const float* var = ctx.input(4).data<float>();
  st->a.resize(static_cast<size_t>(c));
  st->b.resize(static_cast<size_t>(c));
  for (int64_t k = 0; k < c; ++k) {
    const float a = scale[k] / std::sqrt(var[k] + eps);
    st->a[static_cast<size_t>(k)] = a;
    st->b[static_cast<size_t>(k)] = bias[k] - mean[k] * a;
  }
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (st->act == Fusion::Act::kRelu) lo = 0;
  if (st->act == Fusion::Act::kClip) lo = st->lo, hi = st->hi;
  const float* res = st->sum ? ctx.input(kResidualInput).data<float>() : nullptr;
  // A non-plain input whose reader needs plain: computed in the input's layout in scratch, then
  // converted once into the output.
  Tensor staged;
  if (st->to_plain)
    staged = Tensor::View(DType::kFloat, x.shape(), slot.provider->Scratch(0, x.nbytes()));
  float* dst = st->to_plain ? staged.data<float>() : ctx.output(0).data<float>();
  Affine(st->layout, n, c, sp, st->a.data(), st->b.data(), x.data<float>(), res, dst,
         st->act != Fusion::Act::kNone, lo, hi);
  if (st->to_plain) ConvertLayout(staged, st->layout, &ctx.output(0), Layout::kPlain);
}

// ---- ConcatBn: Concat(axis 1) -> BatchNormalization [-> Relu] ----
// DenseNet's pre-activation: every layer concatenates all earlier feature maps and normalizes
// the result, which only its Relu and 1x1 Conv read. One pass from the Concat's inputs to the
// normalized output: the concatenation is never written (the Concat's copy and the BN's read of
// it, 2 of the 4 passes over the block's activations, go away). Computed in the inputs' layout
// (NHWC, channel-blocked with every input's C a multiple of the block, or plain; an input in
// another layout is converted first, as Concat does). params: {number of Concat inputs,
// epsilon, 1 with the Relu}; inputs: the Concat's inputs, then scale, B, mean, var.

const KernelDef* ConcatBnKernel();

bool MatchConcatBn(const GraphView& g, size_t host, PatternMatch* m) {
  const ir::Node& cat = g.node(host);
  if (!IsOnnxOp(cat, "Concat") || cat.outputs.size() != 1 || cat.inputs.empty() ||
      cat.attr_int("axis", 1) != 1)
    return false;
  const int cv = g.output(host, 0);
  const std::vector<size_t> r = g.readers(cv);
  if (r.size() != 1) return false;
  const size_t bs = r[0];
  const ir::Node& bn = g.node(bs);
  if (!IsOnnxOp(bn, "BatchNormalization") || g.opset(bs) < 6 || !AcceptsBn(bn) ||
      bn.inputs.size() < 5 || g.input(bs, 0) != cv)
    return false;
  for (size_t i = 1; i < 5; ++i)
    if (g.input(bs, i) < 0 || g.input(bs, i) == cv) return false;
  for (size_t i = 0; i < cat.inputs.size(); ++i)
    if (g.input(host, i) < 0) return false;
  m->kernel = ConcatBnKernel();
  m->absorbed = {bs};
  m->output = g.output(bs, 0);
  float relu = 0;
  const std::vector<size_t> rr = g.readers(m->output);
  if (rr.size() == 1 && IsOnnxOp(g.node(rr[0]), "Relu") && g.node(rr[0]).outputs.size() == 1) {
    m->absorbed.push_back(rr[0]);
    m->output = g.output(rr[0], 0);
    relu = 1;
  }
  for (size_t i = 0; i < cat.inputs.size(); ++i) m->inputs.push_back(g.input(host, i));
  for (size_t i = 1; i < 5; ++i) m->inputs.push_back(g.input(bs, i));
  m->params = {static_cast<float>(cat.inputs.size()), bn.attr_float("epsilon", 1e-5f), relu};
  return true;
}

struct ConcatBnState : KernelState {
  StateKey key;
  Shape out_shape;
  Layout layout = Layout::kPlain;  // of the output; every input is computed in it
  std::vector<int64_t> c0;         // first output channel of each input
  std::vector<int32_t> src;        // per output channel (plain) or block (blocked): the input
  std::vector<bool> convert;       // input first converted to `layout`
  std::vector<float> a, b;
};

Status PrepareConcatBn(OpContext& ctx, NodeSlot& slot) {
  auto decline = [&] {
    slot.declined = true;
    return Status::Ok();
  };
  if (slot.params.size() != 3) return decline();
  const size_t n = static_cast<size_t>(slot.params[0]);
  if (n == 0 || ctx.num_inputs() != n + 4) return decline();
  for (size_t i = 0; i < n + 4; ++i)
    if (!ctx.has_input(i) || !ctx.input_is_tensor(i) || ctx.input(i).dtype() != DType::kFloat)
      return decline();
  const Tensor& x0 = ctx.input(0);
  if (x0.rank() != 4) return decline();
  int64_t c = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(i);
    if (x.rank() != 4 || x.dim(0) != x0.dim(0) || x.dim(2) != x0.dim(2) || x.dim(3) != x0.dim(3))
      return decline();  // the steps report the error
    c += x.dim(1);
  }
  const Shape y = {x0.dim(0), c, x0.dim(2), x0.dim(3)};
  for (size_t i = n; i < n + 4; ++i)
    if (ctx.input(i).size() != c) return decline();
  if (NumElements(y) == 0) return decline();
  auto* st = static_cast<ConcatBnState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    auto fresh = std::make_unique<ConcatBnState>();
    fresh->key = key;
    fresh->out_shape = y;
    // The inputs' non-plain layout when they agree and every reader takes it, else plain.
    Layout layout = Layout::kPlain;
    bool mixed = false;
    for (size_t i = 0; i < n; ++i) {
      const Layout li = slot.in_layouts[i];
      if (li != Layout::kPlain && layout != Layout::kPlain && li != layout) mixed = true;
      if (li != Layout::kPlain) layout = li;
    }
    const int64_t blk = layout == Layout::kBlocked8 ? 8 : layout == Layout::kBlocked16 ? 16 : 1;
    bool plain = mixed || slot.nhwc_ok.empty() || !slot.nhwc_ok[0];
    for (size_t i = 0; i < n; ++i) plain = plain || ctx.input(i).dim(1) % blk != 0;
    if (plain) layout = Layout::kPlain;
    fresh->layout = layout;
    const int64_t unit = layout == Layout::kPlain ? 1 : blk;  // channels per `src` entry
    int64_t c0 = 0;
    for (size_t i = 0; i < n; ++i) {
      fresh->c0.push_back(c0);
      fresh->convert.push_back(slot.in_layouts[i] != layout);
      for (int64_t k = 0; k < ctx.input(i).dim(1) / unit; ++k)
        fresh->src.push_back(static_cast<int32_t>(i));
      c0 += ctx.input(i).dim(1);
    }
    fresh->a.resize(static_cast<size_t>(c));
    fresh->b.resize(static_cast<size_t>(c));
    slot.state = std::move(fresh);
    st = static_cast<ConcatBnState*>(slot.state.get());
  }
  slot.out_layouts.assign(1, st->layout);
  ctx.set_output(0, DType::kFloat, st->out_shape);
  return Status::Ok();
}

void RunConcatBn(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<ConcatBnState*>(slot.state.get());
  const size_t n = st->c0.size();
  const Shape& y = st->out_shape;
  const int64_t nb = y[0], c = y[1], sp = y[2] * y[3];
  const float eps = slot.params[1];
  const float* scale = ctx.input(n).data<float>();
  const float* bias = ctx.input(n + 1).data<float>();
  const float* mean = ctx.input(n + 2).data<float>();
  const float* var = ctx.input(n + 3).data<float>();
  for (int64_t k = 0; k < c; ++k) {
    const float a = scale[k] / std::sqrt(var[k] + eps);
    st->a[static_cast<size_t>(k)] = a;
    st->b[static_cast<size_t>(k)] = bias[k] - mean[k] * a;
  }
  const bool clamp = slot.params[2] != 0;
  const float lo = clamp ? 0.f : -std::numeric_limits<float>::infinity();
  const float hi = std::numeric_limits<float>::infinity();
  std::vector<const float*> src(n);
  std::vector<Tensor> converted;
  converted.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(i);
    if (st->convert[i]) {
      converted.push_back(Tensor::Uninitialized(DType::kFloat, x.shape()));
      ConvertLayoutInto(x, slot.in_layouts[i], converted.back().raw(), st->layout);
      src[i] = converted.back().data<float>();
    } else {
      src[i] = x.data<float>();
    }
  }
  const float* a = st->a.data();
  const float* b = st->b.data();
  float* dst = ctx.output(0).data<float>();
  auto ci = [&](size_t i) { return ctx.input(i).dim(1); };
  if (st->layout == Layout::kNhwc) {  // pixel rows: each input's channels side by side
    ParallelRange(nb * sp, std::max<int64_t>(1, 4096 / c), [&](int64_t r0, int64_t r1) {
      for (size_t i = 0; i < n; ++i) {
        const int64_t k = ci(i), o = st->c0[i];
        RowsVV(src[i] + r0 * k, k, a + o, b + o, dst + r0 * c + o, c, k, r1 - r0, clamp, lo, hi);
      }
    });
    return;
  }
  if (st->layout == Layout::kBlocked8 || st->layout == Layout::kBlocked16) {
    const int64_t blk = st->layout == Layout::kBlocked8 ? 8 : 16, cb = c / blk;
    ParallelRange(nb * cb, std::max<int64_t>(1, 4096 / (sp * blk)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t img = r / cb, ob = r % cb;
        const size_t i = static_cast<size_t>(st->src[static_cast<size_t>(ob)]);
        const int64_t k = ci(i), lb = ob - st->c0[i] / blk;  // block within the input
        RowBlocked(src[i] + ((img * (k / blk) + lb) * sp) * blk, a + ob * blk, b + ob * blk,
                   nullptr, dst + r * sp * blk, sp, blk, clamp, lo, hi);
      }
    });
    return;
  }
  ParallelRange(nb * c, std::max<int64_t>(1, 4096 / sp), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t img = r / c, ch = r % c;
      const size_t i = static_cast<size_t>(st->src[static_cast<size_t>(ch)]);
      const int64_t k = ci(i), lc = ch - st->c0[i];
      RowVS(src[i] + (img * k + lc) * sp, a[ch], b[ch], nullptr, dst + r * sp, sp, clamp, lo, hi);
    }
  });
}

constexpr KernelDef kConcatBn = {"", "ConcatBn (pattern)", 1,          1000, nullptr, 0,
                                 0,  PrepareConcatBn,      RunConcatBn};

const KernelDef* ConcatBnKernel() {
  return &kConcatBn;
}

constexpr Pattern kPatterns[] = {{"ConcatBn", MatchConcatBn}};

constexpr KernelDef kKernels[] = {
    {"", "BatchNormalization", 6, 1000, AcceptsBn, 0b1, kResidualInput, PrepareBn, RunBn},
};

}  // namespace

std::span<const KernelDef> BatchNormKernels() {
  return kKernels;
}

std::span<const Pattern> BatchNormPatterns() {
  return kPatterns;
}

}  // namespace ferry::ops::cpu
