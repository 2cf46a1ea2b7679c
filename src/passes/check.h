// Numeric equivalence of two models on seeded inputs: how `ferry optimize --check` (and later
// convert) proves a rewrite kept every output.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace ferry::passes {

struct CheckOptions {
  int count = 3;  // input sets
  uint64_t seed = 0;
  double rtol = 1e-5, atol = 1e-6;
  std::map<std::string, Shape> shapes;  // for symbolic input dims (default: 1 for each)
};

// Per output, over all input sets.
struct OutputStats {
  std::string name;
  double max_abs = 0;
  double cosine = 1;                       // of the flattened outputs, all sets together
  int64_t candidate_nonfinite = 0;         // NaN/Inf in the candidate where the reference is finite
  int64_t top1_total = 0, top1_agree = 0;  // rank-2 [N, C>1] float outputs
};

struct CheckResult {
  bool ok = true;
  std::vector<OutputStats> outputs;
  std::string first_failure;  // "output 'logits' set 2: max abs 3.1e-3 at [0, 17] (…)"
  double max_abs = 0;         // over all outputs and sets
};

// Runs `reference` and `candidate` on the same seeded inputs and compares every output
// (same names and shapes; NaN must match NaN). Float inputs and outputs of other float types in
// the candidate (an fp16 model) are converted, and compared as float. kInvalid when a model
// cannot run.
Result<CheckResult> CheckEquivalent(const ir::Model& reference, const ir::Model& candidate,
                                    const CheckOptions& options);

}  // namespace ferry::passes
