#include "core/dtype.h"

namespace ferry {

std::string_view DTypeName(DType t) {
  switch (t) {
#define FERRY_DTYPE(e, code, T, name, size) \
  case DType::e:                            \
    return name;
#include "core/dtypes.inc"
#undef FERRY_DTYPE
    default:
      return "undefined";
  }
}

size_t DTypeSize(DType t) {
  switch (t) {
#define FERRY_DTYPE(e, code, T, name, size) \
  case DType::e:                            \
    return size;
#include "core/dtypes.inc"
#undef FERRY_DTYPE
    default:
      return 0;
  }
}

std::optional<DType> DTypeFromCode(int code) {
  switch (code) {
#define FERRY_DTYPE(e, c, T, name, size) \
  case c:                                \
    return DType::e;
#include "core/dtypes.inc"
#undef FERRY_DTYPE
    default:
      return std::nullopt;
  }
}

std::optional<DType> DTypeFromName(std::string_view n) {
#define FERRY_DTYPE(e, c, T, name, size) \
  if (n == name) return DType::e;
#include "core/dtypes.inc"
#undef FERRY_DTYPE
  if (n == "float") return DType::kFloat;
  if (n == "double") return DType::kDouble;
  return std::nullopt;
}

}  // namespace ferry
