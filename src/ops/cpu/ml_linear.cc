// cpu kernel: ai.onnx.ml LinearClassifier / LinearRegressor on float32 X.
//
// The reference kernel re-reads the attributes (coefficients, labels) on every run and reads X
// element by element through a dtype switch; here the validated model (ops/reference/
// ml_linear.h) is built once per session (PackCache) and each row is a run of dot products over
// the contiguous coefficient rows, rows split over the provider's threads when there are many.
// Products and sums in double in the reference's order, then the reference's FinishLinearRow:
// bit-identical outputs. Declines X other than float32 or not plain.
#include "ops/reference/ml_linear.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

struct PackedLinear {
  std::shared_ptr<const ml::LinearModel> model;
  size_t bytes() const {
    return model ? model->coefficients.size() * 4 + model->intercepts.size() * 4 : 0;
  }
};

struct LinearKernelState : KernelState {
  StateKey key;
  std::vector<OpContext::Declared> decl;
  std::shared_ptr<const PackedLinear> packed;
};

Status PrepareLinear(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() != DType::kFloat ||
      slot.in_layouts[0] != Layout::kPlain) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<LinearKernelState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
    const Tensor& x = ctx.input(0);
    const int64_t c = x.rank() == 1 ? x.dim(0) : x.dim(1);
    auto fresh = std::make_unique<LinearKernelState>();
    fresh->key = std::move(key);
    fresh->decl = std::move(decl);
    Status built = Status::Ok();
    // Keyed by X's columns too: the model's shape checks depend on them.
    fresh->packed =
        slot.packs->Get<PackedLinear>(&ctx.node(), "ml_linear/" + std::to_string(c), [&]() {
          auto p = std::make_shared<PackedLinear>();
          auto m = ml::BuildLinearModel(ctx, c);
          if (!m.ok())
            built = m.status();
          else
            p->model = std::move(m).value();
          return std::shared_ptr<const PackedLinear>(std::move(p));
        });
    FERRY_RETURN_IF_ERROR(built);
    if (!fresh->packed->model) {
      slot.declined = true;
      return Status::Ok();
    }
    slot.state = std::move(fresh);
    st = static_cast<LinearKernelState*>(slot.state.get());
  }
  for (size_t k = 0; k < st->decl.size(); ++k)
    if (st->decl[k].set) ctx.set_output(k, st->decl[k].dtype, st->decl[k].shape);
  slot.out_layouts.assign(ctx.num_outputs(), Layout::kPlain);
  return Status::Ok();
}

void RunLinear(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const LinearKernelState*>(slot.state.get());
  const ml::LinearModel& m = *st->packed->model;
  const Tensor& x = ctx.input(0);
  const int64_t c = m.n_features, nt = m.n_targets, oc = m.out_columns();
  const int64_t n = x.rank() == 1 ? 1 : x.dim(0);
  const float* xd = x.data<float>();
  Tensor* labels = m.classifier ? &ctx.output(0) : nullptr;
  float* z = !m.classifier                                ? ctx.output(0).data<float>()
             : ctx.num_outputs() > 1 && ctx.has_output(1) ? ctx.output(1).data<float>()
                                                          : nullptr;
  auto body = [&](int64_t b, int64_t e) {
    std::vector<float> s(static_cast<size_t>(nt)), row(static_cast<size_t>(oc));
    for (int64_t i = b; i < e; ++i) {
      const float* xi = xd + i * c;
      for (int64_t k = 0; k < nt; ++k) {
        const float* w = m.coefficients.data() + k * c;
        double acc = m.intercepts[static_cast<size_t>(k)];
        for (int64_t j = 0; j < c; ++j) acc += static_cast<double>(w[j]) * xi[j];
        s[static_cast<size_t>(k)] = static_cast<float>(acc);
      }
      ml::FinishLinearRow(m, s.data(), row.data(), labels, i);
      if (z) std::copy(row.begin(), row.end(), z + i * oc);
    }
  };
  if (n * nt * c >= (int64_t{1} << 17))
    ParallelRange(n, 64, body);
  else
    body(0, n);
}

constexpr KernelDef kKernels[] = {
    {ml::kDomain, "LinearClassifier", 1, 1000, nullptr, 0, 0, PrepareLinear, RunLinear},
    {ml::kDomain, "LinearRegressor", 1, 1000, nullptr, 0, 0, PrepareLinear, RunLinear},
};

}  // namespace

std::span<const KernelDef> MlLinearKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
