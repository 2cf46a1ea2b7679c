// cpu kernels for static QDQ models: the QConv pattern (int8 convolution on oneDNN), and
// QuantizeLinear / DequantizeLinear (per tensor, any layout).
//
// QConv: DequantizeLinear(x_q) -> Conv(W = DequantizeLinear(int8 initializer, per-tensor or
// per-output-channel scale, zero point 0), B = DequantizeLinear(int32 initializer, scale
// x_scale * w_scale)) [-> Relu | Clip] -> QuantizeLinear, as `ferry quantize --mode static` writes
// it, runs as one oneDNN int8 convolution (it picks AMX, AVX512-VNNI or AVX2 kernels itself) with
// the requantization of the QLinearConv reference (ops/reference/quant.cc), bit for bit:
//   y = saturate(nearbyint(float(acc + bias) * multiplier) + y_zp),
//   multiplier = x_scale * w_scale[c] / y_scale in float, acc = sum((x - x_zp) * w),
// then clamped to [Q(a), Q(b)] for a Relu (a = 0) or Clip(a, b) between Conv and QuantizeLinear
// (QuantizeLinear is monotone: Q(clip(z, a, b)) = clamp(Q(z), Q(a), Q(b))).
// How the oneDNN computation is kept equal to it:
//  * oneDNN adds the bias in float after converting the accumulator (float(acc) + float(bias)).
//    That equals float(acc + bias) whenever |acc|, |bias| and |acc + bias| < 2^24. At prepare a
//    bound per channel (max|x - x_zp| * sum|w| + |bias|) proves it, or else proves that every
//    accumulator large enough to round gives |value| >= 512 in both computations (so both
//    saturate to the same end); a channel that passes neither check declines the node (the
//    steps then run one by one, exactly).
//  * oneDNN adds the output zero point in float before rounding (nearbyint(v + zp) differs from
//    nearbyint(v) + zp on ties and near them). With y_zp == 0 the convolution writes u8/s8
//    directly; otherwise it writes s32 (nearbyint(v), saturated) and a pass here adds y_zp and
//    saturates.
//  * Without VNNI (AVX2, AVX-512 without VNNI) oneDNN multiplies u8 x s8 pairs with vpmaddubsw,
//    whose 16-bit sums saturate: the node declines unless every |w| <= 64 (no pair can overflow).
// The float DequantizeLinear of the weights and bias are folded by the runtime (computed once).
// Activations stay uint8/int8 in NHWC between QConv nodes when every reader takes that layout.
//
// QuantizeLinear (float32 input) / DequantizeLinear (int8/uint8/int32 input): per-tensor scale and
// zero point, any layout (the output keeps the input's layout when the readers take it);
// DequantizeLinear also per axis on plain inputs (per-channel weights: the session's first run).
// Same arithmetic as the reference: q = saturate(nearbyint(x / scale) + zp) with a float division,
// NaN -> 0; y = float(x - zp) * scale.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <vector>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// The patterns' host is the op itself or the DequantizeLinear feeding it (then its only
// reader): the op's step, or false.
bool OpAtHost(const GraphView& g, size_t host, std::string_view op, size_t* at) {
  *at = host;
  if (IsOp(g, host, "DequantizeLinear")) {
    const std::vector<size_t> r = g.readers(g.output(host, 0));
    if (r.size() != 1 || !IsOp(g, r[0], op)) return false;
    *at = r[0];
    return true;
  }
  return IsOp(g, host, op);
}

// The step writing value v (searching before step `before`), or -1.
int Producer(const GraphView& g, int v, size_t before) {
  if (v < 0) return -1;
  for (size_t s = before; s-- > 0;)
    for (size_t k = 0; k < g.node(s).outputs.size(); ++k)
      if (g.output(s, k) == v) return static_cast<int>(s);
  return -1;
}

bool FloatConst(const Tensor* t, int64_t n1, int64_t n2) {
  return t && t->dtype() == DType::kFloat && t->rank() <= 1 && (t->size() == n1 || t->size() == n2);
}

bool ZeroConst(const Tensor* t) {
  if (!t) return false;
  for (int64_t i = 0; i < t->size(); ++i)
    if (t->GetAsInt64(i) != 0) return false;
  return true;
}

const KernelDef* QConvKernel();

// QConv pattern. params: {clip lo, clip hi (+-inf: none; Relu: 0, inf), group, stride h, w, pad
// top, left, bottom, right, dilation h, w}. inputs: {x_q, x_scale, x_zp, w_q, w_scale, b_q,
// y_scale, y_zp}.
bool MatchQConv(const GraphView& g, size_t host, PatternMatch* m) {
  size_t conv;
  if (!OpAtHost(g, host, "Conv", &conv)) return false;
  const ir::Node& cn = g.node(conv);
  if (cn.attr_string("auto_pad", "NOTSET") != "NOTSET" &&
      cn.attr_string("auto_pad", "NOTSET") != "VALID")
    return false;
  const int x = g.input(conv, 0), w = g.input(conv, 1), b = g.input(conv, 2);
  const int xd = Producer(g, x, conv), wd = Producer(g, w, conv);
  const int bd = b >= 0 ? Producer(g, b, conv) : -1;
  if (xd < 0 || wd < 0 || (b >= 0 && bd < 0)) return false;
  for (int d : {xd, wd, bd})
    if (d >= 0 && !IsOp(g, static_cast<size_t>(d), "DequantizeLinear")) return false;
  const size_t sx = static_cast<size_t>(xd), sw = static_cast<size_t>(wd);
  // x: non-constant, scalar parameters.
  if (g.constant(g.input(sx, 0)) || !FloatConst(g.constant(g.input(sx, 1)), 1, 1)) return false;
  if (g.input(sx, 2) >= 0) {
    const Tensor* z = g.constant(g.input(sx, 2));
    if (!z || z->size() != 1) return false;
  }
  // W: int8 rank-4 constant, zero point 0, per tensor or axis 0.
  const Tensor* wq = g.constant(g.input(sw, 0));
  if (!wq || wq->dtype() != DType::kInt8 || wq->rank() != 4) return false;
  const int64_t oc = wq->dim(0);
  const Tensor* ws = g.constant(g.input(sw, 1));
  if (!FloatConst(ws, 1, oc) || (ws->size() != 1 && g.node(sw).attr_int("axis", 1) != 0))
    return false;
  if (g.input(sw, 2) >= 0 && !ZeroConst(g.constant(g.input(sw, 2)))) return false;
  // B: int32 constant [oc], zero point 0, scale x_scale * w_scale.
  int bq = -1;
  if (bd >= 0) {
    const size_t sb = static_cast<size_t>(bd);
    const Tensor* t = g.constant(g.input(sb, 0));
    const Tensor* bs = g.constant(g.input(sb, 1));
    if (!t || t->dtype() != DType::kInt32 || t->rank() != 1 || t->size() != oc ||
        !FloatConst(bs, 1, oc))
      return false;
    if (g.input(sb, 2) >= 0 && !ZeroConst(g.constant(g.input(sb, 2)))) return false;
    if (bs->size() != 1 && g.node(sb).attr_int("axis", 1) != 0) return false;
    const float xs = g.constant(g.input(sx, 1))->data<float>()[0];
    for (int64_t c = 0; c < oc; ++c) {
      const float want = xs * ws->data<float>()[ws->size() == 1 ? 0 : c];
      const float got = bs->data<float>()[bs->size() == 1 ? 0 : c];
      if (!(std::fabs(got - want) <= 1e-6f * std::fabs(want))) return false;
    }
    bq = g.input(sb, 0);
  }
  // Conv [-> Relu | Clip with constant bounds] -> QuantizeLinear (scalar parameters).
  std::vector<size_t> absorbed;
  int v = g.output(conv, 0);
  std::vector<size_t> r = g.readers(v);
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (r.size() == 1 && (IsOp(g, r[0], "Relu") || IsOp(g, r[0], "Clip"))) {
    const size_t a = r[0];
    if (IsOp(g, a, "Relu")) {
      lo = 0;
    } else if (g.opset(a) < 11) {
      lo = g.node(a).attr_float("min", lo);
      hi = g.node(a).attr_float("max", hi);
    } else {
      for (size_t i : {1, 2}) {
        if (g.input(a, i) < 0) continue;
        const Tensor* t = g.constant(g.input(a, i));
        if (!t || t->dtype() != DType::kFloat || t->size() != 1) return false;
        (i == 1 ? lo : hi) = t->data<float>()[0];
      }
    }
    if (std::isnan(lo) || std::isnan(hi) || lo > hi) return false;
    absorbed.push_back(a);
    v = g.output(a, 0);
    r = g.readers(v);
  }
  if (r.size() != 1 || !IsOp(g, r[0], "QuantizeLinear") || g.input(r[0], 0) != v) return false;
  const size_t q = r[0];
  if (!FloatConst(g.constant(g.input(q, 1)), 1, 1)) return false;
  if (g.input(q, 2) >= 0) {
    const Tensor* z = g.constant(g.input(q, 2));
    if (!z || z->size() != 1 || (z->dtype() != DType::kUint8 && z->dtype() != DType::kInt8))
      return false;
  } else if (g.node(q).attr_int("output_dtype", 0) != 0) {
    return false;
  }
  absorbed.push_back(q);
  // Host: the x DequantizeLinear when the Conv is its only reader, else the Conv.
  const bool own_dq = g.readers(x).size() == 1;
  if (own_dq ? host != sx : host != conv) return false;
  if (own_dq) absorbed.push_back(conv);
  std::sort(absorbed.begin(), absorbed.end());
  std::vector<int64_t> st = cn.attr_ints("strides"), pads = cn.attr_ints("pads"),
                       dil = cn.attr_ints("dilations");
  if (st.empty()) st = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (dil.empty()) dil = {1, 1};
  if (st.size() != 2 || pads.size() != 4 || dil.size() != 2) return false;
  m->kernel = QConvKernel();
  m->absorbed = absorbed;
  m->inputs = {g.input(sx, 0), g.input(sx, 1), g.input(sx, 2), g.input(sw, 0), g.input(sw, 1), bq,
               g.input(q, 1),  g.input(q, 2)};
  m->output = g.output(q, 0);
  m->params = {lo, hi, static_cast<float>(cn.attr_int("group", 1))};
  for (int64_t a : st) m->params.push_back(static_cast<float>(a));
  for (int64_t a : pads) m->params.push_back(static_cast<float>(a));
  for (int64_t a : dil) m->params.push_back(static_cast<float>(a));
  return true;
}

bool HasVnni() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_vnni || isa == dnnl::cpu_isa::avx512_core_bf16 ||
         isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx2_vnni;
}

struct QConvState : KernelState {
  StateKey key;
  dnnl::convolution_forward prim;
  PackedPtr packed_buf;  // W in the primitive's layout (shared)
  memory packed_w, bias, src_zp;
  memory::desc in_md, src_md, dst_md;  // input as it arrives, the primitive's src and dst (NHWC)
  bool reorder_src = false;
  dnnl::reorder src_reorder, dst_reorder;  // dst_reorder: NHWC u8/s8 -> plain output
  bool s32 = false;                        // dst is s32: add y_zp and saturate here
  bool src_zp_arg = false;
  bool nhwc_out = false;
  int32_t y_zp = 0, lo = 0, hi = 0;
  DType out_type = DType::kUint8;
};

int64_t P(const NodeSlot& slot, size_t i) {
  return static_cast<int64_t>(slot.params[i]);
}

Status Decline(NodeSlot& slot) {
  slot.declined = true;
  slot.state.reset();
  return Status::Ok();
}

Status PrepareQConv(OpContext& ctx, NodeSlot& slot) {
  auto tensor = [&](size_t i) { return ctx.has_input(i) && ctx.input_is_tensor(i); };
  if (slot.params.size() != 11 || !tensor(0) || !tensor(1) || !tensor(3) || !tensor(4) ||
      !tensor(6))
    return Decline(slot);
  const Tensor& x = ctx.input(0);
  const DType xt = x.dtype();
  if ((xt != DType::kUint8 && xt != DType::kInt8) || x.rank() != 4 || x.size() == 0)
    return Decline(slot);
  for (size_t i : {3, 5})
    if (tensor(i) && !slot.const_inputs[i]) return Decline(slot);
  if (tensor(2) && (ctx.input(2).dtype() != xt || ctx.input(2).size() != 1)) return Decline(slot);
  const Tensor& w = ctx.input(3);
  const int64_t group = P(slot, 2);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t oc = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  if (w.dtype() != DType::kInt8 || w.rank() != 4 || group < 1 || c != w.dim(1) * group ||
      oc % group != 0)
    return Decline(slot);
  const int64_t sh = P(slot, 3), sw = P(slot, 4), pt = P(slot, 5), pl = P(slot, 6), pb = P(slot, 7),
                pr = P(slot, 8), dh = P(slot, 9), dw = P(slot, 10);
  if (sh < 1 || sw < 1 || dh < 1 || dw < 1) return Decline(slot);
  const int64_t oh = (h + pt + pb - ((kh - 1) * dh + 1)) / sh + 1;
  const int64_t ow = (wd + pl + pr - ((kw - 1) * dw + 1)) / sw + 1;
  if (oh < 1 || ow < 1 || h + pt + pb < (kh - 1) * dh + 1 || wd + pl + pr < (kw - 1) * dw + 1)
    return Decline(slot);
  const DType yt = tensor(7) ? ctx.input(7).dtype() : DType::kUint8;
  if (yt != DType::kUint8 && yt != DType::kInt8) return Decline(slot);
  const Shape out_shape = {n, oc, oh, ow};
  const KeyProbe key = MakeKey(ctx, slot);
  auto* st = static_cast<QConvState*>(slot.state.get());
  if (!st || !(st->key == key)) {
    slot.state.reset();
    auto fresh = std::make_unique<QConvState>();
    fresh->key = key;
    const Tensor& ws = ctx.input(4);
    if (ws.dtype() != DType::kFloat || (ws.size() != 1 && ws.size() != oc)) return Decline(slot);
    const float x_scale = ctx.input(1).data<float>()[0], y_scale = ctx.input(6).data<float>()[0];
    if (!(y_scale > 0)) return Decline(slot);  // Q(clip(z)) = clamp(Q(z), Q(a), Q(b)) needs it
    const int32_t x_zp = tensor(2) ? static_cast<int32_t>(ctx.input(2).GetAsInt64(0)) : 0;
    const int32_t y_zp = tensor(7) ? static_cast<int32_t>(ctx.input(7).GetAsInt64(0)) : 0;
    // Clip(a, b) before QuantizeLinear: Q is monotone, so Q(clip(z)) = clamp(Q(z), Q(a), Q(b)).
    const int32_t tlo = yt == DType::kUint8 ? 0 : -128, thi = yt == DType::kUint8 ? 255 : 127;
    auto quant = [&](float a) {
      const float q = std::nearbyint(a / y_scale) + static_cast<float>(y_zp);
      return static_cast<int32_t>(std::clamp(q, static_cast<float>(tlo), static_cast<float>(thi)));
    };
    fresh->y_zp = y_zp;
    fresh->lo = std::isinf(slot.params[0]) && slot.params[0] < 0 ? tlo : quant(slot.params[0]);
    fresh->hi = std::isinf(slot.params[1]) && slot.params[1] > 0 ? thi : quant(slot.params[1]);
    fresh->out_type = yt;
    // Requantization multipliers, exactness bounds, saturation of the non-VNNI kernels.
    const int64_t k = w.size() / oc;
    const int8_t* wp = w.data<int8_t>();
    const int32_t* bp = tensor(5) ? ctx.input(5).data<int32_t>() : nullptr;
    if (bp && ctx.input(5).size() != oc) return Decline(slot);
    const double xmax =
        xt == DType::kUint8 ? std::max(x_zp, 255 - x_zp) : std::max(x_zp + 128, 127 - x_zp);
    const bool vnni = HasVnni();
    std::vector<float> scales(static_cast<size_t>(oc)), bias(static_cast<size_t>(oc), 0.f);
    constexpr double k24 = 16777216.0;
    for (int64_t o = 0; o < oc; ++o) {
      const float mult = x_scale * ws.data<float>()[ws.size() == 1 ? 0 : o] / y_scale;
      scales[static_cast<size_t>(o)] = mult;
      double sum = 0;
      int amax = 0;
      for (int64_t i = 0; i < k; ++i) {
        const int a = std::abs(static_cast<int>(wp[o * k + i]));
        sum += a;
        amax = std::max(amax, a);
      }
      if (!vnni && amax > 64) return Decline(slot);
      const double b = bp ? std::fabs(static_cast<double>(bp[o])) : 0.0;
      const double bound = xmax * sum + b;
      if (bound >= 2147483647.0 || b >= k24) return Decline(slot);
      if (bound >= k24 && !((k24 - b) * std::fabs(static_cast<double>(mult)) * (1 - 1e-5) >= 512))
        return Decline(slot);
      if (!std::isfinite(mult)) return Decline(slot);
      if (bp) bias[static_cast<size_t>(o)] = static_cast<float>(bp[o]);
    }
    // The primitive: NHWC u8/s8 source, blocked s8 weights, f32 bias, NHWC dst.
    dnnl::engine& eng = slot.provider->engine();
    const bool direct = y_zp == 0;
    fresh->s32 = !direct;
    const memory::data_type dst_dt = direct ? DnnlType(yt) : memory::data_type::s32;
    fresh->in_md = LayoutDesc(x.shape(), slot.in_layouts[0], DnnlType(xt));
    fresh->src_md = LayoutDesc(x.shape(), Layout::kNhwc, DnnlType(xt));
    fresh->dst_md = memory::desc(Dims(out_shape), dst_dt, tag::acdb);
    memory::dims wdims = group > 1 ? memory::dims{group, oc / group, w.dim(1), kh, kw}
                                   : memory::dims{oc, w.dim(1), kh, kw};
    const memory::desc wuser(wdims, memory::data_type::s8, group > 1 ? tag::goihw : tag::oihw);
    const memory::desc wany(wdims, memory::data_type::s8, tag::any);
    const memory::desc bmd({oc}, memory::data_type::f32, tag::a);
    dnnl::primitive_attr attr;
    bool same = true;
    for (float s : scales) same = same && s == scales[0];
    if (same)
      attr.set_output_scales(0, {scales[0]});
    else
      attr.set_output_scales(1 << 1, scales);
    fresh->src_zp_arg = x_zp != 0;
    if (x_zp != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (direct && (fresh->lo != tlo || fresh->hi != thi)) {
      // round(clip(v, lo, hi)) = clamp(round(v), lo, hi) for integer bounds (y_zp is 0 here).
      dnnl::post_ops po;
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, static_cast<float>(fresh->lo),
                        static_cast<float>(fresh->hi));
      attr.set_post_ops(po);
    }
    dnnl::convolution_forward::primitive_desc pd;
    try {
      dnnl::convolution_forward::desc d(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, fresh->src_md,
          wany, bmd, fresh->dst_md, {sh, sw}, {dh - 1, dw - 1}, {pt, pl}, {pb, pr});
      pd = dnnl::convolution_forward::primitive_desc(d, attr, eng);
    } catch (const dnnl::error&) {
      return Decline(slot);
    }
    const std::string impl = pd.impl_info_str();
    if (impl.rfind("ref", 0) == 0 || pd.src_desc() != fresh->src_md ||
        pd.dst_desc() != fresh->dst_md)
      return Decline(slot);
    fresh->prim = dnnl::convolution_forward(pd);
    // W is constant (checked above): packed once per session.
    fresh->packed_buf = SharedReorder(slot, true, w.raw(), wuser, pd.weights_desc(), eng,
                                      slot.provider->stream(), "qconv");
    fresh->packed_w = memory(pd.weights_desc(), eng, const_cast<float*>(fresh->packed_buf->data()));
    fresh->bias = memory(bmd, eng);
    std::memcpy(fresh->bias.get_data_handle(), bias.data(), bias.size() * sizeof(float));
    fresh->src_zp = memory(memory::desc({1}, memory::data_type::s32, tag::a), eng);
    *static_cast<int32_t*>(fresh->src_zp.get_data_handle()) = x_zp;
    fresh->reorder_src = fresh->in_md != fresh->src_md;
    if (fresh->reorder_src)
      fresh->src_reorder =
          dnnl::reorder(dnnl::reorder::primitive_desc(eng, fresh->in_md, eng, fresh->src_md));
    fresh->nhwc_out = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
    if (!fresh->nhwc_out && direct)
      fresh->dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(
          eng, fresh->dst_md, eng, LayoutDesc(out_shape, Layout::kPlain, DnnlType(yt))));
    slot.provider->stream().wait();
    st = fresh.get();
    slot.state = std::move(fresh);
  }
  slot.out_layouts.assign(1, st->nhwc_out ? Layout::kNhwc : Layout::kPlain);
  ctx.set_output(0, yt, out_shape);
  return Status::Ok();
}

// y = clamp(a + zp, lo, hi) over n contiguous elements (a clamped first: no int32 overflow).
template <typename T>
void FinishRow(const int32_t* a, T* y, int64_t n, int32_t zp, int32_t lo, int32_t hi) {
  for (int64_t j = 0; j < n; ++j) y[j] = static_cast<T>(std::clamp(a[j], lo - zp, hi - zp) + zp);
}

template <typename T>
__attribute__((target("avx2"))) void FinishRowAvx2(const int32_t* a, T* y, int64_t n, int32_t zp,
                                                   int32_t lo, int32_t hi) {
  const __m256i vlo = _mm256_set1_epi32(lo - zp), vhi = _mm256_set1_epi32(hi - zp),
                vz = _mm256_set1_epi32(zp);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + j));
    v = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(v, vlo), vhi), vz);
    const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    const __m128i p8 = std::is_signed_v<T> ? _mm_packs_epi16(p16, p16) : _mm_packus_epi16(p16, p16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + j), p8);
  }
  FinishRow(a + j, y + j, n - j, zp, lo, hi);
}

// s32 NHWC [rows, c] -> u8/s8 (NHWC, or plain [n, c, hw] when `plain`): + zp, saturate.
template <typename T>
void FinishS32(const int32_t* a, T* y, int64_t n, int64_t hw, int64_t c, int32_t zp, int32_t lo,
               int32_t hi, bool plain) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  ParallelRange(n * hw, 4096, [&](int64_t b, int64_t e) {
    if (!plain) {
      avx2 ? FinishRowAvx2(a + b * c, y + b * c, (e - b) * c, zp, lo, hi)
           : FinishRow(a + b * c, y + b * c, (e - b) * c, zp, lo, hi);
      return;
    }
    for (int64_t r = b; r < e; ++r) {
      const int32_t* ar = a + r * c;
      const int64_t img = r / hw, p = r % hw;
      T* yr = y + img * c * hw + p;
      for (int64_t j = 0; j < c; ++j)
        yr[j * hw] = static_cast<T>(std::clamp(ar[j], lo - zp, hi - zp) + zp);
    }
  });
}

void RunQConv(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<QConvState*>(slot.state.get());
  Provider& p = *slot.provider;
  dnnl::engine& eng = p.engine();
  dnnl::stream& s = p.stream();
  memory src(st->in_md, eng, const_cast<void*>(ctx.input(0).raw()));
  if (st->reorder_src) {
    memory tmp(st->src_md, eng, p.Scratch(0, st->src_md.get_size()));
    st->src_reorder.execute(s, src, tmp);
    src = tmp;
  }
  Tensor& y = ctx.output(0);
  const bool into_out = !st->s32 && st->nhwc_out;
  memory dst = into_out ? memory(st->dst_md, eng, y.raw())
                        : memory(st->dst_md, eng, p.Scratch(1, st->dst_md.get_size()));
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, src},
                                          {DNNL_ARG_WEIGHTS, st->packed_w},
                                          {DNNL_ARG_BIAS, st->bias},
                                          {DNNL_ARG_DST, dst}};
  if (st->src_zp_arg) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = st->src_zp;
  st->prim.execute(s, args);
  if (!st->s32 && !st->nhwc_out) {
    memory out(LayoutDesc(y.shape(), Layout::kPlain, DnnlType(st->out_type)), eng, y.raw());
    st->dst_reorder.execute(s, dst, out);
  }
  s.wait();
  if (st->s32) {
    const int32_t* a = static_cast<const int32_t*>(dst.get_data_handle());
    const int64_t n = y.dim(0), c = y.dim(1), hw = y.dim(2) * y.dim(3);
    if (st->out_type == DType::kUint8)
      FinishS32(a, y.data<uint8_t>(), n, hw, c, st->y_zp, st->lo, st->hi, !st->nhwc_out);
    else
      FinishS32(a, y.data<int8_t>(), n, hw, c, st->y_zp, st->lo, st->hi, !st->nhwc_out);
  }
}

constexpr KernelDef kQConv = {"", "QConv (pattern)", 1,       1000, nullptr, 0,
                              0,  PrepareQConv,      RunQConv};

const KernelDef* QConvKernel() {
  return &kQConv;
}

// ---- QAdd: DequantizeLinear(a), DequantizeLinear(b) -> Add [-> Relu | Clip] -> QuantizeLinear
// Two roundings, by what ONNX Runtime (the runtime these QDQ files are written for) does with the
// same chain:
//  - a, b and y of one 8-bit type and no Relu/Clip: ORT fuses the chain into QLinearAdd, so QAdd
//    rounds as its x86 kernel does (found by running it: bit-identical on 30 random parameter
//    sets x 65536 elements, ORT 1.30) — scale ratios ra = sa / sy, rb = sb / sy and a constant
//    c = zy - fma(ra, za, rb * zb), then q = saturate(nearbyint(fma(a, ra, fma(b, rb, c)))).
//    This differs from the float steps by one step where their float rounding error decides a
//    tie (ratios such as 0.5: up to 19% of elements; ~0.04% on MobileNetV2), enough to move
//    MobileNetV2's logits off ORT's (97.5% -> 100% of them within one step with this form);
//  - otherwise (ORT runs the float steps): exactly the float steps' operations in their order,
//    bit for bit the unfused graph:
//      q = saturate(nearbyint(clip(float(a - za) * sa + float(b - zb) * sb) / sy) + zy).
// Same shapes, any layout (both inputs in the same one). params: {clip lo, clip hi}.
// inputs: {a_q, a_scale, a_zp, b_q, b_scale, b_zp, y_scale, y_zp}.

const KernelDef* QAddKernel();

// The QuantizeLinear (after an optional Relu/Clip) that is the only reader of value v: fills
// `absorbed`, `lo`, `hi`; -1 when the chain is not there.
int QuantTail(const GraphView& g, int v, std::vector<size_t>* absorbed, float* lo, float* hi) {
  std::vector<size_t> r = g.readers(v);
  *lo = -std::numeric_limits<float>::infinity();
  *hi = std::numeric_limits<float>::infinity();
  if (r.size() == 1 && (IsOp(g, r[0], "Relu") || IsOp(g, r[0], "Clip"))) {
    const size_t a = r[0];
    if (IsOp(g, a, "Relu")) {
      *lo = 0;
    } else if (g.opset(a) < 11) {
      *lo = g.node(a).attr_float("min", *lo);
      *hi = g.node(a).attr_float("max", *hi);
    } else {
      for (size_t i : {1, 2}) {
        if (g.input(a, i) < 0) continue;
        const Tensor* t = g.constant(g.input(a, i));
        if (!t || t->dtype() != DType::kFloat || t->size() != 1) return -1;
        (i == 1 ? *lo : *hi) = t->data<float>()[0];
      }
    }
    if (std::isnan(*lo) || std::isnan(*hi) || *lo > *hi) return -1;
    absorbed->push_back(a);
    v = g.output(a, 0);
    r = g.readers(v);
  }
  if (r.size() != 1 || !IsOp(g, r[0], "QuantizeLinear") || g.input(r[0], 0) != v) return -1;
  const size_t q = r[0];
  if (!FloatConst(g.constant(g.input(q, 1)), 1, 1)) return -1;
  if (g.input(q, 2) >= 0) {
    const Tensor* z = g.constant(g.input(q, 2));
    if (!z || z->size() != 1 || (z->dtype() != DType::kUint8 && z->dtype() != DType::kInt8))
      return -1;
  } else if (g.node(q).attr_int("output_dtype", 0) != 0) {
    return -1;
  }
  absorbed->push_back(q);
  return static_cast<int>(q);
}

// A DequantizeLinear of a non-constant tensor with constant scalar parameters.
bool ActivationDq(const GraphView& g, int step) {
  if (step < 0 || !IsOp(g, static_cast<size_t>(step), "DequantizeLinear")) return false;
  const size_t s = static_cast<size_t>(step);
  if (g.constant(g.input(s, 0)) || !FloatConst(g.constant(g.input(s, 1)), 1, 1)) return false;
  if (g.input(s, 2) >= 0) {
    const Tensor* z = g.constant(g.input(s, 2));
    if (!z || z->size() != 1) return false;
  }
  return true;
}

bool MatchQAdd(const GraphView& g, size_t host, PatternMatch* m) {
  size_t add;
  if (!OpAtHost(g, host, "Add", &add)) return false;
  const int a = g.input(add, 0), b = g.input(add, 1);
  if (a < 0 || b < 0 || a == b) return false;
  const int da = Producer(g, a, add), db = Producer(g, b, add);
  if (!ActivationDq(g, da) || !ActivationDq(g, db)) return false;
  std::vector<size_t> absorbed;
  float lo, hi;
  const int q = QuantTail(g, g.output(add, 0), &absorbed, &lo, &hi);
  if (q < 0) return false;
  // Host: the first of {Add, its single-reader DequantizeLinears} after both integer inputs are
  // computed; a DequantizeLinear before it stays a step of its own (its output then unused).
  int ready = -1;
  for (int d : {da, db})
    ready = std::max(ready, Producer(g, g.input(static_cast<size_t>(d), 0), add));
  std::vector<size_t> steps = {add};
  for (int d : {da, db})
    if (d > ready && g.readers(g.output(static_cast<size_t>(d), 0)).size() == 1)
      steps.push_back(static_cast<size_t>(d));
  if (host != *std::min_element(steps.begin(), steps.end())) return false;
  for (size_t t : steps)
    if (t != host) absorbed.push_back(t);
  std::sort(absorbed.begin(), absorbed.end());
  const size_t sa = static_cast<size_t>(da), sb = static_cast<size_t>(db);
  const size_t sq = static_cast<size_t>(q);
  m->kernel = QAddKernel();
  m->absorbed = absorbed;
  m->inputs = {g.input(sa, 0), g.input(sa, 1), g.input(sa, 2), g.input(sb, 0),
               g.input(sb, 1), g.input(sb, 2), g.input(sq, 1), g.input(sq, 2)};
  m->output = g.output(sq, 0);
  m->params = {lo, hi};
  return true;
}

struct QAddState : KernelState {
  float sa = 1, sb = 1, sy = 1, za = 0, zb = 0, zy = 0, lo = 0, hi = 0;
  float qlo = 0, qhi = 255;
  bool ratio_form = false;  // ORT's QLinearAdd rounding (above)
  float ra = 1, rb = 1, c = 0;
};

Status PrepareQAdd(OpContext& ctx, NodeSlot& slot) {
  auto tensor = [&](size_t i) { return ctx.has_input(i) && ctx.input_is_tensor(i); };
  if (slot.params.size() != 2 || !tensor(0) || !tensor(1) || !tensor(3) || !tensor(4) || !tensor(6))
    return Decline(slot);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const DType at = a.dtype();
  const DType yt = tensor(7) ? ctx.input(7).dtype() : DType::kUint8;
  if ((at != DType::kUint8 && at != DType::kInt8) || b.dtype() != at || a.shape() != b.shape() ||
      slot.in_layouts[0] != slot.in_layouts[3] || (yt != DType::kUint8 && yt != DType::kInt8))
    return Decline(slot);
  for (size_t i : {1, 4, 6})
    if (ctx.input(i).dtype() != DType::kFloat || ctx.input(i).size() != 1) return Decline(slot);
  for (size_t i : {2, 5})
    if (tensor(i) && (ctx.input(i).dtype() != at || ctx.input(i).size() != 1)) return Decline(slot);
  const Layout l = slot.in_layouts[0];
  if (l != Layout::kPlain && (slot.nhwc_ok.empty() || !slot.nhwc_ok[0])) return Decline(slot);
  auto st = std::make_unique<QAddState>();
  st->sa = ctx.input(1).data<float>()[0];
  st->sb = ctx.input(4).data<float>()[0];
  st->sy = ctx.input(6).data<float>()[0];
  st->za = tensor(2) ? static_cast<float>(ctx.input(2).GetAsInt64(0)) : 0.f;
  st->zb = tensor(5) ? static_cast<float>(ctx.input(5).GetAsInt64(0)) : 0.f;
  st->zy = tensor(7) ? static_cast<float>(ctx.input(7).GetAsInt64(0)) : 0.f;
  st->lo = slot.params[0];
  st->hi = slot.params[1];
  st->qlo = yt == DType::kUint8 ? 0.f : -128.f;
  st->qhi = yt == DType::kUint8 ? 255.f : 127.f;
  st->ratio_form = yt == at && std::isinf(st->lo) && st->lo < 0 && std::isinf(st->hi) && st->hi > 0;
  st->ra = st->sa / st->sy;
  st->rb = st->sb / st->sy;
  st->c = st->zy - std::fma(st->ra, st->za, st->rb * st->zb);
  slot.state = std::move(st);
  slot.out_layouts.assign(1, l);
  ctx.set_output(0, yt, a.shape());
  return Status::Ok();
}

template <typename T, typename Y>
void QAddScalar(const T* a, const T* b, Y* y, int64_t n, const QAddState& s) {
  if (s.ratio_form) {
    for (int64_t i = 0; i < n; ++i) {
      const float v =
          std::fma(static_cast<float>(a[i]), s.ra, std::fma(static_cast<float>(b[i]), s.rb, s.c));
      y[i] = static_cast<Y>(std::clamp(std::nearbyint(v), s.qlo, s.qhi));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float fa = static_cast<float>(static_cast<int>(a[i]) - static_cast<int>(s.za)) * s.sa;
    const float fb = static_cast<float>(static_cast<int>(b[i]) - static_cast<int>(s.zb)) * s.sb;
    float v = std::min(std::max(fa + fb, s.lo), s.hi) / s.sy;
    if (std::isnan(v)) v = 0;
    y[i] = static_cast<Y>(std::clamp(std::nearbyint(v) + s.zy, s.qlo, s.qhi));
  }
}

template <typename T>
__attribute__((target("avx2"))) __m256 LoadDq(const T* p, __m256i z, __m256 s) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m256i w = std::is_signed_v<T> ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(w, z)), s);
}

template <typename T>
__attribute__((target("avx2"))) __m256 Load8(const T* p) {
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(std::is_signed_v<T> ? _mm256_cvtepi8_epi32(v)
                                                : _mm256_cvtepu8_epi32(v));
}

template <typename Y>
__attribute__((target("avx2"))) void Store8(Y* y, __m256i q) {
  const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
  const __m128i p8 = std::is_signed_v<Y> ? _mm_packs_epi16(p16, p16) : _mm_packus_epi16(p16, p16);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(y), p8);
}

// The ratio form (ORT's QLinearAdd rounding); the packs saturate to the type's range.
template <typename T, typename Y>
__attribute__((target("avx2,fma"))) void QAddRatioAvx2(const T* a, const T* b, Y* y, int64_t n,
                                                       const QAddState& s) {
  const __m256 ra = _mm256_set1_ps(s.ra), rb = _mm256_set1_ps(s.rb), c = _mm256_set1_ps(s.c);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_fmadd_ps(Load8(a + i), ra, _mm256_fmadd_ps(Load8(b + i), rb, c));
    Store8(y + i, _mm256_cvtps_epi32(v));  // round half to even (MXCSR default)
  }
  QAddScalar(a + i, b + i, y + i, n - i, s);
}

template <typename T, typename Y>
__attribute__((target("avx2"))) void QAddAvx2(const T* a, const T* b, Y* y, int64_t n,
                                              const QAddState& s) {
  const __m256i za = _mm256_set1_epi32(static_cast<int>(s.za)),
                zb = _mm256_set1_epi32(static_cast<int>(s.zb));
  const __m256 sa = _mm256_set1_ps(s.sa), sb = _mm256_set1_ps(s.sb), sy = _mm256_set1_ps(s.sy),
               lo = _mm256_set1_ps(s.lo), hi = _mm256_set1_ps(s.hi), zy = _mm256_set1_ps(s.zy),
               qlo = _mm256_set1_ps(s.qlo), qhi = _mm256_set1_ps(s.qhi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_add_ps(LoadDq(a + i, za, sa), LoadDq(b + i, zb, sb));
    // Clip as std::min(std::max(v, lo), hi); v is never NaN here (finite inputs and scales).
    v = _mm256_div_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi), sy);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zy), qlo), qhi);
    Store8(y + i, _mm256_cvtps_epi32(v));
  }
  QAddScalar(a + i, b + i, y + i, n - i, s);
}

void RunQAdd(OpContext& ctx, NodeSlot& slot) {
  const auto& s = *static_cast<const QAddState*>(slot.state.get());
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  Tensor& y = ctx.output(0);
  static const bool avx2 = __builtin_cpu_supports("avx2");
  static const bool fma = avx2 && __builtin_cpu_supports("fma");
  auto go = [&](const auto* ap, const auto* bp, auto* yp) {
    ParallelRange(a.size(), 1 << 15, [&](int64_t lo, int64_t hi) {
      if (s.ratio_form && fma)
        QAddRatioAvx2(ap + lo, bp + lo, yp + lo, hi - lo, s);
      else if (!s.ratio_form && avx2)
        QAddAvx2(ap + lo, bp + lo, yp + lo, hi - lo, s);
      else
        QAddScalar(ap + lo, bp + lo, yp + lo, hi - lo, s);
    });
  };
  const bool u8 = a.dtype() == DType::kUint8, yu8 = y.dtype() == DType::kUint8;
  if (u8 && yu8) go(a.data<uint8_t>(), b.data<uint8_t>(), y.data<uint8_t>());
  if (u8 && !yu8) go(a.data<uint8_t>(), b.data<uint8_t>(), y.data<int8_t>());
  if (!u8 && yu8) go(a.data<int8_t>(), b.data<int8_t>(), y.data<uint8_t>());
  if (!u8 && !yu8) go(a.data<int8_t>(), b.data<int8_t>(), y.data<int8_t>());
}

constexpr KernelDef kQAdd = {"", "QAdd (pattern)", 1, 1000, nullptr, 0, 0, PrepareQAdd, RunQAdd};

const KernelDef* QAddKernel() {
  return &kQAdd;
}

// ---- QMaxPool: DequantizeLinear -> MaxPool -> QuantizeLinear with the same parameters ----
// DequantizeLinear is increasing (scale > 0), so max commutes with it; when Q(DQ(k)) == k for
// every k of the type (checked at prepare) the three steps equal MaxPool on the integers
// (oneDNN's int8 max pooling; padding never wins, as -inf never does in float). 2-D, no
// dilation, floor mode, no Indices output. params: {kh, kw, sh, sw, pt, pl, pb, pr}.
// inputs: {x_q, x_scale, x_zp, y_scale, y_zp}.

const KernelDef* QMaxPoolKernel();

bool MatchQMaxPool(const GraphView& g, size_t host, PatternMatch* m) {
  size_t pool;
  if (!OpAtHost(g, host, "MaxPool", &pool)) return false;
  const ir::Node& pn = g.node(pool);
  if (pn.outputs.size() > 1 && !pn.outputs[1].empty()) return false;
  if (pn.attr_string("auto_pad", "NOTSET") != "NOTSET" || pn.attr_int("ceil_mode", 0) != 0)
    return false;
  std::vector<int64_t> k = pn.attr_ints("kernel_shape"), st = pn.attr_ints("strides"),
                       pads = pn.attr_ints("pads"), dil = pn.attr_ints("dilations");
  if (st.empty()) st = {1, 1};
  if (pads.empty()) pads = {0, 0, 0, 0};
  if (k.size() != 2 || st.size() != 2 || pads.size() != 4) return false;
  for (int64_t d : dil)
    if (d != 1) return false;
  const int x = g.input(pool, 0);
  const int d = Producer(g, x, pool);
  if (!ActivationDq(g, d)) return false;
  const size_t sd = static_cast<size_t>(d);
  std::vector<size_t> absorbed;
  float lo, hi;
  const int q = QuantTail(g, g.output(pool, 0), &absorbed, &lo, &hi);
  if (q < 0 || absorbed.size() != 1) return false;  // no Relu/Clip in between
  const size_t sq = static_cast<size_t>(q);
  const bool own_dq = g.readers(x).size() == 1;
  if (own_dq ? host != sd : host != pool) return false;
  if (own_dq) absorbed.push_back(pool);
  std::sort(absorbed.begin(), absorbed.end());
  m->kernel = QMaxPoolKernel();
  m->absorbed = absorbed;
  m->inputs = {g.input(sd, 0), g.input(sd, 1), g.input(sd, 2), g.input(sq, 1), g.input(sq, 2)};
  m->output = g.output(sq, 0);
  for (int64_t a : k) m->params.push_back(static_cast<float>(a));
  for (int64_t a : st) m->params.push_back(static_cast<float>(a));
  for (int64_t a : pads) m->params.push_back(static_cast<float>(a));
  return true;
}

struct QPoolState : KernelState {
  StateKey key;
  dnnl::pooling_forward prim;
  memory::desc src_md, dst_md;
};

Status PrepareQMaxPool(OpContext& ctx, NodeSlot& slot) {
  auto tensor = [&](size_t i) { return ctx.has_input(i) && ctx.input_is_tensor(i); };
  if (slot.params.size() != 8 || !tensor(0) || !tensor(1) || !tensor(3)) return Decline(slot);
  const Tensor& x = ctx.input(0);
  const DType xt = x.dtype();
  const DType yt = tensor(4) ? ctx.input(4).dtype() : DType::kUint8;
  if ((xt != DType::kUint8 && xt != DType::kInt8) || yt != xt || x.rank() != 4 || x.size() == 0 ||
      (slot.in_layouts[0] != Layout::kPlain && slot.in_layouts[0] != Layout::kNhwc))
    return Decline(slot);
  const float xs = ctx.input(1).data<float>()[0], ys = ctx.input(3).data<float>()[0];
  const int64_t xz = tensor(2) ? ctx.input(2).GetAsInt64(0) : 0;
  const int64_t yz = tensor(4) ? ctx.input(4).GetAsInt64(0) : 0;
  if (ctx.input(1).dtype() != DType::kFloat || ctx.input(3).dtype() != DType::kFloat || !(xs > 0) ||
      !std::isfinite(xs))
    return Decline(slot);
  const int tlo = xt == DType::kUint8 ? 0 : -128, thi = xt == DType::kUint8 ? 255 : 127;
  for (int k = tlo; k <= thi; ++k) {
    const float f = static_cast<float>(k - xz) * xs;
    const float r = std::nearbyint(f / ys) + static_cast<float>(yz);
    if (r != static_cast<float>(k)) return Decline(slot);
  }
  const int64_t kh = P(slot, 0), kw = P(slot, 1), sh = P(slot, 2), sw = P(slot, 3), pt = P(slot, 4),
                pl = P(slot, 5), pb = P(slot, 6), pr = P(slot, 7);
  if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || pt >= kh || pl >= kw || pb >= kh || pr >= kw)
    return Decline(slot);
  const int64_t oh = (x.dim(2) + pt + pb - kh) / sh + 1, ow = (x.dim(3) + pl + pr - kw) / sw + 1;
  if (oh < 1 || ow < 1 || x.dim(2) + pt + pb < kh || x.dim(3) + pl + pr < kw) return Decline(slot);
  const Shape out_shape = {x.dim(0), x.dim(1), oh, ow};
  const Layout ol = !slot.nhwc_ok.empty() && slot.nhwc_ok[0] ? Layout::kNhwc : Layout::kPlain;
  const KeyProbe key = MakeKey(ctx, slot);
  auto* st = static_cast<QPoolState*>(slot.state.get());
  if (!st || !(st->key == key)) {
    auto fresh = std::make_unique<QPoolState>();
    fresh->key = key;
    fresh->src_md = LayoutDesc(x.shape(), slot.in_layouts[0], DnnlType(xt));
    fresh->dst_md = LayoutDesc(out_shape, ol, DnnlType(xt));
    try {
      dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::pooling_max, fresh->src_md, fresh->dst_md,
                                    {sh, sw}, {kh, kw}, {pt, pl}, {pb, pr});
      dnnl::pooling_forward::primitive_desc pd(d, slot.provider->engine());
      fresh->prim = dnnl::pooling_forward(pd);
    } catch (const dnnl::error&) {
      return Decline(slot);
    }
    st = fresh.get();
    slot.state = std::move(fresh);
  }
  slot.out_layouts.assign(1, ol);
  ctx.set_output(0, yt, out_shape);
  return Status::Ok();
}

void RunQMaxPool(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<QPoolState*>(slot.state.get());
  dnnl::engine& eng = slot.provider->engine();
  memory src(st->src_md, eng, const_cast<void*>(ctx.input(0).raw()));
  memory dst(st->dst_md, eng, ctx.output(0).raw());
  st->prim.execute(slot.provider->stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  slot.provider->stream().wait();
}

constexpr KernelDef kQMaxPool = {"", "QMaxPool (pattern)", 1,          1000, nullptr, 0,
                                 0,  PrepareQMaxPool,      RunQMaxPool};

const KernelDef* QMaxPoolKernel() {
  return &kQMaxPool;
}

// ---- QuantizeLinear / DequantizeLinear ----

struct QdqState : KernelState {
  float scale = 1;
  int32_t zp = 0;
  bool per_tensor = true;
  int64_t dim = 1, inner = 1;  // per axis (DequantizeLinear, plain): [outer, dim, inner]
  std::vector<float> scales;   // per axis: one per index of the axis
  std::vector<int32_t> zps;
  Layout layout = Layout::kPlain;  // of input and output
  bool to_plain = false;           // output plain from a non-plain input (via a scratch copy)
};

bool ScalarParams(const OpContext& ctx, size_t si, size_t zi) {
  if (!ctx.input_is_tensor(si) || ctx.input(si).dtype() != DType::kFloat ||
      ctx.input(si).size() != 1)
    return false;
  return !ctx.has_input(zi) || (ctx.input_is_tensor(zi) && ctx.input(zi).size() == 1);
}

Status PrepareQdq(OpContext& ctx, NodeSlot& slot, bool quantize) {
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const Tensor& x = ctx.input(0);
  const DType yt = decl[0].dtype;
  const bool ok = quantize
                      ? x.dtype() == DType::kFloat && (yt == DType::kUint8 || yt == DType::kInt8)
                      : (x.dtype() == DType::kUint8 || x.dtype() == DType::kInt8 ||
                         x.dtype() == DType::kInt32) &&
                            yt == DType::kFloat;
  auto st = std::make_unique<QdqState>();
  const Layout in_layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  if (ok && !quantize && !ScalarParams(ctx, 1, 2) && ctx.attr_int("block_size", 0) == 0 &&
      in_layout == Layout::kPlain && ctx.input(1).dtype() == DType::kFloat &&
      ctx.input(1).rank() == 1 && x.rank() > 0) {
    // Per axis (weights with per-channel scales), validated by the reference prepare above.
    int64_t axis = ctx.attr_int("axis", 1);
    if (axis < 0) axis += x.rank();
    st->per_tensor = false;
    st->dim = x.dim(axis);
    for (int64_t d = axis + 1; d < x.rank(); ++d) st->inner *= x.dim(d);
    for (int64_t c = 0; c < st->dim; ++c) {
      st->scales.push_back(ctx.input(1).data<float>()[c]);
      st->zps.push_back(ctx.has_input(2) ? static_cast<int32_t>(ctx.input(2).GetAsInt64(c)) : 0);
    }
    slot.out_layouts.assign(1, Layout::kPlain);
    slot.state = std::move(st);
    ctx.set_output(0, yt, x.shape());
    return Status::Ok();
  }
  if (!ok || !ScalarParams(ctx, 1, 2) || ctx.attr_int("block_size", 0) != 0) {
    slot.declined = true;
    return Status::Ok();
  }
  st->scale = ctx.input(1).data<float>()[0];
  st->zp = ctx.has_input(2) ? static_cast<int32_t>(ctx.input(2).GetAsInt64(0)) : 0;
  st->layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  const bool keep = st->layout == Layout::kPlain || (!slot.nhwc_ok.empty() && slot.nhwc_ok[0]);
  st->to_plain = !keep;
  slot.out_layouts.assign(1, keep ? st->layout : Layout::kPlain);
  slot.state = std::move(st);
  ctx.set_output(0, yt, x.shape());
  return Status::Ok();
}

Status PrepareQuantize(OpContext& ctx, NodeSlot& slot) {
  return PrepareQdq(ctx, slot, true);
}
Status PrepareDequantize(OpContext& ctx, NodeSlot& slot) {
  return PrepareQdq(ctx, slot, false);
}

template <typename T>
void QuantizeScalar(const float* x, T* y, int64_t n, float s, float zp, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] / s;
    if (std::isnan(v)) v = 0;
    y[i] = static_cast<T>(std::clamp(std::nearbyint(v) + zp, lo, hi));
  }
}

template <typename T>
__attribute__((target("avx2"))) void QuantizeAvx2(const float* x, T* y, int64_t n, float s,
                                                  float zp, float lo, float hi) {
  const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(zp), vlo = _mm256_set1_ps(lo),
               vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), vs);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));  // NaN -> 0
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, vz), vlo), vhi);
    const __m256i q = _mm256_cvtps_epi32(v);  // in [lo, hi]: the packs below do not saturate
    const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i p8 = std::is_signed_v<T> ? _mm_packs_epi16(p16, p16) : _mm_packus_epi16(p16, p16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), p8);
  }
  QuantizeScalar(x + i, y + i, n - i, s, zp, lo, hi);
}

template <typename T>
void DequantizeScalar(const T* x, float* y, int64_t n, float s, int32_t zp) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int64_t>(x[i]) - zp) * s;
}

template <typename T>
__attribute__((target("avx2"))) void DequantizeAvx2(const T* x, float* y, int64_t n, float s,
                                                    int32_t zp) {
  if constexpr (sizeof(T) == 1) {
    const __m256 vs = _mm256_set1_ps(s);
    const __m256i vz = _mm256_set1_epi32(zp);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
      const __m256i w = std::is_signed_v<T> ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(w, vz)), vs));
    }
    DequantizeScalar(x + i, y + i, n - i, s, zp);
  } else {
    DequantizeScalar(x, y, n, s, zp);  // int32: x - zp may need more than 32 bits
  }
}

// Calls f with x's elements as uint8_t, int8_t or int32_t (DequantizeLinear's input types).
template <typename F>
void WithIntData(const Tensor& x, F&& f) {
  if (x.dtype() == DType::kUint8)
    f(x.data<uint8_t>());
  else if (x.dtype() == DType::kInt8)
    f(x.data<int8_t>());
  else
    f(x.data<int32_t>());
}

void RunQdq(OpContext& ctx, NodeSlot& slot, bool quantize) {
  const auto* st = static_cast<const QdqState*>(slot.state.get());
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t n = x.size();
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (!st->per_tensor) {
    const int64_t rows = n / std::max<int64_t>(1, st->inner), inner = st->inner;
    auto run = [&](const auto* xp) {
      ParallelRange(rows, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, inner)),
                    [&](int64_t b, int64_t e) {
                      for (int64_t r = b; r < e; ++r) {
                        const size_t c = static_cast<size_t>(r % st->dim);
                        float* yp = y.data<float>() + r * inner;
                        avx2 ? DequantizeAvx2(xp + r * inner, yp, inner, st->scales[c], st->zps[c])
                             : DequantizeScalar(xp + r * inner, yp, inner, st->scales[c],
                                                st->zps[c]);
                      }
                    });
    };
    WithIntData(x, run);
    return;
  }
  Tensor tmp;
  Tensor* out = &y;
  if (st->to_plain) {
    tmp = Tensor(y.dtype(), y.shape());
    out = &tmp;
  }
  ParallelRange(n, 1 << 16, [&](int64_t b, int64_t e) {
    if (quantize) {
      const float* xp = x.data<float>() + b;
      const float s = st->scale, z = static_cast<float>(st->zp);
      if (out->dtype() == DType::kUint8) {
        uint8_t* yp = out->data<uint8_t>() + b;
        avx2 ? QuantizeAvx2(xp, yp, e - b, s, z, 0.f, 255.f)
             : QuantizeScalar(xp, yp, e - b, s, z, 0.f, 255.f);
      } else {
        int8_t* yp = out->data<int8_t>() + b;
        avx2 ? QuantizeAvx2(xp, yp, e - b, s, z, -128.f, 127.f)
             : QuantizeScalar(xp, yp, e - b, s, z, -128.f, 127.f);
      }
    } else {
      float* yp = out->data<float>() + b;
      auto run = [&](const auto* xp) {
        avx2 ? DequantizeAvx2(xp + b, yp, e - b, st->scale, st->zp)
             : DequantizeScalar(xp + b, yp, e - b, st->scale, st->zp);
      };
      WithIntData(x, run);
    }
  });
  if (st->to_plain) ConvertLayout(tmp, st->layout, &y, Layout::kPlain);
}

void RunQuantize(OpContext& ctx, NodeSlot& slot) {
  RunQdq(ctx, slot, true);
}
void RunDequantize(OpContext& ctx, NodeSlot& slot) {
  RunQdq(ctx, slot, false);
}

constexpr Pattern kPatterns[] = {
    {"QConv", MatchQConv},
    {"QAdd", MatchQAdd},
    {"QMaxPool", MatchQMaxPool},
};

constexpr KernelDef kKernels[] = {
    {"", "QuantizeLinear", 10, 1000, nullptr, 0b1, 0, PrepareQuantize, RunQuantize},
    {"", "DequantizeLinear", 10, 1000, nullptr, 0b1, 0, PrepareDequantize, RunDequantize},
};

}  // namespace

std::span<const Pattern> QuantPatterns() {
  return kPatterns;
}

std::span<const KernelDef> QuantKernels() {
  return kKernels;
}

const KernelDef* Int8ConvKernel() {
  return QConvKernel();
}

const KernelDef* Int8AddKernel() {
  return QAddKernel();
}

}  // namespace ferry::ops::cpu
