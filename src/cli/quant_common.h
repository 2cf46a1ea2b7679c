// What `calibrate` and `quantize` share: the activation-type flag and sample loading.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "verify/golden.h"

namespace ferry::cli {

// "u8" / "uint8" -> kUint8, "s8" / "int8" -> kInt8; kUsage otherwise.
Result<DType> ParseActivationType(const std::string& text);

// --batch: "auto" -> 0 (quant::CalibrateOptions::batch's auto rule), N >= 1 -> N; kUsage
// otherwise.
Result<int64_t> ParseBatch(const std::string& text);

// The sets of `dir` (verify::LoadDataSets: test-data layout or one .npy per input) as they are
// (a set may hold many samples); `flag` names the option in errors.
Result<std::vector<verify::DataSet>> LoadSets(const std::string& dir, const std::string& flag,
                                              const ir::Graph& graph);

// The sets of `dir` (verify::LoadDataSets: test-data layout or one .npy per input), cut into
// runs of at most `batch` samples along the first axis; at most `max_samples` (0: all).
// `flag` names the option in errors.
Result<std::vector<verify::DataSet>> LoadSamples(const std::string& dir, const std::string& flag,
                                                 const ir::Graph& graph, int64_t batch,
                                                 int64_t max_samples, int64_t* samples);

// "\r<role>: i/n" on a terminal stderr.
void Progress(const std::string& role, size_t i, size_t n);

}  // namespace ferry::cli
