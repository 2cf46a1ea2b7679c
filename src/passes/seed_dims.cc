#include "passes/seed_dims.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "passes/seed_dims_analysis.h"

namespace ferry::passes {

namespace seed_dims {

int64_t Eval(const std::vector<Step>& steps, int64_t v) {
  for (const Step& s : steps) {
    if (v < 0) return -1;
    if (s.kind == Step::Kind::kAdd) {
      v += s.add;
    } else if (s.kind == Step::Kind::kScale) {
      v = static_cast<int64_t>(std::floor(static_cast<double>(v) * s.scale));
    } else if (s.same) {
      v = (v + s.stride - 1) / s.stride;
    } else {
      const int64_t num = v + s.pads - s.dk;
      if (num < 0) return -1;
      v = (s.ceil ? (num + s.stride - 1) / s.stride : num / s.stride) + 1;
    }
  }
  return v;
}

int64_t MinFor(const std::vector<Step>& steps, int64_t need) {
  if (Eval(steps, kMaxDim) < need) return 0;
  int64_t lo = 1, hi = kMaxDim;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (Eval(steps, mid) >= need)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

bool Anonymous(const std::string& symbol) {
  return symbol.empty() || symbol == "?";
}

void Analysis::Follow(const ir::Graph& g, const std::map<std::string, Shape>& given) {
  consts_.clear();
  info_.clear();
  for (const auto& init : g.initializers) Const(init.name, init.tensor);
  for (const ir::ValueInfo* vi : g.RealInputs()) {
    if (vi->type.kind != ir::TypeInfo::Kind::kTensor || !vi->type.shape) continue;
    const auto& decl = *vi->type.shape;
    auto it = given.find(vi->name);
    Info info;
    for (size_t a = 0; a < decl.size(); ++a) {
      const ir::Dim& d = decl[a];
      if (d.value && *d.value >= 0) {
        info.push_back(Known(*d.value));
        continue;
      }
      const size_t key = KeyOf(vi->name, a, d.symbol);
      if (it != given.end() && it->second.size() == decl.size()) {
        if (!keys_[key].given) keys_[key].given = it->second[a];
        info.push_back(Known(it->second[a]));
      } else {
        Axis ax;
        ax.carry = Carry{key, {}};
        info.push_back(ax);
      }
    }
    info_[vi->name] = std::move(info);
  }
  // Nodes in listed order, again while new tensors become known (graphs are usually sorted).
  for (int pass = 0; pass < 4; ++pass) {
    const size_t before = info_.size();
    Walk(g);
    if (info_.size() == before) break;
  }
}

size_t Analysis::KeyOf(const std::string& input, size_t axis, const std::string& symbol) {
  const std::string id = Anonymous(symbol) ? fmt::format("{}\n{}", input, axis) : symbol;
  auto [it, fresh] = key_ids_.emplace(id, keys_.size());
  if (fresh) {
    Key k;
    k.name = Anonymous(symbol) ? fmt::format("{} axis {}", input, axis)
                               : fmt::format("{} axis {} ('{}')", input, axis, symbol);
    keys_.push_back(std::move(k));
  }
  return it->second;
}

void Analysis::Const(const std::string& name, const Tensor& t) {
  consts_[name] = &t;
  Info info;
  for (int64_t d : t.shape()) info.push_back(Known(d));
  info_[name] = std::move(info);
}

const Info* Analysis::Find(const ir::Node& n, size_t k) const {
  if (k >= n.inputs.size() || n.inputs[k].empty()) return nullptr;
  auto it = info_.find(n.inputs[k]);
  return it == info_.end() ? nullptr : &it->second;
}

std::optional<std::vector<int64_t>> Analysis::Ints(const ir::Node& n, size_t k) const {
  if (k >= n.inputs.size()) return std::nullopt;
  auto it = consts_.find(n.inputs[k]);
  if (it == consts_.end() || !IsInteger(it->second->dtype())) return std::nullopt;
  return it->second->ToInt64Vector();
}

std::optional<std::vector<int64_t>> Analysis::IntsOf(const ir::Node& n, const char* attr,
                                                     size_t k) const {
  if (n.attr(attr)) return n.attr_ints(attr);
  return Ints(n, k);
}

void Analysis::Set(const ir::Node& n, size_t k, Info info) {
  if (k < n.outputs.size() && !n.outputs[k].empty()) info_.emplace(n.outputs[k], std::move(info));
}

void Analysis::RequireMin(const Carry& c, int64_t need, const std::string& why) {
  keys_[c.key].at_least.emplace_back(c.steps, need);
  const int64_t v = MinFor(c.steps, need);
  if (v > keys_[c.key].min) {
    keys_[c.key].min = v;
    keys_[c.key].min_why = why;
  }
}

void Analysis::RequireExact(const Carry& c, int64_t d, const std::string& why) {
  const int64_t v = MinFor(c.steps, d);
  if (v > 0 && Eval(c.steps, v) == d && !keys_[c.key].exact) {
    keys_[c.key].exact = v;
    keys_[c.key].exact_why = why;
  }
}

bool Analysis::SameSteps(const Carry& a, const Carry& b) {
  if (a.steps.size() != b.steps.size()) return false;
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const Step &x = a.steps[i], &y = b.steps[i];
    if (x.kind != y.kind || x.add != y.add || x.scale != y.scale || x.pads != y.pads ||
        x.dk != y.dk || x.stride != y.stride || x.same != y.same || x.ceil != y.ceil)
      return false;
  }
  return true;
}

Axis Analysis::Unify(const Axis& a, const Axis& b, const ir::Node& n) {
  if (a.known && b.carry) RequireExact(*b.carry, *a.known, n.Describe());
  if (b.known && a.carry) RequireExact(*a.carry, *b.known, n.Describe());
  if (a.carry && b.carry && a.carry->key == b.carry->key && !SameSteps(*a.carry, *b.carry)) {
    Key& k = keys_[a.carry->key];
    if (k.equal.empty()) k.equal_why = n.Describe();
    if (k.equal.size() < 64) k.equal.emplace_back(a.carry->steps, b.carry->steps);
  }
  return a.known ? a : b.known ? b : a.carry ? a : b;
}

void Analysis::Walk(const ir::Graph& g) {
  for (const auto& init : g.initializers)
    if (!consts_.count(init.name)) Const(init.name, init.tensor);
  for (const auto& n : g.nodes) {
    for (const auto& a : n.attributes) {
      if (a.g) Walk(*a.g);
      for (const auto& sg : a.graphs) Walk(*sg);
    }
    if (n.outputs.empty() || n.outputs[0].empty() || info_.count(n.outputs[0])) continue;
    Node(n);
  }
}

void Analysis::Node(const ir::Node& n) {
  static const std::set<std::string, std::less<>> kSame = {"Relu",
                                                           "Sigmoid",
                                                           "Tanh",
                                                           "Exp",
                                                           "Log",
                                                           "Abs",
                                                           "Neg",
                                                           "Sqrt",
                                                           "Reciprocal",
                                                           "Floor",
                                                           "Ceil",
                                                           "Round",
                                                           "Erf",
                                                           "Sin",
                                                           "Cos",
                                                           "Softplus",
                                                           "Softsign",
                                                           "HardSigmoid",
                                                           "HardSwish",
                                                           "LeakyRelu",
                                                           "Elu",
                                                           "Selu",
                                                           "Celu",
                                                           "Gelu",
                                                           "Mish",
                                                           "Clip",
                                                           "Cast",
                                                           "Identity",
                                                           "Dropout",
                                                           "BatchNormalization",
                                                           "InstanceNormalization",
                                                           "LayerNormalization",
                                                           "Softmax",
                                                           "LogSoftmax",
                                                           "Hardmax",
                                                           "Not",
                                                           "Sign",
                                                           "IsNaN",
                                                           "IsInf",
                                                           "QuantizeLinear",
                                                           "DequantizeLinear",
                                                           "LRN",
                                                           "Shrink",
                                                           "ThresholdedRelu",
                                                           "MeanVarianceNormalization"};
  static const std::set<std::string, std::less<>> kBroadcast = {
      "Add",  "Sub", "Mul",   "Div",   "Pow",     "Max",         "Min",
      "Mean", "Sum", "Equal", "Less",  "Greater", "LessOrEqual", "GreaterOrEqual",
      "And",  "Or",  "Xor",   "Where", "PRelu",   "Mod"};
  static const std::set<std::string, std::less<>> kPools = {"MaxPool", "AveragePool", "LpPool"};
  if (!n.domain.empty()) return;
  const std::string& op = n.op_type;
  if (op == "Constant") {
    const ir::Attribute* v = n.attr("value");
    if (v && v->type == ir::AttrType::kTensor) Const(n.outputs[0], v->t);
  } else if (kSame.count(op)) {
    if (const Info* x = Find(n, 0)) Set(n, 0, *x);
  } else if (kBroadcast.count(op)) {
    Broadcast(n);
  } else if (op == "Conv" || kPools.count(op)) {
    Window(n, op == "Conv");
  } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool") {
    if (const Info* x = Find(n, 0); x && x->size() >= 2) {
      Info out(x->begin(), x->begin() + 2);
      out.resize(x->size(), Known(1));
      Set(n, 0, out);
    }
  } else if (op == "MatMul") {
    MatMul(n);
  } else if (op == "Gemm") {
    Gemm(n);
  } else if (op == "Pad") {
    Pad(n);
  } else if (op == "Transpose") {
    Transpose(n);
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    Squeeze(n, op == "Unsqueeze");
  } else if (op == "Reshape") {
    Reshape(n);
  } else if (op == "Concat") {
    Concat(n);
  } else if (op == "LSTM" || op == "GRU" || op == "RNN") {
    Recurrent(n);
  } else if (op == "Resize" || op == "Upsample") {
    Resize(n);
  }
}

namespace {

// The smallest size that meets every minimum and every equality of `k` (up to kSearch), or
// the largest minimum when none does; `searched` tells whether an equality decided it.
int64_t Search(const Key& k, bool* searched) {
  constexpr int64_t kSearch = 8192;
  if (k.equal.empty()) return k.min;
  for (int64_t v = k.min; v <= kSearch; ++v) {
    bool ok = true;
    for (const auto& [steps, need] : k.at_least) ok = ok && Eval(steps, v) >= need;
    for (const auto& [a, b] : k.equal) ok = ok && Eval(a, v) == Eval(b, v) && Eval(a, v) > 0;
    if (ok) {
      *searched = v != k.min;
      return v;
    }
  }
  return k.min;
}

}  // namespace

SeedDims Analysis::Choose(const std::map<std::string, Shape>& given) {
  SeedDims out;
  std::set<size_t> noted;
  for (const ir::ValueInfo* vi : g_.RealInputs()) {
    if (vi->type.kind != ir::TypeInfo::Kind::kTensor || !vi->type.shape) continue;
    if (auto it = given.find(vi->name); it != given.end()) {
      out.shapes[vi->name] = it->second;
      continue;
    }
    Shape shape;
    const auto& decl = *vi->type.shape;
    for (size_t a = 0; a < decl.size(); ++a) {
      const ir::Dim& d = decl[a];
      if (d.value && *d.value >= 0) {
        shape.push_back(*d.value);
        continue;
      }
      const size_t key = KeyOf(vi->name, a, d.symbol);
      const Key& k = keys_[key];
      bool searched = false;
      const int64_t v = k.given ? *k.given : k.exact ? *k.exact : Search(k, &searched);
      shape.push_back(v);
      if (k.given || v == 1 || !noted.insert(key).second) continue;
      out.notes.push_back(
          k.exact    ? fmt::format("{} = {} (fixed by {})", k.name, v, k.exact_why)
          : searched ? fmt::format("{} = {} (the smallest size on which {} agrees{})", k.name, v,
                                   k.equal_why, k.min > 1 ? ", and " + k.min_why + " fits" : "")
                     : fmt::format("{} = {} (at least that for {})", k.name, v, k.min_why));
    }
    out.shapes[vi->name] = shape;
  }
  return out;
}

}  // namespace seed_dims

SeedDims ChooseSeedDims(const std::vector<const ir::Graph*>& graphs,
                        const std::map<std::string, Shape>& given) {
  if (graphs.empty()) return {};
  seed_dims::Analysis analysis(*graphs.front());
  for (const ir::Graph* g : graphs) analysis.Follow(*g, given);
  return analysis.Choose(given);
}

}  // namespace ferry::passes
