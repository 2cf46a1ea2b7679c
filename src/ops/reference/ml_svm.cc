// Reference kernels: ai.onnx.ml support vector machines — SVMClassifier (libsvm's one-vs-one
// voting; with prob_a / prob_b, Platt scaling and libsvm's pairwise coupling into class
// probabilities) and SVMRegressor (epsilon / nu regression, one-class). Kernels LINEAR, POLY
// (gamma x·y + coef0)^degree, RBF exp(-gamma |x - y|^2), SIGMOID tanh(gamma x·y + coef0).
// Without support vectors both are liblinear models (coefficients per class). Layout of the
// attributes and the vague cases (binary labels, score columns) as ONNX Runtime; arithmetic in
// double as libsvm.
#include <cmath>

#include "ops/reference/ml_common.h"

namespace ferry::ops {
namespace ml {

namespace {

enum class Kernel : uint8_t { kLinear, kPoly, kRbf, kSigmoid };

struct SvmModel {
  Kernel kernel = Kernel::kLinear;
  double gamma = 0, coef0 = 0, degree = 0;
  bool svc = false;  // support vectors (libsvm); else liblinear coefficients
  int64_t n_features = 0, n_vectors = 0;
  std::vector<float> vectors, coefficients, rho, prob_a, prob_b;
  std::vector<int64_t> per_class, start;  // classifier: support vectors of each class
  PostTransform post = PostTransform::kNone;
  // SVMClassifier
  ClassLabels labels;
  int64_t n_classes = 1;
  bool all_positive = true;
  // SVMRegressor
  bool one_class = false;
};

Result<Kernel> ReadKernel(const OpContext& ctx) {
  const std::string k = ctx.attr_string("kernel_type", "LINEAR");
  if (k == "LINEAR") return Kernel::kLinear;
  if (k == "POLY") return Kernel::kPoly;
  if (k == "RBF") return Kernel::kRbf;
  if (k == "SIGMOID") return Kernel::kSigmoid;
  return NodeError(ctx, "kernel_type '{}' is not one of LINEAR, POLY, RBF, SIGMOID", k);
}

double KernelDot(const SvmModel& m, const float* x, const float* v, int64_t c) {
  double s = 0;
  if (m.kernel == Kernel::kRbf) {
    for (int64_t j = 0; j < c; ++j) {
      const double d = static_cast<double>(x[j]) - v[j];
      s += d * d;
    }
    return std::exp(-m.gamma * s);
  }
  for (int64_t j = 0; j < c; ++j) s += static_cast<double>(x[j]) * v[j];
  switch (m.kernel) {
    case Kernel::kPoly:
      return std::pow(m.gamma * s + m.coef0, m.degree);
    case Kernel::kSigmoid:
      return std::tanh(m.gamma * s + m.coef0);
    default:
      return s;
  }
}

Result<SvmModel> BuildSvm(const OpContext& ctx, int64_t c) {
  SvmModel m;
  const bool clf = ctx.node().op_type == "SVMClassifier";
  FERRY_ASSIGN_OR_RETURN(m.kernel, ReadKernel(ctx));
  FERRY_ASSIGN_OR_RETURN(m.post, ReadPostTransform(ctx));
  const auto params = ctx.attr_floats("kernel_params");
  if (!params.empty()) {
    if (params.size() != 3)
      return NodeError(ctx, "kernel_params has {} entries, expected 3 (gamma, coef0, degree)",
                       params.size());
    m.gamma = params[0];
    m.coef0 = params[1];
    m.degree = params[2];
  }
  m.vectors = ctx.attr_floats("support_vectors");
  m.coefficients = ctx.attr_floats("coefficients");
  m.rho = ctx.attr_floats("rho");
  m.n_features = c;
  if (m.coefficients.empty()) return NodeError(ctx, "attribute coefficients is missing");
  if (m.rho.empty()) return NodeError(ctx, "attribute rho is missing");
  if (clf) {
    FERRY_ASSIGN_OR_RETURN(m.labels, ReadClassLabels(ctx, "classlabels_ints"));
    m.n_classes = m.labels.size();
    m.per_class = ctx.attr_ints("vectors_per_class");
    m.prob_a = ctx.attr_floats("prob_a");
    m.prob_b = ctx.attr_floats("prob_b");
    for (int64_t v : m.per_class) {
      if (v < 0 || v > (int64_t{1} << 30))
        return NodeError(ctx, "vectors_per_class has {}, expected >= 0", v);
      m.start.push_back(m.n_vectors);
      m.n_vectors += v;
    }
    m.all_positive =
        std::all_of(m.coefficients.begin(), m.coefficients.end(), [](float v) { return v >= 0; });
  } else {
    m.n_vectors = ctx.attr_int("n_supports", 0);
    m.one_class = ctx.attr_int("one_class", 0) != 0;
    if (m.n_vectors < 0 || m.n_vectors > (int64_t{1} << 30))
      return NodeError(ctx, "n_supports = {}, expected >= 0", m.n_vectors);
  }
  m.svc = m.n_vectors > 0;
  if (!m.svc) m.kernel = Kernel::kLinear;
  const int64_t rows = clf ? m.n_classes : 1;
  if (m.svc) {
    if (static_cast<int64_t>(m.vectors.size()) != m.n_vectors * c)
      return NodeError(ctx,
                       "support_vectors has {} entries, expected {} ({} vectors of X's {} columns)",
                       m.vectors.size(), m.n_vectors * c, m.n_vectors, c);
    const int64_t want = clf ? (m.n_classes - 1) * m.n_vectors : m.n_vectors;
    if (static_cast<int64_t>(m.coefficients.size()) != want)
      return NodeError(ctx, "coefficients has {} entries, expected {}", m.coefficients.size(),
                       want);
    if (clf) {
      if (static_cast<int64_t>(m.per_class.size()) != m.n_classes)
        return NodeError(ctx, "vectors_per_class has {} entries, expected {} (one per class)",
                         m.per_class.size(), m.n_classes);
      const int64_t pairs = m.n_classes * (m.n_classes - 1) / 2;
      if (static_cast<int64_t>(m.rho.size()) < pairs)
        return NodeError(ctx, "rho has {} entries, expected {} (one per pair of classes)",
                         m.rho.size(), pairs);
      if (m.prob_a.size() != m.prob_b.size() ||
          (!m.prob_a.empty() && static_cast<int64_t>(m.prob_a.size()) < pairs))
        return NodeError(ctx,
                         "prob_a and prob_b have {} and {} entries, expected {} each (or none)",
                         m.prob_a.size(), m.prob_b.size(), pairs);
    }
  } else if (static_cast<int64_t>(m.coefficients.size()) != rows * c) {
    return NodeError(ctx, "coefficients has {} entries, expected {} ({} rows of X's {} columns)",
                     m.coefficients.size(), rows * c, rows, c);
  }
  if (clf && m.n_classes < 2)
    return NodeUnsupported(ctx, "{} class label, expected at least 2", m.n_classes);
  return m;
}

struct SvmState : OpState {
  SvmModel m;
};

// Score columns of SVMClassifier's Z.
int64_t ScoreColumns(const SvmModel& m) {
  if (!m.svc || !m.prob_a.empty()) return m.n_classes;
  return m.n_classes > 2 ? m.n_classes * (m.n_classes - 1) / 2 : 2;
}

Status PrepareSvm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kInt64, DType::kInt32}));
  FERRY_ASSIGN_OR_RETURN(Rows rows, ReadRows(ctx, 0));
  FERRY_ASSIGN_OR_RETURN(SvmModel m, BuildSvm(ctx, rows.c));
  if (ctx.node().op_type == "SVMClassifier") {
    ctx.set_output(0, m.labels.strings ? DType::kString : DType::kInt64, {rows.n});
    if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kFloat, {rows.n, ScoreColumns(m)});
  } else {
    ctx.set_output(0, DType::kFloat, {rows.n, 1});
  }
  auto st = std::make_unique<SvmState>();
  st->m = std::move(m);
  ctx.set_state(std::move(st));
  return Status::Ok();
}

// libsvm's pairwise coupling (Wu, Lin, Weng 2004, method 2): class probabilities p from the
// pairwise ones r[i * k + j] = P(i | i or j).
void CoupleProbabilities(int64_t k, const std::vector<double>& r, double* p) {
  const size_t K = static_cast<size_t>(k);
  std::vector<double> q(K * K, 0), qp(K, 0);
  const double eps = 0.005 / static_cast<double>(k);
  for (size_t i = 0; i < K; ++i) {
    p[i] = 1.0 / static_cast<double>(k);
    for (size_t j = 0; j < i; ++j) {
      q[i * K + i] += r[j * K + i] * r[j * K + i];
      q[i * K + j] = q[j * K + i];
    }
    for (size_t j = i + 1; j < K; ++j) {
      q[i * K + i] += r[j * K + i] * r[j * K + i];
      q[i * K + j] = -r[j * K + i] * r[i * K + j];
    }
  }
  const int iters = std::max(100, static_cast<int>(k));
  for (int it = 0; it < iters; ++it) {
    double pqp = 0;
    for (size_t i = 0; i < K; ++i) {
      qp[i] = 0;
      for (size_t j = 0; j < K; ++j) qp[i] += q[i * K + j] * p[j];
      pqp += p[i] * qp[i];
    }
    double max_error = 0;
    for (size_t i = 0; i < K; ++i) max_error = std::max(max_error, std::fabs(qp[i] - pqp));
    if (max_error < eps) break;
    for (size_t i = 0; i < K; ++i) {
      const double diff = (-qp[i] + pqp) / q[i * K + i];
      p[i] += diff;
      pqp = (pqp + diff * (diff * q[i * K + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
      for (size_t j = 0; j < K; ++j) {
        qp[j] = (qp[j] + diff * q[i * K + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

// Platt's sigmoid as libsvm evaluates it: P(first class of the pair | decision value).
double PlattProbability(double dec, double a, double b) {
  const double f = dec * a + b;
  return f >= 0 ? std::exp(-f) / (1 + std::exp(-f)) : 1 / (1 + std::exp(f));
}

void ClassifyRow(const SvmModel& m, const float* x, float* z, Tensor& y, int64_t i,
                 std::vector<double>& buf) {
  const int64_t k = m.n_classes, c = m.n_features;
  const int64_t pairs = k * (k - 1) / 2;
  const bool proba = !m.prob_a.empty();
  std::vector<double> scores;
  std::vector<int64_t> votes;
  if (!m.svc) {
    for (int64_t j = 0; j < k; ++j)
      scores.push_back(KernelDot(m, x, m.coefficients.data() + j * c, c) + m.rho[0]);
  } else {
    buf.resize(static_cast<size_t>(m.n_vectors));
    for (int64_t v = 0; v < m.n_vectors; ++v)
      buf[static_cast<size_t>(v)] = KernelDot(m, x, m.vectors.data() + v * c, c);
    votes.assign(static_cast<size_t>(k), 0);
    int64_t idx = 0;
    for (int64_t a = 0; a < k - 1; ++a) {
      for (int64_t b = a + 1; b < k; ++b, ++idx) {
        double s = 0;
        const int64_t sa = m.start[static_cast<size_t>(a)], sb = m.start[static_cast<size_t>(b)];
        for (int64_t t = 0; t < m.per_class[static_cast<size_t>(a)]; ++t)
          s += static_cast<double>(
                   m.coefficients[static_cast<size_t>((b - 1) * m.n_vectors + sa + t)]) *
               buf[static_cast<size_t>(sa + t)];
        for (int64_t t = 0; t < m.per_class[static_cast<size_t>(b)]; ++t)
          s += static_cast<double>(m.coefficients[static_cast<size_t>(a * m.n_vectors + sb + t)]) *
               buf[static_cast<size_t>(sb + t)];
        s += m.rho[static_cast<size_t>(idx)];
        scores.push_back(s);
        ++votes[static_cast<size_t>(s > 0 ? a : b)];
      }
    }
  }
  std::vector<double> out;
  if (m.svc && proba) {
    std::vector<double> r(static_cast<size_t>(k * k), 0);
    int64_t idx = 0;
    for (int64_t a = 0; a < k - 1; ++a)
      for (int64_t b = a + 1; b < k; ++b, ++idx) {
        double p =
            PlattProbability(scores[static_cast<size_t>(idx)], m.prob_a[static_cast<size_t>(idx)],
                             m.prob_b[static_cast<size_t>(idx)]);
        p = std::min(std::max(p, 1e-7), 1 - 1e-7);
        r[static_cast<size_t>(a * k + b)] = p;
        r[static_cast<size_t>(b * k + a)] = 1 - p;
      }
    out.resize(static_cast<size_t>(k));
    CoupleProbabilities(k, r, out.data());
  } else {
    out = scores;
  }
  // The label: most votes (support vectors), else the best score.
  int64_t best = 0;
  double best_w = 0;
  if (!votes.empty()) {
    best = std::max_element(votes.begin(), votes.end()) - votes.begin();
  } else {
    best = std::max_element(out.begin(), out.end()) - out.begin();
    best_w = out[static_cast<size_t>(best)];
  }
  if (pairs == 1 && !proba) {
    // Two classes without probabilities, as ONNX Runtime picks them.
    const bool pos = (m.all_positive && best_w >= 0.5) || (best_w > 0 && !m.all_positive);
    WriteLabel(m.labels, pos ? 1 : best, y, i);
  } else {
    WriteLabel(m.labels, best, y, i);
  }
  if (!z) return;
  const int64_t cols = ScoreColumns(m);
  if (m.svc && !proba && k == 2) {
    // One decision value written as two columns.
    const float s = static_cast<float>(out[0]);
    if (m.post == PostTransform::kProbit) {
      z[0] = Probit(s);
      z[1] = 0;
    } else if (m.post == PostTransform::kNone) {
      z[0] = -s;
      z[1] = s;
    } else {
      z[0] = 1 - s;
      z[1] = s;
    }
    return;
  }
  for (int64_t j = 0; j < cols; ++j) z[j] = static_cast<float>(out[static_cast<size_t>(j)]);
  ApplyPostTransform(m.post, z, cols);
}

void RunSvm(OpContext& ctx) {
  const SvmModel& m = ctx.state<SvmState>()->m;
  const Tensor& x = ctx.input(0);
  const int64_t c = m.n_features;
  const int64_t n = x.rank() == 1 ? 1 : x.dim(0);
  const bool clf = ctx.node().op_type == "SVMClassifier";
  float* z =
      clf ? (ctx.num_outputs() > 1 && ctx.has_output(1) ? ctx.output(1).data<float>() : nullptr)
          : ctx.output(0).data<float>();
  const int64_t cols = clf ? ScoreColumns(m) : 1;
  ParallelFor(ctx, n, 8, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(c));
    std::vector<double> buf;
    for (int64_t i = b; i < e; ++i) {
      for (int64_t j = 0; j < c; ++j)
        row[static_cast<size_t>(j)] = static_cast<float>(NumberAt(x, i * c + j));
      if (clf) {
        ClassifyRow(m, row.data(), z ? z + i * cols : nullptr, ctx.output(0), i, buf);
        continue;
      }
      double s = 0;
      if (m.svc) {
        for (int64_t v = 0; v < m.n_vectors; ++v)
          s += static_cast<double>(m.coefficients[static_cast<size_t>(v)]) *
               KernelDot(m, row.data(), m.vectors.data() + v * c, c);
      } else {
        s = KernelDot(m, row.data(), m.coefficients.data(), c);
      }
      s += m.rho[0];
      if (m.one_class) s = s > 0 ? 1 : -1;
      const float f = static_cast<float>(s);
      z[i] = m.post == PostTransform::kProbit ? Probit(f) : f;
    }
  });
}

constexpr OpDef kOps[] = {
    {kDomain, "SVMClassifier", 1, nullptr, PrepareSvm, RunSvm},
    {kDomain, "SVMRegressor", 1, nullptr, PrepareSvm, RunSvm},
};

}  // namespace

}  // namespace ml

std::span<const OpDef> MlSvmOps() {
  return ml::kOps;
}

}  // namespace ferry::ops
