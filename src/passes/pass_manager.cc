#include "passes/pass_manager.h"

#include <algorithm>

namespace ferry::passes {

bool GraphCtx::IsConstant(const std::string& name) const {
  if (!graph.FindInitializer(name)) return false;
  for (const auto& in : graph.inputs)
    if (in.name == name) return false;  // a caller may feed it
  return true;
}

namespace {
bool Defines(const ir::Graph& g, const std::string& name) {
  for (const auto& v : g.inputs)
    if (v.name == name) return true;
  if (g.FindInitializer(name)) return true;
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (o == name) return true;
  return false;
}
}  // namespace

const Tensor* GraphCtx::Constant(const std::string& name) const {
  if (IsConstant(name)) return ConstantOf(graph, name);
  if (Defines(graph, name)) return nullptr;
  for (auto it = parents.rbegin(); it != parents.rend(); ++it) {
    const ir::Graph& p = **it;
    if (!Defines(p, name)) continue;
    for (const auto& v : p.inputs)
      if (v.name == name) return nullptr;
    return ConstantOf(p, name);
  }
  return nullptr;
}

std::string GraphCtx::AddConstant(const std::string& base, Tensor t) {
  std::string name = FreshName(graph, base);
  graph.initializers.push_back(ir::Initializer{name, std::move(t), ""});
  return name;
}

bool GraphCtx::ForwardValue(const std::string& from, const std::string& to) {
  if (!index.graph_outputs.count(from)) {
    RenameReads(graph, from, to);
    Reindex();
    return true;
  }
  // `from` is a graph output: `to`'s producer writes `from` directly instead.
  auto prod = index.Producer(to);
  if (!prod || index.graph_outputs.count(to) || outer.count(to)) return false;
  for (auto& o : graph.nodes[*prod].outputs)
    if (o == to) o = from;
  RenameReads(graph, to, from);
  Reindex();
  return true;
}

Result<int> Pass::RunOnGraph(GraphCtx& ctx) {
  auto t = targets();
  int changes = 0;
  for (size_t i = 0; i < ctx.graph.nodes.size(); ++i) {
    const ir::Node& n = ctx.graph.nodes[i];
    if (!n.domain.empty() || std::find(t.begin(), t.end(), n.op_type) == t.end()) continue;
    if (!match(ctx, i)) continue;
    size_t before = ctx.graph.nodes.size();
    FERRY_RETURN_IF_ERROR(apply(ctx, i));
    ++changes;
    ctx.Reindex();
    // Rewrites may remove nodes at or before i; revisit from a safe position.
    size_t removed = before > ctx.graph.nodes.size() ? before - ctx.graph.nodes.size() : 0;
    i = i > removed ? i - removed - 1 : static_cast<size_t>(-1);  // the loop's ++i revisits
  }
  return changes;
}

const std::vector<PassInfo>& AllPasses() {
  static const std::vector<PassInfo> kPasses = {
      {"fold_constants", "basic",
       "evaluate nodes whose inputs are all constant (never random ops or huge results)",
       MakeFoldConstants},
      {"eliminate_noop", "basic",
       "remove Identity, inference Dropout, same-type Cast, same-shape Reshape, zero Pad, "
       "Add 0 / Mul 1, identity and cancelling Transposes",
       MakeEliminateNoop},
      {"merge_reshapes", "basic", "merge consecutive Reshape and Transpose nodes",
       MakeMergeReshapes},
      {"eliminate_dead", "basic",
       "remove unread nodes, unused initializers and unread optional outputs", MakeEliminateDead},
      {"merge_duplicates", "basic", "merge identical initializers and common subexpressions",
       MakeMergeDuplicates},
      {"inline_constant_if", "basic", "inline If nodes whose condition is a constant",
       MakeInlineConstantIf},
      {"fuse_batchnorm", "all",
       "fold BatchNormalization into the preceding Conv, ConvTranspose or Gemm", MakeFuseBatchNorm},
      {"fuse_conv_affine", "all", "fold a per-channel Mul/Add after Conv into its weights and bias",
       MakeFuseConvAffine},
      {"matmul_add_to_gemm", "all",
       "MatMul of a 2-D input and constant weights followed by a bias Add -> Gemm",
       MakeMatMulAddToGemm},
      {"fuse_pad", "all", "fold a zero constant Pad into the following Conv or AveragePool",
       MakeFusePad},
  };
  return kPasses;
}

namespace {

std::set<std::string> DefinedNames(const ir::Graph& g) {
  std::set<std::string> s;
  for (const auto& v : g.inputs) s.insert(v.name);
  for (const auto& i : g.initializers) s.insert(i.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) s.insert(o);
  return s;
}

// Runs `pass` on `g` and, recursively, on every subgraph of its nodes.
Result<int> RunEverywhere(Pass& pass, ir::Graph& g, const ir::Model& m, int64_t opset,
                          const PassOptions& po, bool is_main, const std::set<std::string>& outer,
                          std::vector<const ir::Graph*> parents) {
  GraphCtx ctx{g, m, opset, po, is_main, outer, BuildUseIndex(g), parents};
  FERRY_ASSIGN_OR_RETURN(int changes, pass.RunOnGraph(ctx));
  std::set<std::string> visible = outer;
  for (const auto& n : DefinedNames(g)) visible.insert(n);
  parents.push_back(&g);
  for (auto& n : g.nodes) {
    for (auto& a : n.attributes) {
      std::vector<ir::Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (auto& sg : a.graphs) subs.push_back(sg.get());
      for (ir::Graph* sg : subs) {
        FERRY_ASSIGN_OR_RETURN(int c,
                               RunEverywhere(pass, *sg, m, opset, po, false, visible, parents));
        changes += c;
      }
    }
  }
  return changes;
}

void Tidy(ir::Graph& g, const std::set<std::string>& outer) {
  TopoSort(g, outer);
  std::set<std::string> defined = DefinedNames(g);
  std::erase_if(g.value_info, [&](const ir::ValueInfo& v) { return !defined.count(v.name); });
  std::set<std::string> visible = outer;
  for (const auto& n : defined) visible.insert(n);
  for (auto& n : g.nodes)
    for (auto& a : n.attributes) {
      if (a.g) Tidy(*a.g, visible);
      for (auto& sg : a.graphs) Tidy(*sg, visible);
    }
}

}  // namespace

Result<std::vector<PassReport>> Optimize(ir::Model& model, const OptimizeOptions& options) {
  const auto& table = AllPasses();
  auto known = [&](const std::string& n) {
    return n == "shape_inference" ||
           std::any_of(table.begin(), table.end(), [&](const PassInfo& p) { return n == p.name; });
  };
  for (const auto& n : options.only)
    if (!known(n)) return UsageError("unknown pass '{}' in --passes", n);
  for (const auto& n : options.skip)
    if (!known(n)) return UsageError("unknown pass '{}' in --skip", n);
  if (options.level != "basic" && options.level != "all")
    return UsageError("unknown level '{}' (expected basic or all)", options.level);

  auto selected = [&](const std::string& name, const std::string& level) {
    if (options.skip.count(name)) return false;
    if (!options.only.empty())
      return std::find(options.only.begin(), options.only.end(), name) != options.only.end();
    return options.level == "all" || level == "basic";
  };
  int64_t opset = model.OpsetFor("").value_or(0);
  std::vector<PassReport> reports;
  // Shape inference once up front: later passes read value_info shapes.
  if (selected("shape_inference", "basic")) {
    auto si = MakeShapeInference();
    GraphCtx ctx{model.graph, model, opset, options.pass, true, {}, BuildUseIndex(model.graph)};
    FERRY_ASSIGN_OR_RETURN(int c, si->RunOnGraph(ctx));
    reports.push_back({"shape_inference", c});
  }
  std::vector<std::pair<std::unique_ptr<Pass>, size_t>> passes;
  for (const auto& p : table) {
    if (!selected(p.name, p.level)) continue;
    passes.emplace_back(p.make(), reports.size());
    reports.push_back({p.name, 0});
  }
  bool fixed_point = false;
  std::vector<std::string> still_changing;
  for (int round = 0; round < options.max_rounds && !fixed_point; ++round) {
    still_changing.clear();
    for (auto& [pass, slot] : passes) {
      auto r = RunEverywhere(*pass, model.graph, model, opset, options.pass, true, {}, {});
      if (!r.ok()) return r.status().With("pass " + std::string(pass->name()));
      reports[slot].changes += r.value();
      if (r.value() > 0)
        still_changing.push_back(fmt::format("{} ({} rewrites)", pass->name(), r.value()));
    }
    fixed_point = still_changing.empty();
  }
  if (!fixed_point && !passes.empty()) {
    std::string names;
    for (const auto& n : still_changing) names += (names.empty() ? "" : ", ") + n;
    return InvalidError(
        "the passes found no fixed point in {} rounds: still rewriting the graph in the last "
        "round: {}",
        options.max_rounds, names);
  }
  Tidy(model.graph, {});
  return reports;
}

Status FixInputShape(ir::Model& model, const std::string& input, const Shape& dims) {
  for (auto& vi : model.graph.inputs) {
    if (vi.name != input) continue;
    if (model.graph.IsInitializer(input))
      return UsageError("--fix-shape {}: this input is backed by an initializer", input);
    if (vi.type.kind != ir::TypeInfo::Kind::kTensor)
      return UsageError("--fix-shape {}: input is not a tensor", input);
    if (vi.type.shape && vi.type.shape->size() != dims.size())
      return UsageError("--fix-shape {}: input has rank {}, got {} dims", input,
                        vi.type.shape->size(), dims.size());
    std::vector<ir::Dim> fixed;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0) return UsageError("--fix-shape {}: negative dim {}", input, dims[i]);
      if (vi.type.shape && (*vi.type.shape)[i].value && *(*vi.type.shape)[i].value != dims[i])
        return UsageError("--fix-shape {}: dim {} is fixed at {} in the model, got {}", input, i,
                          *(*vi.type.shape)[i].value, dims[i]);
      fixed.push_back(ir::Dim{dims[i], ""});
    }
    vi.type.shape = std::move(fixed);
    return Status::Ok();
  }
  return UsageError("--fix-shape {}: the model has no input of that name", input);
}

}  // namespace ferry::passes
