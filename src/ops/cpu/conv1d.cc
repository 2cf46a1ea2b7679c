// cpu kernel: Conv with one spatial dim (audio front ends, STFT as a Conv, tf2onnx's text
// models) on the 2-D kernels of conv.cc. X [N,C,L] is X [N,C,1,L], W [K,C/g,k] is W [K,C/g,1,k],
// the attributes get a unit first dim (kernel_shape [1,k], strides [1,s], dilations [1,d], pads
// [0,b,0,e]), and Y [N,K,1,Lo] is Y [N,K,Lo]: the node is run as the 2-D Conv it is equal to,
// with the same packed weights, fusions (bias, residual sum, activation) and algorithm choice.
// Inputs and outputs stay plain (the runtime's provider layouts are rank-4 only).
// A 2-D Conv over a column (X [N,C,H,1], W [K,C/g,kh,1], no pads or dilation along W: tf2onnx's
// Conv1D, magika's 5-tap conv over 512 positions) runs the same way as a row: [N,C,1,H] is the
// same plain storage, and oneDNN 2.6's brgconv ran the column form at a quarter of its speed on
// the row form (magika, 10x256x512 -> 512 channels: 106 ms vs 22 ms per run, 1 thread).
#include <algorithm>
#include <atomic>
#include <utility>

#include "ops/cpu/families.h"
#include "ops/cpu/gemm_avx2.h"
#include "ops/registry.h"

namespace ferry::ops::cpu {

namespace {

struct Conv1dState : KernelState {
  StateKey key;
  ir::Node node;   // the node as a 2-D Conv
  NodeSlot inner;  // the 2-D kernel's slot
  // The inner prepare's outcome for this key, reused while the weights are constant (a
  // prepare runs at every step: the 2-D views and the inner context cost more than the conv of
  // a small one, silero-vad's If bodies).
  bool ready = false;
  Shape out;
  // The own path for short outputs (OwnWanted): W^T packed, the im2col rows and the product.
  bool own = false;
  PackedB w;
  int64_t n = 0, c = 0, len = 0, k = 0, kw = 0, stride = 1, dil = 1, pad_b = 0, lo = 0;
  GemmEpilogue epi;
  std::vector<float> cols, prod;
};

std::atomic<uint64_t> g_own_runs{0};

// Short outputs (N * Lo rows at most kOwnMaxRows: silero-vad's STFT and encoder convs see 4
// positions per 512-sample chunk) run as im2col rows [N * Lo, C * k] x W^T on the own packed
// GEMM (bias and Relu / Clip in its epilogue), then [N, Lo, K] -> [N, K, Lo]. Through oneDNN
// each such conv paid a reorder in, the primitive's set-up and a reorder out, more than the
// product: silero-vad's six convs 33 of its 68 us per chunk (1 thread, Zen 5). Group 1, constant
// W, explicit pads, no fused residual (the product is transposed after its epilogue).
constexpr int64_t kOwnMaxRows = 16;

bool OwnWanted(const OpContext& ctx, const NodeSlot& slot, const Shape& y) {
  const Fusion& f = slot.fusion;
  const std::string pad = ctx.attr_string("auto_pad", "NOTSET");
  return GemmAvx2Supported() && ctx.attr_int("group", 1) == 1 && slot.const_inputs.size() > 1 &&
         slot.const_inputs[1] && !f.sum && !f.affine &&
         (f.act == Fusion::Act::kNone || f.act == Fusion::Act::kRelu ||
          f.act == Fusion::Act::kClip) &&
         (pad == "NOTSET" || pad.empty()) && y[0] * y[2] <= kOwnMaxRows && y[0] * y[2] > 0 &&
         y[1] > 0 && ctx.input(1).dim(1) * ctx.input(1).dim(2) > 0 &&
         (ctx.num_inputs() < 3 || !ctx.has_input(2) ||
          (ctx.input_is_tensor(2) && ctx.input(2).dtype() == DType::kFloat &&
           ctx.input(2).size() == y[1]));
}

void SetUpOwn(const OpContext& ctx, const NodeSlot& slot, const Shape& y, Conv1dState* st) {
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  auto first = [&](const char* name, int64_t def) {
    const std::vector<int64_t> v = ctx.attr_ints(name);
    return v.empty() ? def : v[0];
  };
  st->own = true;
  st->n = x.dim(0);
  st->c = x.dim(1);
  st->len = x.dim(2);
  st->k = y[1];
  st->kw = w.dim(2);
  st->stride = first("strides", 1);
  st->dil = first("dilations", 1);
  st->pad_b = first("pads", 0);
  st->lo = y[2];
  st->w.Pack(w.data<float>(), st->c * st->kw, st->k, /*trans=*/true);
  st->epi.bias_cs = 1;
  const Fusion& f = slot.fusion;
  st->epi.act = f.act == Fusion::Act::kRelu   ? GemmEpilogue::Act::kRelu
                : f.act == Fusion::Act::kClip ? GemmEpilogue::Act::kClip
                                              : GemmEpilogue::Act::kNone;
  st->epi.lo = f.lo;
  st->epi.hi = f.hi;
  st->cols.assign(static_cast<size_t>(st->n * st->lo * st->c * st->kw), 0.f);
  st->prod.assign(static_cast<size_t>(st->n * st->lo * st->k), 0.f);
}

void RunOwn(OpContext& ctx, Conv1dState& st) {
  const float* x = ctx.input(0).data<float>();
  const int64_t row = st.c * st.kw;
  for (int64_t b = 0; b < st.n; ++b)
    for (int64_t l = 0; l < st.lo; ++l) {
      float* a = st.cols.data() + (b * st.lo + l) * row;
      const int64_t p0 = l * st.stride - st.pad_b;
      for (int64_t ch = 0; ch < st.c; ++ch) {
        const float* xr = x + (b * st.c + ch) * st.len;
        float* ar = a + ch * st.kw;
        for (int64_t t = 0; t < st.kw; ++t) {
          const int64_t p = p0 + t * st.dil;
          ar[t] = p >= 0 && p < st.len ? xr[p] : 0.f;
        }
      }
    }
  GemmEpilogue e = st.epi;
  e.bias = ctx.num_inputs() > 2 && ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  PackedGemm(st.cols.data(), st.n * st.lo, row, st.w, st.prod.data(), e, 1);
  float* y = ctx.output(0).data<float>();
  for (int64_t b = 0; b < st.n; ++b)
    for (int64_t l = 0; l < st.lo; ++l) {
      const float* pr = st.prod.data() + (b * st.lo + l) * st.k;
      for (int64_t j = 0; j < st.k; ++j) y[(b * st.k + j) * st.lo + l] = pr[j];
    }
  g_own_runs.fetch_add(1, std::memory_order_relaxed);
}

// The node with 2-D attributes (a unit first spatial dim); `column`: the node is already 2-D with
// a unit second spatial dim, whose H attributes move to W.
ir::Node As2d(const ir::Node& n, bool column) {
  ir::Node m;
  m.name = n.name;
  m.op_type = n.op_type;
  m.domain = n.domain;
  m.inputs = n.inputs;
  m.outputs = n.outputs;
  for (const ir::Attribute& a : n.attributes) {
    ir::Attribute b;
    b.name = a.name;
    b.type = a.type;
    b.i = a.i;
    b.f = a.f;
    b.s = a.s;
    b.ints = a.ints;
    b.floats = a.floats;
    b.strings = a.strings;
    const size_t rank = column ? 2 : 1;
    if (a.type == ir::AttrType::kInts && a.ints.size() == rank &&
        (a.name == "kernel_shape" || a.name == "strides" || a.name == "dilations"))
      b.ints = {1, a.ints[0]};
    if (a.type == ir::AttrType::kInts && a.name == "pads" && a.ints.size() == 2 * rank)
      b.ints = {0, a.ints[0], 0, a.ints[rank]};
    m.attributes.push_back(std::move(b));
  }
  return m;
}

// A rank-3 tensor [N,C,L], or a column [N,C,L,1], as [N,C,1,L] (same storage).
Value With1(const Tensor& t) {
  const Shape& s = t.shape();
  return Value(t.Reshaped({s[0], s[1], 1, s[2]}));
}

bool Ones(const std::vector<int64_t>& v, size_t at) {
  return v.size() <= at || v[at] == 1;
}

// The inputs as the 2-D conv reads them: X and W with a unit dim, B as it is, a fused
// residual (input `sum`, [N,K,Lo]) with a unit dim.
std::vector<Value> Inputs2d(const OpContext& ctx, size_t sum) {
  std::vector<Value> v(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const size_t r = ctx.input_is_tensor(i) ? ctx.input(i).rank() : 0;
    v[i] = (i <= 1 || i == sum) && (r == 3 || r == 4) ? With1(ctx.input(i)) : ctx.input_value(i);
  }
  return v;
}

std::vector<const Value*> Pointers(const OpContext& ctx, const std::vector<Value>& v) {
  std::vector<const Value*> p(v.size(), nullptr);
  for (size_t i = 0; i < v.size(); ++i)
    if (ctx.has_input(i)) p[i] = &v[i];
  return p;
}

}  // namespace

bool IsColumnConv(const OpContext& ctx, const NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || !ctx.input_is_tensor(1) || ctx.input(0).rank() != 4 ||
      ctx.input(1).rank() != 4 || ctx.input(0).dim(3) != 1 || ctx.input(1).dim(3) != 1 ||
      ctx.input(0).dtype() != DType::kFloat || ctx.input(1).dtype() != DType::kFloat)
    return false;
  if (!slot.in_layouts.empty() && slot.in_layouts[0] != Layout::kPlain) return false;
  // A fused residual must be plain as well.
  for (size_t i = 2; i < slot.in_layouts.size(); ++i)
    if (slot.in_layouts[i] != Layout::kPlain) return false;
  const std::vector<int64_t> pads = ctx.attr_ints("pads");
  return Ones(ctx.attr_ints("dilations"), 1) && Ones(ctx.attr_ints("strides"), 1) &&
         (pads.size() != 4 || (pads[1] == 0 && pads[3] == 0));
}

uint64_t OwnConv1dRuns() {
  return g_own_runs.load();
}

bool HasConv1dState(const NodeSlot& slot) {
  return dynamic_cast<const Conv1dState*>(slot.state.get()) != nullptr;
}

Status PrepareConv1d(OpContext& ctx, NodeSlot& slot) {
  const bool column = ctx.input_is_tensor(0) && ctx.input(0).rank() == 4;
  const bool ok = column ? IsColumnConv(ctx, slot)
                         : ctx.input_is_tensor(0) && ctx.input_is_tensor(1) &&
                               ctx.input(0).rank() == 3 && ctx.input(1).rank() == 3 &&
                               ctx.input(0).dtype() == DType::kFloat &&
                               ctx.input(1).dtype() == DType::kFloat &&
                               (slot.in_layouts.empty() || slot.in_layouts[0] == Layout::kPlain);
  if (!ok) {
    slot.declined = true;
    return Status::Ok();
  }
  if (!HasConv1dState(slot)) slot.state.reset();
  auto* st = static_cast<Conv1dState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  const bool w_const = slot.const_inputs.size() > 1 && slot.const_inputs[1];
  // The outcome of a prepare: the output as st->out, plain, fused as the path that runs it is.
  const auto ready = [&] {
    st->ready = true;
    ctx.set_output(0, DType::kFloat, st->out);
    slot.fused = st->own ? slot.fusion.any() : st->inner.fused;
    slot.out_layouts.assign(1, Layout::kPlain);
    return Status::Ok();
  };
  if (st && st->ready && w_const && st->key == key) return ready();
  if (!st || !(st->key == key)) {
    auto fresh = std::make_unique<Conv1dState>();
    fresh->key = std::move(key);
    fresh->node = As2d(ctx.node(), column);
    fresh->inner.provider = slot.provider;
    fresh->inner.packs = slot.packs;
    fresh->inner.reference = slot.reference;
    fresh->inner.const_inputs = slot.const_inputs;
    slot.state = std::move(fresh);
    st = static_cast<Conv1dState*>(slot.state.get());
    if (!column && w_const && !slot.fusion.sum) {
      FERRY_ASSIGN_OR_RETURN(auto decl,
                             ReferenceDeclare(ctx, slot, std::min<size_t>(ctx.num_inputs(), 3)));
      const Shape& y = decl[0].shape;  // [N,K,Lo]
      if (y.size() == 3 && OwnWanted(ctx, slot, y)) {
        SetUpOwn(ctx, slot, y, st);
        st->out = y;
        return ready();
      }
    }
  }
  NodeSlot& in = st->inner;
  in.fusion = slot.fusion;
  in.in_layouts.assign(ctx.num_inputs(), Layout::kPlain);
  in.nhwc_ok.assign(1, false);
  in.out_pixel_stride = 0;
  in.declined = in.fused = in.strided_out_ok = false;
  in.out_layouts.clear();
  in.place_offsets.clear();
  const std::vector<Value> v = Inputs2d(ctx, slot.fusion.sum ? 3 : ctx.num_inputs());
  std::vector<Value> outs(ctx.num_outputs());
  OpContext c2(st->node, ctx.opset(), Pointers(ctx, v), &outs);
  c2.set_pool(ctx.pool());
  FERRY_RETURN_IF_ERROR(PrepareConv2d(c2, in));
  if (in.declined || c2.declared().empty() || !c2.declared()[0].set) {
    slot.declined = true;
    return Status::Ok();
  }
  const Shape& y = c2.declared()[0].shape;  // [N,K,1,Lo]
  st->out = column ? Shape{y[0], y[1], y[3], 1} : Shape{y[0], y[1], y[3]};
  return ready();
}

void RunConv1d(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<Conv1dState*>(slot.state.get());
  if (st->own) return RunOwn(ctx, *st);
  const std::vector<Value> v = Inputs2d(ctx, slot.fused && slot.fusion.sum ? 3 : ctx.num_inputs());
  std::vector<Value> outs(ctx.num_outputs());
  outs[0] = With1(ctx.output(0));
  OpContext c2(st->node, ctx.opset(), Pointers(ctx, v), &outs);
  c2.set_pool(ctx.pool());
  RunConv2d(c2, st->inner);
}

// The TransposeColumnConv pattern: Transpose(perm [0, 2, 1, 3]) of X [N, H, C, 1] read only by
// a column Conv (W constant [K, C, kh, 1], group 1, no auto_pad, no pads along W). X itself is
// the row conv's input [N, C, 1, H] stored channels-last ([N][1][H][C] is X's plain order), so
// the conv reads it where it is: no Transpose, and no reorder of the transposed copy back to
// oneDNN's NHWC (magika: 0.6 + 0.9 ms of its ~40 per run). params: kh, stride, dilation,
// pad begin, pad end.
namespace {

struct TColState : KernelState {
  StateKey key;
  ir::Node node;
  NodeSlot inner;
};

ir::Attribute Ints(const char* name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}

bool Matches(const std::vector<int64_t>& v, std::initializer_list<int64_t> want) {
  return v.size() == want.size() && std::equal(v.begin(), v.end(), want.begin());
}

bool MatchTransposeColumnConv(const GraphView& g, size_t host, PatternMatch* m) {
  if (!IsOp(g, host, "Transpose") || !Matches(g.node(host).attr_ints("perm"), {0, 2, 1, 3}))
    return false;
  size_t conv = 0;
  if (!OnlyReader(g, g.output(host, 0), &conv) || !IsOp(g, conv, "Conv") ||
      g.input(conv, 0) != g.output(host, 0))
    return false;
  const ir::Node& c = g.node(conv);
  const Tensor* w = g.constant(g.input(conv, 1));
  if (!w || w->dtype() != DType::kFloat || w->rank() != 4 || w->dim(3) != 1 ||
      c.attr_int("group", 1) != 1 || c.attr_string("auto_pad", "NOTSET") != "NOTSET")
    return false;
  const std::vector<int64_t> ks = c.attr_ints("kernel_shape"), st = c.attr_ints("strides"),
                             dl = c.attr_ints("dilations"), pd = c.attr_ints("pads");
  if ((!ks.empty() && (ks.size() != 2 || ks[0] != w->dim(2) || ks[1] != 1)) ||
      (!st.empty() && st.size() != 2) || (!dl.empty() && dl.size() != 2) ||
      (!pd.empty() && (pd.size() != 4 || pd[1] != 0 || pd[3] != 0)))
    return false;
  m->absorbed = {conv};
  m->inputs = {g.input(host, 0), g.input(conv, 1), c.inputs.size() > 2 ? g.input(conv, 2) : -1};
  m->output = g.output(conv, 0);
  m->params = {static_cast<float>(w->dim(2)), static_cast<float>(st.empty() ? 1 : st[0]),
               static_cast<float>(dl.empty() ? 1 : dl[0]),
               static_cast<float>(pd.empty() ? 0 : pd[0]),
               static_cast<float>(pd.empty() ? 0 : pd[2])};
  m->kernel = TransposeColumnConvKernel();
  return true;
}

// The inputs as the row conv reads them: X [N, H, C, 1] as [N, C, 1, H] (channels-last), W
// [K, C, kh, 1] as [K, C, 1, kh], B as it is.
std::vector<Value> RowInputs(const OpContext& ctx) {
  std::vector<Value> v(ctx.num_inputs());
  const Shape& x = ctx.input(0).shape();
  const Shape& w = ctx.input(1).shape();
  v[0] = Value(ctx.input(0).Reshaped({x[0], x[2], 1, x[1]}));
  v[1] = Value(ctx.input(1).Reshaped({w[0], w[1], 1, w[2]}));
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) v[2] = ctx.input_value(2);
  return v;
}

Status PrepareTransposeColumnConv(OpContext& ctx, NodeSlot& slot) {
  const bool ok = slot.params.size() == 5 && ctx.input_is_tensor(0) && ctx.input_is_tensor(1) &&
                  ctx.input(0).rank() == 4 && ctx.input(0).dim(3) == 1 &&
                  ctx.input(0).dtype() == DType::kFloat && ctx.input(1).rank() == 4 &&
                  ctx.input(1).dim(1) == ctx.input(0).dim(2) &&
                  (slot.in_layouts.empty() || slot.in_layouts[0] == Layout::kPlain) &&
                  (ctx.num_inputs() < 3 || !ctx.has_input(2) || ctx.input_is_tensor(2));
  if (!ok) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = dynamic_cast<TColState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    auto fresh = std::make_unique<TColState>();
    fresh->key = std::move(key);
    ir::Node& n = fresh->node;
    n.name = ctx.node().name;
    n.op_type = "Conv";
    const auto p = [&](size_t i) { return static_cast<int64_t>(slot.params[i]); };
    n.attributes.push_back(Ints("kernel_shape", {1, p(0)}));
    n.attributes.push_back(Ints("strides", {1, p(1)}));
    n.attributes.push_back(Ints("dilations", {1, p(2)}));
    n.attributes.push_back(Ints("pads", {0, p(3), 0, p(4)}));
    fresh->inner.provider = slot.provider;
    fresh->inner.packs = slot.packs;
    fresh->inner.reference = Registry::Get().Find("", "Conv", ctx.opset() < 11 ? 11 : ctx.opset());
    fresh->inner.const_inputs = slot.const_inputs;
    if (!fresh->inner.reference) {
      slot.declined = true;
      return Status::Ok();
    }
    slot.state = std::move(fresh);
    st = static_cast<TColState*>(slot.state.get());
  }
  NodeSlot& in = st->inner;
  in.fusion = Fusion{};
  in.in_layouts.assign(ctx.num_inputs(), Layout::kPlain);
  in.in_layouts[0] = Layout::kNhwc;
  in.nhwc_ok.assign(1, false);
  in.out_pixel_stride = 0;
  in.declined = in.fused = in.strided_out_ok = false;
  in.out_layouts.clear();
  in.place_offsets.clear();
  const std::vector<Value> v = RowInputs(ctx);
  std::vector<Value> outs(ctx.num_outputs());
  OpContext c2(st->node, ctx.opset() < 11 ? 11 : ctx.opset(), Pointers(ctx, v), &outs);
  c2.set_pool(ctx.pool());
  FERRY_RETURN_IF_ERROR(PrepareConv2d(c2, in));
  if (in.declined || c2.declared().empty() || !c2.declared()[0].set) {
    slot.declined = true;
    return Status::Ok();
  }
  const Shape& y = c2.declared()[0].shape;  // [N,K,1,Lo]
  ctx.set_output(0, DType::kFloat, {y[0], y[1], y[3], 1});
  slot.out_layouts.assign(1, Layout::kPlain);
  return Status::Ok();
}

void RunTransposeColumnConv(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<TColState*>(slot.state.get());
  const std::vector<Value> v = RowInputs(ctx);
  std::vector<Value> outs(ctx.num_outputs());
  outs[0] = With1(ctx.output(0));
  OpContext c2(st->node, ctx.opset() < 11 ? 11 : ctx.opset(), Pointers(ctx, v), &outs);
  c2.set_pool(ctx.pool());
  RunConv2d(c2, st->inner);
}

constexpr KernelDef kTColKernel = {"",
                                   "TransposeColumnConv (pattern)",
                                   1,
                                   1000,
                                   nullptr,
                                   0,
                                   0,
                                   PrepareTransposeColumnConv,
                                   RunTransposeColumnConv};

constexpr Pattern kTColPatterns[] = {{"TransposeColumnConv", MatchTransposeColumnConv}};

}  // namespace

const KernelDef* TransposeColumnConvKernel() {
  return &kTColKernel;
}

std::span<const Pattern> TransposeColumnConvPatterns() {
  return kTColPatterns;
}

}  // namespace ferry::ops::cpu
