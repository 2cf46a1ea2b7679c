// fuse_conv_affine: Conv followed by a Mul or Add with a constant that is per output channel
// (shape [C,1,...], [1,C,1,...] or a scalar, broadcasting without growing the output) folds
// into the Conv: Mul scales weights and bias, Add shifts the bias.
#include "passes/pass.h"

namespace ferry::passes {

namespace {

class FuseConvAffine final : public Pass {
 public:
  std::string_view name() const override { return "fuse_conv_affine"; }
  std::vector<std::string_view> targets() const override { return {"Mul", "Add"}; }

  struct Match {
    size_t conv;
    int conv_side;  // which input of the Mul/Add is the Conv output
    std::vector<float> per_channel;
  };

  std::optional<Match> Find(const GraphCtx& ctx, size_t i) const {
    const ir::Node& n = ctx.graph.nodes[i];
    if (n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const std::string& x = n.inputs[static_cast<size_t>(side)];
      const Tensor* k = ctx.Constant(n.inputs[static_cast<size_t>(1 - side)]);
      if (!k || k->dtype() != DType::kFloat || !ctx.index.SingleUse(x)) continue;
      auto p = ctx.index.Producer(x);
      if (!p) continue;
      const ir::Node& conv = ctx.graph.nodes[*p];
      if (conv.op_type != "Conv" || !conv.domain.empty() || conv.inputs.size() < 2) continue;
      const Tensor* w = ctx.Constant(conv.inputs[1]);
      if (!w || w->dtype() != DType::kFloat || w->rank() < 3) continue;
      if (conv.inputs.size() > 2 && !conv.inputs[2].empty()) {
        const Tensor* b = ctx.Constant(conv.inputs[2]);
        if (!b || b->dtype() != DType::kFloat) continue;
      }
      const int64_t c = w->dim(0), rank = w->rank();
      if (k->rank() > rank) continue;
      // Align the constant's shape to the output's rank; only axis 1 may differ from 1.
      Shape ks(static_cast<size_t>(rank - k->rank()), 1);
      ks.insert(ks.end(), k->shape().begin(), k->shape().end());
      bool ok = true;
      for (size_t d = 0; d < ks.size(); ++d)
        if (ks[d] != 1 && !(d == 1 && ks[d] == c)) ok = false;
      if (!ok) continue;
      Match m{*p, side, std::vector<float>(static_cast<size_t>(c))};
      for (int64_t oc = 0; oc < c; ++oc)
        m.per_channel[static_cast<size_t>(oc)] = k->data<float>()[k->size() == 1 ? 0 : oc];
      return m;
    }
    return std::nullopt;
  }

  bool match(const GraphCtx& ctx, size_t i) const override { return Find(ctx, i).has_value(); }

  Status apply(GraphCtx& ctx, size_t i) override {
    Match m = *Find(ctx, i);
    const bool mul = ctx.graph.nodes[i].op_type == "Mul";
    const ir::Node& conv = ctx.graph.nodes[m.conv];
    const int64_t c = static_cast<int64_t>(m.per_channel.size());
    Tensor bias(DType::kFloat, {c});
    if (conv.inputs.size() > 2 && !conv.inputs[2].empty()) {
      const Tensor* b = ctx.Constant(conv.inputs[2]);
      std::copy(b->data<float>(), b->data<float>() + c, bias.data<float>());
    }
    std::string wname = conv.inputs[1];
    if (mul) {
      Tensor w = ctx.Constant(conv.inputs[1])->Clone();
      int64_t per = w.size() / c;
      for (int64_t oc = 0; oc < c; ++oc) {
        for (int64_t q = 0; q < per; ++q)
          w.data<float>()[oc * per + q] *= m.per_channel[static_cast<size_t>(oc)];
        bias.data<float>()[oc] *= m.per_channel[static_cast<size_t>(oc)];
      }
      wname = ctx.AddConstant(conv.inputs[1] + "_scaled", std::move(w));
    } else {
      for (int64_t oc = 0; oc < c; ++oc)
        bias.data<float>()[oc] += m.per_channel[static_cast<size_t>(oc)];
    }
    const ir::Node& cv = ctx.graph.nodes[m.conv];
    std::string bname = ctx.AddConstant(
        (cv.name.empty() ? cv.outputs[0] : cv.name) + ".bias_folded", std::move(bias));
    ir::Node& cm = ctx.graph.nodes[m.conv];
    cm.inputs[1] = wname;
    if (cm.inputs.size() < 3) cm.inputs.resize(3);
    cm.inputs[2] = bname;
    cm.outputs[0] = ctx.graph.nodes[i].outputs[0];
    ctx.RemoveNode(i);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseConvAffine() {
  return std::make_unique<FuseConvAffine>();
}

}  // namespace ferry::passes
