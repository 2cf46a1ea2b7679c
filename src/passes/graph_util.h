// Helpers the graph passes share: who produces and who reads each value, renaming a value
// everywhere it is read (nested subgraphs included), constant lookup, topological order.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace ferry::passes {

// Names a subgraph reads from enclosing scopes, recursively.
std::set<std::string> OuterReads(const ir::Graph& g);

// Producers and readers of every value of one graph. A value read inside a node's subgraph
// (an outer-scope reference) counts as read by that node.
struct UseIndex {
  std::unordered_map<std::string, size_t> producer;
  std::unordered_map<std::string, std::vector<size_t>> readers;
  std::set<std::string> graph_outputs;

  size_t NumReaders(const std::string& name) const {
    auto it = readers.find(name);
    return it == readers.end() ? 0 : it->second.size();
  }
  // Read by exactly one node and not a graph output.
  bool SingleUse(const std::string& name) const {
    return NumReaders(name) == 1 && !graph_outputs.count(name);
  }
  std::optional<size_t> Producer(const std::string& name) const {
    auto it = producer.find(name);
    if (it == producer.end()) return std::nullopt;
    return it->second;
  }
};
UseIndex BuildUseIndex(const ir::Graph& g);

// Replaces every read of `from` by `to` in `g`'s nodes and nested subgraphs (unless a subgraph
// defines `from` itself). Graph outputs are not renamed.
void RenameReads(ir::Graph& g, const std::string& from, const std::string& to);

// The initializer's tensor, or null.
const Tensor* ConstantOf(const ir::Graph& g, const std::string& name);
ir::Initializer* MutableInitializer(ir::Graph& g, const std::string& name);

// A name not used by any value, input, output or initializer of `g` ("base", "base_1"...).
std::string FreshName(const ir::Graph& g, const std::string& base);

// Orders nodes topologically, keeping the current order where it is already valid. Values
// defined by inputs, initializers and `outer` are available from the start.
void TopoSort(ir::Graph& g, const std::set<std::string>& outer = {});

// Known static shape of a value from the graph's inputs, value_info, outputs or initializers.
std::optional<Shape> StaticShape(const ir::Graph& g, const std::string& name);
// Per-dim known sizes of a value (nullopt dims are symbolic/unknown); nullopt if the rank is
// unknown.
std::optional<std::vector<std::optional<int64_t>>> PartialShape(const ir::Graph& g,
                                                                const std::string& name);
// Known element type of a value (DType::kUndefined if unknown).
DType KnownType(const ir::Graph& g, const std::string& name);

// Float tensor values as float (for folding weights); nullopt for other dtypes.
std::optional<std::vector<float>> FloatValues(const Tensor& t);
// Whether every element of a numeric tensor equals `v`.
bool AllEqual(const Tensor& t, double v);

}  // namespace ferry::passes
