#include "ir/queries.h"

#include <set>
#include <vector>

namespace ferry::ir {

namespace {

bool Passthrough(const std::string& op) {
  return op == "Cast" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" ||
         op == "Flatten" || op == "Identity";
}

}  // namespace

int64_t EmbeddingRows(const Graph& g, const std::string& input, std::string* table) {
  int64_t rows = 0;
  std::vector<std::string> frontier{input};
  std::set<std::string> seen{input};
  while (!frontier.empty()) {
    std::string cur = frontier.back();
    frontier.pop_back();
    for (const auto& n : g.nodes) {
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] != cur) continue;
        if (n.op_type == "Gather" && n.domain.empty() && i == 1) {
          const Initializer* init = g.FindInitializer(n.inputs[0]);
          if (!init || init->tensor.rank() < 1) continue;
          int64_t axis = n.attr_int("axis", 0);
          if (axis < 0) axis += init->tensor.rank();
          if (axis < 0 || axis >= init->tensor.rank()) continue;
          int64_t r = init->tensor.dim(axis);
          if (r > 0 && (rows == 0 || r < rows)) {
            rows = r;
            if (table) *table = n.inputs[0];
          }
        } else if (Passthrough(n.op_type) && n.domain.empty() && i == 0 && !n.outputs.empty() &&
                   seen.insert(n.outputs[0]).second) {
          frontier.push_back(n.outputs[0]);
        }
      }
    }
  }
  return rows;
}

}  // namespace ferry::ir
