// Runs graph passes to a fixed point over the main graph and every subgraph, then restores
// topological order and drops value_info of values that no longer exist.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "passes/pass.h"

namespace ferry::passes {

struct PassInfo {
  const char* name;
  const char* level;  // "basic" or "all"
  const char* what;
  std::unique_ptr<Pass> (*make)();
};
// Every pass, in the order the manager runs them.
const std::vector<PassInfo>& AllPasses();

struct OptimizeOptions {
  std::string level = "all";      // "basic" or "all"
  std::vector<std::string> only;  // run exactly these (in table order); empty = by level
  std::set<std::string> skip;
  PassOptions pass;
  // Rounds of every pass until a round changes nothing (the fixed point). Passes that still
  // rewrite the graph in the last round undo each other: kInvalid naming them.
  int max_rounds = 32;
};

struct PassReport {
  std::string name;
  int changes = 0;
};

// Validates pass names (kUsage naming an unknown pass) and runs the passes to their fixed point.
// Returns how many rewrites each pass made, in table order; kInvalid when no fixed point is
// reached in `max_rounds` rounds.
Result<std::vector<PassReport>> Optimize(ir::Model& model, const OptimizeOptions& options);

// Fixes the named graph inputs' shapes (`dims` must match the declared rank and any known
// dims); errors name the input. Other dynamic axes stay dynamic.
Status FixInputShape(ir::Model& model, const std::string& input, const Shape& dims);

}  // namespace ferry::passes
