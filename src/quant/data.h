// Calibration and evaluation data as a stream of samples: the sets verify::LoadDataSets reads,
// cut along the first axis into batches.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "verify/golden.h"

namespace ferry::quant {

// Cuts every set whose inputs all have the same first dimension N (and whose graph inputs
// declare that dimension symbolic or unknown) into sets of at most `batch` rows, in order
// ("x.npy[0:32]"). Keeps the first `max_samples` rows overall (0: all). `samples` receives the
// number of rows kept (a set that cannot be cut counts as its first dimension, or 1).
std::vector<verify::DataSet> SplitSamples(std::vector<verify::DataSet> sets, const ir::Graph& graph,
                                          int64_t batch, int64_t max_samples, int64_t* samples);

// N when every input of `set` is a non-string tensor of rank >= 1 with first dimension N and
// the graph declares that dimension symbolic or unknown (the set can be cut into samples); -1
// otherwise.
int64_t SplittableRows(const verify::DataSet& set, const ir::Graph& graph);

// Cuts `sets` into runs as SplitSamples does, one run at a time: fn(part, rows) for each, in
// order, where `part` is the whole set (moved out) when one run covers it, else a copy of its
// rows. `batch()` is asked before each cut (so a caller may size later runs by earlier ones;
// values below 1 count as 1). A set's inputs are released once its last run is done. Stops at
// the first error fn returns, and after `max_samples` samples (0: all).
Status ForEachRun(std::vector<verify::DataSet>& sets, const ir::Graph& graph, int64_t max_samples,
                  const std::function<int64_t()>& batch,
                  const std::function<Status(verify::DataSet part, int64_t rows)>& fn);

// Rows [begin, end) of every input of `set` (copies), named "set[begin:end]".
verify::DataSet SliceSet(const verify::DataSet& set, int64_t begin, int64_t end);

// Rows [begin, end) of `t` along axis 0 (a copy). Not for strings.
Tensor SliceRows(const Tensor& t, int64_t begin, int64_t end);

// The sets of `dir` (ir::LoadDataSets with ir::FileReaders: test-data layout or one .npy per
// input) as they are (a set may hold many samples); errors are prefixed with `flag` (the option
// that named the folder, e.g. "--calibration").
Result<std::vector<verify::DataSet>> LoadSets(const std::string& dir, const std::string& flag,
                                              const ir::Graph& graph);

// LoadSets, cut into runs of at most `batch` samples along the first axis (SplitSamples); at
// most `max_samples` (0: all); `samples` receives the number kept.
Result<std::vector<verify::DataSet>> LoadSamples(const std::string& dir, const std::string& flag,
                                                 const ir::Graph& graph, int64_t batch,
                                                 int64_t max_samples, int64_t* samples);

// Class ids from a .npy of integers (`--labels`); kInvalid naming the file otherwise.
Result<std::vector<int64_t>> LoadLabels(const std::string& path);

}  // namespace ferry::quant
