// Numeric equivalence of two models on the same inputs: how `ferry optimize`, `ferry convert`
// (and `ferry quantize --check`) prove a rewrite kept every output. The inputs are seeded
// random sets, or the sets of a data folder (`--check-data`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace ferry::passes {

// The most iterations a Loop node may run in the equivalence check.
inline constexpr int64_t kCheckMaxLoopIterations = 100'000;

struct CheckOptions {
  int count = 3;  // seeded input sets (ignored with `data`)
  uint64_t seed = 0;
  // An element passes when |x - y| <= atol + rtol |x| + scale_rtol max|x| (max over the
  // output's finite reference values): the last term is the rounding floor of a rewrite that
  // folds weights (BatchNorm, affine) through a deep network, which scales with the output's
  // range, not with each element — on real models (tests/models/real, their own inputs) up to
  // 9.3e-5 on sigmoid / softmax outputs (PP-OCRv4's detector), where ONNX Runtime's own
  // optimizer differs from its unoptimised run by more (3.6e-4). 1e-4 is issue 20's bar for
  // agreeing with ONNX Runtime; 0 gives Polygraphy's element-wise rule.
  double rtol = 1e-5, atol = 1e-6, scale_rtol = 1e-4;
  // Dims of the seeded inputs (--shape); a symbolic dim fixed here takes that size in every
  // input. Other dynamic dims: what the graph needs (seed_dims.h), else 1.
  std::map<std::string, Shape> shapes;
  // A folder of input sets (ir::LoadDataSets: test-data layout or one .npy per input) to run
  // instead of seeded inputs; every set is run.
  std::string data;
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
  int sets = 0;               // input sets run
  std::string data;           // the folder the sets came from ("" : seeded)
  std::map<std::string, Shape> seeded_shapes;  // seeded: the dims fed
  std::vector<std::string> notes;              // seeded: dims other than 1 and why
};

// Runs `reference` and `candidate` on the same inputs and compares every output (same names
// and shapes; NaN must match NaN). Float inputs and outputs of other float types in the
// candidate (an fp16 model) are converted, and compared as float. Errors: the data folder's;
// when the reference cannot run on the seeded inputs, the error names the inputs and the dims
// fed, the node (the engine's message) and suggests --shape and --check-data; kUnsupported for
// inputs the check cannot generate.
Result<CheckResult> CheckEquivalent(const ir::Model& reference, const ir::Model& candidate,
                                    const CheckOptions& options);

}  // namespace ferry::passes
