// fuse_pad: a constant-mode Pad with value 0 and non-negative pads on the spatial axes only
// folds into the following Conv, or AveragePool that counts padding (count_include_pad=1, or
// no padding of its own). MaxPool is left alone: it pads with -inf, not 0.
#include "passes/pass.h"

namespace ferry::passes {

namespace {

class FusePad final : public Pass {
 public:
  std::string_view name() const override { return "fuse_pad"; }
  std::vector<std::string_view> targets() const override { return {"Conv", "AveragePool"}; }

  // The Pad's per-axis begin/end pads when it can fold into node i.
  std::optional<std::pair<size_t, std::vector<int64_t>>> Find(const GraphCtx& ctx, size_t i) const {
    const ir::Node& n = ctx.graph.nodes[i];
    if (n.inputs.empty() || !ctx.index.SingleUse(n.inputs[0])) return std::nullopt;
    if (n.attr_string("auto_pad", "NOTSET") != "NOTSET") return std::nullopt;
    auto p = ctx.index.Producer(n.inputs[0]);
    if (!p) return std::nullopt;
    const ir::Node& pad = ctx.graph.nodes[*p];
    if (pad.op_type != "Pad" || !pad.domain.empty() || pad.inputs.empty()) return std::nullopt;
    if (pad.attr_string("mode", "constant") != "constant") return std::nullopt;
    std::vector<int64_t> pads;
    if (ctx.opset < 11) {
      pads = pad.attr_ints("pads");
      if (pad.attr_float("value", 0.f) != 0.f) return std::nullopt;
    } else {
      if (pad.inputs.size() < 2 || pad.inputs[1].empty()) return std::nullopt;
      const Tensor* pt = ctx.Constant(pad.inputs[1]);
      if (!pt) return std::nullopt;
      pads = pt->ToInt64Vector();
      if (pad.inputs.size() > 2 && !pad.inputs[2].empty()) {
        const Tensor* v = ctx.Constant(pad.inputs[2]);
        if (!v || !AllEqual(*v, 0)) return std::nullopt;
      }
      if (pad.inputs.size() > 3 && !pad.inputs[3].empty())
        return std::nullopt;  // axes: keep simple
    }
    if (pads.size() % 2 || pads.size() < 6) return std::nullopt;
    const size_t r = pads.size() / 2;
    for (int64_t v : pads)
      if (v < 0) return std::nullopt;
    if (pads[0] || pads[1] || pads[r] || pads[r + 1]) return std::nullopt;  // batch/channel pads
    if (n.op_type == "AveragePool") {
      bool own = false;
      for (int64_t v : n.attr_ints("pads")) own = own || v != 0;
      if (own && n.attr_int("count_include_pad", 0) == 0) return std::nullopt;
    }
    auto existing = n.attr_ints("pads");
    if (!existing.empty() && existing.size() != 2 * (r - 2)) return std::nullopt;
    return std::make_pair(*p, pads);
  }

  bool match(const GraphCtx& ctx, size_t i) const override { return Find(ctx, i).has_value(); }

  Status apply(GraphCtx& ctx, size_t i) override {
    auto [p, pads] = *Find(ctx, i);
    const size_t r = pads.size() / 2, s = r - 2;
    ir::Node& n = ctx.graph.nodes[i];
    std::vector<int64_t> merged = n.attr_ints("pads");
    if (merged.empty()) merged.assign(2 * s, 0);
    for (size_t d = 0; d < s; ++d) {
      merged[d] += pads[2 + d];
      merged[s + d] += pads[r + 2 + d];
    }
    bool found = false;
    for (auto& a : n.attributes)
      if (a.name == "pads") a.ints = merged, found = true;
    if (!found) {
      ir::Attribute a;
      a.name = "pads";
      a.type = ir::AttrType::kInts;
      a.ints = merged;
      n.attributes.push_back(std::move(a));
    }
    if (n.op_type == "AveragePool") {
      bool set = false;
      for (auto& a : n.attributes)
        if (a.name == "count_include_pad") a.i = 1, set = true;
      if (!set) {
        ir::Attribute a;
        a.name = "count_include_pad";
        a.type = ir::AttrType::kInt;
        a.i = 1;
        n.attributes.push_back(std::move(a));
      }
    }
    n.inputs[0] = ctx.graph.nodes[p].inputs[0];
    ctx.RemoveNode(p);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFusePad() {
  return std::make_unique<FusePad>();
}

}  // namespace ferry::passes
