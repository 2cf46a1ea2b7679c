#include "cli/tensor_files.h"

#include <filesystem>

#include "core/npy.h"
#include "ir/onnx_io.h"

namespace ferry::cli {

Result<Value> ReadInputFile(const std::string& path, const ir::TypeInfo& type) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return InvalidError("input file '{}' does not exist", path);
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  if (bytes.size() >= 6 && bytes.compare(0, 6, "\x93NUMPY") == 0) {
    FERRY_ASSIGN_OR_RETURN(Tensor t, ParseNpy(bytes, path));
    return Value(std::move(t));
  }
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0)
    return InvalidError("'{}' is not a valid .npy file (missing \\x93NUMPY magic)", path);
  return ir::ReadValuePb(path, type);
}

std::string SanitizeFileName(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) c = '_';
  return s;
}

}  // namespace ferry::cli
