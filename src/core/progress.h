// How long library calls (calibration, evaluation, layer selection, verify's runs, benchmarks)
// report progress: an optional callback the caller owns. The library never prints.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

namespace ferry {

// Called before step `i` (0-based) of `n` of `stage` ("calibrate", "evaluate", "reference"...),
// on the calling thread. May be empty.
using ProgressFn = std::function<void(std::string_view stage, size_t i, size_t n)>;

}  // namespace ferry
