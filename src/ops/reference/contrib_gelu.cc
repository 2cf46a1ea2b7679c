// Reference kernels, com.microsoft (ONNX Runtime contrib ops, since_version 1): Gelu, FastGelu,
// BiasGelu, QuickGelu, BiasAdd. Computed in double, rounded once on store.
//   Gelu(x)       = 0.5 x (1 + erf(x / sqrt(2)))
//   BiasGelu(a,b) = Gelu(a + b), b of the last dim's size
//   FastGelu(x,b) = 0.5 y (1 + tanh(sqrt(2 / pi) (y + 0.044715 y^3))), y = x + b (b optional)
//   QuickGelu(x)  = x * sigmoid(alpha x), alpha default 1.702
//   BiasAdd(x, bias, skip) = x + bias + skip, x and skip [N, S, C], bias [C]
#include "ops/reference/contrib_common.h"

namespace ferry::ops {

namespace {

enum class Act { kGelu, kFastGelu, kQuickGelu };

double Apply(Act a, double x, double alpha) {
  switch (a) {
    case Act::kGelu:
      return 0.5 * x * (1.0 + std::erf(x * M_SQRT1_2));
    case Act::kFastGelu: {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    case Act::kQuickGelu:
      return x / (1.0 + std::exp(-alpha * x));
  }
  return x;
}

// Input i (when given) is a float tensor of X's dtype with the last dim's size (1-D).
Status RequireBias(const OpContext& ctx, size_t i, std::string_view what) {
  if (!ctx.has_input(i)) return Status::Ok();
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  const Tensor& x = ctx.input(0);
  const Tensor& b = ctx.input(i);
  const int64_t last = x.rank() > 0 ? x.dim(x.rank() - 1) : 1;
  if (b.dtype() != x.dtype() || b.rank() != 1 || b.dim(0) != last)
    return NodeError(ctx, "{} has shape {} ({}), expected [{}] ({})", what,
                     ShapeToString(b.shape()), DTypeName(b.dtype()), last, DTypeName(x.dtype()));
  return Status::Ok();
}

template <Act kAct, size_t kMaxInputs>
Status PrepareAct(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, kMaxInputs == 2 && kAct == Act::kGelu ? 2 : 1, kMaxInputs));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  if (ctx.input(0).rank() == 0 && kMaxInputs == 2 && ctx.has_input(1))
    return NodeError(ctx, "X is a scalar, expected a tensor with a last dim for the bias");
  if (kMaxInputs == 2) FERRY_RETURN_IF_ERROR(RequireBias(ctx, 1, "bias"));
  ctx.set_output(0, ctx.input(0).dtype(), ctx.input(0).shape());
  return Status::Ok();
}

template <Act kAct>
void RunAct(OpContext& ctx) {
  std::vector<double> x = ReadDoubles(ctx.input(0));
  if (ctx.num_inputs() > 1 && ctx.has_input(1)) {
    const std::vector<double> b = ReadDoubles(ctx.input(1));
    for (size_t i = 0; i < x.size(); ++i) x[i] += b[i % b.size()];
  }
  const double alpha = ctx.attr_float("alpha", 1.702f);
  for (double& v : x) v = Apply(kAct, v, alpha);
  WriteDoubles(x, ctx.output(0));
}

Status PrepareBiasAdd(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kContribFloatTypes));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3)
    return NodeError(ctx, "X has shape {}, expected [N, S, C]", ShapeToString(x.shape()));
  FERRY_RETURN_IF_ERROR(RequireBias(ctx, 1, "bias"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "skip"));
  if (ctx.input(2).shape() != x.shape() || ctx.input(2).dtype() != x.dtype())
    return NodeError(ctx, "skip has shape {} ({}), expected {} ({})",
                     ShapeToString(ctx.input(2).shape()), DTypeName(ctx.input(2).dtype()),
                     ShapeToString(x.shape()), DTypeName(x.dtype()));
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunBiasAdd(OpContext& ctx) {
  std::vector<double> x = ReadDoubles(ctx.input(0));
  const std::vector<double> b = ReadDoubles(ctx.input(1)), s = ReadDoubles(ctx.input(2));
  for (size_t i = 0; i < x.size(); ++i) x[i] += b[i % b.size()] + s[i];
  WriteDoubles(x, ctx.output(0));
}

constexpr OpDef kOps[] = {
    {kMsDomain, "Gelu", 1, nullptr, PrepareAct<Act::kGelu, 1>, RunAct<Act::kGelu>},
    {kMsDomain, "BiasGelu", 1, nullptr, PrepareAct<Act::kGelu, 2>, RunAct<Act::kGelu>},
    {kMsDomain, "FastGelu", 1, nullptr, PrepareAct<Act::kFastGelu, 2>, RunAct<Act::kFastGelu>},
    {kMsDomain, "QuickGelu", 1, nullptr, PrepareAct<Act::kQuickGelu, 1>, RunAct<Act::kQuickGelu>},
    {kMsDomain, "BiasAdd", 1, nullptr, PrepareBiasAdd, RunBiasAdd},
};

}  // namespace

std::span<const OpDef> ContribGeluOps() {
  return kOps;
}

}  // namespace ferry::ops
