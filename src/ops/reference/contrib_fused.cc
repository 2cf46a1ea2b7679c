// Reference kernels, com.microsoft (ONNX Runtime contrib ops, since_version 1): FusedMatMul and
// FusedConv, what ONNX Runtime's graph optimizer writes when it folds a Transpose / scalar Mul
// into a MatMul and an activation (and a residual Add) into a Conv.
//
// FusedMatMul: Y = alpha * A' B', A' = A with its last two dims swapped when transA (likewise
// B); numpy matmul batch broadcasting; accumulated in double. transBatchA / transBatchB (batch
// dims moved next to the matrix dims) are not supported.
// FusedConv: Y = act(Conv(X, W, B) + Z), Z optional (the residual), Conv's attributes, `activation`
// one of Relu, Tanh, Sigmoid, LeakyRelu (activation_params: alpha), Clip (min, max),
// HardSigmoid (alpha, beta); the convolution is the default domain's Conv reference kernel.
#include "ops/reference/contrib_common.h"
#include "ops/registry.h"

namespace ferry::ops {

namespace {

// ---- FusedMatMul ----
struct FmmDims {
  Shape a_batch, b_batch, batch, out;
  int64_t m = 1, k = 1, n = 1;
  bool ta = false, tb = false;
};

Result<FmmDims> GetFmmDims(const OpContext& ctx) {
  const Shape& a = ctx.input(0).shape();
  const Shape& b = ctx.input(1).shape();
  if (a.empty() || b.empty())
    return NodeError(ctx, "inputs must have rank >= 1, got {} and {}", ShapeToString(a),
                     ShapeToString(b));
  FmmDims d;
  d.ta = a.size() >= 2 && ctx.attr_int("transA", 0) != 0;
  d.tb = b.size() >= 2 && ctx.attr_int("transB", 0) != 0;
  int64_t ka, kb;
  if (a.size() == 1) {
    ka = a[0];
  } else {
    d.m = d.ta ? a.back() : a[a.size() - 2];
    ka = d.ta ? a[a.size() - 2] : a.back();
    d.a_batch.assign(a.begin(), a.end() - 2);
  }
  if (b.size() == 1) {
    kb = b[0];
  } else {
    kb = d.tb ? b.back() : b[b.size() - 2];
    d.n = d.tb ? b[b.size() - 2] : b.back();
    d.b_batch.assign(b.begin(), b.end() - 2);
  }
  if (ka != kb)
    return NodeError(ctx, "inner dimensions differ: A' {} has {}, B' {} has {}", ShapeToString(a),
                     ka, ShapeToString(b), kb);
  d.k = ka;
  FERRY_ASSIGN_OR_RETURN(d.batch, BroadcastShapes(ctx, {d.a_batch, d.b_batch}));
  d.out = d.batch;
  if (a.size() > 1) d.out.push_back(d.m);
  if (b.size() > 1) d.out.push_back(d.n);
  return d;
}

Status PrepareFusedMatMul(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "A"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "B"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  if (ctx.input(1).dtype() != ctx.input(0).dtype())
    return NodeError(ctx, "B has dtype {}, expected A's {}", DTypeName(ctx.input(1).dtype()),
                     DTypeName(ctx.input(0).dtype()));
  if (ctx.attr_int("transBatchA", 0) != 0 || ctx.attr_int("transBatchB", 0) != 0)
    return NodeUnsupported(ctx, "transBatchA / transBatchB are not supported");
  FERRY_ASSIGN_OR_RETURN(FmmDims d, GetFmmDims(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), d.out);
  return Status::Ok();
}

void RunFusedMatMul(OpContext& ctx) {
  const FmmDims d = GetFmmDims(ctx).value();
  const std::vector<double> a = ReadDoubles(ctx.input(0)), b = ReadDoubles(ctx.input(1));
  const double alpha = ctx.attr_float("alpha", 1.f);
  BroadcastIndexer ai(d.a_batch, d.batch), bi(d.b_batch, d.batch);
  const int64_t nb = NumElements(d.batch);
  std::vector<double> y(static_cast<size_t>(nb * d.m * d.n));
  for (int64_t t = 0; t < nb; ++t) {
    const double* pa = a.data() + ai(t) * d.m * d.k;
    const double* pb = b.data() + bi(t) * d.k * d.n;
    for (int64_t i = 0; i < d.m; ++i)
      for (int64_t j = 0; j < d.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < d.k; ++p)
          acc += pa[d.ta ? p * d.m + i : i * d.k + p] * pb[d.tb ? j * d.k + p : p * d.n + j];
        y[static_cast<size_t>((t * d.m + i) * d.n + j)] = alpha * acc;
      }
  }
  WriteDoubles(y, ctx.output(0));
}

// ---- FusedConv ----
enum class ConvAct { kNone, kRelu, kTanh, kSigmoid, kLeakyRelu, kClip, kHardSigmoid };

Result<ConvAct> GetConvAct(const OpContext& ctx, std::vector<float>* params) {
  const std::string a = ctx.attr_string("activation", "");
  *params = ctx.attr_floats("activation_params");
  struct Row {
    const char* name;
    ConvAct act;
    size_t params;
  };
  static constexpr Row kActs[] = {{"", ConvAct::kNone, 0},
                                  {"Relu", ConvAct::kRelu, 0},
                                  {"Tanh", ConvAct::kTanh, 0},
                                  {"Sigmoid", ConvAct::kSigmoid, 0},
                                  {"LeakyRelu", ConvAct::kLeakyRelu, 1},
                                  {"Clip", ConvAct::kClip, 2},
                                  {"HardSigmoid", ConvAct::kHardSigmoid, 2}};
  for (const Row& r : kActs)
    if (a == r.name) {
      if (params->size() != r.params)
        return NodeError(ctx, "activation '{}' takes {} activation_params, got {}", a, r.params,
                         params->size());
      if (r.act == ConvAct::kClip && !((*params)[0] <= (*params)[1]))
        return NodeError(ctx, "Clip bounds {} > {}", (*params)[0], (*params)[1]);
      return r.act;
    }
  return NodeUnsupported(
      ctx, "activation '{}' is not supported (Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid)",
      a);
}

// Runs the default domain's Conv on the first three inputs into *out (owned).
Status RunConvPart(const OpContext& ctx, bool run, Value* out) {
  const OpDef* conv = Registry::Get().Find("", "Conv", 11);
  std::vector<const Value*> ins;
  for (size_t i = 0; i < 3 && i < ctx.num_inputs(); ++i)
    ins.push_back(ctx.has_input(i) ? &ctx.input_value(i) : nullptr);
  while (!ins.empty() && !ins.back()) ins.pop_back();
  std::vector<Value> outs(1);
  OpContext sub(ctx.node(), 11, std::move(ins), &outs);
  sub.set_pool(ctx.pool());
  FERRY_RETURN_IF_ERROR(conv->prepare(sub));
  const auto& decl = sub.declared()[0];
  if (!run) {
    *out = Value(Tensor(decl.dtype, decl.shape));
    return Status::Ok();
  }
  outs[0] = Value(Tensor(decl.dtype, decl.shape));
  conv->run(sub);
  *out = std::move(outs[0]);
  return Status::Ok();
}

Status PrepareFusedConv(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 4));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  std::vector<float> params;
  FERRY_RETURN_IF_ERROR(GetConvAct(ctx, &params).status());
  Value y;
  FERRY_RETURN_IF_ERROR(RunConvPart(ctx, false, &y));
  const Tensor& yt = y.tensor();
  if (ctx.has_input(3)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 3, "Z"));
    if (ctx.input(3).shape() != yt.shape() || ctx.input(3).dtype() != yt.dtype())
      return NodeError(ctx, "Z has shape {} ({}), expected the convolution's {} ({})",
                       ShapeToString(ctx.input(3).shape()), DTypeName(ctx.input(3).dtype()),
                       ShapeToString(yt.shape()), DTypeName(yt.dtype()));
  }
  ctx.set_output(0, yt.dtype(), yt.shape());
  return Status::Ok();
}

void RunFusedConv(OpContext& ctx) {
  std::vector<float> params;
  const ConvAct act = GetConvAct(ctx, &params).value();
  Value conv;
  (void)RunConvPart(ctx, true, &conv);
  std::vector<double> y = ReadDoubles(conv.tensor());
  if (ctx.has_input(3)) {
    const std::vector<double> z = ReadDoubles(ctx.input(3));
    for (size_t i = 0; i < y.size(); ++i) y[i] += z[i];
  }
  for (double& v : y) {
    switch (act) {
      case ConvAct::kNone:
        break;
      case ConvAct::kRelu:
        v = std::max(v, 0.0);
        break;
      case ConvAct::kTanh:
        v = std::tanh(v);
        break;
      case ConvAct::kSigmoid:
        v = 1.0 / (1.0 + std::exp(-v));
        break;
      case ConvAct::kLeakyRelu:
        v = v >= 0 ? v : v * params[0];
        break;
      case ConvAct::kClip:
        v = std::clamp(v, static_cast<double>(params[0]), static_cast<double>(params[1]));
        break;
      case ConvAct::kHardSigmoid:
        v = std::clamp(params[0] * v + params[1], 0.0, 1.0);
        break;
    }
  }
  WriteDoubles(y, ctx.output(0));
}

constexpr OpDef kOps[] = {
    {kMsDomain, "FusedMatMul", 1, nullptr, PrepareFusedMatMul, RunFusedMatMul},
    {kMsDomain, "FusedConv", 1, nullptr, PrepareFusedConv, RunFusedConv},
};

}  // namespace

std::span<const OpDef> ContribFusedOps() {
  return kOps;
}

}  // namespace ferry::ops
