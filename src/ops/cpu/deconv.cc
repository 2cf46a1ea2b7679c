// cpu kernel: 2-D ConvTranspose (float32) on oneDNN's deconvolution, with fused bias and
// Relu/Clip/SiLU/HardSwish post-ops (no residual sum).
//
// prepare (when the input shapes, layouts or fusion change) validates the node and gets the
// output shape from its reference prepare, derives the begin pads the way the reference does
// (explicit pads; VALID; or, when the output size is given by output_shape or SAME_*, from the
// total padding: SAME_UPPER puts the odd one at the end, otherwise at the begin), and creates a
// oneDNN deconvolution whose activation and weight layouts oneDNN picks. ONNX's W is
// [C_in, C_out/group, kH, kW] (oneDNN's iohw / giohw); it is reordered once while it is the
// same initializer. An end pad below zero (output_shape larger than the full result) declines.
#include <string>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct DeconvState : KernelState {
  StateKey key;
  Shape out_shape;
  bool fused = false, has_bias = false;
  Layout out_layout = Layout::kPlain;
  dnnl::deconvolution_forward prim;
  DnnlIo io;
  memory::desc wei_user_md, bias_md;
  memory::desc wei_md;   // W in the primitive's layout
  PackedPtr packed_buf;  // W's bytes in it (shared when W is constant)
  memory packed_w;       // packed_buf as oneDNN memory
  const void* packed_from = nullptr;
};

bool AcceptsDeconv(const ir::Node& n) {
  const ir::Attribute* ks = n.attr("kernel_shape");
  return !ks || ks->ints.size() == 2;
}

std::vector<int64_t> IntsOr(const OpContext& ctx, const char* name, size_t n, int64_t def) {
  std::vector<int64_t> v = ctx.attr_ints(name);
  if (v.size() != n) v.assign(n, def);
  return v;
}

Status PrepareDeconv(OpContext& ctx, NodeSlot& slot) {
  const size_t n_in = std::min<size_t>(ctx.num_inputs(), 3);
  if (!FloatConvInputs(ctx)) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<DeconvState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, n_in));
    auto fresh = std::make_unique<DeconvState>();
    fresh->key = key;
    fresh->out_shape = decl[0].shape;
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Shape& y = fresh->out_shape;
    const int64_t group = ctx.attr_int("group", 1);
    if (x.size() == 0 || NumElements(y) == 0 || group < 1) {
      slot.declined = true;
      return Status::Ok();
    }
    const std::vector<int64_t> strides = IntsOr(ctx, "strides", 2, 1),
                               dil = IntsOr(ctx, "dilations", 2, 1),
                               pads = IntsOr(ctx, "pads", 4, 0),
                               out_pad = IntsOr(ctx, "output_padding", 2, 0);
    const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
    const bool sized = !ctx.attr_ints("output_shape").empty() || auto_pad == "SAME_UPPER" ||
                       auto_pad == "SAME_LOWER";
    memory::dims pl(2), pr(2), dd(2), ss(strides.begin(), strides.end());
    for (int a = 0; a < 2; ++a) {
      const int64_t in = x.dim(2 + a), k = w.dim(2 + a), out = y[2 + static_cast<size_t>(a)];
      const int64_t full = strides[a] * (in - 1) + out_pad[a] + (k - 1) * dil[a] + 1;
      int64_t begin = pads[a];
      if (sized) {
        const int64_t total = std::max<int64_t>(0, full - out);
        begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else if (auto_pad == "VALID") {
        begin = 0;
      }
      dd[a] = dil[a] - 1;
      pl[a] = begin;
      // oneDNN: out = (in - 1) * stride + (k - 1) * dil + 1 - pl - pr (output_padding is part
      // of ONNX's full size, so it lowers the end pad).
      pr[a] = (in - 1) * strides[a] + (k - 1) * dil[a] + 1 - begin - out;
      if (pl[a] < 0 || pr[a] < 0) {
        slot.declined = true;
        return Status::Ok();
      }
    }
    const Layout in_layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
    fresh->io.in_md = LayoutDesc(x.shape(), in_layout);
    if (group == 1) {
      fresh->wei_user_md =
          memory::desc({w.dim(1), w.dim(0), w.dim(2), w.dim(3)}, memory::data_type::f32, tag::iohw);
    } else {
      fresh->wei_user_md = memory::desc({group, w.dim(1), w.dim(0) / group, w.dim(2), w.dim(3)},
                                        memory::data_type::f32, tag::giohw);
    }
    memory::desc wei_any(fresh->wei_user_md.dims(), memory::data_type::f32, tag::any);
    fresh->has_bias = ctx.has_input(2);
    if (fresh->has_bias) fresh->bias_md = memory::desc({y[1]}, memory::data_type::f32, tag::a);
    const Fusion& f = slot.fusion;
    const bool fuse = f.any() && !f.sum && f.act != Fusion::Act::kGelu;
    dnnl::primitive_attr attr;
    if (fuse) attr.set_post_ops(MakePostOps(f));  // no sum: fuse needs !f.sum
    fresh->fused = fuse;
    const bool nhwc_ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
    try {
      dnnl::engine& eng = slot.provider->engine();
      auto any = [](const Shape& s) {
        return memory::desc(Dims(s), memory::data_type::f32, tag::any);
      };
      dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                          dnnl::algorithm::deconvolution_direct, any(x.shape()),
                                          wei_any, fresh->bias_md, any(y), ss, dd, pl, pr);
      dnnl::deconvolution_forward::primitive_desc pd(d, attr, eng);
      fresh->prim = dnnl::deconvolution_forward(pd);
      fresh->io.src_md = pd.src_desc();
      fresh->io.dst_md = pd.dst_desc();
      fresh->out_layout = nhwc_ok ? LayoutOf(fresh->io.dst_md, y) : Layout::kPlain;
      fresh->io.Plan(eng, y, fresh->out_layout);
      fresh->wei_md = pd.weights_desc();
    } catch (const dnnl::error&) {
      slot.declined = true;
      return Status::Ok();
    }
    slot.state = std::move(fresh);
    st = static_cast<DeconvState*>(slot.state.get());
  }
  const void* wptr = ctx.input(1).raw();
  const bool w_const = slot.const_inputs.size() > 1 && slot.const_inputs[1];
  if (!w_const || st->packed_from != wptr) {
    dnnl::engine& eng = slot.provider->engine();
    st->packed_buf = SharedReorder(slot, w_const, wptr, st->wei_user_md, st->wei_md, eng,
                                   slot.provider->stream(), "deconv");
    st->packed_w = memory(st->wei_md, eng, const_cast<float*>(st->packed_buf->data()));
    st->packed_from = w_const ? wptr : nullptr;
  }
  ctx.set_output(0, DType::kFloat, st->out_shape);
  slot.fused = st->fused;
  slot.out_layouts.assign(1, st->out_layout);
  return Status::Ok();
}

void RunDeconv(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<DeconvState*>(slot.state.get());
  Provider& p = *slot.provider;
  void* y = ctx.output(0).raw();
  memory dst = st->io.Dst(p, y);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, st->io.Src(p, ctx.input(0).raw())},
                                          {DNNL_ARG_WEIGHTS, st->packed_w},
                                          {DNNL_ARG_DST, dst}};
  if (st->has_bias)
    args[DNNL_ARG_BIAS] = memory(st->bias_md, p.engine(), const_cast<void*>(ctx.input(2).raw()));
  st->prim.execute(p.stream(), args);
  st->io.Finish(p, dst, y);
  p.stream().wait();
}

constexpr KernelDef kKernels[] = {
    {"", "ConvTranspose", 1, 1000, AcceptsDeconv, 0b1, 3, PrepareDeconv, RunDeconv},
};

}  // namespace

std::span<const KernelDef> DeconvKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
