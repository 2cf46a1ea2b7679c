// fuse_batchnorm: BatchNormalization (inference) right after a Conv, ConvTranspose or Gemm with
// constant weights is an affine map per output channel, y' = s·y + t with s = γ/√(σ²+ε) and
// t = β − μ·s; it folds into the weights (scaled per output channel) and the bias (s·b + t).
#include <cmath>

#include "passes/pass.h"

namespace ferry::passes {

namespace {

struct Affine {
  std::vector<double> s, t;
};

class FuseBatchNorm final : public Pass {
 public:
  std::string_view name() const override { return "fuse_batchnorm"; }
  std::vector<std::string_view> targets() const override { return {"BatchNormalization"}; }

  // BN's per-channel affine map, when all its parameters are constant float32.
  std::optional<Affine> BnAffine(const GraphCtx& ctx, const ir::Node& bn) const {
    if (bn.inputs.size() != 5 || bn.attr_int("training_mode", 0) != 0) return std::nullopt;
    for (size_t k = 1; k < bn.outputs.size(); ++k)
      if (!bn.outputs[k].empty()) return std::nullopt;
    std::vector<const Tensor*> p;
    for (size_t k = 1; k < 5; ++k) {
      const Tensor* t = ctx.Constant(bn.inputs[k]);
      if (!t || t->dtype() != DType::kFloat || t->rank() != 1) return std::nullopt;
      p.push_back(t);
    }
    int64_t c = p[0]->size();
    for (const Tensor* t : p)
      if (t->size() != c) return std::nullopt;
    double eps = bn.attr_float("epsilon", 1e-5f);
    Affine a;
    for (int64_t k = 0; k < c; ++k) {
      double s =
          p[0]->data<float>()[k] / std::sqrt(static_cast<double>(p[3]->data<float>()[k]) + eps);
      a.s.push_back(s);
      a.t.push_back(p[1]->data<float>()[k] - p[2]->data<float>()[k] * s);
    }
    return a;
  }

  // The producer of BN's input when it is a foldable Conv/ConvTranspose/Gemm with C channels.
  std::optional<size_t> Producer(const GraphCtx& ctx, size_t i, int64_t channels) const {
    const ir::Node& bn = ctx.graph.nodes[i];
    const std::string& x = bn.inputs[0];
    if (!ctx.index.SingleUse(x)) return std::nullopt;
    auto p = ctx.index.Producer(x);
    if (!p) return std::nullopt;
    const ir::Node& n = ctx.graph.nodes[*p];
    if (!n.domain.empty() || n.outputs.size() != 1 || n.inputs.size() < 2) return std::nullopt;
    const Tensor* w = ctx.Constant(n.inputs[1]);
    if (!w || w->dtype() != DType::kFloat) return std::nullopt;
    const Tensor* b =
        n.inputs.size() > 2 && !n.inputs[2].empty() ? ctx.Constant(n.inputs[2]) : nullptr;
    if (n.inputs.size() > 2 && !n.inputs[2].empty() && (!b || b->dtype() != DType::kFloat))
      return std::nullopt;
    if (n.op_type == "Conv") {
      if (w->rank() < 3 || w->dim(0) != channels) return std::nullopt;
      if (b && b->size() != channels) return std::nullopt;
      return p;
    }
    if (n.op_type == "ConvTranspose") {
      int64_t g = n.attr_int("group", 1);
      if (w->rank() < 3 || g <= 0 || w->dim(1) * g != channels || w->dim(0) % g)
        return std::nullopt;
      if (b && b->size() != channels) return std::nullopt;
      return p;
    }
    if (n.op_type == "Gemm") {
      if (w->rank() != 2) return std::nullopt;
      int64_t cols = n.attr_int("transB", 0) ? w->dim(0) : w->dim(1);
      if (cols != channels) return std::nullopt;
      if (b) {
        const Shape& bs = b->shape();
        bool ok = b->size() == 1 ||
                  (b->size() == channels && (bs.size() == 1 || (bs.size() == 2 && bs[0] == 1)));
        if (!ok) return std::nullopt;
      }
      return p;
    }
    return std::nullopt;
  }

  bool match(const GraphCtx& ctx, size_t i) const override {
    const ir::Node& bn = ctx.graph.nodes[i];
    auto a = BnAffine(ctx, bn);
    return a && Producer(ctx, i, static_cast<int64_t>(a->s.size())).has_value();
  }

  Status apply(GraphCtx& ctx, size_t i) override {
    Affine a = *BnAffine(ctx, ctx.graph.nodes[i]);
    const int64_t c = static_cast<int64_t>(a.s.size());
    size_t p = *Producer(ctx, i, c);
    const ir::Node& n = ctx.graph.nodes[p];
    Tensor w = ctx.Constant(n.inputs[1])->Clone();
    const Tensor* b =
        n.inputs.size() > 2 && !n.inputs[2].empty() ? ctx.Constant(n.inputs[2]) : nullptr;
    float* wd = w.data<float>();
    Tensor nb(DType::kFloat, {c});
    float* bd = nb.data<float>();
    double beta = 1.0;
    if (n.op_type == "Conv") {
      int64_t per = w.size() / c;
      for (int64_t oc = 0; oc < c; ++oc)
        for (int64_t k = 0; k < per; ++k)
          wd[oc * per + k] = static_cast<float>(wd[oc * per + k] * a.s[oc]);
    } else if (n.op_type == "ConvTranspose") {
      int64_t g = n.attr_int("group", 1), ic = w.dim(0), ocg = w.dim(1),
              per = w.size() / (ic * ocg);
      for (int64_t i0 = 0; i0 < ic; ++i0) {
        int64_t grp = i0 / (ic / g);
        for (int64_t j = 0; j < ocg; ++j) {
          double s = a.s[static_cast<size_t>(grp * ocg + j)];
          float* q = wd + (i0 * ocg + j) * per;
          for (int64_t k = 0; k < per; ++k) q[k] = static_cast<float>(q[k] * s);
        }
      }
    } else {  // Gemm
      bool tb = n.attr_int("transB", 0) != 0;
      int64_t rows = w.dim(0), cols = w.dim(1);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t q = 0; q < cols; ++q)
          wd[r * cols + q] = static_cast<float>(wd[r * cols + q] * a.s[tb ? r : q]);
      beta = n.attr_float("beta", 1.0f);
    }
    for (int64_t oc = 0; oc < c; ++oc) {
      double bias = b ? b->data<float>()[b->size() == 1 ? 0 : oc] * beta : 0.0;
      bd[oc] = static_cast<float>(bias * a.s[oc] + a.t[oc]);
    }
    std::string wname = ctx.AddConstant(n.inputs[1] + "_bnfold", std::move(w));
    std::string bname =
        ctx.AddConstant((n.name.empty() ? n.outputs[0] : n.name) + ".bias_bnfold", std::move(nb));
    ir::Node& nm = ctx.graph.nodes[p];
    nm.inputs[1] = wname;
    if (nm.inputs.size() < 3) nm.inputs.resize(3);
    nm.inputs[2] = bname;
    if (nm.op_type == "Gemm")
      for (auto& at : nm.attributes)
        if (at.name == "beta") at.f = 1.0f;
    // The producer now writes BN's output directly.
    std::string bn_out = ctx.graph.nodes[i].outputs[0];
    nm.outputs[0] = bn_out;
    ctx.RemoveNode(i);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseBatchNorm() {
  return std::make_unique<FuseBatchNorm>();
}

}  // namespace ferry::passes
