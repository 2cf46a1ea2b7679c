// The graph-pass contract. A pass names the op types it rewrites (`targets`), decides per node
// whether a rewrite applies (`match`, no mutation) and performs it (`apply`). Whole-graph passes
// (dead-code removal, CSE, shape inference) leave `targets` empty and override RunOnGraph.
// Every pass preserves the model's outputs exactly up to float rounding of folded arithmetic;
// `ferry optimize --check` verifies that numerically on every run.
//
// To add a pass: 1. write passes/<name>.cc with a class deriving from Pass and a factory
// `std::unique_ptr<Pass> Make<Name>()`, 2. list it in pass_manager.cc's table (with its level),
// 3. add a structure test and a numeric-equivalence test in tests/passes/.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "passes/graph_util.h"

namespace ferry::passes {

struct PassOptions {
  // Constant folding never creates a tensor above this many bytes (a large Expand/Tile/
  // ConstantOfShape would bloat the file) unless it is no larger than the inputs it consumes.
  size_t fold_limit_bytes = 1 << 20;
};

// What a pass sees: one graph (the main graph or a subgraph), the model around it, and the
// index of producers/readers, rebuilt by Reindex() after every rewrite.
struct GraphCtx {
  ir::Graph& graph;
  const ir::Model& model;
  int64_t opset = 0;  // default-domain opset
  const PassOptions& options;
  bool is_main = true;          // false inside If/Loop/Scan bodies
  std::set<std::string> outer;  // names visible from enclosing scopes
  UseIndex index;
  // Enclosing graphs, outermost first (empty for the main graph): their constants are
  // constants here too unless this graph redefines the name.
  std::vector<const ir::Graph*> parents = {};

  void Reindex() { index = BuildUseIndex(graph); }
  // Removes node i (its outputs must have no readers left).
  void RemoveNode(size_t i) {
    graph.nodes.erase(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    Reindex();
  }
  // Whether `name` holds a constant of this graph (an initializer that is not a graph input a
  // caller could override).
  bool IsConstant(const std::string& name) const;
  const Tensor* Constant(const std::string& name) const;
  // Adds an initializer under a fresh name derived from `base`; returns the name.
  std::string AddConstant(const std::string& base, Tensor t);
  // Replaces reads of `from` with `to` everywhere. When `from` is a graph output, renames
  // `to`'s producer output instead, so the graph's interface keeps its names; returns false
  // when neither is possible (both are graph inputs/outputs).
  bool ForwardValue(const std::string& from, const std::string& to);
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  // Op types (default domain) this pass rewrites; empty for whole-graph passes.
  virtual std::vector<std::string_view> targets() const { return {}; }
  virtual bool match(const GraphCtx& ctx, size_t node) const {
    (void)ctx, (void)node;
    return false;
  }
  virtual Status apply(GraphCtx& ctx, size_t node) {
    (void)ctx, (void)node;
    return Status::Ok();
  }
  // Runs the pass once over a graph; returns the number of rewrites. The default visits each
  // node whose op type is a target and applies the pass where it matches.
  virtual Result<int> RunOnGraph(GraphCtx& ctx);
};

// Factories, one per pass file.
std::unique_ptr<Pass> MakeShapeInference();
std::unique_ptr<Pass> MakeFoldConstants();
std::unique_ptr<Pass> MakeEliminateDead();
std::unique_ptr<Pass> MakeEliminateNoop();
std::unique_ptr<Pass> MakeMergeReshapes();
std::unique_ptr<Pass> MakeFuseBatchNorm();
std::unique_ptr<Pass> MakeFuseConvAffine();
std::unique_ptr<Pass> MakeMatMulAddToGemm();
std::unique_ptr<Pass> MakeFusePad();
std::unique_ptr<Pass> MakeMergeDuplicates();
std::unique_ptr<Pass> MakeInlineConstantIf();

}  // namespace ferry::passes
