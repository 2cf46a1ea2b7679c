// Helpers shared by the ai.onnx.ml reference kernels (ml_*.cc) and the cpu tree / linear
// kernels: score post-transforms as ONNX Runtime computes them (its ml_common.h is the peer the
// spec leaves room for), class labels, and attribute readers.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/reference/common.h"

namespace ferry::ops::ml {

inline constexpr std::string_view kDomain = "ai.onnx.ml";

enum class PostTransform : uint8_t { kNone, kLogistic, kSoftmax, kSoftmaxZero, kProbit };

// "NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT" (attribute `post_transform`, default
// NONE); an unknown name is an error naming the node.
Result<PostTransform> ReadPostTransform(const OpContext& ctx);

// 1 / (1 + exp(-x)), computed on |x| as ONNX Runtime does.
inline float Logistic(float x) {
  const float v = 1.f / (1.f + std::exp(-std::fabs(x)));
  return x < 0 ? 1.f - v : v;
}
// sqrt(2) * erfinv(2x - 1) with the Winitzki approximation of erfinv (ONNX's reference and ONNX
// Runtime use it, so probit scores match theirs rather than the exact quantile).
float Probit(float x);
// In place over n scores: max-subtracted softmax; the zero variant leaves exact zeros (|v| <=
// 1e-7) at v * exp(-max) and sums only the others.
void Softmax(float* v, int64_t n);
void SoftmaxZero(float* v, int64_t n);
// Applies `t` to one row of n >= 2 scores (NONE: unchanged).
void ApplyPostTransform(PostTransform t, float* v, int64_t n);

// Class labels of a classifier: `classlabels_strings` or the int64 attribute `int_attr`
// (classlabels_int64s or classlabels_ints). Exactly one of the two must be given.
struct ClassLabels {
  bool strings = false;
  std::vector<int64_t> ints;
  std::vector<std::string> strs;
  int64_t size() const {
    return strings ? static_cast<int64_t>(strs.size()) : static_cast<int64_t>(ints.size());
  }
};
Result<ClassLabels> ReadClassLabels(const OpContext& ctx, std::string_view int_attr);
// Writes label `k` (an index into the labels) to out[i] (int64 or string tensor).
inline void WriteLabel(const ClassLabels& l, int64_t k, Tensor& out, int64_t i) {
  if (l.strings)
    out.data<std::string>()[i] = l.strs[static_cast<size_t>(k)];
  else
    out.data<int64_t>()[i] = l.ints[static_cast<size_t>(k)];
}

// The float list attribute `name`, or the tensor attribute `name + "_as_tensor"` (float or
// double) when the list is absent, as doubles; nullopt when neither is given. Both given, or a
// tensor of another dtype, is an error.
Result<std::optional<std::vector<double>>> ReadFloatsOrTensor(const OpContext& ctx,
                                                              std::string_view name);

// The input's rows and columns for the classic-ML ops that read [N, C] or [C] (one row).
// Rank 0 or above 2 is an error naming the node.
struct Rows {
  int64_t n = 0, c = 0;
};
Result<Rows> ReadRows(const OpContext& ctx, size_t input);

// Element i of a float/double/int32/int64 tensor as float / double.
inline double NumberAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat:
      return t.data<float>()[i];
    case DType::kDouble:
      return t.data<double>()[i];
    case DType::kInt32:
      return t.data<int32_t>()[i];
    case DType::kInt64:
      return static_cast<double>(t.data<int64_t>()[i]);
    default:
      return t.GetAsDouble(i);
  }
}

}  // namespace ferry::ops::ml
