// How `ferry run --output-dir` writes one output value: a tensor as BASE.npy, a map or sequence
// of maps as BASE.json, a sequence of tensors as BASE/<i>.npy (each file temp-then-rename).
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace ferry::cli {

// Returns the path written (BASE.npy, BASE.json or BASE/), "" for a value with nothing to write.
Result<std::string> WriteOutputValue(const Value& v, const std::string& base);

}  // namespace ferry::cli
