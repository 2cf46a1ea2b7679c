// Golden sets: reading input sets (and expected outputs) from a folder, and generating seeded
// input sets for `ferry golden capture`, written in the ONNX test-data layout
// (test_data_set_N/input_K.pb, output_K.pb).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ferry::verify {

using NamedValues = std::vector<std::pair<std::string, Value>>;

struct DataSet {
  std::string name;      // "test_data_set_0", or "x.npy[3]" for a set sliced from a batch
  NamedValues inputs;    // by graph input name
  NamedValues expected;  // by graph output name (golden data only)
};

// How the caller reads files (the CLI's ReadInputFile: .npy or .pb by content) and maps an input
// name to its .npy file name.
struct DataReaders {
  std::function<Result<Value>(const std::string& path, const ir::TypeInfo& type)> read;
  std::function<std::string(const std::string& name)> file_name;
};

// Loads every input set of `dir` for `graph`'s real inputs:
//  - test-data layout: test_data_set_*/input_K.pb (or `dir` itself holding input_K.pb); a
//    TensorProto's name selects the input, else its position does; with `want_outputs`,
//    output_K.pb are read as the expected outputs (by TensorProto name, else position);
//  - one .npy per input, named after the input (`file_name(name)` or `name`.npy); a file whose
//    rank is one more than the input's declared rank holds a leading batch of sets.
// Errors (kInvalid) name the folder or file: missing folder, no sets, a missing input, sets
// of different counts, wrong expected-output count.
Result<std::vector<DataSet>> LoadDataSets(const std::string& dir, const ir::Graph& graph,
                                          const DataReaders& readers, bool want_outputs);

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
