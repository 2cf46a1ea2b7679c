// eliminate_dead: removes nodes none of whose outputs is read (no op in the default domain
// has side effects), initializers nothing reads, and unread optional trailing outputs of ops
// that allow omitting them (Dropout's mask, BatchNormalization's training statistics...).
#include <map>
#include <set>

#include "passes/pass.h"

namespace ferry::passes {

namespace {

// Op -> first output index that may be omitted when unread (all outputs from it on).
const std::map<std::string, size_t, std::less<>> kOptionalOutputsFrom = {
    {"Dropout", 1}, {"BatchNormalization", 1}, {"MaxPool", 1}, {"LayerNormalization", 1}};

class EliminateDead final : public Pass {
 public:
  std::string_view name() const override { return "eliminate_dead"; }

  Result<int> RunOnGraph(GraphCtx& ctx) override {
    int changes = 0;
    ir::Graph& g = ctx.graph;
    auto used = [&](const std::string& v) {
      return !v.empty() && (ctx.index.NumReaders(v) > 0 || ctx.index.graph_outputs.count(v));
    };
    // Nodes, last to first, so whole dead chains go in one sweep.
    for (size_t k = g.nodes.size(); k-- > 0;) {
      const ir::Node& n = g.nodes[k];
      bool live = !n.domain.empty();  // custom ops may have effects we cannot see
      for (const auto& o : n.outputs) live = live || used(o);
      if (!live) {
        ctx.RemoveNode(k);
        ++changes;
      }
    }
    // Unread optional outputs.
    for (auto& n : g.nodes) {
      auto it = kOptionalOutputsFrom.find(n.op_type);
      if (!n.domain.empty() || it == kOptionalOutputsFrom.end()) continue;
      if (n.op_type == "BatchNormalization" && n.attr_int("training_mode", 0) != 0) continue;
      while (n.outputs.size() > it->second && !used(n.outputs.back())) {
        n.outputs.pop_back();
        ++changes;
      }
    }
    // Initializers nothing reads (and their graph-input entries).
    std::set<std::string> dead;
    for (const auto& init : g.initializers)
      if (!used(init.name)) dead.insert(init.name);
    if (!dead.empty()) {
      std::erase_if(g.initializers,
                    [&](const ir::Initializer& i) { return dead.count(i.name) > 0; });
      std::erase_if(g.inputs, [&](const ir::ValueInfo& v) { return dead.count(v.name) > 0; });
      changes += static_cast<int>(dead.size());
    }
    ctx.Reindex();
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeEliminateDead() {
  return std::make_unique<EliminateDead>();
}

}  // namespace ferry::passes
