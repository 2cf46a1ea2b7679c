// cpu kernels for the ONNX Runtime contrib ops its transformer optimizer and QOperator quantizer
// write (reference: ops/reference/contrib_*.cc), and the default domain's QLinearConv:
//
// Attention (float32): contrib_attention.cc.
// SkipLayerNormalization (float32, plain): per row, s = input + skip (+ bias) written to the
//   output (or to input_skip_bias_sum when asked), then vec.h's layer_norm row in place; rows
//   split over the threads in fixed blocks. The mean / inv_std_var outputs decline.
// QLinearConv: qconv.cc's QConv kernel (oneDNN int8 convolution with QLinearConv's exact
//   requantization, NHWC activations between int8 nodes) with the node's inputs in the pattern's
//   order; what it declines (weight zero points other than 0, without VNNI weights beyond ±64)
//   runs qlinear_conv.cc's own int8 GEMM kernel (group 1 and depthwise); auto_pad SAME_* and
//   non-2-D convs decline.
// QLinearAdd (com.microsoft): qconv.cc's QAdd kernel (ONNX Runtime's ratio form, bit for bit);
//   equal shapes only (broadcasting declines); a plain operand beside a channels-last one is
//   copied to channels-last first.
// QLinearGlobalAveragePool: int32 channel sums from plain or NHWC input, then
//   saturate(nearbyint(float(sum - zx n) * (sx / (sy n))) + zy), as the reference.
// QGemm: the own int8 GEMM (qgemm.h; B packed once per session when constant, transB transposed
//   while packing) into int32, then + C, * alpha sa sb[j] (/ sy), round, + zy, saturate (or the
//   float product) per element — bit for bit the reference. transA and a non-constant B decline.
#include <cmath>
#include <limits>

#include "ops/cpu/contrib_attention.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/packed.h"
#include "ops/cpu/qgemm.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

Status Decline(NodeSlot& slot) {
  slot.declined = true;
  slot.state.reset();
  return Status::Ok();
}

bool PlainTensor(const OpContext& ctx, const NodeSlot& slot, size_t i, DType t) {
  return ctx.has_input(i) && ctx.input_is_tensor(i) && ctx.input(i).dtype() == t &&
         (slot.in_layouts.size() <= i || slot.in_layouts[i] == Layout::kPlain);
}

// ---- SkipLayerNormalization ----
struct SkipLnState : KernelState {
  int64_t rows = 0, h = 0, skip_rows = 0;
  float eps = 0;
};

Status PrepareSkipLn(OpContext& ctx, NodeSlot& slot) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && !PlainTensor(ctx, slot, i, DType::kFloat)) return Decline(slot);
  for (size_t i : {1, 2})
    if (ctx.has_output(i)) return Decline(slot);
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const Tensor& x = ctx.input(0);
  auto st = std::make_unique<SkipLnState>();
  st->h = x.dim(x.rank() - 1);
  if (st->h == 0 || x.size() == 0) return Decline(slot);
  st->rows = x.size() / st->h;
  st->skip_rows = ctx.input(1).size() / st->h;
  st->eps = ctx.attr_float("epsilon", 1e-12f);
  slot.state = std::move(st);
  slot.out_layouts.assign(ctx.num_outputs(), Layout::kPlain);
  for (size_t i = 0; i < decl.size(); ++i)
    if (decl[i].set) ctx.set_output(i, decl[i].dtype, decl[i].shape);
  return Status::Ok();
}

void RunSkipLn(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const SkipLnState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  const float* skip = ctx.input(1).data<float>();
  const float* gamma = ctx.input(2).data<float>();
  const float* beta = ctx.has_input(3) ? ctx.input(3).data<float>() : nullptr;
  const float* bias =
      ctx.num_inputs() > 4 && ctx.has_input(4) ? ctx.input(4).data<float>() : nullptr;
  float* y = ctx.output(0).data<float>();
  float* sum = ctx.num_outputs() > 3 && ctx.has_output(3) ? ctx.output(3).data<float>() : y;
  const int64_t h = st->h;
  const auto ln = Vec().layer_norm;
  ParallelRange(st->rows, std::max<int64_t>(1, (1 << 15) / h), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * h;
      const float* sr = skip + (r % st->skip_rows) * h;
      float* s = sum + r * h;
      if (bias) {
#pragma omp simd
        for (int64_t k = 0; k < h; ++k) s[k] = xr[k] + sr[k] + bias[k];
      } else {
#pragma omp simd
        for (int64_t k = 0; k < h; ++k) s[k] = xr[k] + sr[k];
      }
      ln(s, y + r * h, h, st->eps, gamma, 1, beta, 1);
    }
  });
}

// ---- QLinearConv (default domain) on the QConv kernel ----
// QConv's inputs {x, x_scale, x_zp, w, w_scale, b, y_scale, y_zp} from QLinearConv's
// {x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B}.
constexpr size_t kConvMap[8] = {0, 1, 2, 3, 4, 8, 6, 7};

bool AcceptsQLinearConv(const ir::Node& n) {
  const std::string pad = n.attr_string("auto_pad", "NOTSET");
  return pad == "NOTSET" || pad == "VALID";
}

std::vector<const Value*> ConvInputs(const OpContext& ctx) {
  std::vector<const Value*> ins;
  for (size_t i : kConvMap) ins.push_back(ctx.has_input(i) ? &ctx.input_value(i) : nullptr);
  return ins;
}

// Swaps the slot's per-input facts into QConv's order for one call, and back.
struct ConvSlotView {
  NodeSlot& slot;
  std::vector<bool> consts;
  std::vector<Layout> layouts;
  explicit ConvSlotView(NodeSlot& s) : slot(s) {
    consts = slot.const_inputs;
    layouts = slot.in_layouts;
    std::vector<bool> c(8, false);
    std::vector<Layout> l(8, Layout::kPlain);
    for (size_t k = 0; k < 8; ++k) {
      if (kConvMap[k] < consts.size()) c[k] = consts[kConvMap[k]];
      if (kConvMap[k] < layouts.size()) l[k] = layouts[kConvMap[k]];
    }
    slot.const_inputs = std::move(c);
    slot.in_layouts = std::move(l);
  }
  ~ConvSlotView() {
    slot.const_inputs = std::move(consts);
    slot.in_layouts = std::move(layouts);
  }
};

// FERRY_QLINEARCONV=own skips oneDNN (QConv) for the own int8 GEMM kernel; =onednn never
// takes the own kernel.
int QLinearConvMode() {
  static const int mode = KernelModeFromEnv("FERRY_QLINEARCONV");
  return mode;
}

Status PrepareQLinearConvCpu(OpContext& ctx, NodeSlot& slot) {
  if (IsOwnQLinearConv(slot)) return PrepareOwnQLinearConv(ctx, slot);
  FERRY_RETURN_IF_ERROR(ReferenceDeclare(ctx, slot, ctx.num_inputs()).status());
  auto own = [&] {
    slot.state.reset();
    if (QLinearConvMode() == 0) return Decline(slot);
    return PrepareOwnQLinearConv(ctx, slot);
  };
  if (ctx.input(0).rank() != 4 || QLinearConvMode() == 1) return own();
  if (ctx.has_input(5)) {
    const Tensor& z = ctx.input(5);
    for (int64_t i = 0; i < z.size(); ++i)
      if (z.GetAsInt64(i) != 0) return own();
  }
  const ir::Node& n = ctx.node();
  std::vector<int64_t> st = n.attr_ints("strides"), pads = n.attr_ints("pads"),
                       dil = n.attr_ints("dilations");
  if (st.empty()) st = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (dil.empty()) dil = {1, 1};
  if (st.size() != 2 || pads.size() != 4 || dil.size() != 2) return own();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  slot.params = {-kInf, kInf, static_cast<float>(n.attr_int("group", 1))};
  for (auto* v : {&st, &pads, &dil})
    for (int64_t a : *v) slot.params.push_back(static_cast<float>(a));
  std::vector<Value> outs(1);
  OpContext sub(ctx.node(), ctx.opset(), ConvInputs(ctx), &outs);
  sub.set_pool(ctx.pool());
  {
    ConvSlotView view(slot);
    FERRY_RETURN_IF_ERROR(Int8ConvKernel()->prepare(sub, slot));
  }
  if (slot.declined) return own();
  const auto& d = sub.declared()[0];
  ctx.set_output(0, d.dtype, d.shape);
  return Status::Ok();
}

void RunQLinearConvCpu(OpContext& ctx, NodeSlot& slot) {
  if (IsOwnQLinearConv(slot)) {
    RunOwnQLinearConv(ctx, slot);
    return;
  }
  Tensor& y = ctx.output(0);
  std::vector<Value> outs(1);
  outs[0] = Value(Tensor::View(y.dtype(), y.shape(), y.raw()));
  OpContext sub(ctx.node(), ctx.opset(), ConvInputs(ctx), &outs);
  sub.set_pool(ctx.pool());
  ConvSlotView view(slot);
  Int8ConvKernel()->run(sub, slot);
}

// ---- QLinearAdd (com.microsoft) on the QAdd kernel: the same input order ----
// One operand channels-last (a conv's output) and the other plain (a reference kernel's, e.g.
// MaxPool's): the plain one is copied to channels-last for the kernel (slot.params[2] names
// it: 0 or 3; -1 none).
int PlainOperand(const OpContext& ctx, const NodeSlot& slot) {
  if (slot.in_layouts.size() < 4 || !ctx.input_is_tensor(0) || !ctx.input_is_tensor(3) ||
      ctx.input(0).rank() != 4 || ctx.input(0).shape() != ctx.input(3).shape())
    return -1;
  const Layout a = slot.in_layouts[0], b = slot.in_layouts[3];
  if (a == Layout::kNhwc && b == Layout::kPlain) return 3;
  if (a == Layout::kPlain && b == Layout::kNhwc) return 0;
  return -1;
}

Status PrepareQLinearAddCpu(OpContext& ctx, NodeSlot& slot) {
  FERRY_RETURN_IF_ERROR(ReferenceDeclare(ctx, slot, ctx.num_inputs()).status());
  constexpr float kInf = std::numeric_limits<float>::infinity();
  slot.params = {-kInf, kInf};
  const int plain = PlainOperand(ctx, slot);
  if (plain < 0) return Int8AddKernel()->prepare(ctx, slot);
  // The kernel sees both operands channels-last.
  const Layout was = slot.in_layouts[static_cast<size_t>(plain)];
  slot.in_layouts[static_cast<size_t>(plain)] = Layout::kNhwc;
  Status st = Int8AddKernel()->prepare(ctx, slot);
  slot.in_layouts[static_cast<size_t>(plain)] = was;
  slot.params.push_back(static_cast<float>(plain));
  return st;
}

void RunQLinearAddCpu(OpContext& ctx, NodeSlot& slot) {
  if (slot.params.size() < 3) {
    Int8AddKernel()->run(ctx, slot);
    return;
  }
  const size_t plain = static_cast<size_t>(slot.params[2]);
  const Tensor& x = ctx.input(plain);
  thread_local std::vector<uint8_t> scratch;
  scratch.resize(static_cast<size_t>(x.nbytes()));
  ConvertLayoutInto(x, Layout::kPlain, scratch.data(), Layout::kNhwc);
  std::vector<const Value*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    ins.push_back(ctx.has_input(i) ? &ctx.input_value(i) : nullptr);
  const Value converted(Tensor::View(x.dtype(), x.shape(), scratch.data()));
  ins[plain] = &converted;
  Tensor& y = ctx.output(0);
  std::vector<Value> outs(1);
  outs[0] = Value(Tensor::View(y.dtype(), y.shape(), y.raw()));
  OpContext sub(ctx.node(), ctx.opset(), std::move(ins), &outs);
  sub.set_pool(ctx.pool());
  Int8AddKernel()->run(sub, slot);
}

// ---- QLinearGlobalAveragePool ----
struct QGapState : KernelState {
  int64_t n = 0, c = 0, hw = 0;
  bool nhwc = false;  // channels innermost (channels_last input, or an NHWC layout)
  float scale = 0;
  int32_t zx = 0, zy = 0, lo = 0, hi = 0;
};

Status PrepareQGap(OpContext& ctx, NodeSlot& slot) {
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const Tensor& x = ctx.input(0);
  const bool last = ctx.attr_int("channels_last", 0) != 0;
  const Layout l = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  if ((l != Layout::kPlain && (l != Layout::kNhwc || last || x.rank() != 4)) || x.size() == 0)
    return Decline(slot);
  auto st = std::make_unique<QGapState>();
  st->n = x.dim(0);
  st->c = last ? x.dim(x.rank() - 1) : x.dim(1);
  st->hw = x.size() / (st->n * st->c);
  st->nhwc = last || l == Layout::kNhwc;
  const float sx = static_cast<float>(ctx.input(1).GetAsDouble(0));
  const float sy = static_cast<float>(ctx.input(3).GetAsDouble(0));
  st->scale = sx / (sy * static_cast<float>(st->hw));
  st->zx = static_cast<int32_t>(ctx.input(2).GetAsInt64(0));
  st->zy = static_cast<int32_t>(ctx.input(4).GetAsInt64(0));
  st->lo = x.dtype() == DType::kInt8 ? -128 : 0;
  st->hi = x.dtype() == DType::kInt8 ? 127 : 255;
  slot.state = std::move(st);
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, decl[0].dtype, decl[0].shape);
  return Status::Ok();
}

template <typename T>
void QGapRun(const QGapState& st, const T* x, T* y) {
  std::vector<int32_t> acc(static_cast<size_t>(st.c));
  for (int64_t b = 0; b < st.n; ++b) {
    std::fill(acc.begin(), acc.end(), 0);
    if (st.nhwc) {
      const T* p = x + b * st.hw * st.c;
      for (int64_t q = 0; q < st.hw; ++q)
#pragma omp simd
        for (int64_t ch = 0; ch < st.c; ++ch) acc[static_cast<size_t>(ch)] += p[q * st.c + ch];
    } else {
      for (int64_t ch = 0; ch < st.c; ++ch) {
        const T* p = x + (b * st.c + ch) * st.hw;
        int32_t s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t q = 0; q < st.hw; ++q) s += p[q];
        acc[static_cast<size_t>(ch)] = s;
      }
    }
    const int32_t off = st.zx * static_cast<int32_t>(st.hw);
    for (int64_t ch = 0; ch < st.c; ++ch) {
      const float v =
          std::nearbyint(static_cast<float>(acc[static_cast<size_t>(ch)] - off) * st.scale) +
          static_cast<float>(st.zy);
      y[b * st.c + ch] =
          static_cast<T>(std::clamp(v, static_cast<float>(st.lo), static_cast<float>(st.hi)));
    }
  }
}

void RunQGap(OpContext& ctx, NodeSlot& slot) {
  const auto& st = *static_cast<const QGapState*>(slot.state.get());
  if (ctx.input(0).dtype() == DType::kInt8)
    QGapRun(st, ctx.input(0).data<int8_t>(), ctx.output(0).data<int8_t>());
  else
    QGapRun(st, ctx.input(0).data<uint8_t>(), ctx.output(0).data<uint8_t>());
}

// ---- QGemm ----
struct QPackedOne {
  QPackedB b;
  size_t bytes() const {
    return static_cast<size_t>(b.kp * b.npad) + (b.colsum.size() + b.zb.size()) * sizeof(int32_t);
  }
};

struct QGemmState : KernelState {
  StateKey key;
  std::shared_ptr<const QPackedOne> packed;
  int64_t m = 0, k = 0, n = 0;
  int32_t za = 0, zy = 0, lo = 0, hi = 0;
  bool a_signed = false, quantized = false, y_signed = false;
  std::vector<float> mult;  // per column
  std::vector<int32_t> acc;
  int64_t c_rs = 0, c_cs = 0;  // C's strides over rows / columns (0: broadcast); c null: none
};

Status PrepareQGemmCpu(OpContext& ctx, NodeSlot& slot) {
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const QIsa isa = QGemmIsa();
  // B and its zero point constant: packed once per session (a state is reused while the shapes
  // stay the same, so a B that changes between runs would read stale packs).
  if (isa == QIsa::kNone || ctx.attr_int("transA", 0) != 0 || !ConstInput(slot, 3) ||
      !ConstInput(slot, 5))
    return Decline(slot);
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && i < slot.in_layouts.size() && slot.in_layouts[i] != Layout::kPlain)
      return Decline(slot);
  const KeyProbe key = MakeKey(ctx, slot);
  auto* st = static_cast<QGemmState*>(slot.state.get());
  if (!st || !(st->key == key)) {
    auto fresh = std::make_unique<QGemmState>();
    fresh->key = std::move(key);
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(3);
    const bool tb = ctx.attr_int("transB", 0) != 0;
    fresh->m = a.dim(0);
    fresh->k = a.dim(1);
    fresh->n = tb ? b.dim(0) : b.dim(1);
    const int64_t k = fresh->k, n = fresh->n;
    fresh->a_signed = a.dtype() == DType::kInt8;
    fresh->za = static_cast<int32_t>(ctx.input(2).GetAsInt64(0));
    std::vector<int32_t> zb;
    for (int64_t j = 0; j < ctx.input(5).size(); ++j)
      zb.push_back(static_cast<int32_t>(ctx.input(5).GetAsInt64(j)));
    const void* zp = ctx.input(5).raw();
    const std::string tag =
        fmt::format("qgemm q{} k{} n{} t{} zp{}", static_cast<int>(isa), k, n, tb, zp);
    fresh->packed = SharedPack<QPackedOne>(slot, true, b.raw(), tag, [&] {
      auto p = std::make_shared<QPackedOne>();
      std::vector<int8_t> t;
      const void* src = b.raw();
      if (tb) {
        t.resize(static_cast<size_t>(k * n));
        const auto* s = static_cast<const int8_t*>(b.raw());
        for (int64_t r = 0; r < k; ++r)
          for (int64_t j = 0; j < n; ++j) t[static_cast<size_t>(r * n + j)] = s[j * k + r];
        src = t.data();
      }
      QPackB(isa, src, b.dtype() == DType::kInt8, k, n, n, zb.data(), zb.size() == 1, &p->b);
      return p;
    });
    const float alpha = ctx.attr_float("alpha", 1.f);
    const float sa = static_cast<float>(ctx.input(1).GetAsDouble(0));
    fresh->quantized = ctx.has_input(7);
    const float sy = fresh->quantized ? static_cast<float>(ctx.input(7).GetAsDouble(0)) : 1.f;
    const Tensor& bs = ctx.input(4);
    fresh->mult.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      float m = alpha * sa * static_cast<float>(bs.GetAsDouble(bs.size() == 1 ? 0 : j));
      if (fresh->quantized) m /= sy;
      fresh->mult[static_cast<size_t>(j)] = m;
    }
    fresh->zy = ctx.has_input(8) ? static_cast<int32_t>(ctx.input(8).GetAsInt64(0)) : 0;
    fresh->y_signed = decl[0].dtype == DType::kInt8;
    fresh->lo = fresh->y_signed ? -128 : 0;
    fresh->hi = fresh->y_signed ? 127 : 255;
    if (ctx.has_input(6)) {
      const Shape& c = ctx.input(6).shape();
      const int64_t cr = c.size() == 2 ? c[0] : 1, cc = c.empty() ? 1 : c.back();
      fresh->c_cs = cc == 1 ? 0 : 1;
      fresh->c_rs = cr == 1 ? 0 : cc;
    }
    fresh->acc.resize(static_cast<size_t>(fresh->m * n));
    st = fresh.get();
    slot.state = std::move(fresh);
  }
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, decl[0].dtype, decl[0].shape);
  return Status::Ok();
}

void RunQGemmCpu(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<QGemmState*>(slot.state.get());
  const int64_t m = st->m, n = st->n;
  QOutput out;
  out.i32 = st->acc.data();
  out.ldc = n;
  QGemm(st->packed->b, ctx.input(0).raw(), st->a_signed, m, st->k, &st->za, true, out);
  const int32_t* c = ctx.has_input(6) ? ctx.input(6).data<int32_t>() : nullptr;
  Tensor& y = ctx.output(0);
  const float lo = static_cast<float>(st->lo), hi = static_cast<float>(st->hi),
              zy = static_cast<float>(st->zy);
  for (int64_t i = 0; i < m; ++i) {
    const int32_t* a = st->acc.data() + i * n;
    for (int64_t j = 0; j < n; ++j) {
      const int32_t v =
          static_cast<int32_t>(static_cast<uint32_t>(a[j]) +
                               static_cast<uint32_t>(c ? c[i * st->c_rs + j * st->c_cs] : 0));
      const float f = static_cast<float>(v) * st->mult[static_cast<size_t>(j)];
      if (!st->quantized) {
        y.data<float>()[i * n + j] = f;
        continue;
      }
      const float q = std::clamp(std::nearbyint(f) + zy, lo, hi);
      if (st->y_signed)
        y.data<int8_t>()[i * n + j] = static_cast<int8_t>(q);
      else
        y.data<uint8_t>()[i * n + j] = static_cast<uint8_t>(q);
    }
  }
}

constexpr KernelDef kKernels[] = {
    {"com.microsoft", "SkipLayerNormalization", 1, 1000, nullptr, 0, 0, PrepareSkipLn, RunSkipLn},
    {"com.microsoft", "Attention", 1, 1000, nullptr, 0, 0, PrepareContribAttention,
     RunContribAttention},
    {"com.microsoft", "QLinearAdd", 1, 1000, nullptr, 0b1001, 0, PrepareQLinearAddCpu,
     RunQLinearAddCpu},
    {"com.microsoft", "QLinearGlobalAveragePool", 1, 1000, nullptr, 0b1, 0, PrepareQGap, RunQGap},
    {"com.microsoft", "QGemm", 1, 1000, nullptr, 0, 0, PrepareQGemmCpu, RunQGemmCpu},
    {"", "QLinearConv", 10, 1000, AcceptsQLinearConv, 0b1, 0, PrepareQLinearConvCpu,
     RunQLinearConvCpu},
};

}  // namespace

std::span<const KernelDef> ContribKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
