// inline_constant_if: an If whose condition is a constant is replaced by the nodes of the branch
// it always takes. Names defined inside the branch get fresh names in the enclosing graph; the
// branch's outputs take the If's output names.
#include <map>
#include <set>

#include "passes/pass.h"

namespace ferry::passes {

namespace {

class InlineConstantIf final : public Pass {
 public:
  std::string_view name() const override { return "inline_constant_if"; }
  std::vector<std::string_view> targets() const override { return {"If"}; }

  const ir::Graph* Branch(const GraphCtx& ctx, size_t i) const {
    const ir::Node& n = ctx.graph.nodes[i];
    if (n.inputs.empty()) return nullptr;
    const Tensor* c = ctx.Constant(n.inputs[0]);
    if (!c || c->size() != 1 || c->dtype() == DType::kString) return nullptr;
    const ir::Attribute* a = n.attr(c->GetAsDouble(0) != 0 ? "then_branch" : "else_branch");
    if (!a || !a->g || !a->g->inputs.empty() || a->g->outputs.size() != n.outputs.size())
      return nullptr;
    return a->g.get();
  }

  bool match(const GraphCtx& ctx, size_t i) const override { return Branch(ctx, i) != nullptr; }

  Status apply(GraphCtx& ctx, size_t i) override {
    ir::Node& n = ctx.graph.nodes[i];
    // The branch is found once: after its graph is moved out, Branch() is null, and so is the
    // graph of every non-graph attribute.
    const ir::Graph* branch = Branch(ctx, i);
    if (!branch) return InvalidError("{}: no constant branch to inline", n.Describe());
    std::unique_ptr<ir::Graph> body;
    for (auto& a : n.attributes)
      if (a.g && a.g.get() == branch) {
        body = std::move(a.g);
        break;
      }
    // Give every name the branch defines a fresh name in the enclosing graph.
    std::string prefix = (n.name.empty() ? n.outputs[0] : n.name) + "/";
    std::vector<std::string> defined;
    for (const auto& init : body->initializers) defined.push_back(init.name);
    for (const auto& bn : body->nodes)
      for (const auto& o : bn.outputs)
        if (!o.empty()) defined.push_back(o);
    std::map<std::string, std::string> fresh;
    for (const auto& d : defined) fresh[d] = FreshName(ctx.graph, prefix + d);
    // Branch outputs: a value defined inside takes the If's output name directly.
    std::vector<ir::Node> copies;
    for (size_t k = 0; k < body->outputs.size(); ++k) {
      const std::string& b = body->outputs[k].name;
      const std::string& o = n.outputs[k];
      if (o.empty()) continue;
      auto it = fresh.find(b);
      bool claimed = it != fresh.end() && it->second.rfind(prefix, 0) == 0;
      if (claimed) {
        it->second = o;
      } else {  // an outer value or a value output twice: copy it out
        ir::Node id;
        id.op_type = "Identity";
        id.name = prefix + "output_" + std::to_string(k);
        id.inputs = {it == fresh.end() ? b : it->second};
        id.outputs = {o};
        copies.push_back(std::move(id));
      }
    }
    // Rename in two steps through unique temporaries so a new name equal to another old one
    // cannot be renamed twice.
    std::map<std::string, std::string> temp;
    size_t t = 0;
    for (const auto& [from, to] : fresh) temp[from] = "\x02" + std::to_string(t++);
    for (const auto& [from, tmp] : temp) RenameReads(*body, from, tmp);
    for (const auto& [from, tmp] : temp) RenameReads(*body, tmp, fresh[from]);
    for (auto& init : body->initializers) {
      init.name = fresh[init.name];
      ctx.graph.initializers.push_back(std::move(init));
    }
    std::vector<ir::Node> moved;
    for (auto& bn : body->nodes) {
      for (auto& o : bn.outputs)
        if (!o.empty()) o = fresh[o];
      moved.push_back(std::move(bn));
    }
    for (auto& c : copies) moved.push_back(std::move(c));
    auto pos = ctx.graph.nodes.erase(ctx.graph.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    ctx.graph.nodes.insert(pos, std::make_move_iterator(moved.begin()),
                           std::make_move_iterator(moved.end()));
    ctx.Reindex();
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Pass> MakeInlineConstantIf() {
  return std::make_unique<InlineConstantIf>();
}

}  // namespace ferry::passes
