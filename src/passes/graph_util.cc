#include "passes/graph_util.h"

#include <algorithm>
#include <queue>

namespace ferry::passes {

namespace {

void Defined(const ir::Graph& g, std::set<std::string>* out) {
  for (const auto& v : g.inputs) out->insert(v.name);
  for (const auto& i : g.initializers) out->insert(i.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) out->insert(o);
}

template <typename Fn>
void ForEachSubgraph(const ir::Node& n, Fn fn) {
  for (const auto& a : n.attributes) {
    if (a.g) fn(*a.g);
    for (const auto& sg : a.graphs) fn(*sg);
  }
}

template <typename Fn>
void ForEachMutableSubgraph(ir::Node& n, Fn fn) {
  for (auto& a : n.attributes) {
    if (a.g) fn(*a.g);
    for (auto& sg : a.graphs) fn(*sg);
  }
}

}  // namespace

std::set<std::string> OuterReads(const ir::Graph& g) {
  std::set<std::string> defined, out;
  Defined(g, &defined);
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name)) out.insert(name);
  };
  for (const auto& n : g.nodes) {
    for (const auto& i : n.inputs) read(i);
    ForEachSubgraph(n, [&](const ir::Graph& sg) {
      for (const auto& name : OuterReads(sg)) read(name);
    });
  }
  for (const auto& o : g.outputs) read(o.name);
  return out;
}

UseIndex BuildUseIndex(const ir::Graph& g) {
  UseIndex idx;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    for (const auto& o : n.outputs)
      if (!o.empty()) idx.producer[o] = i;
    std::set<std::string> reads;
    for (const auto& in : n.inputs)
      if (!in.empty()) reads.insert(in);
    ForEachSubgraph(n, [&](const ir::Graph& sg) {
      for (const auto& name : OuterReads(sg)) reads.insert(name);
    });
    for (const auto& r : reads) idx.readers[r].push_back(i);
  }
  for (const auto& o : g.outputs) idx.graph_outputs.insert(o.name);
  return idx;
}

void RenameReads(ir::Graph& g, const std::string& from, const std::string& to) {
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs)
      if (in == from) in = to;
    ForEachMutableSubgraph(n, [&](ir::Graph& sg) {
      std::set<std::string> defined;
      Defined(sg, &defined);
      if (!defined.count(from)) {
        RenameReads(sg, from, to);
        // A subgraph output may name an outer value directly.
        for (auto& o : sg.outputs)
          if (o.name == from) o.name = to;
      }
    });
  }
}

const Tensor* ConstantOf(const ir::Graph& g, const std::string& name) {
  const ir::Initializer* i = g.FindInitializer(name);
  return i ? &i->tensor : nullptr;
}

ir::Initializer* MutableInitializer(ir::Graph& g, const std::string& name) {
  for (auto& i : g.initializers)
    if (i.name == name) return &i;
  return nullptr;
}

std::string FreshName(const ir::Graph& g, const std::string& base) {
  std::set<std::string> used;
  Defined(g, &used);
  for (const auto& o : g.outputs) used.insert(o.name);
  for (const auto& v : g.value_info) used.insert(v.name);
  if (!used.count(base)) return base;
  for (int k = 1;; ++k) {
    std::string s = base + "_" + std::to_string(k);
    if (!used.count(s)) return s;
  }
}

void TopoSort(ir::Graph& g, const std::set<std::string>& outer) {
  const size_t n = g.nodes.size();
  std::set<std::string> avail = outer;
  for (const auto& v : g.inputs) avail.insert(v.name);
  for (const auto& i : g.initializers) avail.insert(i.name);
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < n; ++i)
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  // Dependencies: node inputs and outer-scope reads of its subgraphs produced by another node.
  std::vector<std::vector<size_t>> users(n);
  std::vector<size_t> pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::set<std::string> reads;
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) reads.insert(in);
    ForEachSubgraph(g.nodes[i], [&](const ir::Graph& sg) {
      for (const auto& r : OuterReads(sg)) reads.insert(r);
    });
    std::set<size_t> deps;
    for (const auto& r : reads) {
      auto it = producer.find(r);
      if (it != producer.end() && it->second != i && !avail.count(r)) deps.insert(it->second);
    }
    pending[i] = deps.size();
    for (size_t d : deps) users[d].push_back(i);
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (order.size() != n) return;  // a cycle: leave the order alone (the session reports it)
  std::vector<ir::Node> sorted;
  sorted.reserve(n);
  for (size_t i : order) sorted.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(sorted);
}

std::optional<Shape> StaticShape(const ir::Graph& g, const std::string& name) {
  if (const Tensor* t = ConstantOf(g, name)) return t->shape();
  auto from = [&](const std::vector<ir::ValueInfo>& list) -> std::optional<Shape> {
    for (const auto& v : list) {
      if (v.name != name) continue;
      if (v.type.kind != ir::TypeInfo::Kind::kTensor || !v.type.shape) return std::nullopt;
      Shape s;
      for (const auto& d : *v.type.shape) {
        if (!d.value) return std::nullopt;
        s.push_back(*d.value);
      }
      return s;
    }
    return std::nullopt;
  };
  for (const auto* list : {&g.inputs, &g.value_info, &g.outputs})
    if (auto s = from(*list)) return s;
  return std::nullopt;
}

std::optional<std::vector<std::optional<int64_t>>> PartialShape(const ir::Graph& g,
                                                                const std::string& name) {
  if (const Tensor* t = ConstantOf(g, name)) {
    std::vector<std::optional<int64_t>> dims(t->shape().begin(), t->shape().end());
    return dims;
  }
  for (const auto* list : {&g.inputs, &g.value_info, &g.outputs})
    for (const auto& v : *list) {
      if (v.name != name) continue;
      if (v.type.kind != ir::TypeInfo::Kind::kTensor || !v.type.shape) return std::nullopt;
      std::vector<std::optional<int64_t>> dims;
      for (const auto& d : *v.type.shape) dims.push_back(d.value);
      return dims;
    }
  return std::nullopt;
}

DType KnownType(const ir::Graph& g, const std::string& name) {
  if (const Tensor* t = ConstantOf(g, name)) return t->dtype();
  for (const auto* list : {&g.inputs, &g.value_info, &g.outputs})
    for (const auto& v : *list)
      if (v.name == name && v.type.kind == ir::TypeInfo::Kind::kTensor) return v.type.elem_type;
  return DType::kUndefined;
}

std::optional<std::vector<float>> FloatValues(const Tensor& t) {
  if (t.dtype() != DType::kFloat) return std::nullopt;
  auto s = t.span<float>();
  return std::vector<float>(s.begin(), s.end());
}

bool AllEqual(const Tensor& t, double v) {
  if (t.dtype() == DType::kString || !t.defined()) return false;
  for (int64_t i = 0; i < t.size(); ++i)
    if (t.GetAsDouble(i) != v) return false;
  return true;
}

}  // namespace ferry::passes
