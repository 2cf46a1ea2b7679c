// The cpu provider's plan, made once at Create: which values are the same every run, which
// DequantizeLinears fold, which values may be stored channels-last, which may be written in
// their place in a Concat's output, the pattern kernels (patterns.cc), which Add / activation
// steps a fusing kernel absorbs, and the memoized shape arithmetic (patterns.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/thread_pool.h"
#include "runtime/executor.h"

namespace ferry::runtime {

namespace {

bool IsDefaultDomain(const ir::Node& n) {
  return n.domain.empty() || n.domain == "ai.onnx";
}

}  // namespace

void GraphExecutor::PlanCpu(const std::vector<std::vector<std::string>>& reads) {
  if (!shared_->cpu()) return;
  const size_t nv = names_.size();
  PlanInfo info;
  info.is_const.assign(nv, false);
  info.sub_read.assign(nv, false);
  info.users.assign(nv, {});
  info.producer.assign(nv, -1);
  // The same every run: initializers, Constant outputs (weights held as Constant nodes, as
  // spox writes them) and the enclosing graphs' constants a subgraph reads.
  for (const auto& [id, v] : constants_) info.is_const[U(id)] = true;
  for (const Step& st : steps_)
    if (st.constant && !is_output_[U(st.outputs[0])]) info.is_const[U(st.outputs[0])] = true;
  for (const auto& [id, name] : outer_)
    if (outer_const_.count(name)) info.is_const[U(id)] = true;
  for (int id : input_ids_) info.is_const[U(id)] = false;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    for (int id : st.outputs)
      if (id >= 0) info.producer[U(id)] = static_cast<int>(s);
    for (size_t i = 0; i < st.inputs.size(); ++i)
      if (st.inputs[i] >= 0) info.users[U(st.inputs[i])].emplace_back(s, i);
    const ir::Node& n = *st.node;
    const auto& r = reads[static_cast<size_t>(&n - graph_.nodes.data())];
    for (const auto& name : r)
      if (std::find(n.inputs.begin(), n.inputs.end(), name) == n.inputs.end())
        info.sub_read[U(ids_.at(name))] = true;
  }
  for (const auto& [id, name] : outer_) info.sub_read[U(id)] = true;
  // An Identity of a constant is constant (the weights torch shares between layers).
  for (Step& st : steps_) {
    if (!st.alias) continue;
    if (is_output_[U(st.outputs[0])])
      st.alias = false;
    else if (info.is_const[U(st.inputs[0])])
      info.is_const[U(st.outputs[0])] = true;
  }
  FoldAtCreate(info);
  PlanFolds(info);
  PlanLayouts(info);
  placeable_.assign(nv, false);
  for (size_t v = 0; v < nv; ++v) {
    if (is_output_[v] || info.sub_read[v] || info.producer[v] < 0 || info.users[v].size() != 1)
      continue;
    const ir::Node& n = *steps_[info.users[v][0].first].node;
    placeable_[v] = n.op_type == "Concat" && n.domain.empty();
  }
  // A pattern's steps also get their fusions planned, each within its own match (a Conv in a
  // pattern still takes the Relu after it), for the runs where the pattern kernel declines.
  // `absorbed`: steps taken by a pattern or fused into another step.
  std::vector<int> pattern_of(steps_.size(), -1);
  PlanPatterns(info, &pattern_of);
  std::vector<bool> absorbed(steps_.size(), false);
  for (size_t s = 0; s < steps_.size(); ++s) absorbed[s] = pattern_of[s] >= 0;
  for (Step& st : steps_) {
    if (!st.cpu) continue;
    st.const_inputs.assign(st.inputs.size(), false);
    for (size_t i = 0; i < st.inputs.size(); ++i)
      st.const_inputs[i] = st.inputs[i] >= 0 && info.is_const[U(st.inputs[i])];
  }
  PlanFusions(info, pattern_of, &absorbed);
  PlanMemo(info, absorbed);
}

namespace {

// Ops whose result does not depend only on their inputs and attributes, or that are planned
// otherwise (DequantizeLinear: PlanFolds), or that make no tensor.
bool FoldableOp(const ir::Node& n) {
  static const std::set<std::string_view> kNot = {"Constant",
                                                  "RandomNormal",
                                                  "RandomNormalLike",
                                                  "RandomUniform",
                                                  "RandomUniformLike",
                                                  "Bernoulli",
                                                  "Multinomial",
                                                  "If",
                                                  "Loop",
                                                  "Scan",
                                                  "DequantizeLinear",
                                                  "SequenceConstruct",
                                                  "SequenceEmpty",
                                                  "SequenceInsert",
                                                  "SequenceErase",
                                                  "SequenceAt",
                                                  "SequenceLength",
                                                  "SplitToSequence",
                                                  "ConcatFromSequence",
                                                  "Optional",
                                                  "OptionalGetElement",
                                                  "OptionalHasElement"};
  return IsDefaultDomain(n) && !kNot.count(n.op_type);
}

// A folded value larger than this stays computed at run time (a ConstantOfShape to a huge
// shape, a Tile or Expand of a constant).
constexpr size_t kFoldBytes = size_t{64} << 20;

}  // namespace

// Steps whose inputs are all the same every run (initializers, Constants, earlier folded steps)
// are computed once here with their reference kernel, as ONNX Runtime folds constants when it
// loads a model: torch's re-ordered LSTM weights (Slice -> Concat -> Unsqueeze of Constants),
// transposed weights, shape arithmetic on constants. The step then shares its value like a
// Constant ("cpu (folded at create)"), and kernels reading it pack it once. A step that fails
// here (bad attributes) or would make more than kFoldBytes is left to run, and reports there.
void GraphExecutor::FoldAtCreate(PlanInfo& info) {
  std::vector<const Tensor*> value(names_.size(), nullptr);
  for (const auto& [id, v] : constants_)
    if (info.is_const[U(id)] && v.is_tensor()) value[U(id)] = &v.tensor();
  for (const auto& [id, name] : outer_)
    if (auto it = outer_const_.find(name); it != outer_const_.end()) value[U(id)] = it->second;
  ThreadPool pool(1);
  for (Step& st : steps_) {
    if (st.constant && !st.outputs.empty() && st.outputs[0] >= 0)
      value[U(st.outputs[0])] = st.constant;
    if (st.alias && value[U(st.inputs[0])] && !is_output_[U(st.outputs[0])])
      value[U(st.outputs[0])] = value[U(st.inputs[0])];
    if (st.constant || st.alias || st.has_subgraphs || st.outputs.size() != 1 ||
        st.outputs[0] < 0 || is_output_[U(st.outputs[0])] || info.sub_read[U(st.outputs[0])] ||
        !FoldableOp(*st.node))
      continue;
    std::vector<Value> in(st.inputs.size());
    std::vector<const Value*> ptrs;
    bool ok = !st.inputs.empty();
    for (size_t i = 0; ok && i < st.inputs.size(); ++i) {
      const int id = st.inputs[i];
      if (id < 0) {
        ptrs.push_back(nullptr);
        continue;
      }
      ok = value[U(id)] != nullptr;
      if (ok) in[i] = Value(*value[U(id)]);
      ptrs.push_back(&in[i]);
    }
    if (!ok) continue;
    std::vector<Value> outs(1);
    ops::OpContext ctx(*st.node, st.opset, std::move(ptrs), &outs);
    ctx.set_pool(&pool);
    ctx.set_seed(shared_->seed);
    ctx.set_max_loop_iterations(shared_->max_loop_iterations);
    if (!st.def->prepare(ctx).ok()) continue;
    const auto& decl = ctx.declared();
    if (decl.size() != 1 || !decl[0].set) continue;
    bool sane = true;
    for (int64_t d : decl[0].shape) sane = sane && d >= 0;
    if (!sane || static_cast<double>(NumElements(decl[0].shape)) * DTypeSize(decl[0].dtype) >
                     static_cast<double>(kFoldBytes))
      continue;
    outs[0] = Value(Tensor(decl[0].dtype, decl[0].shape));
    st.def->run(ctx);
    if (!ctx.run_status().ok() || !outs[0].is_tensor()) continue;
    st.built = std::make_unique<Tensor>(outs[0].tensor());
    st.constant = st.built.get();
    value[U(st.outputs[0])] = st.constant;
    info.is_const[U(st.outputs[0])] = true;
  }
}

// DequantizeLinears of constants fold: computed once, shared (Step::fold). Lazy folds' (constant,
// shared) inputs stay alive to the end of the run, since the DequantizeLinear may be computed at
// any later reader.
void GraphExecutor::PlanFolds(PlanInfo& info) {
  for (Step& st : steps_)
    if (st.node->op_type == "DequantizeLinear" && st.node->domain.empty() &&
        st.outputs.size() == 1 && st.outputs[0] >= 0 && !is_output_[U(st.outputs[0])]) {
      st.fold = true;
      for (int id : st.inputs) st.fold = st.fold && (id < 0 || info.is_const[U(id)]);
      // Same data every run: kernels reading it (a float Gemm's B) may pack it once.
      if (st.fold) {
        info.is_const[U(st.outputs[0])] = true;
        st.fold_cell = std::make_unique<FoldCell>();
      }
    }
  lazy_producer_.assign(names_.size(), -1);
  std::set<int> keep;
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    if (!st.fold || info.sub_read[U(st.outputs[0])]) continue;
    st.lazy = true;
    lazy_producer_[U(st.outputs[0])] = static_cast<int>(s);
    for (int id : st.inputs)
      if (id >= 0) keep.insert(id);
  }
  if (!keep.empty())
    for (Step& st : steps_) std::erase_if(st.frees, [&](int id) { return keep.count(id) > 0; });
}

// Which values may be stored in a provider layout: every reader is a cpu kernel that takes
// it, a Shape / Size (they read only the shape), a Reshape that is a channels-last view or an
// Identity whose readers take the layout (below). Readers come after their values, so the steps are
// walked backwards.
void GraphExecutor::PlanLayouts(const PlanInfo& info) {
  const size_t nv = names_.size();
  nhwc_ok_.assign(nv, false);
  // A Transpose that keeps N first and H, W last of a rank-5+ value (the channel shuffle's
  // [0,2,1,3,4]): on channels-last data it permutes each pixel's channels.
  const auto channel_transpose = [&](size_t s) {
    const ir::Node& n = *steps_[s].node;
    if (n.op_type != "Transpose" || !n.domain.empty()) return false;
    const std::vector<int64_t> p = n.attr_ints("perm");
    return p.size() >= 5 && ops::cpu::KeepsPixelDims(p);
  };
  // A Reshape splitting or merging a channels-last value's channels is a view (run time):
  // taken only between a channel transpose and readers that take channels-last, so a Reshape
  // that flattens (a classifier's) keeps its plain input and stays a view of it.
  const auto reshape_ok = [&](size_t s) {
    const Step& st = steps_[s];
    if (!st.view || st.node->op_type != "Reshape" || st.outputs.empty() || st.outputs[0] < 0 ||
        !ops::cpu::ChannelsLastNative())
      return false;
    const size_t out = U(st.outputs[0]);
    if (!nhwc_ok_[out]) return false;
    const int ps = info.producer[U(st.inputs[0])];
    if (ps >= 0 && channel_transpose(static_cast<size_t>(ps))) return true;
    for (auto [r, i] : info.users[out])
      if (!channel_transpose(r)) return false;
    return true;
  };
  // An Identity (paddle2onnx writes one after most nodes) passes any layout on when its own
  // readers take it: a view at run time (run_views.cc).
  const auto identity_ok = [&](size_t s) {
    const Step& st = steps_[s];
    return st.view && st.node->op_type == "Identity" && st.outputs.size() == 1 &&
           st.outputs[0] >= 0 && nhwc_ok_[U(st.outputs[0])];
  };
  const auto reader_ok = [&](size_t s, size_t i) {
    const Step& st = steps_[s];
    if (ReadsOnlyShape(*st.node)) return true;
    if (i == 0 && (reshape_ok(s) || identity_ok(s))) return true;
    return st.cpu && i < 32 && ((st.cpu->nhwc_inputs >> i) & 1u);
  };
  const auto decide = [&](size_t v) {
    bool ok = !is_output_[v] && !info.sub_read[v] && !info.users[v].empty();
    for (auto [s, i] : info.users[v]) ok = ok && reader_ok(s, i);
    nhwc_ok_[v] = ok;
  };
  for (size_t s = steps_.size(); s-- > 0;)
    for (int id : steps_[s].outputs)
      if (id >= 0) decide(U(id));
  for (size_t v = 0; v < nv; ++v)
    if (info.producer[v] < 0) decide(v);
}

// A float scalar constant: a Constant node's, or an initializer's; true for an omitted input
// (keep the default).
const Tensor* GraphExecutor::ConstTensor(const PlanInfo& info, int id) const {
  if (id < 0 || !info.is_const[U(id)]) return nullptr;
  const int ps = info.producer[U(id)];
  if (ps >= 0) return steps_[static_cast<size_t>(ps)].constant;
  for (const auto& [cid, v] : constants_)
    if (cid == id && v.is_tensor()) return &v.tensor();
  return nullptr;
}

// An inference BatchNormalization whose scale, B, mean and var are constant float vectors of one
// length: y = x * a + b per channel, a = scale / sqrt(var + eps), b = B - mean * a (as its cpu
// kernel computes them). Null otherwise.
std::shared_ptr<const ops::cpu::Fusion::Affine> GraphExecutor::BatchNormAffine(
    const PlanInfo& info, const Step& bn) const {
  const ir::Node& n = *bn.node;
  if (bn.opset < 9 || bn.inputs.size() != 5 || bn.outputs.size() != 1 ||
      n.attr_int("training_mode", 0) != 0)
    return nullptr;
  const Tensor* t[4];
  for (size_t i = 0; i < 4; ++i) {
    t[i] = ConstTensor(info, bn.inputs[i + 1]);
    if (!t[i] || t[i]->dtype() != DType::kFloat || t[i]->rank() != 1 ||
        t[i]->size() != t[0]->size())
      return nullptr;
  }
  const float eps = n.attr_float("epsilon", 1e-5f);
  auto aff = std::make_shared<ops::cpu::Fusion::Affine>();
  const int64_t c = t[0]->size();
  aff->a.resize(static_cast<size_t>(c));
  aff->b.resize(static_cast<size_t>(c));
  for (int64_t k = 0; k < c; ++k) {
    const float a = t[0]->data<float>()[k] / std::sqrt(t[3]->data<float>()[k] + eps);
    aff->a[static_cast<size_t>(k)] = a;
    aff->b[static_cast<size_t>(k)] = t[1]->data<float>()[k] - t[2]->data<float>()[k] * a;
  }
  return aff;
}

bool GraphExecutor::ConstScalar(const PlanInfo& info, int id, float* out) const {
  if (id < 0) return true;
  const int ps = info.producer[U(id)];
  if (ps >= 0) {
    const ir::Node& pn = *steps_[static_cast<size_t>(ps)].node;
    const ir::Attribute* a =
        pn.op_type == "Constant" && pn.domain.empty() ? pn.attr("value") : nullptr;
    if (!a || a->t.dtype() != DType::kFloat || a->t.size() != 1) return false;
    *out = a->t.data<float>()[0];
    return true;
  }
  if (!info.is_const[U(id)]) return false;
  for (const auto& [cid, v] : constants_)
    if (cid == id && v.is_tensor() && v.tensor().dtype() == DType::kFloat &&
        v.tensor().size() == 1) {
      *out = v.tensor().data<float>()[0];
      return true;
    }
  return false;
}

// Exact (erf) GELU of v as torch exports nn.GELU: d = v / sqrt(2) (or v * (1 / sqrt(2)), step
// `scale`), Erf(d), Add(., 1), Mul(v, .) (step `mul`), Mul(., 0.5); or with the halving first,
// Mul(v, 0.5) (step `mul`) times Add(., 1); every intermediate read only by the next step.
// Fills `steps` with the five steps in execution order (the last one writes the result).
bool GraphExecutor::MatchGelu(const PlanInfo& info, const std::vector<bool>& absorbed, int v,
                              size_t scale, size_t mul, std::vector<size_t>* steps) const {
  const auto single = [&](size_t s, const char* op, size_t n_in) {
    const Step& st = steps_[s];
    const ir::Node& n = *st.node;
    return !absorbed[s] && IsDefaultDomain(n) && n.op_type == op && st.opset >= 7 &&
           st.inputs.size() == n_in && st.outputs.size() == 1 && st.outputs[0] >= 0;
  };
  // The one reader of step s's output (not exposed), or -1.
  const auto next = [&](size_t s) -> int {
    const size_t o = U(steps_[s].outputs[0]);
    if (is_output_[o] || info.sub_read[o] || info.users[o].size() != 1) return -1;
    return static_cast<int>(info.users[o][0].first);
  };
  // The other input of binary step s (v's value read at the other position) as a constant.
  const auto constant = [&](size_t s, int known, float* c) {
    const Step& st = steps_[s];
    const int o = st.inputs[0] == known ? st.inputs[1] : st.inputs[0];
    return o >= 0 && o != known && ConstScalar(info, o, c);
  };
  float c = 0;
  const bool div = single(scale, "Div", 2) && steps_[scale].inputs[0] == v &&
                   constant(scale, v, &c) && std::fabs(c - 1.41421356f) < 1e-6f;
  const bool times = !div && single(scale, "Mul", 2) && constant(scale, v, &c) &&
                     std::fabs(c - 0.70710678f) < 1e-6f;
  if (!div && !times) return false;
  const int erf = next(scale);
  if (erf < 0 || !single(static_cast<size_t>(erf), "Erf", 1)) return false;
  const int add = next(static_cast<size_t>(erf));
  if (add < 0 || !single(static_cast<size_t>(add), "Add", 2) ||
      !constant(static_cast<size_t>(add), steps_[static_cast<size_t>(erf)].outputs[0], &c) ||
      c != 1.f)
    return false;
  const int prod = next(static_cast<size_t>(add));
  if (prod < 0 || !single(mul, "Mul", 2)) return false;
  if (static_cast<size_t>(prod) == mul) {  // (v * (1 + erf)) * 0.5
    const int half = next(mul);
    if (half < 0 || !single(static_cast<size_t>(half), "Mul", 2) ||
        !constant(static_cast<size_t>(half), steps_[mul].outputs[0], &c) || c != 0.5f)
      return false;
    *steps = {scale, static_cast<size_t>(erf), static_cast<size_t>(add), mul,
              static_cast<size_t>(half)};
    return true;
  }
  // (v * 0.5) * (1 + erf), the form of `0.5 * x * (1 + erf(x / sqrt(2)))` (HF transformers):
  // `mul` is v * 0.5, read only by `prod`, which also reads the Add.
  if (!constant(mul, v, &c) || c != 0.5f || next(mul) != prod ||
      !single(static_cast<size_t>(prod), "Mul", 2))
    return false;
  *steps = {scale, static_cast<size_t>(erf), static_cast<size_t>(add), mul,
            static_cast<size_t>(prod)};
  std::sort(steps->begin(), steps->end());  // `prod`, reading all the others, is last
  return true;
}

// The chain a fusing kernel at step s may absorb: producer -> [Add] -> [Relu|Clip|HardSwish|
// gate|GELU], each link the only reader of the previous value, and the Add's other operand
// computed before the producer runs. A gate is v * Sigmoid(v) (SiLU) or v * HardSigmoid(v;
// 1/6, 1/2): v read by just those two steps, the gate's output by the Mul. GELU only after a
// MatMul or a Conv (the kernels that take it). An Identity joins the chain anywhere before the
// activation. A Conv's chain may start with an inference BatchNormalization of constant
// statistics (paddle2onnx leaves them unfolded), which the conv folds into its weights and bias.
// Steps join only within the same pattern (or none).
bool GraphExecutor::FusionChain(const PlanInfo& info, const std::vector<int>& pattern_of,
                                const std::vector<bool>& absorbed,
                                const std::vector<bool>& fused_in, size_t s, ops::cpu::Fusion* f,
                                std::vector<size_t>* absorb, int* out, int* residual) const {
  using ops::cpu::Fusion;
  const Step& st = steps_[s];
  const auto joinable = [&](size_t t) { return !fused_in[t] && pattern_of[t] == pattern_of[s]; };
  // v * Sigmoid(v) or v * HardSigmoid(v): gate step g, Mul step m.
  const auto gated = [&](int v, size_t g, size_t m) {
    const Step& gs = steps_[g];
    const Step& ms = steps_[m];
    const ir::Node& gn = *gs.node;
    const ir::Node& mn = *ms.node;
    if (!gn.domain.empty() || !mn.domain.empty() || !joinable(g) || !joinable(m) ||
        mn.op_type != "Mul" || ms.opset < 7 || ms.inputs.size() != 2 || ms.outputs.size() != 1 ||
        ms.outputs[0] < 0 || gs.outputs.size() != 1 || gs.outputs[0] < 0 || gs.inputs.size() != 1)
      return Fusion::Act::kNone;
    const size_t gv = U(gs.outputs[0]);
    if (is_output_[gv] || info.sub_read[gv] || info.users[gv].size() != 1 ||
        info.users[gv][0].first != m)
      return Fusion::Act::kNone;
    if (ms.inputs[1 - info.users[gv][0].second] != v) return Fusion::Act::kNone;
    if (gn.op_type == "Sigmoid" && gs.opset >= 6) return Fusion::Act::kSwish;
    if (gn.op_type == "HardSigmoid" && gs.opset >= 6 && gn.attr_float("alpha", 0.2f) == 1.f / 6.f &&
        gn.attr_float("beta", 0.5f) == 0.5f)
      return Fusion::Act::kHardSwish;
    return Fusion::Act::kNone;
  };
  int v = st.outputs[0];
  for (;;) {
    const size_t vu = U(v);
    if (is_output_[vu] || info.sub_read[vu]) break;
    if (info.users[vu].size() == 2 && f->act == Fusion::Act::kNone) {
      const size_t a = info.users[vu][0].first, b = info.users[vu][1].first;
      std::vector<size_t> gelu;
      if ((st.node->op_type == "MatMul" || st.node->op_type == "Conv") && pattern_of[s] < 0 &&
          (MatchGelu(info, absorbed, v, a, b, &gelu) ||
           MatchGelu(info, absorbed, v, b, a, &gelu))) {
        f->act = Fusion::Act::kGelu;
        absorb->insert(absorb->end(), gelu.begin(), gelu.end());
        v = steps_[gelu.back()].outputs[0];
        break;
      }
      const Fusion::Act act = a < b ? gated(v, a, b) : gated(v, b, a);
      if (act == Fusion::Act::kNone) break;
      f->act = act;
      absorb->push_back(std::min(a, b));
      absorb->push_back(std::max(a, b));
      v = steps_[std::max(a, b)].outputs[0];
      break;
    }
    if (info.users[vu].size() != 1) break;
    auto [t, idx] = info.users[vu][0];
    const Step& ts = steps_[t];
    const ir::Node& n = *ts.node;
    if (!IsDefaultDomain(n) || ts.outputs.size() != 1 || ts.outputs[0] < 0 || !joinable(t)) break;
    if (n.op_type == "BatchNormalization" && st.node->op_type == "Conv" && idx == 0 && !f->affine &&
        !f->sum && f->act == Fusion::Act::kNone && absorb->empty()) {
      f->affine = BatchNormAffine(info, ts);
      if (!f->affine) break;
    } else if (n.op_type == "Add" && !f->sum && f->act == Fusion::Act::kNone && ts.opset >= 7 &&
               ts.inputs.size() == 2) {
      const int o = ts.inputs[1 - idx];
      if (o < 0 || o == v || info.producer[U(o)] >= static_cast<int>(s)) break;
      f->sum = true;
      *residual = o;
    } else if (n.op_type == "Relu" && ts.opset >= 6) {
      f->act = Fusion::Act::kRelu;
    } else if (n.op_type == "Clip" && ts.opset >= 6) {
      f->lo = -std::numeric_limits<float>::infinity();
      f->hi = std::numeric_limits<float>::infinity();
      if (ts.opset < 11) {
        f->lo = n.attr_float("min", f->lo);
        f->hi = n.attr_float("max", f->hi);
      } else if (!ConstScalar(info, ts.inputs.size() > 1 ? ts.inputs[1] : -1, &f->lo) ||
                 !ConstScalar(info, ts.inputs.size() > 2 ? ts.inputs[2] : -1, &f->hi)) {
        break;
      }
      f->act = Fusion::Act::kClip;
    } else if (n.op_type == "HardSwish" && ts.opset >= 14) {
      f->act = Fusion::Act::kHardSwish;
    } else if (n.op_type == "Identity" && ts.inputs.size() == 1 && f->act == Fusion::Act::kNone) {
      // paddle2onnx puts an Identity after most nodes (between a conv's bias Add and its GELU)
    } else {
      break;
    }
    absorb->push_back(t);
    v = ts.outputs[0];
    if (f->act != Fusion::Act::kNone) break;
  }
  *out = v;
  return !absorb->empty();
}

void GraphExecutor::PlanFusions(const PlanInfo& info, const std::vector<int>& pattern_of,
                                std::vector<bool>* absorbed) {
  std::vector<bool> fused_in(steps_.size(), false);
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    if (!st.cpu || st.cpu->fuse_input <= 0 || fused_in[s] || st.outputs.empty() ||
        st.outputs[0] < 0)
      continue;
    ops::cpu::Fusion f;
    std::vector<size_t> absorb;
    int out = -1, residual = -1;
    if (!FusionChain(info, pattern_of, *absorbed, fused_in, s, &f, &absorb, &out, &residual))
      continue;
    st.fusion = f;
    st.absorb = absorb;
    st.fused_output = out;
    st.residual = residual;
    if (f.sum && st.node->op_type == "Conv") {
      // The output may be written over the residual when no later step outside the chain reads
      // it (a view of it may outlive it), the conv itself does not read it (Add(conv(x), x): its
      // window would read what it has overwritten), and no input may be a view of another
      // value's tensor.
      const size_t r = U(residual);
      bool dies = !is_output_[r] && !info.sub_read[r];
      for (auto [t, i] : info.users[r])
        dies = dies && !steps_[t].view &&
               (t <= s || std::find(absorb.begin(), absorb.end(), t) != absorb.end());
      for (int in : st.inputs) {
        const int ps = in < 0 ? -1 : info.producer[U(in)];
        dies = dies && in != residual && (ps < 0 || !steps_[static_cast<size_t>(ps)].view);
      }
      st.residual_dies = dies;
    }
    for (size_t t : absorb) (*absorbed)[t] = fused_in[t] = true;
  }
}

}  // namespace ferry::runtime
