#include "serve/types.h"

namespace ferry::serve {

int HttpStatus(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kOk:
      return 200;
    case ErrorKind::kInvalidArg:
      return 400;
    case ErrorKind::kNotFound:
      return 404;
    case ErrorKind::kUnavailable:
      return 503;
    case ErrorKind::kUnsupported:
      return 501;
    case ErrorKind::kInternal:
      return 500;
    case ErrorKind::kUnauthenticated:
      return 401;
    case ErrorKind::kPermissionDenied:
      return 403;
  }
  return 500;
}

namespace {
struct Row {
  std::string_view name;
  DType dtype;
};
constexpr Row kRows[] = {
    {"BOOL", DType::kBool},     {"UINT8", DType::kUint8},   {"UINT16", DType::kUint16},
    {"UINT32", DType::kUint32}, {"UINT64", DType::kUint64}, {"INT8", DType::kInt8},
    {"INT16", DType::kInt16},   {"INT32", DType::kInt32},   {"INT64", DType::kInt64},
    {"FP16", DType::kFloat16},  {"BF16", DType::kBFloat16}, {"FP32", DType::kFloat},
    {"FP64", DType::kDouble},   {"BYTES", DType::kString},
};
}  // namespace

std::optional<DType> DTypeFromDatatype(std::string_view datatype) {
  for (const auto& r : kRows) {
    if (r.name == datatype) return r.dtype;
  }
  return std::nullopt;
}

std::string_view DatatypeName(DType dtype) {
  for (const auto& r : kRows) {
    if (r.dtype == dtype) return r.name;
  }
  return "";
}

}  // namespace ferry::serve
