// merge_reshapes: Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when s2 is a constant without
// 0 entries (0 would copy a dim of the intermediate); Reshape after Squeeze/Unsqueeze/Flatten
// likewise; Transpose(Transpose(x, p1), p2) -> Transpose(x, p1∘p2). The inner node must have
// no other reader. Squeeze(Unsqueeze(x, axes), axes) with the same non-negative constant axes
// is x itself.
#include <algorithm>

#include "passes/pass.h"

namespace ferry::passes {

namespace {

class MergeReshapes final : public Pass {
 public:
  std::string_view name() const override { return "merge_reshapes"; }
  std::vector<std::string_view> targets() const override {
    return {"Reshape", "Transpose", "Squeeze"};
  }

  // Axes of a Squeeze/Unsqueeze: the attribute before opset 13, the constant input from 13.
  std::optional<std::vector<int64_t>> Axes(const GraphCtx& ctx, const ir::Node& n) const {
    std::vector<int64_t> axes;
    if (ctx.opset < 13) {
      axes = n.attr_ints("axes");
    } else {
      if (n.inputs.size() < 2 || n.inputs[1].empty()) return std::nullopt;
      const Tensor* t = ctx.Constant(n.inputs[1]);
      if (!t) return std::nullopt;
      axes = t->ToInt64Vector();
    }
    if (axes.empty()) return std::nullopt;
    for (int64_t a : axes)
      if (a < 0) return std::nullopt;
    std::sort(axes.begin(), axes.end());
    return axes;
  }

  // For a Squeeze that undoes its Unsqueeze input: the Unsqueeze's input.
  std::optional<std::string> Cancelled(const GraphCtx& ctx, size_t i) const {
    const ir::Node& n = ctx.graph.nodes[i];
    if (n.op_type != "Squeeze" || n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
    auto p = ctx.index.Producer(n.inputs[0]);
    if (!p) return std::nullopt;
    const ir::Node& u = ctx.graph.nodes[*p];
    if (u.op_type != "Unsqueeze" || !u.domain.empty() || u.inputs.empty()) return std::nullopt;
    auto a = Axes(ctx, n), b = Axes(ctx, u);
    if (!a || !b || *a != *b) return std::nullopt;
    const std::string& x = u.inputs[0];
    const std::string& y = n.outputs[0];
    if (ctx.index.graph_outputs.count(y) &&
        (!ctx.index.Producer(x) || ctx.index.graph_outputs.count(x) || ctx.outer.count(x)))
      return std::nullopt;
    return x;
  }

  // The single-use producer of node i's first input when it is of a mergeable kind.
  std::optional<size_t> Inner(const GraphCtx& ctx, size_t i) const {
    const ir::Node& n = ctx.graph.nodes[i];
    if (n.inputs.empty() || n.inputs[0].empty() || !ctx.index.SingleUse(n.inputs[0]))
      return std::nullopt;
    auto p = ctx.index.Producer(n.inputs[0]);
    if (!p) return std::nullopt;
    const ir::Node& in = ctx.graph.nodes[*p];
    if (!in.domain.empty() || in.outputs.size() != 1) return std::nullopt;
    if (n.op_type == "Transpose") {
      if (in.op_type != "Transpose" || n.attr_ints("perm").empty() || in.attr_ints("perm").empty())
        return std::nullopt;
      auto p1 = in.attr_ints("perm"), p2 = n.attr_ints("perm");
      if (p1.size() != p2.size()) return std::nullopt;
      for (int64_t j : p2)
        if (j < 0 || j >= static_cast<int64_t>(p1.size())) return std::nullopt;
      return p;
    }
    if (in.op_type != "Reshape" && in.op_type != "Squeeze" && in.op_type != "Unsqueeze" &&
        in.op_type != "Flatten")
      return std::nullopt;
    if (n.inputs.size() < 2) return std::nullopt;
    const Tensor* s2 = ctx.Constant(n.inputs[1]);
    if (!s2 || (s2->dtype() != DType::kInt64)) return std::nullopt;
    for (int64_t d : s2->ToInt64Vector())
      if (d == 0) return std::nullopt;
    return p;
  }

  bool match(const GraphCtx& ctx, size_t i) const override {
    if (ctx.graph.nodes[i].op_type == "Squeeze") return Cancelled(ctx, i).has_value();
    return Inner(ctx, i).has_value();
  }

  Status apply(GraphCtx& ctx, size_t i) override {
    if (ctx.graph.nodes[i].op_type == "Squeeze") {
      std::string x = *Cancelled(ctx, i);
      ctx.ForwardValue(ctx.graph.nodes[i].outputs[0], x);  // the Unsqueeze goes in eliminate_dead
      ctx.RemoveNode(i);
      return Status::Ok();
    }
    size_t p = *Inner(ctx, i);
    ir::Node& outer = ctx.graph.nodes[i];
    const ir::Node& inner = ctx.graph.nodes[p];
    if (outer.op_type == "Transpose") {
      auto p1 = inner.attr_ints("perm"), p2 = outer.attr_ints("perm");
      std::vector<int64_t> q(p2.size());
      for (size_t j = 0; j < p2.size(); ++j) q[j] = p1[static_cast<size_t>(p2[j])];
      for (auto& a : outer.attributes)
        if (a.name == "perm") a.ints = q;
    }
    outer.inputs[0] = inner.inputs[0];
    ctx.RemoveNode(p);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Pass> MakeMergeReshapes() {
  return std::make_unique<MergeReshapes>();
}

}  // namespace ferry::passes
