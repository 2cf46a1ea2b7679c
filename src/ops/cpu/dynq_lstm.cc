// cpu kernel: com.microsoft DynamicQuantizeLSTM (ONNX Runtime's dynamic quantizer's LSTM) on the
// own int8 GEMM (qgemm.h), bit for bit the reference (ops/reference/contrib_dynq.cc):
//  * W [D, I, 4H] and R [D, H, 4H] (int8 / uint8, zero points per direction or per column) packed
//    once per session (constant W, R and zero points; else the reference runs);
//  * X quantized whole as the reference does (ONNX Runtime's GetQuantizationParameter: range
//    [min(0, min x), max(0, max x)], x / scale rounded half to even), X · W for all the
//    direction's rows in one GEMM whose epilogue writes float(acc) * (W_scale · x_scale);
//  * per step the hidden rows quantized the same way, h · R in one GEMM (the step's X · W rows as
//    its epilogue's addend when the batch is 1), then the gates in the reference's order of
//    operations (clip, input_forget, peepholes, sequence_lens), Sigmoid and Tanh on vec.h's rows
//    (own polynomial exp, ~2 ulp; std::exp / std::tanh took 1.1 of ddddocr common_old's 2.6 ms
//    in this op). ONNX Runtime's own gates are MLAS approximations, so neither matches it bit
//    for bit: against ORT on 4 captcha-like inputs the model's max error was the same with
//    either (0.28 / 0.030 / 0.51 vs 0.52 / 0.079; the int8 convs' flips dominate).
//    FERRY_DQLSTM=exact gives the reference's std::exp / std::tanh gates, bit for bit.
// Activations other than the defaults and layout 1 are refused by the reference's prepare.
#include <atomic>
#include <cmath>
#include <string_view>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/packed.h"
#include "ops/cpu/qgemm.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

struct DqLstmState : KernelState {
  StateKey key;
  int64_t seq = 0, nb = 0, in = 0, h = 0, dirs = 1;
  bool reverse_only = false, input_forget = false;
  float clip = 0.f;
  std::vector<QPackedB> w, r;  // per direction
  std::vector<uint8_t> qx, qh;
  std::vector<float> gx, gates, wscale, rscale, hs, cs, y;
};

int32_t Q(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt8 ? int32_t{t.data<int8_t>()[i]} : int32_t{t.data<uint8_t>()[i]};
}

// The reference's DynamicQuantize (contrib_dynq.cc) into uint8.
void DynQuantize(const float* x, int64_t n, uint8_t* q, float* scale, int32_t* zp) {
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float s = hi == lo ? 1.f : (hi - lo) / 255.f;
  *scale = s;
  *zp = static_cast<int32_t>(std::nearbyint(std::clamp(0.f - lo / s, 0.f, 255.f)));
  const float z = static_cast<float>(*zp);
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] / s;
    if (std::isnan(v)) v = 0;
    q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(v) + z, 0.f, 255.f));
  }
}

float Sigmoid(float v) {
  return 1.f / (1.f + std::exp(-v));
}

// One direction's (W or R) per-column scale or zero point at column j.
template <typename F>
auto PerDir(const Tensor& t, int64_t dir, int64_t g4, int64_t j, F read) {
  const int64_t cols = t.rank() == 2 ? g4 : 1;
  return read(t, dir * cols + (cols == 1 ? 0 : j));
}

Status PrepareDqLstm(OpContext& ctx, NodeSlot& slot) {
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  (void)decl;
  for (size_t i : {1, 2, 9, 11})
    if (!ConstInput(slot, i)) {
      slot.declined = true;
      return Status::Ok();
    }
  if (QGemmIsa() == QIsa::kNone) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<DqLstmState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    auto s = std::make_unique<DqLstmState>();
    s->key = std::move(key);
    const Tensor& x = ctx.input(0);
    s->seq = x.dim(0), s->nb = x.dim(1), s->in = x.dim(2);
    s->h = ctx.attr_int("hidden_size", 0);
    s->dirs = ctx.input(1).dim(0);
    s->reverse_only = ctx.attr_string("direction", "forward") == "reverse";
    s->clip = ctx.has_attr("clip") ? ctx.attr_float("clip", 0.f) : 0.f;
    s->input_forget = ctx.attr_int("input_forget", 0) != 0;
    const int64_t g4 = 4 * s->h;
    auto pack = [&](size_t wi, size_t zi, int64_t k, std::vector<QPackedB>* out) {
      const Tensor& w = ctx.input(wi);
      const bool sgn = w.dtype() == DType::kInt8;
      out->resize(static_cast<size_t>(s->dirs));
      for (int64_t d = 0; d < s->dirs; ++d) {
        std::vector<int32_t> zb(static_cast<size_t>(g4));
        for (int64_t j = 0; j < g4; ++j)
          zb[static_cast<size_t>(j)] = PerDir(ctx.input(zi), d, g4, j, Q);
        QPackB(QGemmIsa(), static_cast<const uint8_t*>(w.raw()) + d * k * g4, sgn, k, g4, g4,
               zb.data(), false, &(*out)[static_cast<size_t>(d)]);
      }
    };
    pack(1, 9, s->in, &s->w);
    pack(2, 11, s->h, &s->r);
    slot.state = std::move(s);
    st = static_cast<DqLstmState*>(slot.state.get());
  }
  for (size_t i = 0; i < ctx.num_outputs() && i < decl.size(); ++i)
    if (ctx.has_output(i) && decl[i].set) ctx.set_output(i, decl[i].dtype, decl[i].shape);
  return Status::Ok();
}

// The gates of one batch row (the reference's loop, same operations in the same order).
void Gates(const DqLstmState& s, const float* g, const float* bias, const float* peep, float* hb,
           float* cb, float* yb) {
  const int64_t h = s.h;
  const float clip = s.clip;
  auto clipped = [&](float v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
  for (int64_t j = 0; j < h; ++j) {
    const float gi = clipped(g[j] + bias[j] + peep[j] * cb[j]);
    const float gf = clipped(g[2 * h + j] + bias[2 * h + j] + peep[2 * h + j] * cb[j]);
    const float gc = clipped(g[3 * h + j] + bias[3 * h + j]);
    const float i = Sigmoid(gi);
    const float f = s.input_forget ? 1.f - i : Sigmoid(gf);
    const float c = f * cb[j] + i * std::tanh(gc);
    const float go = clipped(g[h + j] + bias[h + j] + peep[h + j] * c);
    cb[j] = c;
    hb[j] = Sigmoid(go) * std::tanh(c);
    yb[j] = hb[j];
  }
}

// Gates() with vec.h's Sigmoid and Tanh rows (own polynomial exp, ~2 ulp) in place of std::exp /
// std::tanh: the same sums in the same order, the activations vectorized.
void GatesVec(const DqLstmState& s, const float* g, const float* bias, const float* peep, float* hb,
              float* cb, float* yb, float* tmp) {
  const int64_t h = s.h;
  const float clip = s.clip;
  auto clipped = [&](float v) { return clip > 0 ? std::clamp(v, -clip, clip) : v; };
  float *gi = tmp, *gf = tmp + h, *gc = tmp + 2 * h, *go = tmp + 3 * h, *tc = tmp + 4 * h;
  for (int64_t j = 0; j < h; ++j) {
    gi[j] = clipped(g[j] + bias[j] + peep[j] * cb[j]);
    gf[j] = clipped(g[2 * h + j] + bias[2 * h + j] + peep[2 * h + j] * cb[j]);
    gc[j] = clipped(g[3 * h + j] + bias[3 * h + j]);
  }
  const VecOps& v = Vec();
  const auto sig = v.unary[static_cast<int>(UnOp::kSigmoid)];
  const auto tanh = v.unary[static_cast<int>(UnOp::kTanh)];
  sig(gi, gi, h, 0.f, 0.f);
  if (!s.input_forget) sig(gf, gf, h, 0.f, 0.f);
  tanh(gc, gc, h, 0.f, 0.f);
  for (int64_t j = 0; j < h; ++j) {
    const float f = s.input_forget ? 1.f - gi[j] : gf[j];
    const float c = f * cb[j] + gi[j] * gc[j];
    cb[j] = c;
    go[j] = clipped(g[h + j] + bias[h + j] + peep[h + j] * c);
  }
  sig(go, go, h, 0.f, 0.f);
  tanh(cb, tc, h, 0.f, 0.f);
  for (int64_t j = 0; j < h; ++j) {
    hb[j] = go[j] * tc[j];
    yb[j] = hb[j];
  }
}

std::atomic<int> g_exact{-1};

// FERRY_DQLSTM=exact keeps the reference's std::exp / std::tanh gates (bit for bit the
// reference); SetDqLstmExactGatesForTesting overrides.
bool ExactGates() {
  static const bool exact = [] {
    const char* e = std::getenv("FERRY_DQLSTM");
    return e != nullptr && std::string_view(e) == "exact";
  }();
  const int forced = g_exact.load(std::memory_order_relaxed);
  return forced >= 0 ? forced != 0 : exact;
}

void RunDqLstm(OpContext& ctx, NodeSlot& slot) {
  auto& s = *static_cast<DqLstmState*>(slot.state.get());
  const int64_t h = s.h, g4 = 4 * h, seq = s.seq, nb = s.nb, rows = seq * nb;
  const float* x = ctx.input(0).data<float>();
  s.qx.resize(static_cast<size_t>(rows * s.in));
  s.qh.resize(static_cast<size_t>(nb * h));
  s.gx.resize(static_cast<size_t>(rows * g4));
  s.gates.resize(static_cast<size_t>(nb * g4));
  s.y.assign(static_cast<size_t>(seq * s.dirs * nb * h), 0.f);
  float sx = 1.f;
  int32_t zx = 0;
  DynQuantize(x, rows * s.in, s.qx.data(), &sx, &zx);
  const float* b_in = ctx.has_input(3) ? ctx.input(3).data<float>() : nullptr;
  const float* p_in = ctx.has_input(7) ? ctx.input(7).data<float>() : nullptr;
  std::vector<float> bias(static_cast<size_t>(g4)), peep(static_cast<size_t>(3 * h)),
      tmp(static_cast<size_t>(5 * h));
  auto rf = [](const Tensor& t, int64_t i) { return static_cast<float>(t.GetAsDouble(i)); };
  for (int64_t dir = 0; dir < s.dirs; ++dir) {
    const bool reverse = s.reverse_only || dir == 1;
    const QPackedB& wp = s.w[static_cast<size_t>(dir)];
    const QPackedB& rp = s.r[static_cast<size_t>(dir)];
    s.wscale.assign(static_cast<size_t>(wp.npad), 0.f);
    for (int64_t j = 0; j < g4; ++j)
      s.wscale[static_cast<size_t>(j)] = PerDir(ctx.input(8), dir, g4, j, rf) * sx;
    QOutput o;
    o.f32 = s.gx.data();
    o.scale = s.wscale.data();
    o.ldc = g4;
    QGemm(wp, s.qx.data(), false, rows, s.in, &zx, true, o);
    for (int64_t j = 0; j < g4; ++j)
      bias[static_cast<size_t>(j)] =
          b_in ? b_in[dir * 2 * g4 + j] + b_in[dir * 2 * g4 + g4 + j] : 0.f;
    for (int64_t j = 0; j < 3 * h; ++j)
      peep[static_cast<size_t>(j)] = p_in ? p_in[dir * 3 * h + j] : 0.f;
    s.hs.assign(static_cast<size_t>(nb * h), 0.f);
    s.cs.assign(static_cast<size_t>(nb * h), 0.f);
    if (ctx.has_input(5))
      std::copy_n(ctx.input(5).data<float>() + dir * nb * h, nb * h, s.hs.begin());
    if (ctx.has_input(6))
      std::copy_n(ctx.input(6).data<float>() + dir * nb * h, nb * h, s.cs.begin());
    const float r0 = PerDir(ctx.input(10), dir, g4, 0, rf);
    s.rscale.assign(static_cast<size_t>(rp.npad), 0.f);
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      float sh = 1.f;
      int32_t zh = 0;
      DynQuantize(s.hs.data(), nb * h, s.qh.data(), &sh, &zh);
      for (int64_t j = 0; j < g4; ++j)
        s.rscale[static_cast<size_t>(j)] =
            (ctx.input(10).rank() == 2 ? PerDir(ctx.input(10), dir, g4, j, rf) : r0) * sh;
      const float* gxt = s.gx.data() + t * nb * g4;
      QOutput ro;
      ro.f32 = s.gates.data();
      ro.scale = s.rscale.data();
      ro.ldc = g4;
      // Batch 1 with no padded columns: X · W's row is the epilogue's addend (v + gx, the
      // reference's gx + v: the same float sum).
      const bool fused = nb == 1 && rp.npad == g4;
      if (fused) ro.bias = gxt;
      QGemm(rp, s.qh.data(), false, nb, h, &zh, true, ro);
      if (!fused)
        for (int64_t i = 0; i < nb * g4; ++i) s.gates[static_cast<size_t>(i)] += gxt[i];
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t len = ctx.has_input(4) ? ctx.input(4).data<int32_t>()[b] : seq;
        if (t >= len) continue;
        float* yb = s.y.data() + ((t * s.dirs + dir) * nb + b) * h;
        if (ExactGates())
          Gates(s, s.gates.data() + b * g4, bias.data(), peep.data(), s.hs.data() + b * h,
                s.cs.data() + b * h, yb);
        else
          GatesVec(s, s.gates.data() + b * g4, bias.data(), peep.data(), s.hs.data() + b * h,
                   s.cs.data() + b * h, yb, tmp.data());
      }
    }
    if (ctx.num_outputs() > 1 && ctx.has_output(1))
      std::copy(s.hs.begin(), s.hs.end(), ctx.output(1).data<float>() + dir * nb * h);
    if (ctx.num_outputs() > 2 && ctx.has_output(2))
      std::copy(s.cs.begin(), s.cs.end(), ctx.output(2).data<float>() + dir * nb * h);
  }
  if (ctx.num_outputs() > 0 && ctx.has_output(0))
    std::copy(s.y.begin(), s.y.end(), ctx.output(0).data<float>());
}

constexpr KernelDef kKernels[] = {
    {"com.microsoft", "DynamicQuantizeLSTM", 1, 1000, nullptr, 0, 0, PrepareDqLstm, RunDqLstm},
};

}  // namespace

void SetDqLstmExactGatesForTesting(int exact) {
  g_exact.store(exact, std::memory_order_relaxed);
}

std::span<const KernelDef> DynQLstmKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
