#include "ir/value_files.h"

#include <cstring>
#include <filesystem>

#include "core/npy.h"
#include "ir/onnx_io.h"

namespace ferry::ir {

void CopyBits(const Tensor& from, Tensor* to) {
  if (from.nbytes() == to->nbytes() && from.nbytes() > 0)
    std::memcpy(to->raw(), from.raw(), from.nbytes());
}

namespace {

Result<Value> ReadValueFile(const std::string& path, const ir::TypeInfo& type) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return InvalidError("input file '{}' does not exist", path);
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  if (bytes.size() >= 6 && bytes.compare(0, 6, "\x93NUMPY") == 0) {
    FERRY_ASSIGN_OR_RETURN(Tensor t, ParseNpy(bytes, path));
    return Value(std::move(t));
  }
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0)
    return InvalidError("'{}' is not a valid .npy file (missing \\x93NUMPY magic)", path);
  return ir::ReadValuePb(path, type);
}

// numpy has no bfloat16: a uint16 tensor fed to a bfloat16 input holds the raw bits (this is how
// the ONNX test data and Ferry's own .npy outputs store bfloat16).
Value AdaptBFloat16(Value v, const ir::TypeInfo& type) {
  if (v.is_tensor() && type.kind == ir::TypeInfo::Kind::kTensor &&
      type.elem_type == DType::kBFloat16 && v.tensor().dtype() == DType::kUint16) {
    Tensor t(DType::kBFloat16, v.tensor().shape());
    CopyBits(v.tensor(), &t);
    return Value(std::move(t));
  }
  return v;
}

}  // namespace

Result<Value> ReadInputFile(const std::string& path, const ir::TypeInfo& type) {
  FERRY_ASSIGN_OR_RETURN(Value v, ReadValueFile(path, type));
  return AdaptBFloat16(std::move(v), type);
}

std::string SanitizeFileName(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-'))
      c = '_';
  return s;
}

}  // namespace ferry::ir
