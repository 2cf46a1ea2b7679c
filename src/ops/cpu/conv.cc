// cpu kernel: 2-D Conv (float32) on oneDNN, with fused bias, residual sum and Relu/Clip.
//
// prepare (when the input shapes, layouts or fusion change) validates the node with its reference
// prepare, creates a oneDNN convolution whose activation and weight layouts oneDNN picks
// (format_tag::any: NHWC on AVX-512, 8-channel blocks on AVX2; blocked weights), and reorders the
// weights into that layout once (again on every run when W is not an initializer). run reorders the
// input when it is not in the layout the primitive wants, executes, and writes the output in the
// primitive's layout when every reader accepts that (slot.nhwc_ok) and it is a Layout, else plain.
// 3x3 stride-1 group-1 convolutions run as Winograd instead (winograd.h) where ChooseConvAlgo
// (or FERRY_CONV_ALGO / SetConvAlgoOverride) says so and the CPU has AVX2+FMA; no oneDNN
// primitive is created for them; or, where the rule says kGemm (small images, many channels,
// AVX-512), as one im2col GEMM with an own kernel (conv_gemm.h), which also takes 1x1 convs on
// small images (PointwiseGemm). Own AVX-512 kernels, every fused post-op included, also run
// depthwise convolutions (dwconv.h, DwConvWanted), 1x1 convs on large images with few channels
// (pointwise.h, PointwiseWanted), a first layer on the plain image (stem.h, StemWanted) and
// grouped 3x3 convs with 4 / 8 channels per group (grouped.h, GroupedWanted); a 1x1 conv of a 1x1
// image (Squeeze-Excitation's FCs) is a matrix-vector product (GemvTransB). Other grouped convs on
// an NHWC input run oneDNN with NHWC in and out (GroupedConvNhwc).
#include <atomic>
#include <cstring>
#include <string>

#include "ops/cpu/conv_gemm.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/dwconv.h"
#include "ops/cpu/families.h"
#include "ops/cpu/gemm_avx2.h"
#include "ops/cpu/grouped.h"
#include "ops/cpu/pointwise.h"
#include "ops/cpu/stem.h"
#include "ops/cpu/vec.h"
#include "ops/cpu/winograd.h"

namespace ferry::ops::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct ConvState : KernelState {
  StateKey key;
  Shape out_shape;
  bool fused = false;
  // Winograd / ConvGemm with a fused SiLU / HardSwish: applied over the output afterwards.
  bool wino_act = false;
  UnOp wino_unary = UnOp::kCopy;
  Layout out_layout = Layout::kPlain;
  dnnl::convolution_forward prim;
  DnnlIo io;                 // the input and output around the primitive
  memory::desc wei_user_md;  // W as stored (oihw / goihw)
  memory::desc res_md;       // residual (sum) as stored
  dnnl::reorder res_reorder;
  memory::desc wei_md;   // W in the primitive's layout
  PackedPtr packed_buf;  // W's bytes in it (shared when W is constant)
  memory packed_w;       // packed_buf as oneDNN memory
  const void* packed_from = nullptr;
  bool has_bias = false;
  size_t sum_index = 0;
  // The fused Add's other operand is one value per output channel (or one value): it joins the
  // bias (`bias_sum`, refilled at every prepare) instead of being added as a residual. Paddle2onnx
  // writes every conv's bias as such an Add ([1, K, 1, 1]): 75 in PP-OCRv6 det, each a pass over
  // the conv's output (42 ms of its 355 per run), and a GELU after it could not fuse.
  bool bias_from_sum = false;
  // A fused BatchNormalization (Fusion::affine): W scaled per output channel (`scaled_w`, from
  // the W at `scaled_from`; shared by the run contexts while W is constant, so the packed forms
  // made from it are too), the bias scaled and shifted.
  std::shared_ptr<const Fusion::Affine> affine;
  PackedPtr scaled_w;
  const void* scaled_from = nullptr;
  // The bias the conv adds when it is not the bias input as it is (bias_from_sum, affine).
  std::vector<float> bias_sum;
  bool OwnBias() const { return bias_from_sum || affine != nullptr; }
  // The residual the run adds (a fused sum that did not join the bias), and the bias it adds.
  bool Residual(const NodeSlot& slot) const { return fused && slot.fusion.sum && !bias_from_sum; }
  const float* Bias(const OpContext& ctx) const {
    return OwnBias() ? bias_sum.data() : has_bias ? ctx.input(2).data<float>() : nullptr;
  }
  const float* Weights(const OpContext& ctx) const {
    return affine ? scaled_w->data() : ctx.input(1).data<float>();
  }
  std::unique_ptr<WinogradConv> wino;    // set: Winograd instead of the oneDNN primitive
  std::unique_ptr<ConvGemm> gemm;        // set: the own im2col GEMM instead
  std::unique_ptr<DwConv> dw;            // set: the own depthwise kernel instead
  std::unique_ptr<Pointwise> pw;         // set: the own 1x1 kernel for large images instead
  std::unique_ptr<StemConv> stem;        // set: the own first-layer kernel (plain RGB in) instead
  std::unique_ptr<GroupedConv> grouped;  // set: the own grouped 3x3 kernel instead
  // A 1x1 conv of a 1x1 image (Squeeze-Excitation's two FCs): y[n] = W x[n] on GemvTransB, W
  // read where it is; Relu / Clip in its epilogue, SiLU / HardSwish after (wino_act).
  bool gemv = false;
  GemmEpilogue::Act gemv_act = GemmEpilogue::Act::kNone;
  float gemv_lo = 0.f, gemv_hi = 0.f;
};

// FERRY_CONV_GEMV=onednn keeps SE's 1x1-image convs on oneDNN (benchmarking).
bool ConvGemvWanted() {
  static const bool on = KernelModeFromEnv("FERRY_CONV_GEMV") != 0;
  return on;
}

// FERRY_CONV_COLUMN=onednn runs a column conv ([N,C,H,1], kernel [kh,1]) as it is, not as the
// row conv.
bool ColumnAsRow() {
  static const bool on = KernelModeFromEnv("FERRY_CONV_COLUMN", "row") != 0;
  return on;
}

std::atomic<int> g_grouped_nhwc{-1};
std::atomic<uint64_t> g_grouped_nhwc_prepares{0};

}  // namespace

void SetGroupedConvNhwc(int on) {
  g_grouped_nhwc = on;
}

uint64_t GroupedNhwcPrepares() {
  return g_grouped_nhwc_prepares.load();
}

bool GroupedConvNhwc() {
  // FERRY_GROUPED_LAYOUT=onednn: oneDNN's choice (blocked) instead, for benchmarking.
  static const bool env_on = KernelModeFromEnv("FERRY_GROUPED_LAYOUT", "nhwc") != 0;
  const int o = g_grouped_nhwc.load(std::memory_order_relaxed);
  return o < 0 ? env_on : o == 1;
}

namespace {

bool AcceptsConv(const ir::Node& n) {
  // 1-D (conv1d.cc) and 2-D (kernel_shape, when given, has one or two values); everything
  // else is checked at prepare.
  const ir::Attribute* ks = n.attr("kernel_shape");
  return !ks || ks->ints.size() == 2 || ks->ints.size() == 1;
}

Status PrepareConv(OpContext& ctx, NodeSlot& slot) {
  if (ctx.input_is_tensor(0) && ctx.input(0).rank() == 3) return PrepareConv1d(ctx, slot);
  if (ColumnAsRow() && IsColumnConv(ctx, slot)) return PrepareConv1d(ctx, slot);
  if (HasConv1dState(slot)) slot.state.reset();
  return PrepareConv2d(ctx, slot);
}

// Whether r broadcasts to y [N, K, ...] as one value per channel (or one value): its dims,
// aligned to y's from the right, are 1 but for y's channel axis, which is K or 1.
bool PerChannel(const Shape& r, const Shape& y) {
  if (r.size() > y.size() || y.size() < 2) return false;
  const size_t off = y.size() - r.size();
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] != 1 && !(i + off == 1 && r[i] == y[1])) return false;
  return true;
}

void RunConv(OpContext& ctx, NodeSlot& slot) {
  if (HasConv1dState(slot)) return RunConv1d(ctx, slot);
  RunConv2d(ctx, slot);
}

}  // namespace

Status PrepareConv2d(OpContext& ctx, NodeSlot& slot) {
  const size_t n_in = std::min<size_t>(ctx.num_inputs(), 3);
  if (!FloatConvInputs(ctx)) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<ConvState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, n_in));
    auto fresh = std::make_unique<ConvState>();
    fresh->key = key;
    fresh->out_shape = decl[0].shape;
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Shape& y = fresh->out_shape;
    const int64_t group = ctx.attr_int("group", 1);
    std::vector<int64_t> strides = ctx.attr_ints("strides"), dil = ctx.attr_ints("dilations"),
                         pads = ctx.attr_ints("pads");
    if (strides.empty()) strides = {1, 1};
    if (dil.empty()) dil = {1, 1};
    if (pads.empty()) pads = {0, 0, 0, 0};
    std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
    memory::dims pl(2), pr(2), dd(2), ss(strides.begin(), strides.end());
    for (int a = 0; a < 2; ++a) {
      const int64_t in = x.dim(2 + a), k = w.dim(2 + a), out = y[2 + static_cast<size_t>(a)];
      dd[a] = dil[a] - 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        int64_t total = std::max<int64_t>(0, (out - 1) * strides[a] + (k - 1) * dil[a] + 1 - in);
        pl[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else if (auto_pad == "VALID") {
        pl[a] = 0;
      } else {
        pl[a] = pads[a];
      }
      // The explicit end pad (oneDNN floors like ONNX); for auto_pad, what the output needs.
      pr[a] =
          auto_pad == "NOTSET" || auto_pad.empty()
              ? pads[2 + static_cast<size_t>(a)]
              : std::max<int64_t>(0, (out - 1) * strides[a] + (k - 1) * dil[a] + 1 - in - pl[a]);
    }
    const Layout in_layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
    fresh->io.in_md = LayoutDesc(x.shape(), in_layout);
    if (group == 1) {
      fresh->wei_user_md = memory::desc(Dims(w.shape()), memory::data_type::f32, tag::oihw);
    } else {
      memory::dims gw = {group, w.dim(0) / group, w.dim(1), w.dim(2), w.dim(3)};
      fresh->wei_user_md = memory::desc(gw, memory::data_type::f32, tag::goihw);
    }
    auto any = [](const Shape& s) {
      return memory::desc(Dims(s), memory::data_type::f32, tag::any);
    };
    memory::desc wei_any(fresh->wei_user_md.dims(), memory::data_type::f32, tag::any);
    fresh->has_bias = ctx.has_input(2);
    // Fusion: sum needs a residual of the output's exact shape, or one that joins the bias.
    Fusion f = slot.fusion;
    const size_t last_in = ctx.num_inputs() - 1;
    if (f.sum && last_in >= 2 && ctx.input_is_tensor(last_in) &&
        ctx.input(last_in).dtype() == DType::kFloat && PerChannel(ctx.input(last_in).shape(), y)) {
      fresh->bias_from_sum = true;
      fresh->sum_index = last_in;
      f.sum = false;
    }
    if (f.affine && (f.affine->a.size() != static_cast<size_t>(w.dim(0)) ||
                     f.affine->b.size() != f.affine->a.size())) {
      slot.declined = true;  // not this conv's channels: the steps run on their own
      return Status::Ok();
    }
    fresh->affine = f.affine;
    const memory::desc bias_md = fresh->has_bias || fresh->OwnBias()
                                     ? memory::desc({w.dim(0)}, memory::data_type::f32, tag::a)
                                     : memory::desc();
    bool fuse = f.any() || fresh->bias_from_sum;
    if (f.sum) {
      fresh->sum_index = ctx.num_inputs() - 1;
      if (!ctx.input_is_tensor(fresh->sum_index) ||
          ctx.input(fresh->sum_index).dtype() != DType::kFloat ||
          ctx.input(fresh->sum_index).shape() != y)
        fuse = false;
    }
    dnnl::primitive_attr attr;
    if (fuse) attr.set_post_ops(MakePostOps(f));
    fresh->fused = fuse;
    // A fused GELU (erf) is oneDNN's gelu_erf post-op: the own kernels below take none.
    const bool own_ok = !(fuse && f.act == Fusion::Act::kGelu);
    const bool nhwc_ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
    const Layout res_layout = fuse && f.sum && slot.in_layouts.size() > fresh->sum_index
                                  ? slot.in_layouts[fresh->sum_index]
                                  : Layout::kPlain;
    // 1x1 on a 1x1 image (SE's FCs, at most kGemvMaxRows images): a matrix-vector product that
    // reads W where it is (before the pointwise GEMM below, which would pack a copy for one
    // pixel). Any layout of an [N, C, 1, 1] value is stored as plain. A fused residual stays on
    // oneDNN.
    const bool gemv = own_ok && group == 1 && x.dim(2) == 1 && x.dim(3) == 1 && w.dim(2) == 1 &&
                      w.dim(3) == 1 && y[2] == 1 && y[3] == 1 && x.dim(0) >= 1 &&
                      x.dim(0) <= kGemvMaxRows && x.dim(1) > 0 && w.dim(0) > 0 && pl[0] == 0 &&
                      pl[1] == 0 && GemmAvx2Supported() && !(fuse && f.sum) && ConvGemvWanted();
    // 3x3, stride 1, dilation 1, group 1: Winograd or the own GEMM where the rule (or an
    // override) says so; 1x1, stride 1, no pads: the own GEMM on small images (PointwiseGemm).
    const bool unit = ss[0] == 1 && ss[1] == 1 && dd[0] == 0 && dd[1] == 0 && x.dim(0) > 0 &&
                      x.dim(1) > 0 && w.dim(0) > 0 && y[2] > 0 && y[3] > 0;
    const bool k3 =
        own_ok && group == 1 && w.dim(2) == 3 && w.dim(3) == 3 && unit && WinogradSupported();
    // A 1x1 conv the own GEMM (small images) or the pointwise kernel (large ones) may take: NHWC
    // in, out and residual only (ConvGemm's other layouts go through scalar loops, which cost
    // more than oneDNN's whole convolution: MnasNet's last conv, plain out, 0.30 -> 1.07 ms;
    // RegNet's, nChw8c in, 0.29 -> 0.34).
    const bool pointwise = own_ok && group == 1 && w.dim(2) == 1 && w.dim(3) == 1 && unit &&
                           pl[0] == 0 && pl[1] == 0 && pr[0] == 0 && pr[1] == 0 &&
                           in_layout == Layout::kNhwc && nhwc_ok &&
                           (!fuse || !f.sum || res_layout == Layout::kNhwc);
    const bool k1 = !gemv && pointwise && ConvGemmSupported();
    if (k3 || k1) {
      WinogradShape ws;
      ws.n = x.dim(0);
      ws.c = x.dim(1);
      ws.h = x.dim(2);
      ws.w = x.dim(3);
      ws.k = w.dim(0);
      ws.oh = y[2];
      ws.ow = y[3];
      ws.pad_t = pl[0];
      ws.pad_l = pl[1];
      ws.r = k3 ? 3 : 1;
      ConvAlgo algo = k3 ? ConvAlgoOverride() : ConvAlgo::kDirect;
      if (k3 && algo == ConvAlgo::kAuto) algo = ChooseConvAlgo(ws, omp_get_max_threads());
      if (k1 && PointwiseGemm(ws)) algo = ConvAlgo::kGemm;
      // Swish / HardSwish: ConvGemm applies them to each output row it stores; after Winograd
      // they run as a pass over the output.
      Fusion own_fusion = fuse ? f : Fusion{};
      if (algo != ConvAlgo::kGemm &&
          (own_fusion.act == Fusion::Act::kSwish || own_fusion.act == Fusion::Act::kHardSwish)) {
        fresh->wino_act = true;
        fresh->wino_unary = own_fusion.act == Fusion::Act::kSwish ? UnOp::kSilu : UnOp::kHardSwish;
        own_fusion.act = Fusion::Act::kNone;
      }
      if (algo == ConvAlgo::kGemm && ConvGemmSupported()) {
        // NHWC, the layout of oneDNN's convolutions on an AVX-512 CPU.
        fresh->out_layout = nhwc_ok ? Layout::kNhwc : Layout::kPlain;
        fresh->gemm =
            std::make_unique<ConvGemm>(ws, in_layout, fresh->out_layout, res_layout, own_fusion);
      } else if (algo == ConvAlgo::kWinograd2 || algo == ConvAlgo::kWinograd4) {
        // The layout oneDNN's convolutions use on this CPU (NHWC with AVX-512, nChw8c with
        // AVX2), so the layers around need no reorder.
        fresh->out_layout = !nhwc_ok || ws.k % 8 != 0 ? Layout::kPlain
                            : WinogradAvx512()        ? Layout::kNhwc
                                                      : Layout::kBlocked8;
        fresh->wino =
            std::make_unique<WinogradConv>(ws, algo == ConvAlgo::kWinograd2 ? 2 : 4, in_layout,
                                           fresh->out_layout, res_layout, own_fusion);
      } else {
        fresh->wino_act = false;
      }
    }
    if (gemv) {
      fresh->gemv = true;
      fresh->wino_act = false;
      if (fuse && (f.act == Fusion::Act::kRelu || f.act == Fusion::Act::kClip)) {
        fresh->gemv_act =
            f.act == Fusion::Act::kRelu ? GemmEpilogue::Act::kRelu : GemmEpilogue::Act::kClip;
        fresh->gemv_lo = f.lo;
        fresh->gemv_hi = f.hi;
      } else if (fuse && (f.act == Fusion::Act::kSwish || f.act == Fusion::Act::kHardSwish)) {
        fresh->wino_act = true;
        fresh->wino_unary = f.act == Fusion::Act::kSwish ? UnOp::kSilu : UnOp::kHardSwish;
      }
      fresh->out_layout = nhwc_ok ? Layout::kNhwc : Layout::kPlain;
    }
    // 1x1 on a large NHWC image with few channels: the own kernel where PointwiseWanted says so.
    if (!fresh->wino && !fresh->gemm && !fresh->gemv && pointwise &&
        PointwiseWanted(y[2] * y[3], x.dim(1), w.dim(0), fuse ? f : Fusion{})) {
      fresh->wino_act = false;
      fresh->out_layout = Layout::kNhwc;
      fresh->pw = std::make_unique<Pointwise>(x.dim(0) * y[2] * y[3], x.dim(1), w.dim(0),
                                              fuse ? f : Fusion{});
    }
    // The window as the own depthwise and first-layer kernels take it.
    DwShape win;
    win.n = x.dim(0);
    win.c = x.dim(1);
    win.h = x.dim(2);
    win.w = x.dim(3);
    win.kh = w.dim(2);
    win.kw = w.dim(3);
    win.sh = ss[0];
    win.sw = ss[1];
    win.oh = y[2];
    win.ow = y[3];
    win.pad_t = pl[0];
    win.pad_l = pl[1];
    // A first layer (few channels, plain image in, NHWC out): the own kernel reads the rows in
    // place.
    if (own_ok && !fresh->wino && !fresh->gemm && !fresh->gemv && !fresh->pw && group == 1 &&
        in_layout == Layout::kPlain && nhwc_ok && dd[0] == 0 && dd[1] == 0) {
      StemShape sh;
      static_cast<DwShape&>(sh) = win;
      sh.k = w.dim(0);
      if (StemWanted(sh, fuse ? f : Fusion{})) {
        fresh->wino_act = false;
        fresh->out_layout = Layout::kNhwc;
        fresh->stem = std::make_unique<StemConv>(sh, fuse ? f : Fusion{});
      }
    }
    // Depthwise, dilation 1: the own kernel where DwConvWanted says so.
    if (own_ok && !fresh->wino && !fresh->gemm && !fresh->gemv && !fresh->pw && !fresh->stem &&
        group == x.dim(1) && w.dim(0) == group && w.dim(1) == 1 && dd[0] == 0 && dd[1] == 0 &&
        DwConvWanted(win, fuse ? f : Fusion{})) {
      fresh->wino_act = false;
      fresh->out_layout = nhwc_ok ? Layout::kNhwc : Layout::kPlain;
      fresh->dw = std::make_unique<DwConv>(win, in_layout, fresh->out_layout, res_layout,
                                           fuse ? f : Fusion{});
    }
    // Grouped, not depthwise, its input and output channels-last.
    const bool grouped_nhwc_in = group > 1 && w.dim(1) > 1 && in_layout == Layout::kNhwc && nhwc_ok;
    // Grouped 3x3 with 4 / 8 / 16 channels per group on NHWC: the own kernel (GroupedWanted).
    if (own_ok && !fresh->wino && !fresh->gemm && !fresh->gemv && !fresh->pw && !fresh->stem &&
        !fresh->dw && grouped_nhwc_in && dd[0] == 0 && dd[1] == 0 &&
        (!fuse || !f.sum || res_layout == Layout::kNhwc) && GroupedWanted(win, group, w.dim(0))) {
      fresh->wino_act = false;
      fresh->out_layout = Layout::kNhwc;
      fresh->grouped = std::make_unique<GroupedConv>(win, group, fuse ? f : Fusion{});
    }
    if (!fresh->wino && !fresh->gemm && !fresh->dw && !fresh->gemv && !fresh->pw && !fresh->stem &&
        !fresh->grouped) {
      try {
        dnnl::engine& eng = slot.provider->engine();
        // Activation layouts as oneDNN prefers them on this CPU (NHWC with AVX-512, 8-channel
        // blocks with AVX2); consecutive cpu layers then share them without reorders.
        auto make = [&](const memory::desc& src, const memory::desc& dst) {
          dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                            dnnl::algorithm::convolution_direct, src, wei_any,
                                            bias_md, dst, ss, dd, pl, pr);
          return dnnl::convolution_forward::primitive_desc(d, attr, eng);
        };
        // Grouped (not depthwise) on an NHWC input: NHWC in and out as well. Left to choose,
        // oneDNN 2.6 takes 4 / 8 / 16-channel blocked layouts for ResNeXt's and RegNet's
        // grouped convs, i.e. a reorder of the input in and of the output back (through the
        // plain layout) at every one of them: 5.3 ms of ResNeXt-50's run at 1 thread by
        // ONEDNN_VERBOSE. Its jit:avx512_core kernel takes NHWC directly.
        const bool grouped_nhwc = grouped_nhwc_in && GroupedConvNhwc();
        auto nhwc = [](const Shape& s) {
          return memory::desc(Dims(s), memory::data_type::f32, tag::nhwc);
        };
        dnnl::convolution_forward::primitive_desc pd =
            grouped_nhwc ? make(nhwc(x.shape()), nhwc(y)) : make(any(x.shape()), any(y));
        if (grouped_nhwc) g_grouped_nhwc_prepares.fetch_add(1, std::memory_order_relaxed);
        fresh->prim = dnnl::convolution_forward(pd);
        fresh->io.src_md = pd.src_desc();
        fresh->io.dst_md = pd.dst_desc();
        fresh->out_layout = nhwc_ok ? LayoutOf(fresh->io.dst_md, y) : Layout::kPlain;
        fresh->io.Plan(eng, y, fresh->out_layout);
        if (fuse && f.sum) {
          fresh->res_md = LayoutDesc(y, res_layout);
          if (fresh->res_md != fresh->io.dst_md)
            fresh->res_reorder = dnnl::reorder(
                dnnl::reorder::primitive_desc(eng, fresh->res_md, eng, fresh->io.dst_md));
        }
        fresh->wei_md = pd.weights_desc();
      } catch (const dnnl::error&) {
        slot.declined = true;
        return Status::Ok();
      }
    }
    slot.state = std::move(fresh);
    st = static_cast<ConvState*>(slot.state.get());
  }
  // Weights: packed once while W is the same initializer; every run when W is computed.
  const void* wptr = ctx.input(1).raw();
  const bool w_const = slot.const_inputs.size() > 1 && slot.const_inputs[1];
  if (st->affine && (!w_const || st->scaled_from != wptr)) {
    // W [K, ...] times a[k] per output channel.
    const Tensor& w = ctx.input(1);
    const std::string tag = fmt::format("conv-bn:{}", static_cast<const void*>(st->affine.get()));
    st->scaled_w = SharedPack<PackedFloats>(slot, w_const, wptr, tag, [&] {
      auto buf = std::make_shared<PackedFloats>(static_cast<size_t>(w.size()));
      const int64_t k = w.dim(0), per = w.size() / std::max<int64_t>(k, 1);
      for (int64_t o = 0; o < k; ++o)
        for (int64_t i = 0; i < per; ++i)
          buf->data()[o * per + i] =
              w.data<float>()[o * per + i] * st->affine->a[static_cast<size_t>(o)];
      return buf;
    });
    st->scaled_from = w_const ? wptr : nullptr;
  }
  if (st->affine) wptr = st->scaled_w->data();
  if (!st->gemv && (!w_const || st->packed_from != wptr)) {
    const float* w = static_cast<const float*>(wptr);
    if (st->wino) {
      PackFor(*st->wino, slot, w_const, w);
    } else if (st->gemm) {
      PackFor(*st->gemm, slot, w_const, w);
    } else if (st->dw) {
      PackFor(*st->dw, slot, w_const, w);
    } else if (st->pw) {
      PackFor(*st->pw, slot, w_const, w);
    } else if (st->stem) {
      PackFor(*st->stem, slot, w_const, w);
    } else if (st->grouped) {
      PackFor(*st->grouped, slot, w_const, w);
    } else {
      dnnl::engine& eng = slot.provider->engine();
      st->packed_buf = SharedReorder(slot, w_const, wptr, st->wei_user_md, st->wei_md, eng,
                                     slot.provider->stream(), "conv");
      st->packed_w = memory(st->wei_md, eng, const_cast<float*>(st->packed_buf->data()));
    }
    st->packed_from = w_const ? wptr : nullptr;
  }
  if (st->OwnBias()) {
    // (bias * a + b) + the per-channel operand, refilled at every prepare (any may be computed).
    const int64_t k = st->out_shape[1];
    st->bias_sum.resize(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) {
      const size_t u = static_cast<size_t>(j);
      float v = st->has_bias ? ctx.input(2).data<float>()[j] : 0.f;
      if (st->affine) v = v * st->affine->a[u] + st->affine->b[u];
      if (st->bias_from_sum) {
        const Tensor& r = ctx.input(st->sum_index);
        v += r.data<float>()[r.size() == 1 ? 0 : j];
      }
      st->bias_sum[u] = v;
    }
  }
  ctx.set_output(0, DType::kFloat, st->out_shape);
  slot.fused = st->fused;
  slot.out_layouts.assign(1, st->out_layout);
  // The own pointwise and Winograd kernels (channels-last, no residual, Winograd without a
  // separate activation pass) may write a channel slice of a wider tensor (a Concat's output).
  const bool sum = st->Residual(slot);
  slot.strided_out_ok = !sum && st->out_layout == Layout::kNhwc &&
                        (st->pw || (st->wino && !st->wino_act && st->out_shape[1] % 8 == 0));
  return Status::Ok();
}

void RunConv2d(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<ConvState*>(slot.state.get());
  Provider& p = *slot.provider;
  if (st->dw) {
    st->dw->Run(ctx.input(0).data<float>(), st->Bias(ctx),
                st->Residual(slot) ? ctx.input(st->sum_index).data<float>() : nullptr,
                ctx.output(0).data<float>(), p.Scratch(0, st->dw->scratch_bytes()));
    return;
  }
  if (st->stem) {
    st->stem->Run(ctx.input(0).data<float>(), st->Bias(ctx), ctx.output(0).data<float>());
    return;
  }
  if (st->grouped) {
    st->grouped->Run(ctx.input(0).data<float>(), st->Bias(ctx),
                     st->Residual(slot) ? ctx.input(st->sum_index).data<float>() : nullptr,
                     ctx.output(0).data<float>());
    return;
  }
  if (st->pw) {
    st->pw->Run(ctx.input(0).data<float>(), st->Bias(ctx),
                st->Residual(slot) ? ctx.input(st->sum_index).data<float>() : nullptr,
                ctx.output(0).data<float>(), slot.out_pixel_stride);
    return;
  }
  if (st->gemv) {
    GemmEpilogue e;
    e.bias = st->Bias(ctx);
    e.bias_cs = 1;
    e.act = st->gemv_act;
    e.lo = st->gemv_lo;
    e.hi = st->gemv_hi;
    const Tensor& x = ctx.input(0);
    const int64_t k = ctx.input(1).dim(0);
    float* y = ctx.output(0).data<float>();
    GemvTransB(x.data<float>(), x.dim(0), x.dim(1), st->Weights(ctx), x.dim(1), k, y, e,
               omp_get_max_threads());
    if (st->wino_act) Vec().unary[static_cast<int>(st->wino_unary)](y, y, x.dim(0) * k, 0.f, 0.f);
    return;
  }
  if (st->wino || st->gemm) {
    const bool sum = st->Residual(slot);
    const float* bias = st->Bias(ctx);
    const float* res = sum ? ctx.input(st->sum_index).data<float>() : nullptr;
    if (st->wino)
      st->wino->Run(ctx.input(0).data<float>(), bias, res, ctx.output(0).data<float>(),
                    p.Scratch(0, st->wino->scratch_bytes()), slot.out_pixel_stride);
    else
      st->gemm->Run(ctx.input(0).data<float>(), bias, res, ctx.output(0).data<float>(),
                    p.Scratch(0, st->gemm->scratch_bytes()));
    if (st->wino_act) {
      float* y = ctx.output(0).data<float>();
      const VecOps::UnaryRow f = Vec().unary[static_cast<int>(st->wino_unary)];
      ParallelRange(ctx.output(0).size(), 1 << 15,
                    [&](int64_t b, int64_t e) { f(y + b, y + b, e - b, 0.f, 0.f); });
    }
    return;
  }
  dnnl::engine& eng = p.engine();
  dnnl::stream& s = p.stream();
  void* y = ctx.output(0).raw();
  memory src = st->io.Src(p, ctx.input(0).raw());
  memory dst = st->io.Dst(p, y);
  if (st->Residual(slot)) {
    void* r = const_cast<void*>(ctx.input(st->sum_index).raw());
    if (st->res_md == st->io.dst_md) {
      if (r != dst.get_data_handle())
        std::memcpy(dst.get_data_handle(), r, st->io.dst_md.get_size());
    } else {
      if (r == dst.get_data_handle()) {  // in place, another layout: reorder from a copy
        void* copy = p.Scratch(2, st->res_md.get_size());
        std::memcpy(copy, r, st->res_md.get_size());
        r = copy;
      }
      memory res(st->res_md, eng, r);
      st->res_reorder.execute(s, res, dst);
    }
  }
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, st->packed_w}, {DNNL_ARG_DST, dst}};
  if (const float* bias = st->Bias(ctx))
    args[DNNL_ARG_BIAS] =
        memory(memory::desc({ctx.input(1).dim(0)}, memory::data_type::f32, tag::a), eng,
               const_cast<float*>(bias));
  st->prim.execute(s, args);
  st->io.Finish(p, dst, y);
  s.wait();
}

namespace {

constexpr KernelDef kKernels[] = {
    {"", "Conv", 1, 1000, AcceptsConv, 0b1, 3, PrepareConv, RunConv},
};

}  // namespace

std::span<const KernelDef> ConvKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
