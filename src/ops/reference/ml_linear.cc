// Reference kernels: ai.onnx.ml linear models and per-feature transforms — LinearClassifier,
// LinearRegressor, Scaler, Normalizer, Binarizer. Inputs may be float, double, int64 or int32
// (converted to float as ONNX Runtime does); outputs are float, except Binarizer (X's dtype).
#include "ops/reference/ml_linear.h"

namespace ferry::ops {
namespace ml {

Result<std::shared_ptr<const LinearModel>> BuildLinearModel(const OpContext& ctx,
                                                            int64_t n_features) {
  auto m = std::make_shared<LinearModel>();
  m->classifier = ctx.node().op_type == "LinearClassifier";
  m->n_features = n_features;
  FERRY_ASSIGN_OR_RETURN(m->post, ReadPostTransform(ctx));
  m->coefficients = ctx.attr_floats("coefficients");
  m->intercepts = ctx.attr_floats("intercepts");
  if (!ctx.has_attr("coefficients") || m->coefficients.empty())
    return NodeError(ctx, "attribute coefficients is missing");
  if (m->classifier) {
    FERRY_ASSIGN_OR_RETURN(m->labels, ReadClassLabels(ctx, "classlabels_ints"));
    m->n_targets = !m->intercepts.empty() ? static_cast<int64_t>(m->intercepts.size())
                   : n_features > 0 ? static_cast<int64_t>(m->coefficients.size()) / n_features
                                    : 0;
    if (m->n_targets != 1 && m->n_targets != m->labels.size())
      return NodeError(ctx,
                       "{} coefficient rows for {} class labels, expected {} (or 1 for 2 labels)",
                       m->n_targets, m->labels.size(), m->labels.size());
  } else {
    m->n_targets = ctx.attr_int("targets", 1);
    if (m->n_targets <= 0 || m->n_targets > (int64_t{1} << 24))
      return NodeError(ctx, "targets = {}, expected 1 to 2^24", m->n_targets);
    if (!m->intercepts.empty() && static_cast<int64_t>(m->intercepts.size()) != m->n_targets)
      return NodeError(ctx, "intercepts has {} entries, expected {} (targets)",
                       m->intercepts.size(), m->n_targets);
  }
  if (m->n_targets <= 0 ||
      static_cast<int64_t>(m->coefficients.size()) != m->n_targets * n_features)
    return NodeError(ctx, "coefficients has {} entries, expected {} ({} rows of X's {} columns)",
                     m->coefficients.size(), m->n_targets * n_features, m->n_targets, n_features);
  if (m->intercepts.empty()) m->intercepts.assign(static_cast<size_t>(m->n_targets), 0.f);
  return std::shared_ptr<const LinearModel>(std::move(m));
}

void FinishLinearRow(const LinearModel& m, const float* s, float* z, Tensor* labels, int64_t i) {
  const int64_t nt = m.n_targets;
  if (!m.classifier) {
    std::copy(s, s + nt, z);
    // One target: only PROBIT applies, as for the tree regressor.
    if (nt > 1 || m.post == PostTransform::kProbit) ApplyPostTransform(m.post, z, nt);
    return;
  }
  if (nt == 1) {
    // Label as ONNX Runtime: the second label when the raw score is positive.
    const bool pos = s[0] > 0;
    if (m.labels.size() == 2) {
      WriteLabel(m.labels, pos ? 1 : 0, *labels, i);
      z[0] = -s[0];
      z[1] = s[0];
      ApplyPostTransform(m.post, z, 2);
    } else {
      if (m.labels.strings)
        labels->data<std::string>()[i] = pos ? "1" : "0";
      else
        labels->data<int64_t>()[i] = pos ? 1 : 0;
      z[0] = s[0];
      ApplyPostTransform(m.post, z, 1);
    }
    return;
  }
  int64_t best = 0;
  for (int64_t k = 1; k < nt; ++k)
    if (s[k] > s[best]) best = k;
  WriteLabel(m.labels, best, *labels, i);
  std::copy(s, s + nt, z);
  ApplyPostTransform(m.post, z, nt);
}

namespace {

Status RequireNumeric(const OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  return RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kInt64, DType::kInt32});
}

// ---- LinearClassifier, LinearRegressor ----

struct LinearState : OpState {
  std::shared_ptr<const LinearModel> model;
};

Status PrepareLinear(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireNumeric(ctx));
  FERRY_ASSIGN_OR_RETURN(Rows rows, ReadRows(ctx, 0));
  FERRY_ASSIGN_OR_RETURN(auto model, BuildLinearModel(ctx, rows.c));
  if (model->classifier) {
    ctx.set_output(0, model->labels.strings ? DType::kString : DType::kInt64, {rows.n});
    if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kFloat, {rows.n, model->out_columns()});
  } else {
    ctx.set_output(0, DType::kFloat, {rows.n, model->n_targets});
  }
  auto st = std::make_unique<LinearState>();
  st->model = std::move(model);
  ctx.set_state(std::move(st));
  return Status::Ok();
}

void RunLinear(OpContext& ctx) {
  const LinearModel& m = *ctx.state<LinearState>()->model;
  const Tensor& x = ctx.input(0);
  const int64_t c = m.n_features, nt = m.n_targets, oc = m.out_columns();
  const int64_t n = c ? x.size() / c : (x.rank() == 1 ? 1 : x.dim(0));
  Tensor* labels = m.classifier ? &ctx.output(0) : nullptr;
  float* z = !m.classifier                                ? ctx.output(0).data<float>()
             : ctx.num_outputs() > 1 && ctx.has_output(1) ? ctx.output(1).data<float>()
                                                          : nullptr;
  ParallelFor(ctx, n, 64, [&](int64_t b, int64_t e) {
    std::vector<float> s(static_cast<size_t>(nt)), row(static_cast<size_t>(oc));
    for (int64_t i = b; i < e; ++i) {
      for (int64_t k = 0; k < nt; ++k) {
        double acc = m.intercepts[static_cast<size_t>(k)];
        const float* w = m.coefficients.data() + k * c;
        for (int64_t j = 0; j < c; ++j)
          acc += static_cast<double>(w[j]) * static_cast<float>(NumberAt(x, i * c + j));
        s[static_cast<size_t>(k)] = static_cast<float>(acc);
      }
      FinishLinearRow(m, s.data(), row.data(), labels, i);
      if (z) std::copy(row.begin(), row.end(), z + i * oc);
    }
  });
}

// ---- Scaler: (x - offset) * scale, offset and scale of 1 or C entries ----

Status PrepareScaler(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireNumeric(ctx));
  FERRY_ASSIGN_OR_RETURN(Rows rows, ReadRows(ctx, 0));
  const auto offset = ctx.attr_floats("offset");
  const auto scale = ctx.attr_floats("scale");
  for (const auto& [name, v] : {std::pair{"offset", &offset}, std::pair{"scale", &scale}})
    if (v->size() > 1 && static_cast<int64_t>(v->size()) != rows.c)
      return NodeError(ctx, "{} has {} entries, expected 0, 1 or {} (X's columns)", name, v->size(),
                       rows.c);
  ctx.set_output(0, DType::kFloat, ctx.input(0).shape());
  return Status::Ok();
}

void RunScaler(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto offset = ctx.attr_floats("offset");
  const auto scale = ctx.attr_floats("scale");
  const int64_t c = x.rank() == 1 ? x.dim(0) : x.dim(1);
  float* y = ctx.output(0).data<float>();
  for (int64_t i = 0; i < x.size(); ++i) {
    const size_t j = static_cast<size_t>(c ? i % c : 0);
    const float o = offset.empty() ? 0.f : offset[offset.size() == 1 ? 0 : j];
    const float s = scale.empty() ? 1.f : scale[scale.size() == 1 ? 0 : j];
    y[i] = (static_cast<float>(NumberAt(x, i)) - o) * s;
  }
}

// ---- Normalizer: each row divided by its MAX, L1 or L2 norm (rows of norm 0 unchanged) ----

Status PrepareNormalizer(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireNumeric(ctx));
  FERRY_ASSIGN_OR_RETURN(Rows rows, ReadRows(ctx, 0));
  (void)rows;
  const std::string norm = ctx.attr_string("norm", "MAX");
  if (norm != "MAX" && norm != "L1" && norm != "L2")
    return NodeError(ctx, "norm '{}' is not one of MAX, L1, L2", norm);
  ctx.set_output(0, DType::kFloat, ctx.input(0).shape());
  return Status::Ok();
}

void RunNormalizer(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string norm = ctx.attr_string("norm", "MAX");
  const int64_t c = x.rank() == 1 ? x.dim(0) : x.dim(1);
  const int64_t n = x.rank() == 1 ? 1 : x.dim(0);
  float* y = ctx.output(0).data<float>();
  for (int64_t i = 0; i < n; ++i) {
    float* r = y + i * c;
    for (int64_t j = 0; j < c; ++j) r[j] = static_cast<float>(NumberAt(x, i * c + j));
    float d = 0;
    if (norm == "MAX") {
      d = c ? r[0] : 0.f;
      for (int64_t j = 1; j < c; ++j) d = std::max(d, r[j]);
    } else if (norm == "L1") {
      for (int64_t j = 0; j < c; ++j) d += std::fabs(r[j]);
    } else {
      for (int64_t j = 0; j < c; ++j) d += r[j] * r[j];
      d = std::sqrt(d);
    }
    if (d != 0)
      for (int64_t j = 0; j < c; ++j) r[j] /= d;
  }
}

// ---- Binarizer: x > threshold ? 1 : 0, in X's dtype ----

Status PrepareBinarizer(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireNumeric(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), ctx.input(0).shape());
  return Status::Ok();
}

template <typename T>
void Binarize(const Tensor& x, float th, Tensor& y) {
  const T* s = x.data<T>();
  T* d = y.data<T>();
  for (int64_t i = 0; i < x.size(); ++i) d[i] = static_cast<double>(s[i]) > th ? T(1) : T(0);
}

void RunBinarizer(OpContext& ctx) {
  const float th = ctx.attr_float("threshold", 0.f);
  switch (ctx.input(0).dtype()) {
    case DType::kFloat:
      return Binarize<float>(ctx.input(0), th, ctx.output(0));
    case DType::kDouble:
      return Binarize<double>(ctx.input(0), th, ctx.output(0));
    case DType::kInt64:
      return Binarize<int64_t>(ctx.input(0), th, ctx.output(0));
    default:
      return Binarize<int32_t>(ctx.input(0), th, ctx.output(0));
  }
}

constexpr OpDef kOps[] = {
    {kDomain, "LinearClassifier", 1, nullptr, PrepareLinear, RunLinear},
    {kDomain, "LinearRegressor", 1, nullptr, PrepareLinear, RunLinear},
    {kDomain, "Scaler", 1, nullptr, PrepareScaler, RunScaler},
    {kDomain, "Normalizer", 1, nullptr, PrepareNormalizer, RunNormalizer},
    {kDomain, "Binarizer", 1, nullptr, PrepareBinarizer, RunBinarizer},
};

}  // namespace

}  // namespace ml

std::span<const OpDef> MlLinearOps() {
  return ml::kOps;
}

}  // namespace ferry::ops
