// Linear models of ai.onnx.ml (LinearClassifier, LinearRegressor) as one validated model,
// shared by the reference kernels (ml_linear.cc) and the cpu kernel (ops/cpu/ml_linear.cc),
// which computes the same scores with a packed GEMM.
#pragma once

#include <memory>
#include <vector>

#include "ops/reference/ml_common.h"

namespace ferry::ops::ml {

struct LinearModel {
  int64_t n_targets = 0;            // rows of coefficients
  int64_t n_features = 0;           // X's columns
  std::vector<float> coefficients;  // [n_targets, n_features]
  std::vector<float> intercepts;    // [n_targets] (zeros when absent)
  PostTransform post = PostTransform::kNone;
  // LinearClassifier only.
  bool classifier = false;
  ClassLabels labels;
  // One coefficient row for two labels: the scores are [-s, s] (ONNX's reference).
  bool two_columns() const { return classifier && n_targets == 1 && labels.size() == 2; }
  int64_t out_columns() const { return two_columns() ? 2 : n_targets; }
};

// Builds and validates the model of a LinearClassifier / LinearRegressor node for X with
// `n_features` columns.
Result<std::shared_ptr<const LinearModel>> BuildLinearModel(const OpContext& ctx,
                                                            int64_t n_features);

// Finishes one row from its raw scores s (n_targets of them, X·Wᵀ + b): writes out_columns()
// scores to z and, for the classifier, the label to out[i].
void FinishLinearRow(const LinearModel& m, const float* s, float* z, Tensor* labels, int64_t i);

}  // namespace ferry::ops::ml
