// StepRunner's views (cpu provider): a reshaping step's output that shares its input's storage
// instead of copying it. Build extended the input's lifetime (arena slot included) to the
// output's last reader; whether a step makes a view is decided here, per run.
#include "runtime/step_runner.h"

namespace ferry::runtime {

// The output shape of a reshaping op as its reference prepare declares it (which validates);
// an error when it does not keep the element count.
Status StepRunner::DeclaredShape(size_t s, const Tensor& x, Shape* shape) {
  const Step& st = steps_[s];
  ops::OpContext ctx = MakeContext(s, StepInputs(s), &outs_);
  FERRY_RETURN_IF_ERROR(st.def->prepare(ctx));
  const auto& decl = ctx.declared();
  if (decl.empty() || !decl[0].set || decl[0].dtype != x.dtype() ||
      NumElements(decl[0].shape) != x.size())
    return InvalidError("{}: a reshaping op declared {} for {} elements", st.node->Describe(),
                        decl.empty() ? std::string("nothing") : ShapeToString(decl[0].shape),
                        x.size());
  *shape = decl[0].shape;
  return Status::Ok();
}

// A rank-4 Transpose between NCHW and NHWC (ConvNeXt's permutes around its LayerNorms) of a
// value stored the other way round: [0,2,3,1] of a channels-last value is its storage as a
// plain [N,H,W,C], and [0,3,1,2] of a plain [N,H,W,C] is that storage as a channels-last
// [N,C,H,W] when every reader takes channels-last.
bool StepRunner::RelayoutView(size_t s) {
  const Step& st = steps_[s];
  const size_t in = U(st.inputs[0]), out = U(st.outputs[0]);
  const Value& v = frame_.values[in];
  if (!v.is_tensor() || st.node->op_type != "Transpose" || v.tensor().rank() != 4 ||
      v.tensor().dtype() == DType::kString)
    return false;
  const std::vector<int64_t> perm = st.node->attr_ints("perm");
  const Shape& xs = v.tensor().shape();
  if (layouts_[in] == Layout::kNhwc && perm == std::vector<int64_t>{0, 2, 3, 1}) {
    frame_.values[out] = Value(v.tensor().Reshaped({xs[0], xs[2], xs[3], xs[1]}));
    layouts_[out] = Layout::kPlain;
  } else if (layouts_[in] == Layout::kPlain && perm == std::vector<int64_t>{0, 3, 1, 2} && fuse_ &&
             e_.nhwc_ok_[out] && v.tensor().dtype() == DType::kFloat) {
    frame_.values[out] = Value(v.tensor().Reshaped({xs[0], xs[3], xs[1], xs[2]}));
    layouts_[out] = Layout::kNhwc;
  } else {
    return false;
  }
  state_.steps[s].provider = "cpu (view)";
  return true;
}

Status StepRunner::RunView(size_t s, bool* ran) {
  if (RelayoutView(s)) {
    *ran = true;
    return Status::Ok();
  }
  const Step& st = steps_[s];
  StepState& ss = state_.steps[s];
  const size_t in = U(st.inputs[0]), out = U(st.outputs[0]);
  const Value& v = frame_.values[in];
  if (!v.is_tensor()) return Status::Ok();
  if (layouts_[in] == Layout::kNhwc && fuse_ && e_.nhwc_ok_[out] && st.node->op_type == "Reshape") {
    // A channels-last value reshaped keeping N first and H, W last (its channels split or
    // merged: the channel shuffle) has the same storage: a channels-last view.
    Shape ys;
    FERRY_RETURN_IF_ERROR(DeclaredShape(s, v.tensor(), &ys));
    const Shape& xs = v.tensor().shape();
    const size_t r = xs.size();
    if (r >= 4 && ys.size() >= 4 && ys[0] == xs[0] && ys[ys.size() - 2] == xs[r - 2] &&
        ys.back() == xs[r - 1]) {
      frame_.values[out] = Value(v.tensor().Reshaped(ys));
      layouts_[out] = Layout::kNhwc;
      ss.provider = "cpu (channels-last view)";
      *ran = true;
      return Status::Ok();
    }
  }
  if (st.node->op_type == "Identity" && layouts_[in] != Layout::kPlain && fuse_ &&
      e_.nhwc_ok_[out]) {
    frame_.values[out] = v;  // the same storage in the same provider layout (PlanLayouts)
    layouts_[out] = layouts_[in];
    ss.provider = "cpu (channels-last view)";
    *ran = true;
    return Status::Ok();
  }
  if (layouts_[in] != Layout::kPlain || v.tensor().dtype() == DType::kString) return Status::Ok();
  const Shape& xs = v.tensor().shape();
  if (st.node->op_type == "Transpose") {
    // Same element order when the dims larger than 1 keep their order.
    std::vector<int64_t> perm = st.node->attr_ints("perm");
    if (perm.empty())
      for (size_t i = xs.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != xs.size()) return Status::Ok();
    int64_t prev = -1;
    for (const int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(xs.size())) return Status::Ok();  // prepare reports
      if (xs[static_cast<size_t>(p)] == 1) continue;
      if (p <= prev) return Status::Ok();
      prev = p;
    }
  }
  if (st.node->op_type == "Identity") {
    frame_.values[out] = v;
  } else {
    Shape ys;
    FERRY_RETURN_IF_ERROR(DeclaredShape(s, v.tensor(), &ys));
    frame_.values[out] = Value(v.tensor().Reshaped(ys));
  }
  layouts_[out] = Layout::kPlain;
  ss.provider = "cpu (view)";
  *ran = true;
  return Status::Ok();
}

}  // namespace ferry::runtime
