// cpu kernel: com.microsoft Attention (float32), what ONNX Runtime's transformer optimizer fuses a
// BERT self-attention into. Reference: ops/reference/contrib_attention.cc.
//
// QKV = input [B*S, D] x weights [D, Dq + Dk + Dv] + bias on the own packed GEMM (gemm_avx2.h;
// the weights packed once per session, the bias in its epilogue), then per (batch, head), on the
// threads in contiguous blocks: K's head transposed to [H, S] so each query's scores are axpys
// over contiguous keys, scale, + mask (the reference's BuildAttentionMask: key lengths, end and
// start positions, 2-D / 3-D / 4-D masks, unidirectional) + attention_bias, vec.h's softmax row,
// then the probabilities times V's head rows into the output's columns. Declines: other dtypes,
// past / present, CPUs without AVX2+FMA.
#include "ops/cpu/contrib_attention.h"

#include <cmath>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/gemm_avx2.h"
#include "ops/cpu/packed.h"
#include "ops/cpu/vec.h"
#include "ops/reference/contrib_attention.h"

namespace ferry::ops::cpu {

namespace {

struct PackedW {
  PackedB b;
  size_t bytes() const { return b.bytes(); }
};

struct AttnState : KernelState {
  StateKey key;
  AttnDims d;
  int64_t din = 0, dq = 0, dk = 0, dv = 0, cols = 0;
  float scale = 1;
  std::shared_ptr<const PackedW> w;
  std::vector<float> qkv, mask;  // scratch of this context
};

Status Decline(NodeSlot& slot) {
  slot.declined = true;
  slot.state.reset();
  return Status::Ok();
}

}  // namespace

Status PrepareContribAttention(OpContext& ctx, NodeSlot& slot) {
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  if (!GemmAvx2Supported() || ctx.input(0).dtype() != DType::kFloat || ctx.has_input(4) ||
      (ctx.num_outputs() > 1 && ctx.has_output(1)) || !ConstInput(slot, 1))
    return Decline(slot);
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && i < slot.in_layouts.size() && slot.in_layouts[i] != Layout::kPlain)
      return Decline(slot);
  const KeyProbe key = MakeKey(ctx, slot);
  auto* st = static_cast<AttnState*>(slot.state.get());
  if (!st || !(st->key == key)) {
    auto fresh = std::make_unique<AttnState>();
    fresh->key = std::move(key);
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    AttnDims& d = fresh->d;
    d.b = x.dim(0);
    d.s = x.dim(1);
    d.t = d.s;
    d.n = ctx.attr_int("num_heads", 1);
    fresh->din = x.dim(2);
    fresh->cols = w.dim(1);
    const std::vector<int64_t> qkv = ctx.attr_ints("qkv_hidden_sizes");
    fresh->dq = qkv.empty() ? fresh->cols / 3 : qkv[0];
    fresh->dk = qkv.empty() ? fresh->cols / 3 : qkv[1];
    fresh->dv = qkv.empty() ? fresh->cols / 3 : qkv[2];
    d.h = fresh->dq / d.n;
    d.hv = fresh->dv / d.n;
    const float s = ctx.attr_float("scale", 0.f);
    fresh->scale = s == 0.f ? 1.f / std::sqrt(static_cast<float>(d.h)) : s;
    const int64_t din = fresh->din, cols = fresh->cols;
    fresh->w =
        SharedPack<PackedW>(slot, true, w.raw(), fmt::format("attn k{} n{}", din, cols), [&] {
          auto p = std::make_shared<PackedW>();
          p->b.Pack(w.data<float>(), din, cols, false);
          return p;
        });
    fresh->qkv.resize(static_cast<size_t>(d.b * d.s * cols));
    st = fresh.get();
    slot.state = std::move(fresh);
  }
  slot.out_layouts.assign(ctx.num_outputs(), Layout::kPlain);
  ctx.set_output(0, decl[0].dtype, decl[0].shape);
  return Status::Ok();
}

void RunContribAttention(OpContext& ctx, NodeSlot& slot) {
  auto& st = *static_cast<AttnState*>(slot.state.get());
  const AttnDims& d = st.d;
  const int64_t rows = d.b * d.s, cols = st.cols;
  GemmEpilogue e;
  if (ctx.has_input(2)) {
    e.bias = ctx.input(2).data<float>();
    e.bias_cs = 1;
  }
  PackedGemm(ctx.input(0).data<float>(), rows, st.din, st.w->b, st.qkv.data(), e,
             slot.provider->threads());
  const bool causal = ctx.attr_int("unidirectional", 0) != 0 && d.s > 1;
  const std::vector<double> mask =
      BuildAttentionMask(ctx, 3, d, causal, ctx.attr_float("mask_filter_value", -10000.f));
  st.mask.assign(mask.begin(), mask.end());
  const Tensor* ab = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const float* q = st.qkv.data();
  const float* k = q + st.dq;
  const float* v = q + st.dq + st.dk;
  float* y = ctx.output(0).data<float>();
  const int64_t h = d.h, hv = d.hv, s_len = d.s, t_len = d.t, ydim = d.n * hv;
  const auto softmax = Vec().softmax;
  ParallelRange(d.b * d.n, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> kt(static_cast<size_t>(h * t_len)), sc(static_cast<size_t>(t_len));
    for (int64_t bn = b0; bn < b1; ++bn) {
      const int64_t b = bn / d.n, n = bn % d.n;
      // K's head, transposed: kt[c][t].
      for (int64_t t = 0; t < t_len; ++t) {
        const float* kr = k + (b * s_len + t) * cols + n * h;
        for (int64_t c = 0; c < h; ++c) kt[static_cast<size_t>(c * t_len + t)] = kr[c];
      }
      for (int64_t s = 0; s < s_len; ++s) {
        const float* qr = q + (b * s_len + s) * cols + n * h;
        float* scp = sc.data();
        for (int64_t t = 0; t < t_len; ++t) scp[t] = 0.f;
        for (int64_t c = 0; c < h; ++c) {
          const float qc = qr[c];
          const float* kc = kt.data() + c * t_len;
#pragma omp simd
          for (int64_t t = 0; t < t_len; ++t) scp[t] += qc * kc[t];
        }
        const float* mr = st.mask.empty() ? nullptr : st.mask.data() + (b * s_len + s) * t_len;
        const float* br = nullptr;
        if (ab) {
          const Shape& bs = ab->shape();
          br = ab->data<float>() +
               (((bs[0] == 1 ? 0 : b) * bs[1] + (bs[1] == 1 ? 0 : n)) * s_len + s) * t_len;
        }
        for (int64_t t = 0; t < t_len; ++t) {
          float x = scp[t] * st.scale;
          if (mr) x += mr[t];
          if (br) x += br[t];
          scp[t] = x;
        }
        softmax(scp, scp, t_len);
        float* yr = y + (b * s_len + s) * ydim + n * hv;
        for (int64_t c = 0; c < hv; ++c) yr[c] = 0.f;
        for (int64_t t = 0; t < t_len; ++t) {
          const float p = scp[t];
          const float* vr = v + (b * s_len + t) * cols + n * hv;
#pragma omp simd
          for (int64_t c = 0; c < hv; ++c) yr[c] += p * vr[c];
        }
      }
    }
  });
}

}  // namespace ferry::ops::cpu
