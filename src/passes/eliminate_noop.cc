// eliminate_noop: removes nodes that pass their input through unchanged — Identity, inference
// Dropout, Cast to the same type, Reshape/Squeeze/Unsqueeze/Flatten/Expand whose output shape
// equals the input's, Pad with all-zero pads, Add/Sub of 0 and Mul/Div by 1 that do not
// broadcast, Transpose with the identity permutation, Concat of one input.
#include <set>

#include "passes/pass.h"

namespace ferry::passes {

namespace {

class EliminateNoop final : public Pass {
 public:
  std::string_view name() const override { return "eliminate_noop"; }
  std::vector<std::string_view> targets() const override {
    return {"Identity", "Dropout", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand",
            "Pad",      "Add",     "Sub",  "Mul",     "Div",     "Transpose", "Concat"};
  }

  // Which input passes through (or -1).
  int PassThrough(const GraphCtx& ctx, const ir::Node& n) const {
    const ir::Graph& g = ctx.graph;
    if (n.outputs.empty() || n.outputs[0].empty() || n.inputs.empty() || n.inputs[0].empty())
      return -1;
    const std::string& x = n.inputs[0];
    const std::string& y = n.outputs[0];
    auto same_shape = [&](const std::string& a, const std::string& b) {
      auto sa = StaticShape(g, a), sb = StaticShape(g, b);
      return sa && sb && *sa == *sb;
    };
    const std::string& op = n.op_type;
    if (op == "Identity") return 0;
    if (op == "Dropout") {
      for (size_t k = 1; k < n.outputs.size(); ++k)
        if (!n.outputs[k].empty()) return -1;  // the mask is read
      if (ctx.opset < 7 && n.attr_int("is_test", 0) == 0) return -1;
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
        const Tensor* mode = ctx.Constant(n.inputs[2]);
        if (!mode || !AllEqual(*mode, 0)) return -1;  // training_mode may be on
      }
      return 0;
    }
    if (op == "Cast") {
      DType in = TypeOf(ctx, x);
      return in != DType::kUndefined && in != DType::kString &&
                     static_cast<int64_t>(in) == n.attr_int("to", -1)
                 ? 0
                 : -1;
    }
    if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten" ||
        op == "Expand")
      return same_shape(x, y) ? 0 : -1;
    if (op == "Pad") {
      std::vector<int64_t> pads;
      if (ctx.opset < 11) {
        pads = n.attr_ints("pads");
      } else {
        if (n.inputs.size() < 2 || n.inputs[1].empty()) return -1;
        const Tensor* p = ctx.Constant(n.inputs[1]);
        if (!p) return -1;
        pads = p->ToInt64Vector();
      }
      for (int64_t p : pads)
        if (p != 0) return -1;
      return 0;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      if (n.inputs.size() != 2) return -1;
      double neutral = (op == "Add" || op == "Sub") ? 0.0 : 1.0;
      DType ty = KnownType(g, y);
      if (ty == DType::kUndefined || !IsNumeric(ty))
        return -1;  // x*1, x+0, x/1 are exact for ints too
      for (int k = 0; k < 2; ++k) {
        if ((op == "Sub" || op == "Div") && k == 0) continue;  // 0 - x and 1 / x are not no-ops
        const Tensor* c = ctx.Constant(n.inputs[static_cast<size_t>(k)]);
        const std::string& other = n.inputs[static_cast<size_t>(1 - k)];
        if (c && AllEqual(*c, neutral) && KeepsShape(g, other, *c) && KnownType(g, other) == ty)
          return 1 - k;
      }
      return -1;
    }
    if (op == "Transpose") {
      auto perm = n.attr_ints("perm");
      if (perm.empty()) return -1;
      for (size_t k = 0; k < perm.size(); ++k)
        if (perm[k] != static_cast<int64_t>(k)) return -1;
      return 0;
    }
    if (op == "Concat") return n.inputs.size() == 1 ? 0 : -1;
    return -1;
  }

  // The element type of `v`: from value_info, or bool when a comparison produced it (subgraph
  // values carry no value_info).
  static DType TypeOf(const GraphCtx& ctx, const std::string& v) {
    DType t = KnownType(ctx.graph, v);
    if (t != DType::kUndefined) return t;
    auto p = ctx.index.Producer(v);
    if (!p) return t;
    static const std::set<std::string, std::less<>> kBoolOps = {
        "Greater", "Less", "Equal", "GreaterOrEqual", "LessOrEqual", "And",
        "Or",      "Xor",  "Not",   "IsNaN",          "IsInf"};
    const ir::Node& n = ctx.graph.nodes[*p];
    return n.domain.empty() && kBoolOps.count(n.op_type) ? DType::kBool : t;
  }

  // Broadcasting `c` against `other` leaves other's shape unchanged (dims may be symbolic).
  static bool KeepsShape(const ir::Graph& g, const std::string& other, const Tensor& c) {
    auto dims = PartialShape(g, other);
    if (!dims || c.rank() > static_cast<int64_t>(dims->size())) return false;
    const size_t off = dims->size() - static_cast<size_t>(c.rank());
    for (size_t d = 0; d < static_cast<size_t>(c.rank()); ++d) {
      int64_t cd = c.dim(static_cast<int64_t>(d));
      const auto& od = (*dims)[off + d];
      if (cd != 1 && !(od && *od == cd)) return false;
    }
    return true;
  }

  bool match(const GraphCtx& ctx, size_t i) const override {
    const ir::Node& n = ctx.graph.nodes[i];
    int k = PassThrough(ctx, n);
    if (k < 0) return false;
    const std::string& x = n.inputs[static_cast<size_t>(k)];
    const std::string& y = n.outputs[0];
    if (!ctx.index.graph_outputs.count(y)) return true;
    // A graph output keeps its name: the input's producer (or a constant only this node
    // reads) must be renameable.
    if (ctx.index.graph_outputs.count(x) || ctx.outer.count(x)) return false;
    if (ctx.index.Producer(x).has_value()) return true;
    return ctx.IsConstant(x) && ctx.index.NumReaders(x) == 1;
  }

  Status apply(GraphCtx& ctx, size_t i) override {
    const ir::Node& n = ctx.graph.nodes[i];
    std::string x = n.inputs[static_cast<size_t>(PassThrough(ctx, n))];
    std::string y = n.outputs[0];
    // Renaming keeps node indices; match() checked the forwarding is possible.
    if (ctx.index.graph_outputs.count(y) && !ctx.index.Producer(x)) {
      MutableInitializer(ctx.graph, x)->name = y;  // the constant becomes the output itself
      ctx.RemoveNode(i);
      return Status::Ok();
    }
    ctx.ForwardValue(y, x);
    ctx.RemoveNode(i);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Pass> MakeEliminateNoop() {
  return std::make_unique<EliminateNoop>();
}

}  // namespace ferry::passes
