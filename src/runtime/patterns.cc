// Two parts of the cpu provider's plan: pattern kernels (a matched subgraph computed by one
// kernel, ops::cpu::AllPatterns) and memoized shape arithmetic (Step::memo).
#include <algorithm>
#include <set>

#include "runtime/executor.h"

namespace ferry::runtime {

namespace {

// The steps and values of a graph as the pattern matchers see them (read-only).
class PlanView final : public ops::cpu::GraphView {
 public:
  PlanView(const std::vector<Step>& steps, const std::vector<std::pair<int, Value>>& constants,
           const std::vector<int>& producer,
           const std::vector<std::vector<std::pair<size_t, size_t>>>& users,
           const std::vector<bool>& is_const)
      : steps_(steps),
        constants_(constants),
        producer_(producer),
        users_(users),
        is_const_(is_const) {}
  size_t num_steps() const override { return steps_.size(); }
  const ir::Node& node(size_t s) const override { return *steps_[s].node; }
  int64_t opset(size_t s) const override { return steps_[s].opset; }
  int input(size_t s, size_t i) const override {
    const auto& in = steps_[s].inputs;
    return i < in.size() ? in[i] : -1;
  }
  int output(size_t s, size_t k) const override {
    const auto& out = steps_[s].outputs;
    return k < out.size() ? out[k] : -1;
  }
  std::vector<size_t> readers(int v) const override {
    std::vector<size_t> r;
    if (v >= 0)
      for (auto [s, i] : users_[U(v)]) r.push_back(s);
    return r;
  }
  const Tensor* constant(int v) const override {
    if (v < 0) return nullptr;
    const int ps = producer_[U(v)];
    if (ps < 0) {
      if (!is_const_[U(v)]) return nullptr;
      for (const auto& [cid, val] : constants_)
        if (cid == v && val.is_tensor()) return &val.tensor();
      return nullptr;
    }
    const Step& p = steps_[static_cast<size_t>(ps)];
    if (p.alias) return constant(p.inputs[0]);
    if (p.built) return p.built.get();  // folded at Create
    const ir::Node& n = *p.node;
    const ir::Attribute* a = n.op_type == "Constant" && (n.domain.empty() || n.domain == "ai.onnx")
                                 ? n.attr("value")
                                 : nullptr;
    return a && a->type == ir::AttrType::kTensor ? &a->t : nullptr;
  }

 private:
  const std::vector<Step>& steps_;
  const std::vector<std::pair<int, Value>>& constants_;
  const std::vector<int>& producer_;
  const std::vector<std::vector<std::pair<size_t, size_t>>>& users_;
  const std::vector<bool>& is_const_;
};

}  // namespace

// Offers every step to the cpu provider's pattern matchers and keeps the matches the runtime
// can honour: each absorbed step comes after the host, no value computed inside the match (but
// its output) is read outside it or exposed (graph output, subgraph read), every value it reads
// exists before the host runs, and no step belongs to two matches. `pattern_of` gives each
// step of an accepted match (host included) the match's host.
void GraphExecutor::PlanPatterns(const PlanInfo& info, std::vector<int>* pattern_of) {
  const auto patterns = ops::cpu::AllPatterns();
  if (patterns.empty()) return;
  PlanView view(steps_, constants_, info.producer, info.users, info.is_const);
  for (size_t h = 0; h < steps_.size(); ++h) {
    if ((*pattern_of)[h] >= 0) continue;
    for (const ops::cpu::Pattern& p : patterns) {
      ops::cpu::PatternMatch m;
      if (!p.match(view, h, &m) || !m.kernel || m.output < 0) continue;
      std::set<size_t> in_match = {h};
      bool ok = true;
      for (size_t t : m.absorbed)
        ok = ok && t > h && t < steps_.size() && (*pattern_of)[t] < 0 && in_match.insert(t).second;
      bool writes_output = false;
      for (size_t t : in_match) {
        for (int o : steps_[t].outputs) {
          if (o < 0) continue;
          if (o == m.output) {
            writes_output = true;
            continue;
          }
          ok = ok && !is_output_[U(o)] && !info.sub_read[U(o)];
          for (auto [r, i] : info.users[U(o)]) ok = ok && in_match.count(r);
        }
      }
      for (int v : m.inputs) ok = ok && (v < 0 || info.producer[U(v)] < static_cast<int>(h));
      if (!ok || !writes_output) continue;
      auto plan = std::make_unique<Step::PatternPlan>();
      plan->name = p.name;
      plan->provider = "cpu (" + std::string(p.name) + ")";
      plan->kernel = m.kernel;
      plan->absorbed = m.absorbed;
      plan->inputs = m.inputs;
      plan->output = m.output;
      plan->params = m.params;
      for (int v : m.inputs) plan->const_inputs.push_back(v >= 0 && info.is_const[U(v)]);
      plan->packs = std::make_unique<ops::cpu::PackCache>();
      steps_[h].pattern = std::move(plan);
      for (size_t t : in_match) (*pattern_of)[t] = static_cast<int>(h);
      // A value the match reads may have its last reader before the host (QDQ patterns read
      // the integer tensor a DequantizeLinear before them also reads): keep it until the host.
      for (int v : m.inputs)
        for (size_t t = 0; v >= 0 && t < h; ++t) {
          auto& fr = steps_[t].frees;
          auto it = std::find(fr.begin(), fr.end(), v);
          if (it == fr.end()) continue;
          fr.erase(it);
          steps_[h].frees.push_back(v);
          break;
        }
      break;
    }
  }
}

// Marks the memo steps (Step::memo): deterministic ops of the shape arithmetic whose inputs are
// the same every run or memo steps' outputs (Shape/Size: any input; their output depends only
// on its shape), that run at their own position (not absorbed by a fusion or a pattern, not
// hosting one) and expose no output (graph outputs are handed to the caller). Then the steps
// computed only for their shapes (torch's attention reads a Transpose's shape).
void GraphExecutor::PlanMemo(const PlanInfo& info, const std::vector<bool>& absorbed) {
  static const std::set<std::string_view> kOps = {"Shape",      "Size",        "Gather",
                                                  "Unsqueeze",  "Squeeze",     "Reshape",
                                                  "Flatten",    "Concat",      "Cast",
                                                  "Range",      "Constant",    "ConstantOfShape",
                                                  "Identity",   "Equal",       "Not",
                                                  "And",        "Or",          "Less",
                                                  "Greater",    "LessOrEqual", "GreaterOrEqual",
                                                  "Where",      "Expand",      "Add",
                                                  "Sub",        "Mul",         "Div",
                                                  "Mod",        "Neg",         "Abs",
                                                  "Min",        "Max",         "Slice",
                                                  "ReduceProd", "ReduceSum",   "ReduceMin",
                                                  "ReduceMax",  "Tile",        "Transpose",
                                                  "Sqrt",       "Floor",       "Ceil"};
  const size_t nv = names_.size();
  memo_src_.assign(nv, 0);
  for (size_t v = 0; v < nv; ++v) memo_src_[v] = info.is_const[v] ? 1 : 0;
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    const ir::Node& n = *st.node;
    if (st.constant && !is_output_[U(st.outputs[0])]) {
      memo_src_[U(st.outputs[0])] = 1;  // shared every run
      continue;
    }
    if (!n.domain.empty() || !kOps.count(n.op_type) || st.has_subgraphs || absorbed[s] ||
        st.pattern || !st.absorb.empty() || st.fold || st.outputs.empty() ||
        (st.alias && info.is_const[U(st.outputs[0])]))  // shared already
      continue;
    const bool by_shape = ReadsOnlyShape(n);
    bool ok = true;
    for (int o : st.outputs) ok = ok && o >= 0 && !is_output_[U(o)];
    for (size_t i = 0; ok && i < st.inputs.size(); ++i) {
      const int id = st.inputs[i];
      if (id < 0 || (i == 0 && by_shape)) continue;
      ok = memo_src_[U(id)] != 0;
    }
    if (by_shape) ok = ok && st.inputs.size() == 1 && st.inputs[0] >= 0;
    if (!ok) continue;
    st.memo = true;
    st.memo_by_shape = by_shape;
    for (int o : st.outputs) memo_src_[U(o)] = 2;
  }
  static const std::set<std::string_view> kShapeOnly = {"Transpose", "Slice", "Concat", "Cast",
                                                        "Add",       "Sub",   "Mul",    "Div",
                                                        "MatMul",    "Relu",  "Softmax"};
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    const ir::Node& n = *st.node;
    if (!n.domain.empty() || !kShapeOnly.count(n.op_type) || st.has_subgraphs || absorbed[s] ||
        st.pattern || !st.absorb.empty() || st.memo || st.outputs.empty())
      continue;
    bool ok = true;
    for (int o : st.outputs) {
      ok = ok && o >= 0 && !is_output_[U(o)] && !info.sub_read[U(o)] && !info.users[U(o)].empty();
      if (!ok) break;
      for (auto [r, i] : info.users[U(o)]) ok = ok && steps_[r].memo_by_shape;
    }
    st.shape_only = ok;
  }
}

}  // namespace ferry::runtime
