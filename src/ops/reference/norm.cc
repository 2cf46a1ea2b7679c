// Reference kernels: Softmax, LogSoftmax, Hardmax, BatchNormalization, InstanceNormalization,
// LayerNormalization, GroupNormalization, LpNormalization, LRN, MeanVarianceNormalization.
//
// Every kernel reads its float inputs into double, computes in double and rounds once when it
// writes the output (float16/bfloat16 therefore compute at least in float, as the specs ask).
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat, DType::kDouble,
                                                      DType::kFloat16, DType::kBFloat16};

// ---- helpers ----
std::vector<double> ToDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  VisitNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<double>(static_cast<ComputeType<T>>(p[i]));
  });
  return v;
}

void StoreDoubles(const std::vector<double>& v, Tensor& t) {
  VisitNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
  });
}

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

// `from` broadcasts unidirectionally to `to` (numpy rules, `to` unchanged).
bool BroadcastsTo(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  return true;
}

// Checks input i is a float tensor with exactly `n` elements.
Status RequireFloatVector(const OpContext& ctx, size_t i, std::string_view what, int64_t n) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kFloatTypes));
  if (ctx.input(i).size() != n)
    return NodeError(ctx, "{} has shape {} ({} elements), expected {} elements", what,
                     ShapeToString(ctx.input(i).shape()), ctx.input(i).size(), n);
  return Status::Ok();
}

// ---- Softmax, LogSoftmax, Hardmax ----
// Before opset 13 the input is coerced to 2D [prod(dims[:axis]), prod(dims[axis:])] (axis
// default 1); from 13 the op works along one axis (default -1). Either way: outer x n x inner.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit SoftmaxSplit(const OpContext& ctx) {
  const Shape& s = ctx.input(0).shape();
  int64_t rank = static_cast<int64_t>(s.size());
  AxisSplit r;
  if (rank == 0) return r;
  bool legacy = ctx.opset() < 13;
  int64_t axis = ctx.attr_int("axis", legacy ? 1 : -1);
  if (axis < 0) axis += rank;
  size_t a = static_cast<size_t>(axis);
  r.outer = Product(s, 0, a);
  if (legacy) {
    r.n = Product(s, a, s.size());
  } else {
    r.n = s[a];
    r.inner = Product(s, a + 1, s.size());
  }
  return r;
}

Status PrepareSoftmaxFamily(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  const Tensor& x = ctx.input(0);
  int64_t rank = x.rank();
  if (rank > 0) {
    int64_t axis = ctx.attr_int("axis", ctx.opset() < 13 ? 1 : -1);
    // Opset < 13 also allows axis == rank (coerced to [N, 1]).
    bool legacy_end = ctx.opset() < 13 && axis == rank;
    if (!legacy_end) FERRY_RETURN_IF_ERROR(NormalizeAxis(ctx, axis, rank).status());
  }
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

void RunSoftmaxKind(OpContext& ctx, SoftmaxKind kind) {
  AxisSplit sp = SoftmaxSplit(ctx);
  std::vector<double> x = ToDoubles(ctx.input(0));
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < sp.outer; ++o) {
    for (int64_t in = 0; in < sp.inner; ++in) {
      int64_t base = o * sp.n * sp.inner + in;
      auto at = [&](int64_t k) { return static_cast<size_t>(base + k * sp.inner); };
      if (sp.n == 0) continue;
      int64_t arg = 0;
      for (int64_t k = 1; k < sp.n; ++k)
        if (x[at(k)] > x[at(arg)]) arg = k;
      double mx = x[at(arg)];
      if (kind == SoftmaxKind::kHardmax) {
        for (int64_t k = 0; k < sp.n; ++k) y[at(k)] = k == arg ? 1.0 : 0.0;
        continue;
      }
      double sum = 0;
      for (int64_t k = 0; k < sp.n; ++k) sum += std::exp(x[at(k)] - mx);
      for (int64_t k = 0; k < sp.n; ++k) {
        double d = x[at(k)] - mx;
        y[at(k)] = kind == SoftmaxKind::kSoftmax ? std::exp(d) / sum : d - std::log(sum);
      }
    }
  }
  StoreDoubles(y, ctx.output(0));
}

void RunSoftmax(OpContext& ctx) {
  RunSoftmaxKind(ctx, SoftmaxKind::kSoftmax);
}
void RunLogSoftmax(OpContext& ctx) {
  RunSoftmaxKind(ctx, SoftmaxKind::kLogSoftmax);
}
void RunHardmax(OpContext& ctx) {
  RunSoftmaxKind(ctx, SoftmaxKind::kHardmax);
}

// ---- BatchNormalization ----
// Inference uses input_mean/input_var. Training (training_mode=1 from opset 14; before that
// the 5-output form, which opset < 7 also marks with is_test=0) uses the batch statistics and
// outputs the updated running statistics (opset < 14 also saved_mean/saved_var).
// spatial=0 (opset < 9): statistics are per activation, shaped [C, D1, ..., Dn].
struct BatchNormMode {
  bool training = false;
  bool spatial = true;
};

bool AnyOutputFrom(const OpContext& ctx, size_t first) {
  for (size_t i = first; i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) return true;
  return false;
}

BatchNormMode GetBatchNormMode(const OpContext& ctx) {
  BatchNormMode m;
  if (ctx.opset() >= 14)
    m.training = ctx.attr_int("training_mode", 0) != 0;
  else if (ctx.opset() < 7)
    m.training = ctx.attr_int("is_test", 0) == 0 && AnyOutputFrom(ctx, 1);
  else
    m.training = AnyOutputFrom(ctx, 1);
  if (ctx.opset() < 9) m.spatial = ctx.attr_int("spatial", 1) != 0;
  return m;
}

Status PrepareBatchNorm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 5, 5));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2)
    return NodeError(ctx, "X has rank {}, expected at least 2 (N x C x ...)", x.rank());
  BatchNormMode m = GetBatchNormMode(ctx);
  int64_t c = x.dim(1);
  int64_t stat = m.spatial ? c : c * Product(x.shape(), 2, x.shape().size());
  const char* names[] = {"X", "scale", "B", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) FERRY_RETURN_IF_ERROR(RequireFloatVector(ctx, i, names[i], stat));
  size_t max_outputs = ctx.opset() >= 14 ? 3 : 5;
  if (ctx.num_outputs() > max_outputs)
    return NodeError(ctx, "has {} outputs, expected at most {}", ctx.num_outputs(), max_outputs);
  if (ctx.opset() >= 14 && !m.training && AnyOutputFrom(ctx, 1))
    return NodeError(ctx, "running_mean/running_var outputs are only valid with training_mode=1");
  ctx.set_output(0, x.dtype(), x.shape());
  if (m.training) {
    for (size_t i = 1; i < ctx.num_outputs(); ++i) {
      const Tensor& like = ctx.input(i % 2 == 1 ? 3 : 4);
      if (ctx.has_output(i)) ctx.set_output(i, like.dtype(), like.shape());
    }
  }
  return Status::Ok();
}

void RunBatchNorm(OpContext& ctx) {
  BatchNormMode m = GetBatchNormMode(ctx);
  const Tensor& xt = ctx.input(0);
  std::vector<double> x = ToDoubles(xt), scale = ToDoubles(ctx.input(1)),
                      bias = ToDoubles(ctx.input(2));
  std::vector<double> mean = ToDoubles(ctx.input(3)), var = ToDoubles(ctx.input(4));
  int64_t n = xt.dim(0), c = xt.dim(1), inner = Product(xt.shape(), 2, xt.shape().size());
  size_t stat_size = mean.size();
  auto stat_index = [&](int64_t ch, int64_t s) {
    return static_cast<size_t>(m.spatial ? ch : ch * inner + s);
  };
  std::vector<double> batch_mean(stat_size, 0.0), batch_var(stat_size, 0.0);
  if (m.training) {
    double count = static_cast<double>(m.spatial ? n * inner : n);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t s = 0; s < inner; ++s)
          batch_mean[stat_index(ch, s)] += x[static_cast<size_t>((b * c + ch) * inner + s)];
    for (double& v : batch_mean) v /= count;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t s = 0; s < inner; ++s) {
          size_t k = stat_index(ch, s);
          double d = x[static_cast<size_t>((b * c + ch) * inner + s)] - batch_mean[k];
          batch_var[k] += d * d;
        }
    for (double& v : batch_var) v /= count;
  }
  const std::vector<double>& use_mean = m.training ? batch_mean : mean;
  const std::vector<double>& use_var = m.training ? batch_var : var;
  double eps = ctx.attr_float("epsilon", 1e-5f);
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t s = 0; s < inner; ++s) {
        size_t k = stat_index(ch, s), i = static_cast<size_t>((b * c + ch) * inner + s);
        y[i] = (x[i] - use_mean[k]) / std::sqrt(use_var[k] + eps) * scale[k] + bias[k];
      }
  StoreDoubles(y, ctx.output(0));
  if (!m.training) return;
  double momentum = ctx.attr_float("momentum", 0.9f);
  std::vector<double> running_mean(stat_size), running_var(stat_size);
  for (size_t k = 0; k < stat_size; ++k) {
    running_mean[k] = mean[k] * momentum + batch_mean[k] * (1 - momentum);
    running_var[k] = var[k] * momentum + batch_var[k] * (1 - momentum);
  }
  const std::vector<double>* outs[] = {nullptr, &running_mean, &running_var, &batch_mean,
                                       &batch_var};
  for (size_t i = 1; i < ctx.num_outputs() && i < 5; ++i)
    if (ctx.has_output(i)) StoreDoubles(*outs[i], ctx.output(i));
}

// ---- InstanceNormalization ----
Status PrepareInstanceNorm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2)
    return NodeError(ctx, "input has rank {}, expected at least 2 (N x C x ...)", x.rank());
  FERRY_RETURN_IF_ERROR(RequireFloatVector(ctx, 1, "scale", x.dim(1)));
  FERRY_RETURN_IF_ERROR(RequireFloatVector(ctx, 2, "B", x.dim(1)));
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

// Normalizes each of `rows` contiguous rows of `len` values of x into y (mean 0, var 1).
// Optionally returns each row's mean and 1/sqrt(var + eps).
void NormalizeRows(const std::vector<double>& x, int64_t rows, int64_t len, double eps,
                   std::vector<double>* y, std::vector<double>* means = nullptr,
                   std::vector<double>* inv_stds = nullptr) {
  for (int64_t r = 0; r < rows; ++r) {
    size_t base = static_cast<size_t>(r * len);
    double mean = 0, var = 0;
    for (int64_t k = 0; k < len; ++k) mean += x[base + static_cast<size_t>(k)];
    mean = len > 0 ? mean / static_cast<double>(len) : 0.0;
    for (int64_t k = 0; k < len; ++k) {
      double d = x[base + static_cast<size_t>(k)] - mean;
      var += d * d;
    }
    var = len > 0 ? var / static_cast<double>(len) : 0.0;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t k = 0; k < len; ++k)
      (*y)[base + static_cast<size_t>(k)] = (x[base + static_cast<size_t>(k)] - mean) * inv;
    if (means) (*means)[static_cast<size_t>(r)] = mean;
    if (inv_stds) (*inv_stds)[static_cast<size_t>(r)] = inv;
  }
}

void RunInstanceNorm(OpContext& ctx) {
  const Tensor& xt = ctx.input(0);
  std::vector<double> x = ToDoubles(xt), scale = ToDoubles(ctx.input(1)),
                      bias = ToDoubles(ctx.input(2));
  int64_t n = xt.dim(0), c = xt.dim(1), inner = Product(xt.shape(), 2, xt.shape().size());
  std::vector<double> y(x.size());
  NormalizeRows(x, n * c, inner, ctx.attr_float("epsilon", 1e-5f), &y);
  for (int64_t r = 0; r < n * c; ++r)
    for (int64_t s = 0; s < inner; ++s) {
      size_t i = static_cast<size_t>(r * inner + s), ch = static_cast<size_t>(r % c);
      y[i] = y[i] * scale[ch] + bias[ch];
    }
  StoreDoubles(y, ctx.output(0));
}

// ---- LayerNormalization (opset 17) ----
Status PrepareLayerNorm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  const Tensor& x = ctx.input(0);
  int64_t rank = x.rank(), axis = ctx.attr_int("axis", -1);
  if (axis < -rank || axis > rank)
    return NodeError(ctx, "axis {} is out of range [{}, {}]", axis, -rank, rank);
  if (axis < 0) axis += rank;
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, i == 1 ? "Scale" : "B"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, kFloatTypes));
    if (!BroadcastsTo(ctx.input(i).shape(), x.shape()))
      return NodeError(ctx, "{} has shape {}, which does not broadcast to X's shape {}",
                       i == 1 ? "Scale" : "B", ShapeToString(ctx.input(i).shape()),
                       ShapeToString(x.shape()));
  }
  int64_t stash = ctx.attr_int("stash_type", 1);
  std::optional<DType> stash_type = DTypeFromCode(static_cast<int>(stash));
  if (!stash_type || !IsFloat(*stash_type))
    return NodeUnsupported(ctx, "stash_type {} is not a float type", stash);
  Shape stat_shape = x.shape();
  for (size_t d = static_cast<size_t>(axis); d < stat_shape.size(); ++d) stat_shape[d] = 1;
  ctx.set_output(0, x.dtype(), x.shape());
  for (size_t i = 1; i < 3 && i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) ctx.set_output(i, *stash_type, stat_shape);
  return Status::Ok();
}

void RunLayerNorm(OpContext& ctx) {
  const Tensor& xt = ctx.input(0);
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += xt.rank();
  int64_t rows = Product(xt.shape(), 0, static_cast<size_t>(axis));
  int64_t len = Product(xt.shape(), static_cast<size_t>(axis), xt.shape().size());
  std::vector<double> x = ToDoubles(xt), y(x.size());
  std::vector<double> means(static_cast<size_t>(rows)), inv_stds(static_cast<size_t>(rows));
  NormalizeRows(x, rows, len, ctx.attr_float("epsilon", 1e-5f), &y, &means, &inv_stds);
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    std::vector<double> p = ToDoubles(ctx.input(i));
    BroadcastIndexer idx(ctx.input(i).shape(), xt.shape());
    for (size_t k = 0; k < y.size(); ++k) {
      double v = p[static_cast<size_t>(idx(static_cast<int64_t>(k)))];
      y[k] = i == 1 ? y[k] * v : y[k] + v;
    }
  }
  StoreDoubles(y, ctx.output(0));
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) StoreDoubles(means, ctx.output(1));
  if (ctx.num_outputs() > 2 && ctx.has_output(2)) StoreDoubles(inv_stds, ctx.output(2));
}

// ---- GroupNormalization (opset 18: scale/bias per group; opset 21: per channel) ----
Status PrepareGroupNorm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2)
    return NodeError(ctx, "X has rank {}, expected at least 2 (N x C x ...)", x.rank());
  if (!ctx.has_attr("num_groups")) return NodeError(ctx, "attribute num_groups is missing");
  int64_t groups = ctx.attr_int("num_groups", 1), c = x.dim(1);
  if (groups <= 0 || c % groups != 0)
    return NodeError(ctx, "num_groups {} must be positive and divide the channel count {}", groups,
                     c);
  int64_t per = ctx.opset() >= 21 ? c : groups;
  FERRY_RETURN_IF_ERROR(RequireFloatVector(ctx, 1, "scale", per));
  FERRY_RETURN_IF_ERROR(RequireFloatVector(ctx, 2, "bias", per));
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunGroupNorm(OpContext& ctx) {
  const Tensor& xt = ctx.input(0);
  int64_t n = xt.dim(0), c = xt.dim(1), groups = ctx.attr_int("num_groups", 1);
  int64_t inner = Product(xt.shape(), 2, xt.shape().size()), cpg = c / groups;
  std::vector<double> x = ToDoubles(xt), y(x.size());
  std::vector<double> scale = ToDoubles(ctx.input(1)), bias = ToDoubles(ctx.input(2));
  // Channels of a group are contiguous: each (n, group) is one row of cpg * inner values.
  NormalizeRows(x, n * groups, cpg * inner, ctx.attr_float("epsilon", 1e-5f), &y);
  bool per_channel = ctx.opset() >= 21;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      size_t p = static_cast<size_t>(per_channel ? ch : ch / cpg);
      for (int64_t s = 0; s < inner; ++s) {
        size_t i = static_cast<size_t>((b * c + ch) * inner + s);
        y[i] = y[i] * scale[p] + bias[p];
      }
    }
  StoreDoubles(y, ctx.output(0));
}

// ---- LpNormalization ----
Status PrepareLpNorm(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  const Tensor& x = ctx.input(0);
  FERRY_RETURN_IF_ERROR(NormalizeAxis(ctx, ctx.attr_int("axis", -1), x.rank()).status());
  int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) return NodeUnsupported(ctx, "p is {}, expected 1 or 2", p);
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunLpNorm(OpContext& ctx) {
  const Tensor& xt = ctx.input(0);
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += xt.rank();
  size_t a = static_cast<size_t>(axis);
  int64_t outer = Product(xt.shape(), 0, a), n = xt.dim(axis),
          inner = Product(xt.shape(), a + 1, xt.shape().size());
  bool l1 = ctx.attr_int("p", 2) == 1;
  std::vector<double> x = ToDoubles(xt), y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + in); };
      double norm = 0;
      for (int64_t k = 0; k < n; ++k) norm += l1 ? std::fabs(x[at(k)]) : x[at(k)] * x[at(k)];
      if (!l1) norm = std::sqrt(norm);
      for (int64_t k = 0; k < n; ++k) y[at(k)] = x[at(k)] / norm;
    }
  StoreDoubles(y, ctx.output(0));
}

// ---- LRN ----
Status PrepareLrn(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2)
    return NodeError(ctx, "X has rank {}, expected at least 2 (N x C x ...)", x.rank());
  if (!ctx.has_attr("size")) return NodeError(ctx, "attribute size is missing");
  if (ctx.attr_int("size", 0) <= 0)
    return NodeError(ctx, "size is {}, expected a positive value", ctx.attr_int("size", 0));
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunLrn(OpContext& ctx) {
  const Tensor& xt = ctx.input(0);
  int64_t size = ctx.attr_int("size", 1);
  double alpha = ctx.attr_float("alpha", 1e-4f), beta = ctx.attr_float("beta", 0.75f);
  double bias = ctx.attr_float("bias", 1.0f);
  int64_t n = xt.dim(0), c = xt.dim(1), inner = Product(xt.shape(), 2, xt.shape().size());
  int64_t before = (size - 1) / 2, after = size / 2;  // floor((size-1)/2), ceil((size-1)/2)
  std::vector<double> x = ToDoubles(xt), y(x.size());
  auto at = [&](int64_t b, int64_t ch, int64_t s) {
    return static_cast<size_t>((b * c + ch) * inner + s);
  };
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t s = 0; s < inner; ++s) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k)
          sq += x[at(b, k, s)] * x[at(b, k, s)];
        y[at(b, ch, s)] =
            x[at(b, ch, s)] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
  StoreDoubles(y, ctx.output(0));
}

// ---- MeanVarianceNormalization: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over axes ----
Result<std::vector<bool>> MvnAxes(const OpContext& ctx) {
  int64_t rank = ctx.input(0).rank();
  std::vector<int64_t> axes =
      ctx.has_attr("axes") ? ctx.attr_ints("axes") : std::vector<int64_t>{0, 2, 3};
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    FERRY_ASSIGN_OR_RETURN(int64_t na, NormalizeAxis(ctx, a, rank, "axes entry"));
    if (reduced[static_cast<size_t>(na)]) return NodeError(ctx, "axes lists axis {} twice", na);
    reduced[static_cast<size_t>(na)] = true;
  }
  return reduced;
}

Status PrepareMvn(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  FERRY_RETURN_IF_ERROR(MvnAxes(ctx).status());
  ctx.set_output(0, ctx.input(0).dtype(), ctx.input(0).shape());
  return Status::Ok();
}

void RunMvn(OpContext& ctx) {
  const Tensor& xt = ctx.input(0);
  std::vector<bool> reduced = MvnAxes(ctx).value();
  Shape key_shape = xt.shape();
  for (size_t d = 0; d < key_shape.size(); ++d)
    if (reduced[d]) key_shape[d] = 1;
  BroadcastIndexer key(key_shape, xt.shape());
  size_t nkeys = static_cast<size_t>(NumElements(key_shape));
  std::vector<double> x = ToDoubles(xt), y(x.size()), sum(nkeys, 0.0), sq(nkeys, 0.0);
  double count = nkeys == 0 ? 1.0 : static_cast<double>(x.size()) / static_cast<double>(nkeys);
  for (size_t i = 0; i < x.size(); ++i) {
    size_t k = static_cast<size_t>(key(static_cast<int64_t>(i)));
    sum[k] += x[i];
    sq[k] += x[i] * x[i];
  }
  for (size_t i = 0; i < x.size(); ++i) {
    size_t k = static_cast<size_t>(key(static_cast<int64_t>(i)));
    double mean = sum[k] / count;
    double var = std::max(0.0, sq[k] / count - mean * mean);
    y[i] = (x[i] - mean) / (std::sqrt(var) + 1e-9);
  }
  StoreDoubles(y, ctx.output(0));
}

constexpr OpDef kOps[] = {
    {"", "Softmax", 1, nullptr, PrepareSoftmaxFamily, RunSoftmax},
    {"", "LogSoftmax", 1, nullptr, PrepareSoftmaxFamily, RunLogSoftmax},
    {"", "Hardmax", 1, nullptr, PrepareSoftmaxFamily, RunHardmax},
    {"", "BatchNormalization", 1, nullptr, PrepareBatchNorm, RunBatchNorm},
    {"", "InstanceNormalization", 1, nullptr, PrepareInstanceNorm, RunInstanceNorm},
    {"", "LayerNormalization", 17, nullptr, PrepareLayerNorm, RunLayerNorm},
    {"", "GroupNormalization", 18, nullptr, PrepareGroupNorm, RunGroupNorm},
    {"", "LpNormalization", 1, nullptr, PrepareLpNorm, RunLpNorm},
    {"", "LRN", 1, nullptr, PrepareLrn, RunLrn},
    {"", "MeanVarianceNormalization", 9, nullptr, PrepareMvn, RunMvn},
};

}  // namespace

std::span<const OpDef> NormOps() {
  return kOps;
}

}  // namespace ferry::ops
