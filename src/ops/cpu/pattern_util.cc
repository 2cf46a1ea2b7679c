// Helpers the conv pattern matchers share (mbconv.cc, stem.cc; see families.h).
#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

namespace {

// A float scalar constant (absent: `dflt`).
bool ScalarOf(const GraphView& g, int v, float dflt, float* out) {
  if (v < 0) {
    *out = dflt;
    return true;
  }
  const Tensor* t = g.constant(v);
  if (!t || t->dtype() != DType::kFloat || t->size() != 1) return false;
  *out = t->data<float>()[0];
  return true;
}

// The gate v * Sigmoid(v) (SiLU) or v * HardSigmoid(v) (HardSwish) on value v read by steps a
// and b: its activation (kNone when it is not one) and the Mul.
Fusion::Act Gate(const GraphView& g, int v, size_t a, size_t b, size_t* mul) {
  for (auto [gs, ms] : {std::pair{a, b}, std::pair{b, a}}) {
    const ir::Node& gn = g.node(gs);
    const ir::Node& mn = g.node(ms);
    const int gv = g.output(gs, 0);
    size_t only = 0;
    if (!IsOnnxOp(mn, "Mul") || g.opset(ms) < 7 || gv < 0 || g.output(ms, 0) < 0 ||
        !OnlyReader(g, gv, &only) || only != ms || g.input(gs, 0) != v || Other(g, ms, v) != gv)
      continue;
    *mul = ms;
    if (IsOnnxOp(gn, "Sigmoid") && g.opset(gs) >= 6) return Fusion::Act::kSwish;
    if (IsOnnxOp(gn, "HardSigmoid") && g.opset(gs) >= 6 &&
        gn.attr_float("alpha", 0.2f) == 1.f / 6.f && gn.attr_float("beta", 0.5f) == 0.5f)
      return Fusion::Act::kHardSwish;
  }
  return Fusion::Act::kNone;
}

}  // namespace

// After value *v: a Relu, a Clip (constant bounds) or, with `gates`, a HardSwish that alone
// reads it, or a SiLU / HardSwish gate (Gate). Sets f and moves *v to its output, adding the
// steps to `steps`; without one f stays kNone.
bool TakeAct(const GraphView& g, int* v, Fusion* f, std::vector<size_t>* steps, bool gates) {
  const std::vector<size_t> readers = g.readers(*v);
  if (gates && readers.size() == 2) {
    size_t mul = 0;
    f->act = Gate(g, *v, readers[0], readers[1], &mul);
    if (f->act == Fusion::Act::kNone) return true;  // no activation (the caller checks readers)
    steps->push_back(std::min(readers[0], readers[1]));
    steps->push_back(std::max(readers[0], readers[1]));
    *v = g.output(mul, 0);
    return true;
  }
  if (readers.size() != 1) return false;
  const size_t s = readers[0];
  const ir::Node& n = g.node(s);
  if (gates && IsOnnxOp(n, "HardSwish") && g.opset(s) >= 14) {
    f->act = Fusion::Act::kHardSwish;
  } else if (IsOnnxOp(n, "Relu") && g.opset(s) >= 6) {
    f->act = Fusion::Act::kRelu;
  } else if (IsOnnxOp(n, "Clip") && g.opset(s) >= 6) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    if (g.opset(s) < 11) {
      f->lo = n.attr_float("min", -kInf);
      f->hi = n.attr_float("max", kInf);
    } else if (!ScalarOf(g, g.input(s, 1), -kInf, &f->lo) ||
               !ScalarOf(g, g.input(s, 2), kInf, &f->hi)) {
      return false;
    }
    f->act = Fusion::Act::kClip;
  } else {
    return true;  // no activation
  }
  if (g.output(s, 0) < 0) return false;
  steps->push_back(s);
  *v = g.output(s, 0);
  return true;
}

// Conv step s with constant float weights [k0, k1, kh, kw] and bias, dilation 1, explicit pads;
// fills its weight dims, group, strides and pads.
bool ConvStep(const GraphView& g, size_t s, ConvAt* c) {
  const ir::Node& n = g.node(s);
  if (!IsOnnxOp(n, "Conv") || n.inputs.size() < 2 || g.output(s, 0) < 0) return false;
  c->w = g.constant(g.input(s, 1));
  if (!c->w || c->w->dtype() != DType::kFloat || c->w->rank() != 4) return false;
  if (n.inputs.size() > 2 && g.input(s, 2) >= 0) {
    const Tensor* b = g.constant(g.input(s, 2));
    if (!b || b->dtype() != DType::kFloat || b->rank() != 1 || b->dim(0) != c->w->dim(0))
      return false;
  }
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && !auto_pad.empty()) return false;
  std::vector<int64_t> dil = n.attr_ints("dilations"), ks = n.attr_ints("kernel_shape");
  for (int64_t d : dil)
    if (d != 1) return false;
  if (!ks.empty() && (ks.size() != 2 || ks[0] != c->w->dim(2) || ks[1] != c->w->dim(3)))
    return false;
  c->group = n.attr_int("group", 1);
  c->strides = n.attr_ints("strides");
  c->pads = n.attr_ints("pads");
  if (c->strides.empty()) c->strides = {1, 1};
  if (c->pads.empty()) c->pads = {0, 0, 0, 0};
  return c->strides.size() == 2 && c->pads.size() == 4;
}

}  // namespace ferry::ops::cpu
