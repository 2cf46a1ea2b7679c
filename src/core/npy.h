// NumPy .npy files (format versions 1-3), little-endian numeric, bool and unicode ('<U') arrays.
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace ferry {

// Parses .npy bytes. `what` names the source in error messages (a path).
Result<Tensor> ParseNpy(const std::string& bytes, const std::string& what);
Result<Tensor> ReadNpy(const std::string& path);
// Serialises a tensor; strings are written as '<U' (UTF-32) arrays.
std::string SerializeNpy(const Tensor& t);

// Reads a whole file; kInvalid with the path when it cannot be read.
Result<std::string> ReadFileBytes(const std::string& path);
// Writes via a temp file in the same folder, then renames: never a half-written file.
Status WriteFileAtomic(const std::string& path, const std::string& bytes);

}  // namespace ferry
