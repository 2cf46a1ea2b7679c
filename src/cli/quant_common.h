// What `calibrate` and `quantize` share on the command line: the --batch flag and progress on
// a terminal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ferry::cli {

// --batch: "auto" -> 0 (quant::CalibrateOptions::batch's auto rule), N >= 1 -> N; kUsage
// otherwise.
Result<int64_t> ParseBatch(const std::string& text);

// "\r<stage>: i/n" on a terminal stderr (a ferry::ProgressFn).
void Progress(std::string_view stage, size_t i, size_t n);

}  // namespace ferry::cli
