// Helpers shared by the com.microsoft (ONNX Runtime contrib) reference kernels: quantization
// parameters, requantization as ONNX Runtime's MLAS rounds it, float tensors as doubles.
#pragma once

#include "ops/reference/common.h"

namespace ferry::ops {

constexpr std::string_view kMsDomain = "com.microsoft";

// Input i (optional) is a scalar or a 1-element tensor; `what` names it in the error.
Status RequireScalarParam(const OpContext& ctx, size_t i, std::string_view what, bool required,
                          std::initializer_list<DType> allowed);
// Input i (optional) is a scalar, a 1-element tensor or a 1-D tensor of n values.
Status RequireScalarOrVector(const OpContext& ctx, size_t i, std::string_view what, int64_t n,
                             std::initializer_list<DType> allowed);
// Element k of a scalar-or-vector parameter (element 0 of a scalar); 0 when absent.
float ParamF(const OpContext& ctx, size_t i, int64_t k = 0);
int32_t ParamI(const OpContext& ctx, size_t i, int64_t k = 0);

// The range of an 8-bit quantized type (uint8 or int8).
inline int32_t QMin(DType t) {
  return t == DType::kInt8 ? -128 : 0;
}
inline int32_t QMax(DType t) {
  return t == DType::kInt8 ? 127 : 255;
}
// saturate(nearbyint(v) + zp) to the type's range, rounding half to even; NaN counts as 0.
inline int32_t RoundToQ(float v, int32_t zp, DType t) {
  if (std::isnan(v)) v = 0;
  float r = std::nearbyint(v) + static_cast<float>(zp);
  return static_cast<int32_t>(
      std::clamp(r, static_cast<float>(QMin(t)), static_cast<float>(QMax(t))));
}
// MLAS's QuantizeLinear: saturate(nearbyint(v / scale) + zp).
inline int32_t QuantizeF(float v, float scale, int32_t zp, DType t) {
  return RoundToQ(v / scale, zp, t);
}
// Reads element i of a uint8/int8 tensor as int32.
inline int32_t QAt(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt8 ? int32_t{t.data<int8_t>()[i]} : int32_t{t.data<uint8_t>()[i]};
}
inline void QStore(Tensor& t, int64_t i, int32_t v) {
  if (t.dtype() == DType::kInt8)
    t.data<int8_t>()[i] = static_cast<int8_t>(v);
  else
    t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
}

// Float tensors (float, float16, bfloat16, double) read into double and stored back.
std::vector<double> ReadDoubles(const Tensor& t);
void WriteDoubles(const std::vector<double>& v, Tensor& t);
constexpr std::initializer_list<DType> kContribFloatTypes = {DType::kFloat, DType::kFloat16,
                                                             DType::kBFloat16, DType::kDouble};

// RotaryEmbedding's rotation (ONNX opset 23 and com.microsoft), in place: x holds [B, S, N, H]
// (bnsh false) or [B, N, S, H] head vectors; the first 2 * half values of each are rotated by
// cache row row(b, s) of cosv / sinv (half values a row): non-interleaved pairs (i, i + half),
// interleaved (2i, 2i + 1).
void RotateHeads(std::vector<double>& x, int64_t b, int64_t s, int64_t n, int64_t h, bool bnsh,
                 int64_t half, bool interleaved, const std::vector<double>& cosv,
                 const std::vector<double>& sinv,
                 const std::function<int64_t(int64_t, int64_t)>& row);

// Normalizes rows of `len` values of x in place: (x - mean) / sqrt(var + eps) * gamma + beta
// (beta optional; simplified: no mean, x / sqrt(mean(x^2) + eps) * gamma). Returns each row's
// mean and 1 / sqrt(var + eps) when asked.
void LayerNormRows(std::vector<double>& x, int64_t rows, int64_t len, double eps,
                   const std::vector<double>& gamma, const std::vector<double>* beta,
                   bool simplified, std::vector<double>* means, std::vector<double>* inv_std);

}  // namespace ferry::ops
