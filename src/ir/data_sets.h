// Input sets (and expected outputs) on disk, for every verb that feeds a model real data
// (verify, golden, calibrate, quantize --eval, the equivalence check of optimize / convert /
// quantize, bench): the ONNX test-data layout (test_data_set_N/input_K.pb, output_K.pb) or one
// .npy per input.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ferry::ir {

using NamedValues = std::vector<std::pair<std::string, Value>>;

struct DataSet {
  std::string name;      // "test_data_set_0", or "x.npy[3]" for a set sliced from a batch
  NamedValues inputs;    // by graph input name
  NamedValues expected;  // by graph output name (golden data only)
};

// How files are read (.npy or .pb by content) and how an input name maps to its .npy file name.
struct DataReaders {
  std::function<Result<Value>(const std::string& path, const TypeInfo& type)> read;
  std::function<std::string(const std::string& name)> file_name;
};
// ReadInputFile and SanitizeFileName (ir/value_files.h).
DataReaders FileReaders();

// Loads every input set of `dir` for `graph`'s real inputs:
//  - test-data layout: test_data_set_*/input_K.pb (or `dir` itself holding input_K.pb); a
//    TensorProto's name selects the input, else its position does; with `want_outputs`,
//    output_K.pb are read as the expected outputs (by TensorProto name, else position);
//  - one .npy per input, named after the input (`file_name(name)` or `name`.npy); a file whose
//    rank is one more than the input's declared rank holds a leading batch of sets.
// Errors (kInvalid) name the folder or file: missing folder, no sets, a missing input, sets
// of different counts, wrong expected-output count.
Result<std::vector<DataSet>> LoadDataSets(const std::string& dir, const Graph& graph,
                                          const DataReaders& readers, bool want_outputs);
// The same with FileReaders().
Result<std::vector<DataSet>> LoadDataSets(const std::string& dir, const Graph& graph,
                                          bool want_outputs);

// Files of `dir` named `prefix<N>...` (N digits), ordered by N.
std::vector<std::string> ListNumbered(const std::string& dir, const std::string& prefix);

}  // namespace ferry::ir
