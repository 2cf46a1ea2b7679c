// Element types. The list lives once, in dtypes.inc; codes equal ONNX's TensorProto codes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/half.h"
#include "core/status.h"

namespace ferry {

enum class DType : uint8_t {
  kUndefined = 0,
#define FERRY_DTYPE(e, code, T, name, size) e = code,
#include "core/dtypes.inc"
#undef FERRY_DTYPE
};

inline constexpr int kNumDTypes = 0
#define FERRY_DTYPE(e, code, T, name, size) +1
#include "core/dtypes.inc"
#undef FERRY_DTYPE
    ;
static_assert(kNumDTypes == 14, "update DType users (DTypeFromCode, Visit) when adding a dtype");

// "float32", "int64", ...; "undefined" for kUndefined or an unknown code.
std::string_view DTypeName(DType t);
// Element size in bytes (sizeof(std::string) for kString), 0 for kUndefined.
size_t DTypeSize(DType t);
// Maps an ONNX TensorProto.DataType code; nullopt for codes Ferry does not hold (complex, float8).
std::optional<DType> DTypeFromCode(int code);
std::optional<DType> DTypeFromName(std::string_view name);

inline bool IsFloat(DType t) {
  return t == DType::kFloat || t == DType::kDouble || t == DType::kFloat16 || t == DType::kBFloat16;
}
inline bool IsSignedInt(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64;
}
inline bool IsUnsignedInt(DType t) {
  return t == DType::kUint8 || t == DType::kUint16 || t == DType::kUint32 || t == DType::kUint64;
}
inline bool IsInteger(DType t) { return IsSignedInt(t) || IsUnsignedInt(t); }
inline bool IsNumeric(DType t) { return IsFloat(t) || IsInteger(t); }

template <typename T>
struct TypeTag {
  using type = T;
};

template <typename T>
constexpr DType DTypeOf() {
#define FERRY_DTYPE(e, code, CT, name, size) \
  if constexpr (std::is_same_v<T, CT>) return DType::e;
#include "core/dtypes.inc"
#undef FERRY_DTYPE
  return DType::kUndefined;
}

// Calls fn(TypeTag<T>{}) for the C++ type of `t`. Returns false for kUndefined.
template <typename Fn>
bool VisitDType(DType t, Fn&& fn) {
  switch (t) {
#define FERRY_DTYPE(e, code, T, name, size) \
  case DType::e:                            \
    fn(TypeTag<T>{});                       \
    return true;
#include "core/dtypes.inc"
#undef FERRY_DTYPE
    default:
      return false;
  }
}

// Visits only numeric types (floats incl. half types, ints); returns false otherwise.
template <typename Fn>
bool VisitNumeric(DType t, Fn&& fn) {
  if (!IsNumeric(t)) return false;
  return VisitDType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, std::string> && !std::is_same_v<T, bool>) fn(tag);
  });
}

// Visits numeric types and bool.
template <typename Fn>
bool VisitPod(DType t, Fn&& fn) {
  if (t == DType::kString || t == DType::kUndefined) return false;
  return VisitDType(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, std::string>) fn(tag);
  });
}

// Arithmetic type used to compute on T: float for the half types, T otherwise.
template <typename T>
using ComputeType =
    std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;

}  // namespace ferry
