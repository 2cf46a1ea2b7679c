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
  StateKey key = MakeKey(ctx, slot);
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
// and picked at load time by the CPU (GCC target_clones): 16 lanes on AVX-512 CPUs.
// d[j] = s[j] * a[j] + b[j] (+ r[j]) (clamped) for j < len: a channel-last row.
#define FERRY_BN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
FERRY_BN_CLONES void RowVV(const float* s, const float* a, const float* b, const float* r, float* d,
                           int64_t len, bool clamp, float lo, float hi) {
  if (r) {
    if (clamp) {
      for (int64_t j = 0; j < len; ++j)
        d[j] = std::min(std::max(s[j] * a[j] + b[j] + r[j], lo), hi);
    } else {
      for (int64_t j = 0; j < len; ++j) d[j] = s[j] * a[j] + b[j] + r[j];
    }
  } else if (clamp) {
    for (int64_t j = 0; j < len; ++j) d[j] = std::min(std::max(s[j] * a[j] + b[j], lo), hi);
  } else {
    for (int64_t j = 0; j < len; ++j) d[j] = s[j] * a[j] + b[j];
  }
}

// d[p * blk + j] = s[p * blk + j] * a[j] + b[j] (...) for p < sp: one channel block.
FERRY_BN_CLONES void RowBlocked(const float* s, const float* a, const float* b, const float* r,
                                float* d, int64_t sp, int64_t blk, bool clamp, float lo, float hi) {
  for (int64_t p = 0; p < sp; ++p) {
    const float* sp_ = s + p * blk;
    float* dp = d + p * blk;
    const float* rp = r ? r + p * blk : nullptr;
    for (int64_t j = 0; j < blk; ++j) {
      float v = sp_[j] * a[j] + b[j];
      if (rp) v += rp[j];
      dp[j] = clamp ? std::min(std::max(v, lo), hi) : v;
    }
  }
}

// d[p] = s[p] * a + b (...) for p < sp: one plain channel plane.
FERRY_BN_CLONES void RowVS(const float* s, float a, float b, const float* r, float* d, int64_t sp,
                           bool clamp, float lo, float hi) {
  if (r) {
    for (int64_t p = 0; p < sp; ++p) {
      const float v = s[p] * a + b + r[p];
      d[p] = clamp ? std::min(std::max(v, lo), hi) : v;
    }
  } else if (clamp) {
    for (int64_t p = 0; p < sp; ++p) d[p] = std::min(std::max(s[p] * a + b, lo), hi);
  } else {
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

constexpr KernelDef kKernels[] = {
    {"", "BatchNormalization", 6, 1000, AcceptsBn, 0b1, kResidualInput, PrepareBn, RunBn},
};

}  // namespace

std::span<const KernelDef> BatchNormKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
