#include "ops/reference/ml_common.h"

#include <limits>

namespace ferry::ops::ml {

Result<PostTransform> ReadPostTransform(const OpContext& ctx) {
  const std::string s = ctx.attr_string("post_transform", "NONE");
  if (s == "NONE") return PostTransform::kNone;
  if (s == "LOGISTIC") return PostTransform::kLogistic;
  if (s == "SOFTMAX") return PostTransform::kSoftmax;
  if (s == "SOFTMAX_ZERO") return PostTransform::kSoftmaxZero;
  if (s == "PROBIT") return PostTransform::kProbit;
  return NodeError(
      ctx, "post_transform '{}' is not one of NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT", s);
}

float Probit(float x) {
  // erfinv(y) ~ sgn(y) sqrt(sqrt(v^2 - ln(1 - y^2) / a) - v), v = 2 / (pi a) + ln(1 - y^2) / 2.
  constexpr float kA = 0.147f;
  constexpr float kPi = 3.14159265358979323846f;
  const float y = 2 * x - 1;
  const float sgn = y < 0 ? -1.f : 1.f;
  const float w = (1 - y) * (1 + y);
  const float lg = std::log(w);
  const float v = 2 / (kPi * kA) + 0.5f * lg;
  const float v2 = 1 / kA * lg;
  const float v3 = -v + std::sqrt(v * v - v2);
  return 1.41421356f * sgn * std::sqrt(v3);
}

void Softmax(float* v, int64_t n) {
  float mx = -std::numeric_limits<float>::max();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    v[i] = std::exp(v[i] - mx);
    sum += v[i];
  }
  for (int64_t i = 0; i < n; ++i) v[i] /= sum;
}

void SoftmaxZero(float* v, int64_t n) {
  float mx = -std::numeric_limits<float>::max();
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, v[i]);
  const float exp_neg_max = std::exp(-mx);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] > 1e-7f || v[i] < -1e-7f) {
      v[i] = std::exp(v[i] - mx);
      sum += v[i];
    } else {
      v[i] *= exp_neg_max;
    }
  }
  for (int64_t i = 0; i < n; ++i) v[i] /= sum;
}

void ApplyPostTransform(PostTransform t, float* v, int64_t n) {
  switch (t) {
    case PostTransform::kNone:
      break;
    case PostTransform::kLogistic:
      for (int64_t i = 0; i < n; ++i) v[i] = Logistic(v[i]);
      break;
    case PostTransform::kSoftmax:
      Softmax(v, n);
      break;
    case PostTransform::kSoftmaxZero:
      SoftmaxZero(v, n);
      break;
    case PostTransform::kProbit:
      for (int64_t i = 0; i < n; ++i) v[i] = Probit(v[i]);
      break;
  }
}

Result<ClassLabels> ReadClassLabels(const OpContext& ctx, std::string_view int_attr) {
  ClassLabels l;
  l.strs = ctx.node().attr_strings("classlabels_strings");
  l.ints = ctx.attr_ints(int_attr);
  const bool has_s = ctx.has_attr("classlabels_strings") && !l.strs.empty();
  const bool has_i = ctx.has_attr(int_attr) && !l.ints.empty();
  if (has_s == has_i)
    return NodeError(ctx,
                     "expected exactly one of classlabels_strings and {} (got {} and {} labels)",
                     int_attr, l.strs.size(), l.ints.size());
  l.strings = has_s;
  return l;
}

Result<std::optional<std::vector<double>>> ReadFloatsOrTensor(const OpContext& ctx,
                                                              std::string_view name) {
  const std::string tname = std::string(name) + "_as_tensor";
  const ir::Attribute* a = ctx.node().attr(name);
  const ir::Attribute* t = ctx.node().attr(tname);
  if (a && t) return NodeError(ctx, "both {} and {} are given, expected one", name, tname);
  if (a) {
    if (a->type != ir::AttrType::kFloats && a->type != ir::AttrType::kFloat)
      return NodeError(ctx, "attribute {} is not a list of floats", name);
    std::vector<double> v;
    if (a->type == ir::AttrType::kFloat)
      v.push_back(a->f);
    else
      v.assign(a->floats.begin(), a->floats.end());
    return std::optional<std::vector<double>>(std::move(v));
  }
  if (t) {
    if (t->type != ir::AttrType::kTensor ||
        (t->t.dtype() != DType::kFloat && t->t.dtype() != DType::kDouble))
      return NodeError(ctx, "attribute {} must be a float or double tensor", tname);
    std::vector<double> v(static_cast<size_t>(t->t.size()));
    for (int64_t i = 0; i < t->t.size(); ++i) v[static_cast<size_t>(i)] = NumberAt(t->t, i);
    return std::optional<std::vector<double>>(std::move(v));
  }
  return std::optional<std::vector<double>>();
}

Result<Rows> ReadRows(const OpContext& ctx, size_t input) {
  const Tensor& x = ctx.input(input);
  if (x.rank() == 1) return Rows{1, x.dim(0)};
  if (x.rank() == 2) return Rows{x.dim(0), x.dim(1)};
  return NodeError(ctx, "input X has shape {}, expected [N, C] or [C]", ShapeToString(x.shape()));
}

}  // namespace ferry::ops::ml
