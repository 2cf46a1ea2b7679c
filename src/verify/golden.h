// Golden sets: generating seeded input sets for `ferry golden capture`, written in the ONNX
// test-data layout (test_data_set_N/input_K.pb, output_K.pb); reading sets back is
// ir/data_sets.h (re-exported here under verify's names).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/data_sets.h"
#include "ir/graph.h"

namespace ferry::verify {

// Data sets moved to ir/data_sets.h (passes' equivalence check reads them too); verify keeps
// its names for them.
using NamedValues = ir::NamedValues;
using DataSet = ir::DataSet;
using DataReaders = ir::DataReaders;
using ir::FileReaders;
using ir::LoadDataSets;

// ---- golden capture ----

struct CaptureOptions {
  int count = 4;  // random sets, before the edge cases
  uint64_t seed = 0;
  std::map<std::string, Shape> shapes;                      // --shape NAME=DIMS
  std::map<std::string, std::pair<double, double>> ranges;  // --range NAME=LO,HI
  int64_t default_dim = 16;                                 // other symbolic dims
};

// What to generate for one input.
struct InputPlan {
  std::string name;
  DType dtype = DType::kFloat;
  std::vector<ir::Dim> dims;  // declared dims (symbolic ones resolved per set)
  bool has_range = false;     // integers (and floats with --range): uniform in [lo, hi]
  double lo = 0, hi = 0;
  bool mask = false;  // named like an attention mask: ones
};

struct CapturePlan {
  std::vector<InputPlan> inputs;
  std::map<std::string, int64_t> symbols;  // symbolic dim -> value for the random sets
  std::vector<std::string> seq_symbols;    // symbolic non-batch dims not fixed by --shape
  std::vector<std::string> notes;          // defaults chosen, to tell the user
};

// Resolves shapes and value ranges: --shape wins; a symbolic leading dim is 1, other symbolic
// dims `default_dim`; integer inputs feeding a Gather's indices (directly or through
// Cast/Reshape/Squeeze/Unsqueeze/Flatten/Identity) draw from the table's rows. Errors:
// kUsage for a --shape/--range naming no input or a --shape of the wrong rank, kUnsupported
// for string inputs, kInvalid for unknown rank without --shape.
Result<CapturePlan> PlanCapture(const ir::Graph& graph, const CaptureOptions& options);

// One generated set: `kind` is "random", "zeros", "large", "shortest" or "longest".
struct GeneratedSet {
  std::string kind;
  NamedValues inputs;
};
// Set `index` (seeded by options.seed and index) of kind `kind`; `seq_len` overrides the
// sequence symbols (0: the plan's values).
GeneratedSet GenerateSet(const CapturePlan& plan, const CaptureOptions& options, int index,
                         const std::string& kind, int64_t seq_len);

// Writes sets (inputs and outputs by name, in graph order) to `dir` in the test-data layout
// plus `golden.json` (`manifest`), via a temp folder renamed into place. An existing `dir` is
// refused (kInvalid) unless `force`, in which case it is replaced only after the new one is
// complete.
struct CapturedSet {
  std::string kind;
  NamedValues inputs, outputs;
};
Status WriteGoldenDir(const std::string& dir, const std::vector<CapturedSet>& sets,
                      const std::string& manifest, bool force);

}  // namespace ferry::verify
