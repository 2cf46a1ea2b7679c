// GraphExecutor::Build: the checks and the plan every run of a graph follows — topological
// order (any listed order is accepted), every read produced, every op resolved at the model's
// opset, subgraph executors, liveness (the step after which each value is freed) and views;
// then the cpu provider's plan (cpu_plan.cc).
#include <algorithm>
#include <set>

#include "ops/registry.h"
#include "runtime/executor.h"

namespace ferry::runtime {

bool ReadsOnlyShape(const ir::Node& n) {
  return (n.op_type == "Shape" || n.op_type == "Size") && n.domain.empty();
}

void CollectFreeNames(const ir::Graph& g, std::set<std::string>* out) {
  std::set<std::string> defined;
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& i : g.initializers) defined.insert(i.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) defined.insert(o);
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name)) out->insert(name);
  };
  for (const auto& n : g.nodes) {
    for (const auto& i : n.inputs) read(i);
    for (const auto& a : n.attributes) {
      std::set<std::string> inner;
      if (a.g) CollectFreeNames(*a.g, &inner);
      for (const auto& sg : a.graphs) CollectFreeNames(*sg, &inner);
      for (const auto& name : inner) read(name);
    }
  }
  for (const auto& o : g.outputs) read(o.name);
}

namespace {

// Kahn's algorithm, stable in listed order; an error names a node of a cycle.
Result<std::vector<size_t>> TopologicalOrder(
    const ir::Graph& g, const std::vector<std::vector<std::string>>& reads,
    const std::unordered_map<std::string, size_t>& producer) {
  const size_t n = g.nodes.size();
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<size_t>> users(n);
  for (size_t k = 0; k < n; ++k) {
    std::set<size_t> deps;
    for (const auto& r : reads[k]) {
      auto it = producer.find(r);
      if (it != producer.end()) deps.insert(it->second);
    }
    for (size_t d : deps) {
      if (d == k) return InvalidError("{}: reads its own output", g.nodes[k].Describe());
      users[d].push_back(k);
      ++indeg[k];
    }
  }
  std::vector<size_t> order;
  std::set<size_t> ready;
  for (size_t k = 0; k < n; ++k)
    if (indeg[k] == 0) ready.insert(k);
  while (!ready.empty()) {
    size_t k = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(k);
    for (size_t u : users[k])
      if (--indeg[u] == 0) ready.insert(u);
  }
  if (order.size() != n)
    for (size_t k = 0; k < n; ++k)
      if (indeg[k] > 0) return InvalidError("{}: is part of a cycle", g.nodes[k].Describe());
  return order;
}

bool IsDefaultDomain(const ir::Node& n) {
  return n.domain.empty() || n.domain == "ai.onnx";
}

}  // namespace

Status GraphExecutor::Build(const std::set<std::string>& outer, const ConstValues& outer_const) {
  outer_const_ = outer_const;
  std::set<std::string> visible = outer;
  for (const auto& v : graph_.inputs) {
    input_ids_.push_back(Intern(v.name));
    visible.insert(v.name);
  }
  for (const auto& init : graph_.initializers) {
    constants_.emplace_back(Intern(init.name), Value(init.tensor));
    visible.insert(init.name);
  }
  // Which node produces each name.
  std::unordered_map<std::string, size_t> producer;
  for (size_t k = 0; k < graph_.nodes.size(); ++k) {
    // Every ONNX operator has an output; kernels declare output 0 without asking.
    if (graph_.nodes[k].outputs.empty())
      return InvalidError("{}: has no outputs", graph_.nodes[k].Describe());
    for (const auto& o : graph_.nodes[k].outputs)
      if (!o.empty()) {
        if (producer.count(o) || (visible.count(o) && !outer.count(o)))
          return InvalidError("{}: output '{}' is produced more than once",
                              graph_.nodes[k].Describe(), o);
        producer[o] = k;
      }
  }
  // Dependencies per node (explicit inputs + outer-scope names its subgraphs read).
  std::vector<std::vector<std::string>> reads(graph_.nodes.size());
  for (size_t k = 0; k < graph_.nodes.size(); ++k) {
    const ir::Node& n = graph_.nodes[k];
    for (const auto& i : n.inputs)
      if (!i.empty()) reads[k].push_back(i);
    for (const auto& a : n.attributes) {
      std::set<std::string> inner;
      if (a.g) CollectFreeNames(*a.g, &inner);
      for (const auto& sg : a.graphs) CollectFreeNames(*sg, &inner);
      for (const auto& name : inner) reads[k].push_back(name);
    }
    for (const auto& r : reads[k])
      if (!producer.count(r) && !visible.count(r))
        return InvalidError(
            "{}: reads tensor '{}', which no node, graph input or initializer produces",
            n.Describe(), r);
  }
  FERRY_ASSIGN_OR_RETURN(std::vector<size_t> order, TopologicalOrder(graph_, reads, producer));
  FERRY_RETURN_IF_ERROR(BuildSteps(order));
  for (const auto& o : graph_.outputs) {
    if (!producer.count(o.name) && !visible.count(o.name))
      return InvalidError("graph output '{}' is not produced by any node, input or initializer",
                          o.name);
    output_ids_.push_back(Intern(o.name));
  }
  // Names read from enclosing scopes (here or in nested subgraphs) are copied in by name.
  {
    std::set<std::string> free;
    CollectFreeNames(graph_, &free);
    for (const auto& name : free) outer_.emplace_back(Intern(name), name);
  }
  PlanLiveness(reads);
  PlanCpu(reads);
  PlanPinned();
  // Subgraphs last: they may take this graph's constants, folded ones included.
  FERRY_RETURN_IF_ERROR(BuildSubgraphs(visible, producer));
  for (Step& st : steps_)
    for (auto& [name, sub] : st.subgraphs) sub->ResolveOuter(*this);
  return Status::Ok();
}

// Each step's subgraph executors (If/Loop/Scan bodies), built recursively: what a subgraph may
// read is this graph's names and the enclosing ones; what it may treat as constant are the
// enclosing constants, this graph's initializers and its Constant or folded steps' values.
Status GraphExecutor::BuildSubgraphs(const std::set<std::string>& visible,
                                     const std::unordered_map<std::string, size_t>& producer) {
  std::set<std::string> sub_visible;
  ConstValues sub_const;
  bool built = false;
  for (Step& st : steps_) {
    if (!st.has_subgraphs) continue;
    // Built once, on the first subgraph (a per-node copy made session build quadratic in
    // graph size).
    if (!built) {
      sub_visible = visible;
      for (const auto& [name, p] : producer) sub_visible.insert(name);
      sub_const = outer_const_;
      for (const auto& init : graph_.initializers) sub_const[init.name] = &init.tensor;
      for (const Step& cs : steps_)
        if (cs.constant && cs.outputs.size() == 1 && cs.outputs[0] >= 0)
          sub_const[names_[U(cs.outputs[0])]] = cs.constant;
      for (const auto& in : graph_.inputs) sub_const.erase(in.name);  // fed by the caller
      built = true;
    }
    const ir::Node& n = *st.node;
    for (const auto& a : n.attributes) {
      if (!a.g) continue;
      auto sub = std::make_unique<GraphExecutor>(*a.g, shared_);
      FERRY_RETURN_IF_ERROR(
          sub->Build(sub_visible, sub_const).With(n.Describe() + " attribute '" + a.name + "'"));
      st.subgraphs.emplace(a.name, std::move(sub));
    }
  }
  return Status::Ok();
}

// One Step per node in `order`: its op definition at the model's opset, the cpu kernel that
// takes it and its value ids (subgraphs: BuildSubgraphs).
Status GraphExecutor::BuildSteps(const std::vector<size_t>& order) {
  const auto& reg = ops::Registry::Get();
  const ir::Model& model = *shared_->model;
  for (size_t k : order) {
    const ir::Node& n = graph_.nodes[k];
    Step st;
    st.node = &n;
    auto opset = model.OpsetFor(n.domain);
    std::string dom = n.domain.empty() ? "ai.onnx" : n.domain;
    if (!opset)
      return Status(
          StatusCode::kUnsupported,
          fmt::format("{}: operator '{}' is in domain '{}', which the model does not import",
                      n.Describe(), n.op_type, dom));
    st.opset = *opset;
    st.def = reg.Find(n.domain, n.op_type, *opset);
    if (!st.def || !st.def->prepare || !st.def->run)
      return Status(StatusCode::kUnsupported,
                    fmt::format("{}: unsupported operator '{}' (domain '{}', opset {})",
                                n.Describe(), n.op_type, dom, *opset));
    if (shared_->cpu()) {
      st.cpu = ops::cpu::FindKernel(n, *opset);
      st.alias = n.op_type == "Identity" && IsDefaultDomain(n) && n.inputs.size() == 1 &&
                 !n.inputs[0].empty() && n.outputs.size() == 1 && !n.outputs[0].empty();
      if (n.op_type == "Constant" && IsDefaultDomain(n) && n.outputs.size() == 1 &&
          !n.outputs[0].empty()) {
        const ir::Attribute* a = n.attr("value");
        if (a && a->type == ir::AttrType::kTensor && a->t.owned()) st.constant = &a->t;
      }
      if (st.cpu) st.packs = std::make_unique<ops::cpu::PackCache>();
    }
    for (const auto& i : n.inputs) st.inputs.push_back(i.empty() ? -1 : Intern(i));
    for (const auto& o : n.outputs) st.outputs.push_back(o.empty() ? -1 : Intern(o));
    for (const auto& a : n.attributes) st.has_subgraphs = st.has_subgraphs || a.g != nullptr;
    steps_.push_back(std::move(st));
  }
  return Status::Ok();
}

// Liveness: the last step reading each value frees it (graph outputs are never freed). With
// the cpu provider, reshaping steps may make views: a view may share its input's tensor,
// which may itself be a view (or, when that step did not make a view at run time, its own
// tensor), so every value up a chain of view steps lives until the view's last reader.
void GraphExecutor::PlanLiveness(const std::vector<std::vector<std::string>>& reads) {
  is_output_.assign(names_.size(), false);
  for (int id : output_ids_) is_output_[U(id)] = true;
  std::vector<int> last(names_.size(), -1);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const ir::Node& n = *steps_[s].node;
    size_t k = static_cast<size_t>(&n - graph_.nodes.data());
    for (const auto& r : reads[k]) {
      auto it = ids_.find(r);
      if (it != ids_.end()) last[U(it->second)] = static_cast<int>(s);
    }
  }
  if (shared_->cpu()) {
    std::vector<int> view_of(names_.size(), -1);
    for (Step& st : steps_) {
      const ir::Node& n = *st.node;
      const bool op = n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" ||
                      n.op_type == "Unsqueeze" || n.op_type == "Identity" ||
                      n.op_type == "Transpose";  // a view when it moves only size-1 dims
      if (!op || !IsDefaultDomain(n) || st.inputs.empty() || st.inputs[0] < 0 ||
          st.outputs.size() != 1 || st.outputs[0] < 0 || is_output_[U(st.outputs[0])])
        continue;
      st.view = true;
      const size_t out = U(st.outputs[0]);
      view_of[out] = st.inputs[0];
      for (int v = st.inputs[0]; v >= 0; v = view_of[U(v)])
        if (last[U(v)] >= 0) last[U(v)] = std::max(last[U(v)], last[out]);
    }
  }
  for (size_t id = 0; id < names_.size(); ++id)
    if (last[id] >= 0 && !is_output_[id])
      steps_[static_cast<size_t>(last[id])].frees.push_back(static_cast<int>(id));
}

void GraphExecutor::PlanPinned() {
  pinned_.assign(names_.size(), false);
  std::vector<bool> fed(names_.size(), false);  // written by the caller at every run
  for (int id : input_ids_) fed[U(id)] = true;
  for (const auto& [id, name] : outer_) fed[U(id)] = true;
  for (const auto& [id, v] : constants_)
    if (!fed[U(id)] && !is_output_[U(id)]) pinned_[U(id)] = true;
  for (const Step& st : steps_)
    if (st.constant && st.outputs.size() == 1 && st.outputs[0] >= 0 &&
        !is_output_[U(st.outputs[0])] && !fed[U(st.outputs[0])])
      pinned_[U(st.outputs[0])] = true;
  for (Step& st : steps_) std::erase_if(st.frees, [&](int id) { return pinned_[U(id)]; });
}

}  // namespace ferry::runtime
