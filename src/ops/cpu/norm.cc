// cpu kernels: float32 Softmax, ReduceMean / ReduceSum over contiguous axes, LayerNormalization,
// on the row kernels of vec.h.
//
// Softmax: opset 1-12 coerces the input to 2-D at `axis` (rows of prod(dims[axis:])); opset 13+
// works along one axis. A contiguous row (the last axis, or any legacy split) is the fast path;
// an inner axis is gathered into a row, computed and scattered back.
// ReduceMean / ReduceSum: the reduced axes must be one contiguous block (e.g. [-1], [-2,-1] or
// [1] of [B,S,H]); other reductions decline. keepdims either way. A rank-4 input may arrive in a
// conv's layout (NHWC, channel-blocked): H and W reduced there directly, other axes after a copy
// to plain.
// LayerNormalization (opset 17, and ONNX Runtime's contrib form from opset 1): one normalized row
// of prod(dims[axis:]); Scale and B of that many elements (or one); the optional Mean / InvStdDev
// outputs decline. Rows are split over the threads in fixed contiguous blocks when the tensor is
// large.
#include <algorithm>
#include <vector>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements

struct RowState : KernelState {
  int64_t outer = 1, n = 1, inner = 1;  // [outer, n, inner]: the op works along n
  float eps = 0;
  bool mean = false;  // ReduceMean (else ReduceSum)
  // Reduce over H and W of a rank-4 input in a non-plain layout: per-channel sums in that layout
  // (ChannelSums); any other reduction of such an input reads a plain copy (`plain`).
  Layout layout = Layout::kPlain;
  bool spatial = false;
  std::vector<float> partial, plain;
};

bool PlainFloat(const OpContext& ctx, const NodeSlot& slot, size_t i) {
  return ctx.has_input(i) && ctx.input_is_tensor(i) && ctx.input(i).dtype() == DType::kFloat &&
         (slot.in_layouts.size() <= i || slot.in_layouts[i] == Layout::kPlain);
}

RowState* Fresh(NodeSlot& slot) {
  slot.state = std::make_unique<RowState>();
  return static_cast<RowState*>(slot.state.get());
}

// Splits rows [0, rows) of `row_elems` elements each over the threads.
template <typename F>
void ForRows(int64_t rows, int64_t row_elems, F&& fn) {
  ParallelRange(rows, std::max<int64_t>(1, kParallelMin / std::max<int64_t>(1, row_elems)), fn);
}

Status PrepareSoftmax(OpContext& ctx, NodeSlot& slot) {
  if (!PlainFloat(ctx, slot, 0) || ctx.input(0).size() == 0 || ctx.input(0).rank() == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  const bool legacy = ctx.opset() < 13;
  int64_t axis = ctx.attr_int("axis", legacy ? 1 : -1);
  if (axis < 0) axis += rank;
  RowState* st = Fresh(slot);
  const size_t a = static_cast<size_t>(std::min(axis, rank));
  st->outer = NumElements(Shape(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(a)));
  const Shape rest(s.begin() + static_cast<std::ptrdiff_t>(a), s.end());
  if (legacy) {
    st->n = NumElements(rest);
  } else {
    st->n = s[a];
    st->inner = NumElements(Shape(rest.begin() + 1, rest.end()));
  }
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, decl[0].shape);
  return Status::Ok();
}

void RunSoftmax(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const RowState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const auto softmax = Vec().softmax;
  const int64_t n = st->n, inner = st->inner;
  if (inner == 1) {
    ForRows(st->outer, n, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) softmax(x + r * n, y + r * n, n);
    });
    return;
  }
  ForRows(st->outer * inner, n, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(2 * n));
    for (int64_t r = b; r < e; ++r) {
      const int64_t base = (r / inner) * n * inner + r % inner;
      for (int64_t k = 0; k < n; ++k) row[static_cast<size_t>(k)] = x[base + k * inner];
      softmax(row.data(), row.data() + n, n);
      for (int64_t k = 0; k < n; ++k) y[base + k * inner] = row[static_cast<size_t>(n + k)];
    }
  });
}

template <bool kMean>
Status PrepareReduce(OpContext& ctx, NodeSlot& slot) {
  const Layout layout = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() != DType::kFloat ||
      ctx.input(0).rank() == 0 || (layout != Layout::kPlain && ctx.input(0).rank() != 4)) {
    slot.declined = true;
    return Status::Ok();
  }
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  const int64_t axes_input_opset = kMean ? 18 : 13;
  std::vector<int64_t> axes;
  if (ctx.opset() >= axes_input_opset) {
    if (ctx.has_input(1)) {
      if (!ctx.input_is_tensor(1) || ctx.input(1).dtype() != DType::kInt64) {
        slot.declined = true;
        return Status::Ok();
      }
      axes = ctx.input(1).ToInt64Vector();
    }
    if (axes.empty() && ctx.attr_int("noop_with_empty_axes", 0) != 0) {
      slot.declined = true;
      return Status::Ok();
    }
  } else {
    axes = ctx.attr_ints("axes");
  }
  // Validates (duplicate or out-of-range axes are the reference's errors).
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  std::vector<bool> reduced(s.size(), axes.empty());
  for (int64_t ax : axes) reduced[static_cast<size_t>(ax < 0 ? ax + rank : ax)] = true;
  // The reduced axes must be one contiguous block [first, last): x is [outer, n, inner].
  size_t first = 0;
  while (first < s.size() && !reduced[first]) ++first;
  size_t last = first;
  while (last < s.size() && reduced[last]) ++last;
  for (size_t d = last; d < s.size(); ++d)
    if (reduced[d]) {  // reduced axes with a kept one between them
      slot.declined = true;
      return Status::Ok();
    }
  auto span = [&](size_t b, size_t e) {
    return NumElements(Shape(s.begin() + static_cast<std::ptrdiff_t>(b),
                             s.begin() + static_cast<std::ptrdiff_t>(e)));
  };
  if (ctx.input(0).size() == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  RowState* st = Fresh(slot);
  st->outer = span(0, first);
  st->n = span(first, last);
  st->inner = span(last, s.size());
  st->mean = kMean;
  st->layout = layout;
  st->spatial = layout != Layout::kPlain && first == 2 && last == 4;
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, decl[0].shape);
  return Status::Ok();
}

void RunReduce(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<RowState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const int64_t n = st->n, inner = st->inner;
  const float scale = st->mean ? 1.f / static_cast<float>(n) : 1.f;
  if (st->spatial) {  // torch's x.mean([2, 3]) (MnasNet) of a conv's NHWC / blocked output
    ChannelSums(x, st->layout, ctx.input(0).dim(0), ctx.input(0).dim(1), n, scale, y, st->partial);
    return;
  }
  if (st->layout != Layout::kPlain) {
    st->plain.resize(static_cast<size_t>(ctx.input(0).size()));
    ConvertLayoutInto(ctx.input(0), st->layout, st->plain.data(), Layout::kPlain);
    x = st->plain.data();
  }
  if (inner == 1) {
    const auto sum = Vec().sum;
    ForRows(st->outer, n, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) y[r] = sum(x + r * n, n) * scale;
    });
    return;
  }
  // An inner block: y[o, j] = sum over k of x[o, k, j] (a fixed order, independent of threads).
  const auto sum_lanes = Vec().sum_lanes;
  ForRows(st->outer, n * inner, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float* yr = y + r * inner;
      sum_lanes(x + r * n * inner, n, inner, yr);
      if (st->mean)
        for (int64_t j = 0; j < inner; ++j) yr[j] *= scale;
    }
  });
}

Status PrepareLayerNorm(OpContext& ctx, NodeSlot& slot) {
  const bool has_b = ctx.has_input(2);
  if (!PlainFloat(ctx, slot, 0) || !PlainFloat(ctx, slot, 1) ||
      (has_b && !PlainFloat(ctx, slot, 2)) || ctx.num_outputs() > 1 || ctx.input(0).size() == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, ctx.num_inputs()));
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += rank;
  const int64_t n = NumElements(Shape(s.begin() + axis, s.end()));
  auto fits = [&](size_t i) {
    const int64_t k = ctx.input(i).size();
    return k == n || k == 1;
  };
  if (n == 0 || !fits(1) || (has_b && !fits(2))) {
    slot.declined = true;
    return Status::Ok();
  }
  RowState* st = Fresh(slot);
  st->n = n;
  st->outer = ctx.input(0).size() / n;
  st->eps = ctx.attr_float("epsilon", 1e-5f);
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, decl[0].shape);
  return Status::Ok();
}

void RunLayerNorm(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const RowState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const float* g = ctx.input(1).data<float>();
  const int64_t gs = ctx.input(1).size() == 1 ? 0 : 1;
  const float* bb = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  const int64_t bs = bb && ctx.input(2).size() == 1 ? 0 : 1;
  const auto ln = Vec().layer_norm;
  const int64_t n = st->n;
  ForRows(st->outer, n, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) ln(x + r * n, y + r * n, n, st->eps, g, gs, bb, bs);
  });
}

// ---- The decomposed LayerNorm torch exports (opset < 17, or LayerNorm written out):
//   m = ReduceMean(x, [-1]); d = x - m; v = ReduceMean(Pow(d, 2), [-1]);
//   n = d / Sqrt(v + eps); [n * gamma]; [+ beta]
// computed by one row kernel. Inputs: x, gamma (or absent), beta (or absent); params: eps.

bool ScalarConst(const GraphView& g, int v, float* out) {
  const Tensor* t = v >= 0 ? g.constant(v) : nullptr;
  if (!t || t->size() != 1) return false;
  *out = t->data<float>()[0];
  return true;
}

// ReduceMean over the last axis only, keeping it.
bool MeanOfLastAxis(const GraphView& g, size_t s) {
  if (!IsOp(g, s, "ReduceMean") || g.node(s).attr_int("keepdims", 1) != 1) return false;
  if (g.opset(s) < 18) return g.node(s).attr_ints("axes") == std::vector<int64_t>{-1};
  const Tensor* axes = g.input(s, 1) >= 0 ? g.constant(g.input(s, 1)) : nullptr;
  return axes == nullptr ? false
                         : axes->dtype() == DType::kInt64 && axes->size() == 1 &&
                               axes->data<int64_t>()[0] == -1;
}

const KernelDef* LayerNormPatternKernel();

bool MatchLayerNorm(const GraphView& g, size_t host, PatternMatch* m) {
  if (!MeanOfLastAxis(g, host)) return false;
  const int x = g.input(host, 0), mean = g.output(host, 0);
  size_t sub, pow, rm2, add_eps, sqrt, div;
  if (x < 0 || mean < 0 || !OnlyReader(g, mean, &sub) || !IsOp(g, sub, "Sub") ||
      g.input(sub, 0) != x || g.input(sub, 1) != mean)
    return false;
  const int d = g.output(sub, 0);
  const std::vector<size_t> dr = g.readers(d);
  if (dr.size() != 2) return false;
  pow = IsOp(g, dr[0], "Pow") ? dr[0] : dr[1];
  div = pow == dr[0] ? dr[1] : dr[0];
  float two = 0, eps = 0;
  if (!IsOp(g, pow, "Pow") || g.input(pow, 0) != d || !ScalarConst(g, g.input(pow, 1), &two) ||
      two != 2.f)
    return false;
  if (!OnlyReader(g, g.output(pow, 0), &rm2) || !MeanOfLastAxis(g, rm2)) return false;
  if (!OnlyReader(g, g.output(rm2, 0), &add_eps) || !IsOp(g, add_eps, "Add") ||
      !ScalarConst(g, Other(g, add_eps, g.output(rm2, 0)), &eps))
    return false;
  if (!OnlyReader(g, g.output(add_eps, 0), &sqrt) || !IsOp(g, sqrt, "Sqrt")) return false;
  if (!IsOp(g, div, "Div") || g.input(div, 0) != d || g.input(div, 1) != g.output(sqrt, 0))
    return false;
  m->absorbed = {sub, pow, rm2, add_eps, sqrt, div};
  m->inputs = {x, -1, -1};
  m->output = g.output(div, 0);
  size_t mul, add;
  if (OnlyReader(g, m->output, &mul) && IsOp(g, mul, "Mul") && Other(g, mul, m->output) >= 0) {
    m->inputs[1] = Other(g, mul, m->output);
    m->absorbed.push_back(mul);
    m->output = g.output(mul, 0);
    if (OnlyReader(g, m->output, &add) && IsOp(g, add, "Add") && Other(g, add, m->output) >= 0) {
      m->inputs[2] = Other(g, add, m->output);
      m->absorbed.push_back(add);
      m->output = g.output(add, 0);
    }
  }
  m->params = {eps};
  m->kernel = LayerNormPatternKernel();
  return true;
}

// gamma / beta: absent, one element, or the last dim's size laid along the last axis.
bool RowOperand(const OpContext& ctx, const NodeSlot& slot, size_t i, int64_t n) {
  if (!ctx.has_input(i)) return true;
  if (!PlainFloat(ctx, slot, i) || ctx.input(i).rank() > ctx.input(0).rank()) return false;
  const Tensor& t = ctx.input(i);
  return t.size() == 1 || (t.size() == n && t.shape().back() == n);
}

Status PrepareLayerNormPattern(OpContext& ctx, NodeSlot& slot) {
  if (!PlainFloat(ctx, slot, 0) || ctx.input(0).rank() == 0 || ctx.input(0).size() == 0 ||
      slot.params.size() != 1) {
    slot.declined = true;
    return Status::Ok();
  }
  const int64_t n = ctx.input(0).shape().back();
  if (!RowOperand(ctx, slot, 1, n) || !RowOperand(ctx, slot, 2, n)) {
    slot.declined = true;
    return Status::Ok();
  }
  RowState* st = Fresh(slot);
  st->n = n;
  st->outer = ctx.input(0).size() / n;
  st->eps = slot.params[0];
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, ctx.input(0).shape());
  return Status::Ok();
}

void RunLayerNormPattern(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const RowState*>(slot.state.get());
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const float* g = ctx.has_input(1) ? ctx.input(1).data<float>() : nullptr;
  const int64_t gs = g && ctx.input(1).size() > 1 ? 1 : 0;
  const float* bb = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  const int64_t bs = bb && ctx.input(2).size() > 1 ? 1 : 0;
  const auto ln = Vec().layer_norm;
  const int64_t n = st->n;
  ForRows(st->outer, n, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) ln(x + r * n, y + r * n, n, st->eps, g, gs, bb, bs);
  });
}

constexpr KernelDef kLayerNormPattern = {"",
                                         "LayerNorm (pattern)",
                                         1,
                                         1000,
                                         nullptr,
                                         0,
                                         0,
                                         PrepareLayerNormPattern,
                                         RunLayerNormPattern};

const KernelDef* LayerNormPatternKernel() {
  return &kLayerNormPattern;
}

// ---- Attention scores: Softmax(x [* cx] + w [* cw]) over the last axis (torch's attention:
// scores * scale + mask * scale, then Softmax), one pass per row: the scaled sum of the row into
// a buffer, then the Softmax row kernel. The same float operations as the steps (a product, a
// product, a sum, the same row kernel), so the same bits as running them one by one. x or w
// has the output's shape, the other broadcasts to it (numpy). Inputs: x, w; params: Softmax's
// axis, then (has cx, cx, has cw, cw).

const KernelDef* AddSoftmaxPatternKernel();

bool ScalarFloat(const GraphView& g, int v, float* out) {
  const Tensor* t = v >= 0 ? g.constant(v) : nullptr;
  if (!t || t->dtype() != DType::kFloat || t->size() != 1) return false;
  *out = t->data<float>()[0];
  return true;
}

// Step s is Mul(v, c) (either order) with c a float scalar constant.
bool ScaledBy(const GraphView& g, size_t s, int* v, float* c) {
  if (!IsOp(g, s, "Mul") || g.opset(s) < 7) return false;
  const int a = g.input(s, 0), b = g.input(s, 1);
  if (a >= 0 && ScalarFloat(g, b, c)) {
    *v = a;
    return true;
  }
  if (b >= 0 && ScalarFloat(g, a, c)) {
    *v = b;
    return true;
  }
  return false;
}

// The step after `from` writing value v, or -1.
int ProducerAfter(const GraphView& g, int v, size_t from) {
  for (size_t s = from + 1; s < g.num_steps(); ++s)
    for (size_t k = 0; g.output(s, k) >= 0; ++k)
      if (g.output(s, k) == v) return static_cast<int>(s);
  return -1;
}

bool MatchAddSoftmax(const GraphView& g, size_t host, PatternMatch* m) {
  float cx = 1.f, cw = 1.f;
  bool hx = false, hw = false;
  int x = -1, w = -1;
  size_t add = host;
  std::vector<size_t> absorbed;
  if (IsOp(g, host, "Mul")) {
    if (!ScaledBy(g, host, &x, &cx) || !OnlyReader(g, g.output(host, 0), &add)) return false;
    hx = true;
    absorbed.push_back(add);
    w = Other(g, add, g.output(host, 0));
    // The other operand scaled by a later step that only this Add reads.
    size_t reader = 0;
    const int ps = w >= 0 ? ProducerAfter(g, w, host) : -1;
    int wv = -1;
    if (ps >= 0 && OnlyReader(g, w, &reader) && reader == add &&
        ScaledBy(g, static_cast<size_t>(ps), &wv, &cw)) {
      hw = true;
      w = wv;
      absorbed.push_back(static_cast<size_t>(ps));
    }
  } else {
    x = g.input(host, 0);
    w = g.input(host, 1);
  }
  if (x < 0 || w < 0 || !IsOp(g, add, "Add") || g.opset(add) < 7) return false;
  size_t sm = 0;
  if (!OnlyReader(g, g.output(add, 0), &sm) || !IsOp(g, sm, "Softmax")) return false;
  absorbed.push_back(sm);
  std::sort(absorbed.begin(), absorbed.end());
  if (host == add)
    absorbed.erase(std::remove(absorbed.begin(), absorbed.end(), add), absorbed.end());
  const int64_t axis = g.node(sm).attr_int("axis", g.opset(sm) < 13 ? 1 : -1);
  m->absorbed = absorbed;
  m->inputs = {x, w};
  m->output = g.output(sm, 0);
  m->params = {static_cast<float>(axis), hx ? 1.f : 0.f, cx, hw ? 1.f : 0.f, cw};
  m->kernel = AddSoftmaxPatternKernel();
  return true;
}

struct AddSoftmaxState : KernelState {
  int64_t outer = 1, n = 1;
  bool swap = false;                // the full-shape operand is input 1
  std::vector<int64_t> dims, bstr;  // output dims and the broadcast operand's strides (0: bcast)
};

Status PrepareAddSoftmax(OpContext& ctx, NodeSlot& slot) {
  if (!PlainFloat(ctx, slot, 0) || !PlainFloat(ctx, slot, 1) || slot.params.size() != 5) {
    slot.declined = true;
    return Status::Ok();
  }
  const Shape& a = ctx.input(0).shape();
  const Shape& b = ctx.input(1).shape();
  const size_t r = std::max(a.size(), b.size());
  Shape out(r, 1);
  for (size_t k = 0; k < r; ++k) {
    const int64_t da = k + a.size() >= r ? a[k + a.size() - r] : 1;
    const int64_t db = k + b.size() >= r ? b[k + b.size() - r] : 1;
    if (da != db && da != 1 && db != 1) {
      slot.declined = true;  // the reference reports the mismatch
      return Status::Ok();
    }
    out[k] = da == 1 ? db : da;
  }
  int64_t axis = static_cast<int64_t>(slot.params[0]);
  if (axis < 0) axis += static_cast<int64_t>(r);
  const bool swap = a != out;
  if (r == 0 || axis != static_cast<int64_t>(r) - 1 || (swap && b != out) ||
      NumElements(out) == 0) {
    slot.declined = true;
    return Status::Ok();
  }
  auto st = std::make_unique<AddSoftmaxState>();
  st->swap = swap;
  st->dims = out;
  st->n = out.back();
  st->outer = NumElements(out) / st->n;
  const Shape& small = swap ? a : b;
  st->bstr.assign(r, 0);
  int64_t stride = 1;
  for (size_t k = small.size(); k-- > 0;) {
    const size_t o = k + r - small.size();
    st->bstr[o] = small[k] == 1 ? 0 : stride;
    stride *= small[k];
  }
  slot.state = std::move(st);
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, out);
  return Status::Ok();
}

void RunAddSoftmax(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const AddSoftmaxState*>(slot.state.get());
  const size_t full = st->swap ? 1 : 0;
  const float* x = ctx.input(full).data<float>();
  const float* w = ctx.input(1 - full).data<float>();
  const bool hx = slot.params[full == 0 ? 1 : 3] != 0.f, hw = slot.params[full == 0 ? 3 : 1] != 0.f;
  const float cx = slot.params[full == 0 ? 2 : 4], cw = slot.params[full == 0 ? 4 : 2];
  float* y = ctx.output(0).data<float>();
  // The row kernels the Mul / Add / Softmax steps run on (the same bits).
  const VecOps& vec = Vec();
  const auto softmax = vec.softmax;
  const auto mul = vec.binary[static_cast<int>(BinOp::kMul)][static_cast<int>(RowKind::kVS)];
  const auto add = vec.binary[static_cast<int>(BinOp::kAdd)][static_cast<int>(RowKind::kVV)];
  const int64_t n = st->n, nd = static_cast<int64_t>(st->dims.size());
  const int64_t ws = st->bstr.back();
  ForRows(st->outer, n, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = b; r < e; ++r) {
      int64_t off = 0;
      for (int64_t k = nd - 1, q = r; k-- > 0;) {
        off += (q % st->dims[static_cast<size_t>(k)]) * st->bstr[static_cast<size_t>(k)];
        q /= st->dims[static_cast<size_t>(k)];
      }
      const float* xr = x + r * n;
      const float* wr = w + off;
      float* t = row.data();
      float* yr = y + r * n;
      const float* a = xr;
      if (hx) {  // x * cx, into the output row (free until the softmax)
        mul(xr, &cx, yr, n);
        a = yr;
      }
      const float* c = wr;
      if (ws == 0) {  // one mask value for the row
        const float v = hw ? wr[0] * cw : wr[0];
        std::fill(t, t + n, v);
        c = t;
      } else if (hw) {
        mul(wr, &cw, t, n);
        c = t;
      }
      add(a, c, t, n);
      softmax(t, yr, n);
    }
  });
}

constexpr KernelDef kAddSoftmaxPattern = {
    "", "AddSoftmax (pattern)", 1, 1000, nullptr, 0, 0, PrepareAddSoftmax, RunAddSoftmax};

const KernelDef* AddSoftmaxPatternKernel() {
  return &kAddSoftmaxPattern;
}

constexpr Pattern kPatterns[] = {
    {"LayerNorm", MatchLayerNorm},
    {"AddSoftmax", MatchAddSoftmax},
};

constexpr KernelDef kKernels[] = {
    {"", "Softmax", 1, 1000, nullptr, 0, 0, PrepareSoftmax, RunSoftmax},
    {"", "ReduceMean", 1, 1000, nullptr, 0b1, 0, PrepareReduce<true>, RunReduce},
    {"", "ReduceSum", 1, 1000, nullptr, 0b1, 0, PrepareReduce<false>, RunReduce},
    {"", "LayerNormalization", 1, 1000, nullptr, 0, 0, PrepareLayerNorm, RunLayerNorm},
};

}  // namespace

std::span<const Pattern> NormPatterns() {
  return kPatterns;
}

std::span<const KernelDef> NormKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
