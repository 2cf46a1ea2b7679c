#include "runtime/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "core/float_mode.h"
#include "core/thread_pool.h"
#include "ops/cpu/cpu_kernel.h"
#include "ops/op.h"
#include "ops/registry.h"

namespace ferry::runtime {

struct SessionShared {
  const ir::Model* model = nullptr;
  std::unique_ptr<ThreadPool> pool;
  uint64_t seed = 0;
  std::string provider;
  ops::cpu::ProviderPtr cpu;  // null with provider "reference"
  bool profile = false;
  bool flush = false;  // SessionOptions::flush_denormals, with the cpu provider
};

namespace {

// Memoized outputs are kept only up to this size per step (shape arithmetic is a few bytes).
constexpr size_t kMemoBytes = 64 << 10;

// Shape and Size: their output depends on the input's (logical) shape only, not on its
// elements or their layout.
bool ReadsOnlyShape(const ir::Node& n) {
  return (n.op_type == "Shape" || n.op_type == "Size") && n.domain.empty();
}

struct ArenaSlot {
  size_t offset = 0, size = 0;
  // > 0: a channel slice of a Concat's channels-last output (the value's own pixels this many
  // floats apart), written there by a kernel that supports it (NodeSlot::out_pixel_stride).
  int64_t pixel_stride = 0;
};

struct ArenaPlan {
  std::vector<ArenaSlot> slots;  // per value id; size 0 = not in the arena
  size_t total = 0;
  std::unique_ptr<std::byte[], void (*)(std::byte*)> buffer{nullptr, [](std::byte*) {}};
  std::byte* base = nullptr;
};

// Names a graph reads that it does not define itself (outer-scope references), recursively
// through nested subgraphs.
void CollectFreeNames(const ir::Graph& g, std::set<std::string>* out) {
  std::set<std::string> defined;
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& i : g.initializers) defined.insert(i.name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs) defined.insert(o);
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name)) out->insert(name);
  };
  for (const auto& n : g.nodes) {
    for (const auto& i : n.inputs) read(i);
    for (const auto& a : n.attributes) {
      std::set<std::string> inner;
      if (a.g) CollectFreeNames(*a.g, &inner);
      for (const auto& sg : a.graphs) CollectFreeNames(*sg, &inner);
      for (const auto& name : inner) read(name);
    }
  }
  for (const auto& o : g.outputs) read(o.name);
}

}  // namespace

struct Frame;

class GraphExecutor {
 public:
  GraphExecutor(const ir::Graph& g, SessionShared* shared) : graph_(g), shared_(shared) {}

  // `outer` = names visible from enclosing scopes (empty for the main graph).
  Status Build(const std::set<std::string>& outer);
  Status Run(const Frame* parent, std::span<const Value> inputs, std::vector<Value>* outputs,
             const RunOptions* opts);

  const ir::Graph& graph() const { return graph_; }
  int IdOf(const std::string& name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? -1 : it->second;
  }
  size_t arena_bytes() const {
    size_t b = 0;
    for (const auto& [k, p] : plans_) b += p.total;
    return b;
  }
  std::vector<NodeReport> Report() const;
  void ResetProfile() {
    for (auto& st : steps_) {
      st.total_ns = 0;
      st.calls = 0;
    }
  }

 private:
  struct Step {
    const ir::Node* node = nullptr;
    const ops::OpDef* def = nullptr;
    int64_t opset = 0;
    std::vector<int> inputs, outputs;
    std::vector<int> frees;  // values last read here
    std::map<std::string, std::unique_ptr<GraphExecutor>, std::less<>> subgraphs;
    // cpu provider: the kernel, its persistent slot, and the fusion this step may host.
    const ops::cpu::KernelDef* cpu = nullptr;
    std::unique_ptr<ops::cpu::NodeSlot> slot;
    ops::cpu::Fusion fusion;
    std::vector<size_t> absorb;  // steps computed by this one when its kernel accepts `fusion`
    int fused_output = -1;       // the value the fused chain writes
    int residual = -1;           // fusion.sum: the value added
    // A Conv's residual read by no later step outside its chain: the fused output may be
    // written over it (in place; the arena plan gives both one slot).
    bool residual_dies = false;
    // cpu provider: an Identity whose output may share its input's (owned) tensor, and a
    // Constant whose output may share its `value` attribute's tensor.
    bool alias = false;
    const Tensor* constant = nullptr;
    // cpu provider: a Reshape/Flatten/Squeeze/Unsqueeze/Identity whose output may be a view of
    // its (plain) input: no copy. Build extends the input's lifetime (arena slot included) to
    // the output's last reader.
    bool view = false;
    // cpu provider: every output is read only by Shape/Size steps: only its shapes are made.
    bool shape_only = false;
    // cpu provider: a step whose inputs are constants or other memoized steps' outputs (Shape
    // and Size: any input, keyed by its shape) — the shape arithmetic of exported transformers.
    // Its outputs of the last run are kept (owned) with the generations of its inputs (or the
    // input's shape); a later run whose inputs have the same generations reuses them.
    bool memo = false;
    bool memo_by_shape = false;  // Shape, Size
    bool memo_valid = false;
    std::vector<uint64_t> memo_in_gens;
    Shape memo_shape;
    std::vector<Value> memo_outs;
    // cpu provider: a DequantizeLinear of initializers (QDQ weights and biases) is computed on
    // the first run and its result shared by later runs. `lazy` (not read by a subgraph): in
    // runs without an observer it does not run at its position; its value is computed (or taken
    // from `folded`) when a step that runs reads it (MaterializeLazy), so the float copy of an
    // int8 weight a pattern kernel reads directly is never made.
    bool fold = false;
    bool lazy = false;
    std::unique_ptr<Tensor> folded;
    // cpu provider: a pattern kernel that computes this step and `absorbed` ones (host step).
    struct PatternPlan {
      std::string_view name;
      const ops::cpu::KernelDef* kernel = nullptr;
      std::vector<size_t> absorbed;
      std::vector<int> inputs;
      int output = -1;
      std::unique_ptr<ops::cpu::NodeSlot> slot;
    };
    std::unique_ptr<PatternPlan> pattern;
    // Last run and profile.
    std::string provider;
    int fused_into = -1;
    int64_t total_ns = 0, calls = 0;
  };
  void PlanCpu(const std::vector<std::vector<std::string>>& reads);
  // Computes a lazy DequantizeLinear's value into `d.folded` (once), from its constant inputs.
  Status MaterializeLazy(Step& d, const Frame& frame);
  void PlanPatterns(const std::vector<int>& producer,
                    const std::vector<std::vector<std::pair<size_t, size_t>>>& users,
                    const std::vector<bool>& is_const, const std::vector<bool>& sub_read,
                    std::vector<int>* pattern_of);
  int Intern(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, static_cast<int>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }
  ArenaPlan MakePlan(const std::vector<size_t>& sizes, const std::vector<int>& first,
                     const std::vector<int>& last) const;

  const ir::Graph& graph_;
  SessionShared* shared_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> ids_;
  std::vector<int> input_ids_, output_ids_;
  std::vector<std::pair<int, Value>> constants_;
  std::vector<std::pair<int, std::string>> outer_;  // ids read from enclosing scopes
  std::vector<Step> steps_;
  std::vector<bool> is_output_;
  std::vector<bool> nhwc_ok_;  // per value: every reader is a cpu kernel that takes channels-last
  // per value: its only reader is a Concat (no graph output, no subgraph read), so its producer
  // may write it in its place in the Concat's output (the arena plan decides)
  std::vector<bool> placeable_;
  std::vector<int> lazy_producer_;  // per value: its lazy DequantizeLinear step, or -1
  // Memoization (Step::memo): per value, 1 when the same every run (an initializer, a shared
  // Constant, a folded DequantizeLinear), 2 when written by a memo step, else 0; and per value
  // the generation of its memo step's last output (a fresh number whenever recomputed).
  std::vector<uint8_t> memo_src_;
  std::vector<uint64_t> memo_gen_;
  uint64_t memo_counter_ = 0;
  void PlanMemo(const std::vector<bool>& is_const, const std::vector<bool>& absorbed,
                const std::vector<std::vector<std::pair<size_t, size_t>>>& users,
                const std::vector<bool>& sub_read);
  uint64_t MemoGen(int id) const {
    return memo_src_[static_cast<size_t>(id)] == 2 ? memo_gen_[static_cast<size_t>(id)] : 0;
  }
  std::map<std::string, ArenaPlan> plans_;
};

struct Frame {
  const GraphExecutor* exec;
  std::vector<Value> values;
  const Frame* parent;
};

namespace {

class Runner final : public ops::SubgraphRunner {
 public:
  Runner(GraphExecutor* e, const Frame* f, const RunOptions* o) : exec_(e), frame_(f), opts_(o) {}
  const ir::Graph& graph() const override { return exec_->graph(); }
  Status Run(std::span<const Value> inputs, std::vector<Value>* outputs) override {
    return exec_->Run(frame_, inputs, outputs, nullptr);
  }

 private:
  GraphExecutor* exec_;
  const Frame* frame_;
  const RunOptions* opts_;
};

std::string Signature(std::span<const Value> inputs) {
  std::string s;
  for (const auto& v : inputs) {
    if (v.is_tensor())
      s += std::to_string(static_cast<int>(v.tensor().dtype())) + ShapeToString(v.tensor().shape());
    else
      s += v.is_sequence() ? "S" : "N";
    s += ";";
  }
  return s;
}

}  // namespace

Status GraphExecutor::Build(const std::set<std::string>& outer) {
  const auto& reg = ops::Registry::Get();
  const ir::Model& model = *shared_->model;
  std::set<std::string> visible = outer;
  for (const auto& v : graph_.inputs) {
    input_ids_.push_back(Intern(v.name));
    visible.insert(v.name);
  }
  for (const auto& init : graph_.initializers) {
    constants_.emplace_back(Intern(init.name), Value(init.tensor));
    visible.insert(init.name);
  }
  // Which node produces each name.
  std::unordered_map<std::string, size_t> producer;
  for (size_t k = 0; k < graph_.nodes.size(); ++k)
    for (const auto& o : graph_.nodes[k].outputs)
      if (!o.empty()) {
        if (producer.count(o) || (visible.count(o) && !outer.count(o)))
          return InvalidError("{}: output '{}' is produced more than once",
                              graph_.nodes[k].Describe(), o);
        producer[o] = k;
      }
  // Dependencies per node (explicit inputs + outer-scope names its subgraphs read).
  std::vector<std::vector<std::string>> reads(graph_.nodes.size());
  for (size_t k = 0; k < graph_.nodes.size(); ++k) {
    const ir::Node& n = graph_.nodes[k];
    for (const auto& i : n.inputs)
      if (!i.empty()) reads[k].push_back(i);
    for (const auto& a : n.attributes) {
      std::set<std::string> inner;
      if (a.g) CollectFreeNames(*a.g, &inner);
      for (const auto& sg : a.graphs) CollectFreeNames(*sg, &inner);
      for (const auto& name : inner) reads[k].push_back(name);
    }
    for (const auto& r : reads[k])
      if (!producer.count(r) && !visible.count(r))
        return InvalidError(
            "{}: reads tensor '{}', which no node, graph input or initializer produces",
            n.Describe(), r);
  }
  // Kahn's algorithm, stable in listed order.
  std::vector<int> indeg(graph_.nodes.size(), 0);
  std::vector<std::vector<size_t>> users(graph_.nodes.size());
  for (size_t k = 0; k < graph_.nodes.size(); ++k) {
    std::set<size_t> deps;
    for (const auto& r : reads[k]) {
      auto it = producer.find(r);
      if (it != producer.end()) deps.insert(it->second);
    }
    for (size_t d : deps) {
      if (d == k) return InvalidError("{}: reads its own output", graph_.nodes[k].Describe());
      users[d].push_back(k);
      ++indeg[k];
    }
  }
  std::vector<size_t> order;
  std::set<size_t> ready;
  for (size_t k = 0; k < graph_.nodes.size(); ++k)
    if (indeg[k] == 0) ready.insert(k);
  while (!ready.empty()) {
    size_t k = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(k);
    for (size_t u : users[k])
      if (--indeg[u] == 0) ready.insert(u);
  }
  if (order.size() != graph_.nodes.size()) {
    for (size_t k = 0; k < graph_.nodes.size(); ++k)
      if (indeg[k] > 0) return InvalidError("{}: is part of a cycle", graph_.nodes[k].Describe());
  }
  // Steps.
  std::set<std::string> sub_visible;
  bool sub_visible_built = false;
  for (size_t k : order) {
    const ir::Node& n = graph_.nodes[k];
    Step st;
    st.node = &n;
    auto opset = model.OpsetFor(n.domain);
    std::string dom = n.domain.empty() ? "ai.onnx" : n.domain;
    if (!opset)
      return Status(
          StatusCode::kUnsupported,
          fmt::format("{}: operator '{}' is in domain '{}', which the model does not import",
                      n.Describe(), n.op_type, dom));
    st.opset = *opset;
    st.def = reg.Find(n.domain, n.op_type, *opset);
    if (!st.def || !st.def->prepare || !st.def->run)
      return Status(StatusCode::kUnsupported,
                    fmt::format("{}: unsupported operator '{}' (domain '{}', opset {})",
                                n.Describe(), n.op_type, dom, *opset));
    if (shared_->cpu) {
      st.cpu = ops::cpu::FindKernel(n, *opset);
      st.alias = n.op_type == "Identity" && (n.domain.empty() || n.domain == "ai.onnx") &&
                 n.inputs.size() == 1 && !n.inputs[0].empty() && n.outputs.size() == 1 &&
                 !n.outputs[0].empty();
      if (n.op_type == "Constant" && (n.domain.empty() || n.domain == "ai.onnx") &&
          n.outputs.size() == 1 && !n.outputs[0].empty()) {
        const ir::Attribute* a = n.attr("value");
        if (a && a->type == ir::AttrType::kTensor && a->t.owned()) st.constant = &a->t;
      }
      if (st.cpu) {
        st.slot = std::make_unique<ops::cpu::NodeSlot>();
        st.slot->provider = shared_->cpu.get();
        st.slot->reference = st.def;
      }
    }
    for (const auto& i : n.inputs) st.inputs.push_back(i.empty() ? -1 : Intern(i));
    for (const auto& o : n.outputs) st.outputs.push_back(o.empty() ? -1 : Intern(o));
    for (const auto& a : n.attributes) {
      if (a.g) {
        // What a subgraph may read: this graph's names and the enclosing ones. Built once, on
        // the first subgraph (a per-node copy made session build quadratic in graph size).
        if (!sub_visible_built) {
          sub_visible = visible;
          for (const auto& [name, p] : producer) sub_visible.insert(name);
          sub_visible_built = true;
        }
        auto sub = std::make_unique<GraphExecutor>(*a.g, shared_);
        FERRY_RETURN_IF_ERROR(
            sub->Build(sub_visible).With(n.Describe() + " attribute '" + a.name + "'"));
        st.subgraphs.emplace(a.name, std::move(sub));
      }
    }
    steps_.push_back(std::move(st));
  }
  for (const auto& o : graph_.outputs) {
    if (!producer.count(o.name) && !visible.count(o.name))
      return InvalidError("graph output '{}' is not produced by any node, input or initializer",
                          o.name);
    output_ids_.push_back(Intern(o.name));
  }
  // Names read from enclosing scopes (here or in nested subgraphs) are copied in by name.
  {
    std::set<std::string> free;
    CollectFreeNames(graph_, &free);
    for (const auto& name : free) outer_.emplace_back(Intern(name), name);
  }
  // Liveness: the last step reading each value frees it (graph outputs are never freed).
  is_output_.assign(names_.size(), false);
  for (int id : output_ids_) is_output_[static_cast<size_t>(id)] = true;
  std::vector<int> last(names_.size(), -1);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const ir::Node& n = *steps_[s].node;
    size_t k = static_cast<size_t>(&n - graph_.nodes.data());
    for (const auto& r : reads[k]) {
      auto it = ids_.find(r);
      if (it != ids_.end()) last[static_cast<size_t>(it->second)] = static_cast<int>(s);
    }
  }
  // Views (cpu provider): a view may share its input's tensor, which may itself be a view (or,
  // when that step did not make a view at run time, its own tensor): every value up the chain of
  // view steps lives until the view's last reader.
  if (shared_->cpu) {
    std::vector<int> view_of(names_.size(), -1);
    for (Step& st : steps_) {
      const ir::Node& n = *st.node;
      const bool op = n.op_type == "Reshape" || n.op_type == "Flatten" || n.op_type == "Squeeze" ||
                      n.op_type == "Unsqueeze" || n.op_type == "Identity" ||
                      n.op_type == "Transpose";  // a view when it moves only size-1 dims
      if (!op || !(n.domain.empty() || n.domain == "ai.onnx") || st.inputs.empty() ||
          st.inputs[0] < 0 || st.outputs.size() != 1 || st.outputs[0] < 0 ||
          is_output_[static_cast<size_t>(st.outputs[0])])
        continue;
      st.view = true;
      const size_t out = static_cast<size_t>(st.outputs[0]);
      view_of[out] = st.inputs[0];
      for (int v = st.inputs[0]; v >= 0; v = view_of[static_cast<size_t>(v)])
        if (last[static_cast<size_t>(v)] >= 0)
          last[static_cast<size_t>(v)] = std::max(last[static_cast<size_t>(v)], last[out]);
    }
  }
  for (size_t id = 0; id < names_.size(); ++id)
    if (last[id] >= 0 && !is_output_[id])
      steps_[static_cast<size_t>(last[id])].frees.push_back(static_cast<int>(id));
  PlanCpu(reads);
  return Status::Ok();
}

// Decides, for the cpu provider, which values may be channels-last (every reader takes it) and
// which Add/Relu/Clip/HardSwish steps a fusing kernel (Conv) may absorb: the chain producer ->
// [Add] -> [Relu|Clip|HardSwish|gate|GELU], each link the only reader of the previous value, and
// the Add's other operand computed before the producer runs. A gate is v * Sigmoid(v) (SiLU) or
// v * HardSigmoid(v; 1/6, 1/2): v read by just those two steps, the gate's output by the Mul.
// GELU is torch's exact one, v * 0.5 * (1 + erf(v / sqrt(2))) in five steps (see Gelu below).
void GraphExecutor::PlanCpu(const std::vector<std::vector<std::string>>& reads) {
  if (!shared_->cpu) return;
  using ops::cpu::Fusion;
  const size_t nv = names_.size();
  std::vector<bool> is_const(nv, false), sub_read(nv, false);
  for (const auto& [id, v] : constants_) is_const[static_cast<size_t>(id)] = true;
  for (int id : input_ids_) is_const[static_cast<size_t>(id)] = false;
  std::vector<std::vector<std::pair<size_t, size_t>>> users(nv);
  std::vector<int> producer(nv, -1);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    for (int id : st.outputs)
      if (id >= 0) producer[static_cast<size_t>(id)] = static_cast<int>(s);
    for (size_t i = 0; i < st.inputs.size(); ++i)
      if (st.inputs[i] >= 0) users[static_cast<size_t>(st.inputs[i])].emplace_back(s, i);
    const ir::Node& n = *st.node;
    const auto& r = reads[static_cast<size_t>(&n - graph_.nodes.data())];
    for (const auto& name : r)
      if (std::find(n.inputs.begin(), n.inputs.end(), name) == n.inputs.end())
        sub_read[static_cast<size_t>(ids_.at(name))] = true;
  }
  for (const auto& [id, name] : outer_) sub_read[static_cast<size_t>(id)] = true;
  // An Identity of a constant is constant (the weights torch shares between layers).
  for (Step& st : steps_) {
    if (!st.alias) continue;
    if (is_output_[static_cast<size_t>(st.outputs[0])])
      st.alias = false;
    else if (is_const[static_cast<size_t>(st.inputs[0])])
      is_const[static_cast<size_t>(st.outputs[0])] = true;
  }
  for (Step& st : steps_)
    if (shared_->cpu && st.node->op_type == "DequantizeLinear" && st.node->domain.empty() &&
        st.outputs.size() == 1 && st.outputs[0] >= 0 &&
        !is_output_[static_cast<size_t>(st.outputs[0])]) {
      st.fold = true;
      for (int id : st.inputs) st.fold = st.fold && (id < 0 || is_const[static_cast<size_t>(id)]);
      // Same data every run: kernels reading it (a float Gemm's B) may pack it once.
      if (st.fold) is_const[static_cast<size_t>(st.outputs[0])] = true;
    }
  // Lazy folds: their (constant, shared) inputs stay alive to the end of the run, since the
  // DequantizeLinear may be computed at any later reader.
  lazy_producer_.assign(nv, -1);
  std::set<int> keep;
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    if (!st.fold || sub_read[static_cast<size_t>(st.outputs[0])]) continue;
    st.lazy = true;
    lazy_producer_[static_cast<size_t>(st.outputs[0])] = static_cast<int>(s);
    for (int id : st.inputs)
      if (id >= 0) keep.insert(id);
  }
  if (!keep.empty())
    for (Step& st : steps_) std::erase_if(st.frees, [&](int id) { return keep.count(id) > 0; });
  // Which values may be stored in a provider layout: every reader is a cpu kernel that takes
  // it, a Shape / Size (they read only the shape), or a Reshape that is a channels-last view
  // (below). Readers come after their values, so the steps are walked backwards.
  nhwc_ok_.assign(nv, false);
  // A Transpose that keeps N first and H, W last of a rank-5+ value (the channel shuffle's
  // [0,2,1,3,4]): on channels-last data it permutes each pixel's channels.
  const auto channel_transpose = [&](size_t s) {
    const ir::Node& n = *steps_[s].node;
    if (n.op_type != "Transpose" || !n.domain.empty()) return false;
    const std::vector<int64_t> p = n.attr_ints("perm");
    return p.size() >= 5 && ops::cpu::KeepsPixelDims(p);
  };
  // A Reshape splitting or merging a channels-last value's channels is a view (Run): taken
  // only between a channel transpose and readers that take channels-last, so a Reshape that
  // flattens (a classifier's) keeps its plain input and stays a view of it.
  const auto reshape_ok = [&](size_t s) {
    const Step& st = steps_[s];
    if (!st.view || st.node->op_type != "Reshape" || st.outputs.empty() || st.outputs[0] < 0 ||
        !ops::cpu::ChannelsLastNative())
      return false;
    const size_t out = static_cast<size_t>(st.outputs[0]);
    if (!nhwc_ok_[out]) return false;
    const int ps = producer[static_cast<size_t>(st.inputs[0])];
    if (ps >= 0 && channel_transpose(static_cast<size_t>(ps))) return true;
    for (auto [r, i] : users[out])
      if (!channel_transpose(r)) return false;
    return true;
  };
  const auto reader_ok = [&](size_t s, size_t i) {
    const Step& st = steps_[s];
    const ir::Node& n = *st.node;
    if (ReadsOnlyShape(n)) return true;
    if (i == 0 && reshape_ok(s)) return true;
    return st.cpu && i < 32 && ((st.cpu->nhwc_inputs >> i) & 1u);
  };
  const auto decide = [&](size_t v) {
    bool ok = !is_output_[v] && !sub_read[v] && !users[v].empty();
    for (auto [s, i] : users[v]) ok = ok && reader_ok(s, i);
    nhwc_ok_[v] = ok;
  };
  for (size_t s = steps_.size(); s-- > 0;)
    for (int id : steps_[s].outputs)
      if (id >= 0) decide(static_cast<size_t>(id));
  for (size_t v = 0; v < nv; ++v)
    if (producer[v] < 0) decide(v);
  placeable_.assign(nv, false);
  for (size_t v = 0; v < nv; ++v) {
    if (is_output_[v] || sub_read[v] || producer[v] < 0 || users[v].size() != 1) continue;
    const ir::Node& n = *steps_[users[v][0].first].node;
    placeable_[v] = n.op_type == "Concat" && n.domain.empty();
  }
  auto const_scalar = [&](int id, float* out) {
    if (id < 0) return true;  // omitted: keep the default
    const int ps = producer[static_cast<size_t>(id)];
    if (ps >= 0) {  // a Constant node's float scalar
      const ir::Node& pn = *steps_[static_cast<size_t>(ps)].node;
      const ir::Attribute* a =
          pn.op_type == "Constant" && pn.domain.empty() ? pn.attr("value") : nullptr;
      if (!a || a->t.dtype() != DType::kFloat || a->t.size() != 1) return false;
      *out = a->t.data<float>()[0];
      return true;
    }
    if (!is_const[static_cast<size_t>(id)]) return false;
    for (const auto& [cid, v] : constants_)
      if (cid == id && v.is_tensor() && v.tensor().dtype() == DType::kFloat &&
          v.tensor().size() == 1) {
        *out = v.tensor().data<float>()[0];
        return true;
      }
    return false;
  };
  // A pattern's steps also get their fusions planned, each within its own match (a Conv in a
  // pattern still takes the Relu after it), for the runs where the pattern kernel declines.
  // `absorbed`: steps taken by a pattern or fused into another step; `fused_in`: the latter.
  std::vector<int> pattern_of(steps_.size(), -1);
  PlanPatterns(producer, users, is_const, sub_read, &pattern_of);
  std::vector<bool> absorbed(steps_.size(), false), fused_in(steps_.size(), false);
  for (size_t s = 0; s < steps_.size(); ++s) absorbed[s] = pattern_of[s] >= 0;
  // Exact (erf) GELU of v as torch exports nn.GELU: d = v / sqrt(2) (or v * (1 / sqrt(2)), step
  // `scale`), Erf(d), Add(., 1), Mul(v, .) (step `mul`), Mul(., 0.5); or with the halving first,
  // Mul(v, 0.5) (step `mul`) times Add(., 1); every intermediate read only by the next step.
  // Fills `steps` with the five steps in execution order (the last one writes the result).
  const auto Gelu = [&](int v, size_t scale, size_t mul, std::vector<size_t>* steps) {
    const auto single = [&](size_t s, const char* op, size_t n_in) {
      const Step& st = steps_[s];
      const ir::Node& n = *st.node;
      return !absorbed[s] && (n.domain.empty() || n.domain == "ai.onnx") && n.op_type == op &&
             st.opset >= 7 && st.inputs.size() == n_in && st.outputs.size() == 1 &&
             st.outputs[0] >= 0;
    };
    // The one reader of step s's output (not exposed), or -1.
    const auto next = [&](size_t s) -> int {
      const size_t o = static_cast<size_t>(steps_[s].outputs[0]);
      if (is_output_[o] || sub_read[o] || users[o].size() != 1) return -1;
      return static_cast<int>(users[o][0].first);
    };
    // The other input of binary step s (v's value read at the other position) as a constant.
    const auto constant = [&](size_t s, int known, float* c) {
      const Step& st = steps_[s];
      const int o = st.inputs[0] == known ? st.inputs[1] : st.inputs[0];
      return o >= 0 && o != known && const_scalar(o, c);
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
  };
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    if (st.cpu) {
      st.slot->const_inputs.assign(st.inputs.size(), false);
      for (size_t i = 0; i < st.inputs.size(); ++i)
        st.slot->const_inputs[i] = st.inputs[i] >= 0 && is_const[static_cast<size_t>(st.inputs[i])];
    }
    if (!st.cpu || st.cpu->fuse_input <= 0 || fused_in[s] || st.outputs.empty() ||
        st.outputs[0] < 0)
      continue;
    // Whether step t may be fused into s: not fused already, in the same pattern or in none.
    const auto joinable = [&](size_t t) { return !fused_in[t] && pattern_of[t] == pattern_of[s]; };
    int v = st.outputs[0];
    Fusion f;
    std::vector<size_t> absorb;
    int residual = -1;
    for (;;) {
      const size_t vu = static_cast<size_t>(v);
      if (is_output_[vu] || sub_read[vu]) break;
      if (users[vu].size() == 2 && f.act == Fusion::Act::kNone) {
        // v * Sigmoid(v) (SiLU) or v * HardSigmoid(v) (HardSwish): the gate's output read only
        // by the Mul, whose other operand is v.
        const auto gated = [&](size_t g, size_t m) {
          const Step& gs = steps_[g];
          const Step& ms = steps_[m];
          const ir::Node& gn = *gs.node;
          const ir::Node& mn = *ms.node;
          if (!gn.domain.empty() || !mn.domain.empty() || !joinable(g) || !joinable(m) ||
              mn.op_type != "Mul" || ms.opset < 7 || ms.inputs.size() != 2 ||
              ms.outputs.size() != 1 || ms.outputs[0] < 0 || gs.outputs.size() != 1 ||
              gs.outputs[0] < 0 || gs.inputs.size() != 1)
            return Fusion::Act::kNone;
          const size_t gv = static_cast<size_t>(gs.outputs[0]);
          if (is_output_[gv] || sub_read[gv] || users[gv].size() != 1 || users[gv][0].first != m)
            return Fusion::Act::kNone;
          const int other = ms.inputs[1 - users[gv][0].second];
          if (other != v) return Fusion::Act::kNone;
          if (gn.op_type == "Sigmoid" && gs.opset >= 6) return Fusion::Act::kSwish;
          if (gn.op_type == "HardSigmoid" && gs.opset >= 6 &&
              gn.attr_float("alpha", 0.2f) == 1.f / 6.f && gn.attr_float("beta", 0.5f) == 0.5f)
            return Fusion::Act::kHardSwish;
          return Fusion::Act::kNone;
        };
        const size_t a = users[vu][0].first, b = users[vu][1].first;
        std::vector<size_t> gelu_steps;
        // GELU only after a MatMul (the one kernel that takes it): a Conv keeps its Add.
        if (st.node->op_type == "MatMul" && pattern_of[s] < 0 &&
            (Gelu(v, a, b, &gelu_steps) || Gelu(v, b, a, &gelu_steps))) {
          f.act = Fusion::Act::kGelu;
          absorb.insert(absorb.end(), gelu_steps.begin(), gelu_steps.end());
          v = steps_[gelu_steps.back()].outputs[0];
          break;
        }
        Fusion::Act act = a < b ? gated(a, b) : gated(b, a);
        if (act == Fusion::Act::kNone) break;
        f.act = act;
        absorb.push_back(std::min(a, b));
        absorb.push_back(std::max(a, b));
        v = steps_[std::max(a, b)].outputs[0];
        break;
      }
      if (users[vu].size() != 1) break;
      auto [t, idx] = users[vu][0];
      const Step& ts = steps_[t];
      const ir::Node& n = *ts.node;
      if ((!n.domain.empty() && n.domain != "ai.onnx") || ts.outputs.size() != 1 ||
          ts.outputs[0] < 0 || !joinable(t))
        break;
      if (n.op_type == "Add" && !f.sum && f.act == Fusion::Act::kNone && ts.opset >= 7 &&
          ts.inputs.size() == 2) {
        int o = ts.inputs[1 - idx];
        if (o < 0 || o == v || producer[static_cast<size_t>(o)] >= static_cast<int>(s)) break;
        f.sum = true;
        residual = o;
      } else if (n.op_type == "Relu" && ts.opset >= 6) {
        f.act = Fusion::Act::kRelu;
      } else if (n.op_type == "Clip" && ts.opset >= 6) {
        f.lo = -std::numeric_limits<float>::infinity();
        f.hi = std::numeric_limits<float>::infinity();
        if (ts.opset < 11) {
          f.lo = n.attr_float("min", f.lo);
          f.hi = n.attr_float("max", f.hi);
        } else if (!const_scalar(ts.inputs.size() > 1 ? ts.inputs[1] : -1, &f.lo) ||
                   !const_scalar(ts.inputs.size() > 2 ? ts.inputs[2] : -1, &f.hi)) {
          break;
        }
        f.act = Fusion::Act::kClip;
      } else if (n.op_type == "HardSwish" && ts.opset >= 14) {
        f.act = Fusion::Act::kHardSwish;
      } else {
        break;
      }
      absorb.push_back(t);
      v = ts.outputs[0];
      if (f.act != Fusion::Act::kNone) break;
    }
    if (absorb.empty()) continue;
    st.fusion = f;
    st.absorb = absorb;
    st.fused_output = v;
    st.residual = residual;
    if (f.sum && st.node->op_type == "Conv") {
      const size_t r = static_cast<size_t>(residual);
      bool dies = !is_output_[r] && !sub_read[r];
      for (auto [t, i] : users[r])
        dies = dies && !steps_[t].view &&
               (t <= s || std::find(absorb.begin(), absorb.end(), t) != absorb.end());
      // (A view of it may outlive it.) Not when the conv itself reads it (Add(conv(x), x): its
      // window would read what it has overwritten), nor any input that may be a view of another
      // value's tensor.
      for (int in : st.inputs) {
        const int ps = in < 0 ? -1 : producer[static_cast<size_t>(in)];
        dies = dies && in != residual && (ps < 0 || !steps_[static_cast<size_t>(ps)].view);
      }
      st.residual_dies = dies;
    }
    for (size_t t : absorb) absorbed[t] = fused_in[t] = true;
  }
  PlanMemo(is_const, absorbed, users, sub_read);
}

// Marks the memo steps (Step::memo): deterministic ops of the shape arithmetic whose inputs are
// the same every run or memo steps' outputs (Shape/Size: any input; their output depends only
// on its shape), that run at their own position (not absorbed by a fusion or a pattern, not
// hosting one) and expose no output (graph outputs are handed to the caller).
void GraphExecutor::PlanMemo(const std::vector<bool>& is_const, const std::vector<bool>& absorbed,
                             const std::vector<std::vector<std::pair<size_t, size_t>>>& users,
                             const std::vector<bool>& sub_read) {
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
  memo_gen_.assign(nv, 0);
  for (size_t v = 0; v < nv; ++v) memo_src_[v] = is_const[v] ? 1 : 0;
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    const ir::Node& n = *st.node;
    if (st.constant && !is_output_[static_cast<size_t>(st.outputs[0])]) {
      memo_src_[static_cast<size_t>(st.outputs[0])] = 1;  // shared every run
      continue;
    }
    if (!n.domain.empty() || !kOps.count(n.op_type) || !st.subgraphs.empty() || absorbed[s] ||
        st.pattern || !st.absorb.empty() || st.fold || st.outputs.empty() ||
        (st.alias && is_const[static_cast<size_t>(st.outputs[0])]))  // shared already
      continue;
    const bool by_shape = ReadsOnlyShape(n);
    bool ok = true;
    for (int o : st.outputs) ok = ok && o >= 0 && !is_output_[static_cast<size_t>(o)];
    for (size_t i = 0; ok && i < st.inputs.size(); ++i) {
      const int id = st.inputs[i];
      if (id < 0 || (i == 0 && by_shape)) continue;
      ok = memo_src_[static_cast<size_t>(id)] != 0;
    }
    if (by_shape) ok = ok && st.inputs.size() == 1 && st.inputs[0] >= 0;
    if (!ok) continue;
    st.memo = true;
    st.memo_by_shape = by_shape;
    for (int o : st.outputs) memo_src_[static_cast<size_t>(o)] = 2;
  }
  // Steps computed only for their shapes (torch's attention reads a Transpose's shape).
  static const std::set<std::string_view> kShapeOnly = {"Transpose", "Slice", "Concat", "Cast",
                                                        "Add",       "Sub",   "Mul",    "Div",
                                                        "MatMul",    "Relu",  "Softmax"};
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    const ir::Node& n = *st.node;
    if (!n.domain.empty() || !kShapeOnly.count(n.op_type) || !st.subgraphs.empty() || absorbed[s] ||
        st.pattern || !st.absorb.empty() || st.memo || st.outputs.empty())
      continue;
    bool ok = true;
    for (int o : st.outputs) {
      ok = ok && o >= 0 && !is_output_[static_cast<size_t>(o)] &&
           !sub_read[static_cast<size_t>(o)] && !users[static_cast<size_t>(o)].empty();
      for (auto [r, i] :
           ok ? users[static_cast<size_t>(o)] : std::vector<std::pair<size_t, size_t>>{})
        ok = ok && steps_[r].memo_by_shape;
    }
    st.shape_only = ok;
  }
}

// Offers every step to the cpu provider's pattern matchers (ops::cpu::AllPatterns) and keeps
// the matches the runtime can honour: each absorbed step comes after the host, no value
// computed inside the match (but its output) is read outside it or exposed (graph output,
// subgraph read), every value it reads exists before the host runs, and no step belongs to two
// matches. `pattern_of` gives each step of an accepted match (host included) the match's host.
void GraphExecutor::PlanPatterns(const std::vector<int>& producer,
                                 const std::vector<std::vector<std::pair<size_t, size_t>>>& users,
                                 const std::vector<bool>& is_const,
                                 const std::vector<bool>& sub_read, std::vector<int>* pattern_of) {
  const auto patterns = ops::cpu::AllPatterns();
  if (patterns.empty()) return;
  class View final : public ops::cpu::GraphView {
   public:
    View(const GraphExecutor& e, const std::vector<int>& producer,
         const std::vector<std::vector<std::pair<size_t, size_t>>>& users,
         const std::vector<bool>& is_const)
        : e_(e), producer_(producer), users_(users), is_const_(is_const) {}
    size_t num_steps() const override { return e_.steps_.size(); }
    const ir::Node& node(size_t s) const override { return *e_.steps_[s].node; }
    int64_t opset(size_t s) const override { return e_.steps_[s].opset; }
    int input(size_t s, size_t i) const override {
      const auto& in = e_.steps_[s].inputs;
      return i < in.size() ? in[i] : -1;
    }
    int output(size_t s, size_t k) const override {
      const auto& out = e_.steps_[s].outputs;
      return k < out.size() ? out[k] : -1;
    }
    std::vector<size_t> readers(int v) const override {
      std::vector<size_t> r;
      if (v >= 0)
        for (auto [s, i] : users_[static_cast<size_t>(v)]) r.push_back(s);
      return r;
    }
    const Tensor* constant(int v) const override {
      if (v < 0) return nullptr;
      const int ps = producer_[static_cast<size_t>(v)];
      if (ps < 0) {
        if (!is_const_[static_cast<size_t>(v)]) return nullptr;
        for (const auto& [cid, val] : e_.constants_)
          if (cid == v && val.is_tensor()) return &val.tensor();
        return nullptr;
      }
      const Step& p = e_.steps_[static_cast<size_t>(ps)];
      if (p.alias) return constant(p.inputs[0]);
      const ir::Node& n = *p.node;
      const ir::Attribute* a =
          n.op_type == "Constant" && (n.domain.empty() || n.domain == "ai.onnx") ? n.attr("value")
                                                                                 : nullptr;
      return a && a->type == ir::AttrType::kTensor ? &a->t : nullptr;
    }

   private:
    const GraphExecutor& e_;
    const std::vector<int>& producer_;
    const std::vector<std::vector<std::pair<size_t, size_t>>>& users_;
    const std::vector<bool>& is_const_;
  };
  View view(*this, producer, users, is_const);
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
          const size_t ou = static_cast<size_t>(o);
          ok = ok && !is_output_[ou] && !sub_read[ou];
          for (auto [r, i] : users[ou]) ok = ok && in_match.count(r);
        }
      }
      for (int v : m.inputs)
        ok = ok && (v < 0 || producer[static_cast<size_t>(v)] < static_cast<int>(h));
      if (!ok || !writes_output) continue;
      auto plan = std::make_unique<Step::PatternPlan>();
      plan->name = p.name;
      plan->kernel = m.kernel;
      plan->absorbed = m.absorbed;
      plan->inputs = m.inputs;
      plan->output = m.output;
      plan->slot = std::make_unique<ops::cpu::NodeSlot>();
      plan->slot->provider = shared_->cpu.get();
      plan->slot->reference = steps_[h].def;
      plan->slot->params = m.params;
      for (int v : m.inputs)
        plan->slot->const_inputs.push_back(v >= 0 && is_const[static_cast<size_t>(v)]);
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

ArenaPlan GraphExecutor::MakePlan(const std::vector<size_t>& sizes, const std::vector<int>& first,
                                  const std::vector<int>& last) const {
  ArenaPlan plan;
  plan.slots.assign(sizes.size(), {});
  std::vector<size_t> order;
  for (size_t id = 0; id < sizes.size(); ++id)
    if (sizes[id] > 0) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<size_t> placed;
  for (size_t id : order) {
    size_t need = (sizes[id] + 63) / 64 * 64;
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping lifetimes
    for (size_t p : placed)
      if (!(last[p] < first[id] || last[id] < first[p]))
        busy.emplace_back(plan.slots[p].offset,
                          plan.slots[p].offset + (plan.slots[p].size + 63) / 64 * 64);
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (auto [b, e] : busy) {
      if (off + need <= b) break;
      off = std::max(off, e);
    }
    plan.slots[id] = {off, sizes[id]};
    plan.total = std::max(plan.total, off + need);
    placed.push_back(id);
  }
  if (plan.total > 0) {
    auto* p = static_cast<std::byte*>(::operator new[](plan.total, std::align_val_t(64)));
    plan.buffer = std::unique_ptr<std::byte[], void (*)(std::byte*)>(
        p, [](std::byte* q) { ::operator delete[](q, std::align_val_t(64)); });
    plan.base = p;
  }
  return plan;
}

Status GraphExecutor::Run(const Frame* parent, std::span<const Value> inputs,
                          std::vector<Value>* outputs, const RunOptions* opts) {
  Frame frame{this, std::vector<Value>(names_.size()), parent};
  for (const auto& [id, v] : constants_) frame.values[static_cast<size_t>(id)] = v;
  for (size_t i = 0; i < input_ids_.size() && i < inputs.size(); ++i)
    frame.values[static_cast<size_t>(input_ids_[i])] = inputs[i];
  for (const auto& [id, name] : outer_) {
    for (const Frame* f = parent; f; f = f->parent) {
      int pid = f->exec->IdOf(name);
      if (pid >= 0 && !f->values[static_cast<size_t>(pid)].is_none()) {
        frame.values[static_cast<size_t>(id)] = f->values[static_cast<size_t>(pid)];
        break;
      }
    }
  }
  const bool cpu_on = shared_->cpu != nullptr;
  // Fused runs and unfused runs (with an observer) keep separate arena plans: fusion moves
  // where values are first written.
  const bool fuse = cpu_on && !(opts && opts->observer);
  std::string sig = (fuse ? "F" : "U") + Signature(inputs);
  auto pit = plans_.find(sig);
  ArenaPlan* plan = pit == plans_.end() ? nullptr : &pit->second;
  std::vector<size_t> sizes;
  std::vector<int> first, last;
  // A fused Conv's output written over its residual (Step::residual_dies): output -> residual.
  std::vector<int> over;
  // Inputs of Concats their producers may write in their place in the Concat's output
  // (NodeSlot::place_offsets), and the values written by a kernel that takes a pixel stride.
  struct Placement {
    int value, concat_out;
    int64_t offset, stride;
  };
  std::vector<Placement> places;
  std::vector<bool> strided_ok;
  if (!plan) {
    sizes.assign(names_.size(), 0);
    first.assign(names_.size(), 0);
    last.assign(names_.size(), static_cast<int>(steps_.size()));
    over.assign(names_.size(), -1);
    strided_ok.assign(names_.size(), false);
  }
  using ops::cpu::Layout;
  std::vector<Layout> layouts(cpu_on ? names_.size() : 0, Layout::kPlain);
  std::vector<bool> skip(cpu_on ? steps_.size() : 0, false);
  const bool profile = shared_->profile;
  for (size_t s = 0; s < steps_.size(); ++s) {
    Step& st = steps_[s];
    auto free_values = [&] {
      for (int id : st.frees) {
        if (!plan) last[static_cast<size_t>(id)] = static_cast<int>(s);
        frame.values[static_cast<size_t>(id)] = Value();
      }
    };
    if (cpu_on && skip[s]) {
      free_values();
      continue;
    }
    if (fuse && st.lazy) {
      // Computed when a step that runs reads it (materialize); until then unused.
      st.provider = "cpu (unused constant)";
      if (profile) ++st.calls;
      free_values();
      continue;
    }
    if (fuse && (st.memo_valid || st.constant)) {
      // Fast paths, before any per-step set-up: a memo step whose inputs did not change since
      // its last run (reuse its outputs), and a Constant (share its tensor).
      const auto t0 =
          profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      bool hit = false;
      if (st.memo_valid) {
        hit = true;
        if (st.memo_by_shape) {
          const Value& v = frame.values[static_cast<size_t>(st.inputs[0])];
          hit = v.is_tensor() && v.tensor().shape() == st.memo_shape;
        } else {
          for (size_t i = 0; hit && i < st.inputs.size(); ++i)
            hit = st.inputs[i] < 0 || MemoGen(st.inputs[i]) == st.memo_in_gens[i];
        }
        if (hit) {
          for (size_t k = 0; k < st.outputs.size(); ++k) {
            frame.values[static_cast<size_t>(st.outputs[k])] = st.memo_outs[k];  // shared
            layouts[static_cast<size_t>(st.outputs[k])] = Layout::kPlain;
          }
          st.provider = "cpu (memoized)";
        }
      } else if (!is_output_[static_cast<size_t>(st.outputs[0])]) {
        frame.values[static_cast<size_t>(st.outputs[0])] = Value(*st.constant);  // shared
        layouts[static_cast<size_t>(st.outputs[0])] = Layout::kPlain;
        st.provider = "cpu";
        hit = true;
      }
      if (hit) {
        if (profile) {
          st.total_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
          ++st.calls;
        }
        free_values();
        continue;
      }
    }
    int64_t lazy_ns = 0;  // time spent materializing lazy inputs: reported on their own steps
    auto materialize = [&](int id) -> Status {
      if (!fuse || id < 0) return Status::Ok();
      const int p = lazy_producer_[static_cast<size_t>(id)];
      if (p < 0 || !frame.values[static_cast<size_t>(id)].is_none()) return Status::Ok();
      const auto m0 =
          profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
      Step& d = steps_[static_cast<size_t>(p)];
      FERRY_RETURN_IF_ERROR(MaterializeLazy(d, frame));
      frame.values[static_cast<size_t>(id)] = Value(*d.folded);  // shared
      layouts[static_cast<size_t>(id)] = Layout::kPlain;
      d.provider = "cpu (folded constant)";
      if (profile) {
        const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now() - m0)
                               .count();
        d.total_ns += ns;
        lazy_ns += ns;
      }
      return Status::Ok();
    };
    const auto t0 =
        profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    std::vector<int> out_ids = st.outputs;
    // The step's inputs as a kernel's OpContext takes them (null: an absent optional input).
    const auto step_inputs = [&] {
      std::vector<const Value*> ins;
      for (int id : st.inputs)
        ins.push_back(id < 0 ? nullptr : &frame.values[static_cast<size_t>(id)]);
      return ins;
    };
    // Output 0 may go to a strided slot (a channel slice of a Concat's output) only when this
    // run's kernel takes the stride; `used_stride`: the one it got.
    bool strided_now = false;
    int64_t used_stride = 0;
    auto alloc = [&](size_t k, DType dt, const Shape& shape) -> Tensor {
      int id = k < out_ids.size() ? out_ids[k] : -1;
      if (id >= 0 && dt != DType::kString && !is_output_[static_cast<size_t>(id)] && !st.memo) {
        size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dt);
        if (plan) {
          const ArenaSlot& slot = plan->slots[static_cast<size_t>(id)];
          const bool strided = slot.pixel_stride > 0;
          if (bytes > 0 && bytes <= slot.size && (!strided || (k == 0 && strided_now))) {
            if (strided) used_stride = slot.pixel_stride;
            return Tensor::View(dt, shape, plan->base + slot.offset);
          }
        } else {
          sizes[static_cast<size_t>(id)] = bytes;
          first[static_cast<size_t>(id)] = static_cast<int>(s);
        }
      }
      // Every kernel writes all of its outputs (the arena's reused bytes are not zero either):
      // zero-filling a graph output on every run cost a memset and fresh page faults.
      if (dt == DType::kString) return Tensor(dt, shape);
      Tensor t = Tensor::Uninitialized(dt, shape);
#ifdef FERRY_POISON_OUTPUTS
      std::memset(t.raw(), 0xFF, t.nbytes());  // NaN as float, -1 as integer
#endif
      return t;
    };
    auto allocate_declared = [&](ops::OpContext& ctx, std::vector<Value>* outs) -> Status {
      const auto& decl = ctx.declared();
      for (size_t k = 0; k < decl.size(); ++k) {
        if (!decl[k].set) continue;
        for (int64_t d : decl[k].shape)
          if (d < 0)
            return InvalidError("{}: output {} would have a negative dim ({})", st.node->Describe(),
                                k, ShapeToString(decl[k].shape));
        (*outs)[k] = Value(alloc(k, decl[k].dtype, decl[k].shape));
      }
      return Status::Ok();
    };
    std::vector<Value> outs(st.outputs.size());
    bool ran = false;
    if (fuse && st.pattern) {
      // A pattern kernel computes this step and the steps it absorbed, or declines.
      Step::PatternPlan& pp = *st.pattern;
      for (int id : pp.inputs) FERRY_RETURN_IF_ERROR(materialize(id));
      ops::cpu::NodeSlot& slot = *pp.slot;
      std::vector<const Value*> ins;
      slot.in_layouts.clear();
      for (int id : pp.inputs) {
        ins.push_back(id < 0 ? nullptr : &frame.values[static_cast<size_t>(id)]);
        slot.in_layouts.push_back(id < 0 ? Layout::kPlain : layouts[static_cast<size_t>(id)]);
      }
      slot.nhwc_ok.assign(1, nhwc_ok_[static_cast<size_t>(pp.output)]);
      slot.fusion = {};
      slot.declined = slot.fused = false;
      slot.out_layouts.clear();
      std::vector<Value> pouts(1);
      ops::OpContext ctx(*st.node, st.opset, std::move(ins), &pouts);
      ctx.set_pool(shared_->pool.get());
      ctx.set_seed(shared_->seed);
      FERRY_RETURN_IF_ERROR(pp.kernel->prepare(ctx, slot));
      if (!slot.declined) {
        out_ids = {pp.output};
        ctx.set_allocator(alloc);
        FERRY_RETURN_IF_ERROR(allocate_declared(ctx, &pouts));
        pp.kernel->run(ctx, slot);
        frame.values[static_cast<size_t>(pp.output)] = std::move(pouts[0]);
        layouts[static_cast<size_t>(pp.output)] =
            slot.out_layouts.empty() ? Layout::kPlain : slot.out_layouts[0];
        for (size_t t : pp.absorbed) {
          skip[t] = true;
          steps_[t].provider = "fused";
          steps_[t].fused_into = static_cast<int>(s);
        }
        st.provider = "cpu (" + std::string(pp.name) + ")";
        ran = true;
      }
    }
    if (!ran) {
      for (int id : st.inputs) FERRY_RETURN_IF_ERROR(materialize(id));
      if (st.fusion.sum) FERRY_RETURN_IF_ERROR(materialize(st.residual));
    }
    if (st.folded && cpu_on && !ran) {
      frame.values[static_cast<size_t>(st.outputs[0])] = Value(*st.folded);  // shared
      layouts[static_cast<size_t>(st.outputs[0])] = Layout::kPlain;
      st.provider = "cpu (folded constant)";
      ran = true;
    }
    if (st.constant && cpu_on && !ran && !is_output_[static_cast<size_t>(st.outputs[0])]) {
      frame.values[static_cast<size_t>(st.outputs[0])] = Value(*st.constant);  // shared
      layouts[static_cast<size_t>(st.outputs[0])] = Layout::kPlain;
      st.provider = "cpu";
      ran = true;
    }
    if (st.alias && cpu_on && !ran) {
      // Identity of an owned tensor (an initializer, a graph input): share it, no copy. Views
      // (arena slots) are copied: their slot may be reused after the input's last reader.
      const size_t in = static_cast<size_t>(st.inputs[0]), out = static_cast<size_t>(st.outputs[0]);
      const Value& v = frame.values[in];
      if (v.is_tensor() && v.tensor().owned()) {
        frame.values[out] = v;
        layouts[out] = layouts[in];
        st.provider = "cpu";
        ran = true;
      }
    }
    if (st.view && cpu_on && !ran) {
      // A view of the input (its lifetime extended at Build): the reference prepare validates
      // and declares the shape; no copy.
      const size_t in = static_cast<size_t>(st.inputs[0]), out = static_cast<size_t>(st.outputs[0]);
      const Value& v = frame.values[in];
      // A rank-4 Transpose between NCHW and NHWC (ConvNeXt's permutes around its LayerNorms)
      // of a value stored the other way round is a view too: [0,2,3,1] of a channels-last value
      // is its storage as a plain [N,H,W,C], and [0,3,1,2] of a plain [N,H,W,C] is that storage
      // as a channels-last [N,C,H,W] when every reader takes channels-last.
      Layout out_layout = Layout::kPlain;
      bool relayout = false;
      if (v.is_tensor() && st.node->op_type == "Transpose" && v.tensor().rank() == 4 &&
          v.tensor().dtype() != DType::kString) {
        const std::vector<int64_t> perm = st.node->attr_ints("perm");
        const Shape& xs = v.tensor().shape();
        if (layouts[in] == Layout::kNhwc && perm == std::vector<int64_t>{0, 2, 3, 1}) {
          frame.values[out] = Value(v.tensor().Reshaped({xs[0], xs[2], xs[3], xs[1]}));
          relayout = true;
        } else if (layouts[in] == Layout::kPlain && perm == std::vector<int64_t>{0, 3, 1, 2} &&
                   fuse && nhwc_ok_[out] && v.tensor().dtype() == DType::kFloat) {
          frame.values[out] = Value(v.tensor().Reshaped({xs[0], xs[3], xs[1], xs[2]}));
          out_layout = Layout::kNhwc;
          relayout = true;
        }
        if (relayout) {
          layouts[out] = out_layout;
          st.provider = "cpu (view)";
          ran = true;
        }
      }
      // The output shape of a reshaping op as its reference prepare declares it (which
      // validates); an error when it does not keep the element count.
      const auto declared_shape = [&](Shape* shape) -> Status {
        ops::OpContext ctx(*st.node, st.opset, step_inputs(), &outs);
        FERRY_RETURN_IF_ERROR(st.def->prepare(ctx));
        const auto& decl = ctx.declared();
        if (decl.empty() || !decl[0].set || decl[0].dtype != v.tensor().dtype() ||
            NumElements(decl[0].shape) != v.tensor().size())
          return InvalidError("{}: a reshaping op declared {} for {} elements", st.node->Describe(),
                              decl.empty() ? std::string("nothing") : ShapeToString(decl[0].shape),
                              v.tensor().size());
        *shape = decl[0].shape;
        return Status::Ok();
      };
      if (!relayout && v.is_tensor() && layouts[in] == Layout::kNhwc && fuse && nhwc_ok_[out] &&
          st.node->op_type == "Reshape") {
        // A channels-last value reshaped keeping N first and H, W last (its channels split or
        // merged: the channel shuffle) has the same storage: a channels-last view.
        Shape ys;
        FERRY_RETURN_IF_ERROR(declared_shape(&ys));
        const Shape& xs = v.tensor().shape();
        const size_t r = xs.size();
        if (r >= 4 && ys.size() >= 4 && ys[0] == xs[0] && ys[ys.size() - 2] == xs[r - 2] &&
            ys.back() == xs[r - 1]) {
          frame.values[out] = Value(v.tensor().Reshaped(ys));
          layouts[out] = Layout::kNhwc;
          st.provider = "cpu (channels-last view)";
          relayout = ran = true;
        }
      }
      if (!relayout && v.is_tensor() && layouts[in] == Layout::kPlain &&
          v.tensor().dtype() != DType::kString) {
        const Shape& xs = v.tensor().shape();
        bool viewable = true;
        if (st.node->op_type == "Transpose") {
          // Same element order when the dims larger than 1 keep their order.
          std::vector<int64_t> perm = st.node->attr_ints("perm");
          if (perm.empty())
            for (size_t i = xs.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
          int64_t prev = -1;
          viewable = perm.size() == xs.size();
          for (size_t i = 0; viewable && i < perm.size(); ++i) {
            const int64_t p = perm[i];
            if (p < 0 || p >= static_cast<int64_t>(xs.size())) {
              viewable = false;  // the reference prepare reports it
            } else if (xs[static_cast<size_t>(p)] != 1) {
              viewable = p > prev;
              prev = p;
            }
          }
        }
        if (!viewable) {
        } else if (st.node->op_type == "Identity") {
          frame.values[out] = v;
        } else {
          Shape ys;
          FERRY_RETURN_IF_ERROR(declared_shape(&ys));
          frame.values[out] = Value(v.tensor().Reshaped(ys));
        }
        if (viewable) {
          layouts[out] = Layout::kPlain;
          st.provider = "cpu (view)";
          ran = true;
        }
      }
    }
    if (st.shape_only && fuse && !ran) {
      // Every reader is a Shape/Size: declare the outputs (the reference prepare validates),
      // compute nothing. The tensors have no elements to read.
      ops::OpContext ctx(*st.node, st.opset, step_inputs(), &outs);
      FERRY_RETURN_IF_ERROR(st.def->prepare(ctx));
      const auto& decl = ctx.declared();
      ran = decl.size() == st.outputs.size();
      for (size_t k = 0; ran && k < decl.size(); ++k)
        ran = decl[k].set && decl[k].dtype != DType::kString;
      for (size_t k = 0; ran && k < decl.size(); ++k) {
        frame.values[static_cast<size_t>(st.outputs[k])] =
            Value(Tensor::View(decl[k].dtype, decl[k].shape, nullptr));
        layouts[static_cast<size_t>(st.outputs[k])] = Layout::kPlain;
      }
      if (ran) st.provider = "cpu (shape only)";
    }
    if (st.cpu && !ran) {
      ops::cpu::NodeSlot& slot = *st.slot;
      std::vector<const Value*> ins = step_inputs();
      slot.fusion = fuse ? st.fusion : ops::cpu::Fusion{};
      if (slot.fusion.sum) {
        ins.resize(static_cast<size_t>(st.cpu->fuse_input), nullptr);
        ins.push_back(&frame.values[static_cast<size_t>(st.residual)]);
      }
      slot.in_layouts.clear();
      for (size_t i = 0; i < ins.size(); ++i) {
        int id = i < st.inputs.size() ? st.inputs[i] : st.residual;
        slot.in_layouts.push_back(id < 0 || !ins[i] ? Layout::kPlain
                                                    : layouts[static_cast<size_t>(id)]);
      }
      if (slot.fusion.sum) slot.in_layouts.back() = layouts[static_cast<size_t>(st.residual)];
      slot.nhwc_ok.assign(st.outputs.size(), false);
      slot.declined = false;
      slot.fused = false;
      slot.strided_out_ok = false;
      slot.out_pixel_stride = 0;
      slot.place_offsets.clear();
      slot.out_layouts.clear();
      ops::OpContext ctx(*st.node, st.opset, std::move(ins), &outs);
      ctx.set_pool(shared_->pool.get());
      ctx.set_seed(shared_->seed);
      // nhwc_ok depends on which value output 0 lands in (the fused one or its own).
      for (size_t k = 0; k < st.outputs.size(); ++k) {
        // With fusion requested, output 0 lands in the fused value, or (fusion refused) in its own.
        int id = st.outputs[k];
        bool ok = fuse && id >= 0 && nhwc_ok_[static_cast<size_t>(id)];
        if (k == 0 && slot.fusion.any()) ok = ok && nhwc_ok_[static_cast<size_t>(st.fused_output)];
        slot.nhwc_ok[k] = ok;
      }
      Status status = st.cpu->prepare(ctx, slot);
      if (!status.ok()) return status;
      if (!slot.declined) {
        if (slot.fused) out_ids[0] = st.fused_output;
        ctx.set_allocator(alloc);
        strided_now = fuse && slot.strided_out_ok;
        FERRY_RETURN_IF_ERROR(allocate_declared(ctx, &outs));
        slot.out_pixel_stride = used_stride;
        st.cpu->run(ctx, slot);
        if (!plan && fuse) {
          if (slot.strided_out_ok && out_ids[0] >= 0)
            strided_ok[static_cast<size_t>(out_ids[0])] = true;
          for (size_t i = 0; i < slot.place_offsets.size() && i < st.inputs.size(); ++i)
            if (slot.place_offsets[i] >= 0 && st.inputs[i] >= 0 && out_ids[0] >= 0)
              places.push_back(
                  {st.inputs[i], out_ids[0], slot.place_offsets[i], slot.place_pixel_stride});
        }
        for (size_t k = 0; k < st.outputs.size(); ++k) {
          if (out_ids[k] < 0) continue;
          frame.values[static_cast<size_t>(out_ids[k])] = std::move(outs[k]);
          layouts[static_cast<size_t>(out_ids[k])] =
              k < slot.out_layouts.size() ? slot.out_layouts[k] : Layout::kPlain;
        }
        if (slot.fused)
          for (size_t t : st.absorb) {
            skip[t] = true;
            steps_[t].provider = "fused";
            steps_[t].fused_into = static_cast<int>(s);
          }
        if (!plan && slot.fused && st.fusion.sum && st.residual_dies) {
          const size_t o = static_cast<size_t>(st.fused_output);
          const size_t r = static_cast<size_t>(st.residual);
          if (sizes[r] > 0 && sizes[o] == sizes[r]) over[o] = st.residual;
        }
        st.provider = "cpu";
        ran = true;
      } else {
        st.provider = "reference (cpu declined)";
      }
    }
    if (!ran) {
      std::vector<const Value*> ins;
      std::vector<Value> converted;  // plain copies of channels-last inputs
      converted.reserve(st.inputs.size());
      for (int id : st.inputs) {
        if (id < 0) {
          ins.push_back(nullptr);
          continue;
        }
        const Value& v = frame.values[static_cast<size_t>(id)];
        // Shape and Size read only the (logical) shape: no conversion.
        if (cpu_on && layouts[static_cast<size_t>(id)] != Layout::kPlain &&
            !ReadsOnlyShape(*st.node)) {
          Tensor t(v.tensor().dtype(), v.tensor().shape());
          ops::cpu::ConvertLayout(v.tensor(), layouts[static_cast<size_t>(id)], &t, Layout::kPlain);
          converted.emplace_back(std::move(t));
          ins.push_back(&converted.back());
        } else {
          ins.push_back(&v);
        }
      }
      ops::OpContext ctx(*st.node, st.opset, std::move(ins), &outs);
      ctx.set_pool(shared_->pool.get());
      ctx.set_seed(shared_->seed);
      std::vector<std::unique_ptr<Runner>> runners;
      ctx.set_subgraphs([&](std::string_view attr) -> ops::SubgraphRunner* {
        auto it = st.subgraphs.find(attr);
        if (it == st.subgraphs.end()) return nullptr;
        runners.push_back(std::make_unique<Runner>(it->second.get(), &frame, opts));
        return runners.back().get();
      });
      ctx.set_allocator(alloc);
      Status status = st.def->prepare(ctx);
      if (!status.ok()) return status;
      FERRY_RETURN_IF_ERROR(allocate_declared(ctx, &outs));
      st.def->run(ctx);
      if (!ctx.run_status().ok()) return ctx.run_status();
      for (size_t k = 0; k < st.outputs.size(); ++k) {
        if (st.outputs[k] < 0) continue;
        frame.values[static_cast<size_t>(st.outputs[k])] = std::move(outs[k]);
        if (cpu_on) layouts[static_cast<size_t>(st.outputs[k])] = Layout::kPlain;
      }
      if (!st.cpu) st.provider = st.alias || st.constant ? "reference (cpu declined)" : "reference";
    }
    if (fuse && st.memo) {
      // Keep this run's outputs for later runs with the same inputs (small plain tensors only).
      size_t bytes = 0;
      bool keep = true;
      for (int id : st.outputs) {
        const Value& v = frame.values[static_cast<size_t>(id)];
        keep = keep && v.is_tensor() && layouts[static_cast<size_t>(id)] == Layout::kPlain &&
               v.tensor().dtype() != DType::kString;
        if (keep) bytes += v.tensor().nbytes();
      }
      keep = keep && bytes <= kMemoBytes;
      st.memo_valid = false;
      st.memo_outs.clear();
      if (keep) {
        for (int id : st.outputs) {
          Value& v = frame.values[static_cast<size_t>(id)];
          if (!v.tensor().owned()) v = Value(v.tensor().Clone());
          st.memo_outs.push_back(v);
        }
        st.memo_in_gens.clear();
        for (int id : st.inputs) st.memo_in_gens.push_back(id < 0 ? 0 : MemoGen(id));
        st.memo_valid = true;
        if (st.memo_by_shape) {
          const Value& x = frame.values[static_cast<size_t>(st.inputs[0])];
          st.memo_valid = x.is_tensor();
          if (x.is_tensor()) st.memo_shape = x.tensor().shape();
        }
      }
      // A fresh generation: readers memoized on the old outputs recompute.
      for (int id : st.outputs) memo_gen_[static_cast<size_t>(id)] = ++memo_counter_;
    }
    if (cpu_on && st.fold && !st.folded) {
      const size_t out = static_cast<size_t>(st.outputs[0]);
      if (frame.values[out].is_tensor() && layouts[out] == Layout::kPlain)
        st.folded = std::make_unique<Tensor>(frame.values[out].tensor().Clone());
    }
    if (opts && opts->observer)
      for (size_t k = 0; k < st.outputs.size(); ++k)
        if (st.outputs[k] >= 0)
          opts->observer(*st.node, st.node->outputs[k],
                         frame.values[static_cast<size_t>(st.outputs[k])]);
    if (profile) {
      st.total_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - t0)
                         .count() -
                     lazy_ns;
      ++st.calls;
    }
    free_values();
  }
  outputs->clear();
  for (int id : output_ids_) {
    Value v = frame.values[static_cast<size_t>(id)];
    if (v.is_tensor() && !v.tensor().owned()) v = Value(v.tensor().Clone());
    for (auto& t : v.sequence())
      if (!t.owned()) t = t.Clone();
    outputs->push_back(std::move(v));
  }
  if (!plan) {
    // Values freed before their producer ran, or never freed, keep conservative lifetimes.
    for (size_t id = 0; id < sizes.size(); ++id)
      if (last[id] < first[id]) last[id] = first[id];
    // Values without a slot of their own, each a guest of a host value's slot:
    //  * in place of a residual: an output written over its residual (the same bytes; chains
    //    of residual blocks share one slot);
    //  * in place of a Concat: an input whose only reader is the Concat, written by its producer
    //    in the arena (a strided place also by a kernel that takes the stride), at its place in
    //    the Concat output's slot. Not for values written over a residual or written over (their
    //    slots are shared already). A Concat's output may itself be placed (contiguous places
    //    nest).
    // A host's slot lives from the first to the last reader of any of its guests.
    struct Guest {
      int host = -1;
      int64_t offset = 0, stride = 0;
    };
    std::vector<Guest> guest(sizes.size());
    std::vector<bool> written_over(sizes.size(), false);
    for (size_t id = 0; id < sizes.size(); ++id)
      if (over[id] >= 0) {
        guest[id].host = over[id];
        written_over[static_cast<size_t>(over[id])] = true;
      }
    for (const Placement& pl : places) {
      const size_t v = static_cast<size_t>(pl.value), o = static_cast<size_t>(pl.concat_out);
      if (!placeable_[v] || guest[v].host >= 0 || sizes[v] == 0 || sizes[o] == 0 || over[o] >= 0 ||
          written_over[v] || written_over[o] || (pl.stride > 0 && !strided_ok[v]))
        continue;
      guest[v] = {pl.concat_out, pl.offset, pl.stride};
    }
    auto host_of = [&](size_t v, int64_t* off) {
      for (; guest[v].host >= 0; v = static_cast<size_t>(guest[v].host)) *off += guest[v].offset;
      return v;
    };
    std::vector<size_t> own = sizes;
    for (size_t id = 0; id < sizes.size(); ++id) {
      if (guest[id].host < 0) continue;
      int64_t off = 0;
      const size_t r = host_of(id, &off);
      first[r] = std::min(first[r], first[id]);
      last[r] = std::max(last[r], last[id]);
      own[id] = 0;
    }
    ArenaPlan p = MakePlan(own, first, last);
    for (size_t id = 0; id < sizes.size(); ++id) {
      if (guest[id].host < 0) continue;
      int64_t off = 0;
      const size_t r = host_of(id, &off);
      p.slots[id] = {p.slots[r].offset + static_cast<size_t>(off), sizes[id], guest[id].stride};
    }
    plans_.emplace(sig, std::move(p));
  }
  return Status::Ok();
}

Status GraphExecutor::MaterializeLazy(Step& d, const Frame& frame) {
  if (d.folded) return Status::Ok();
  std::vector<Value> outs(d.outputs.size());
  auto inputs = [&] {
    std::vector<const Value*> ins;
    for (int id : d.inputs)
      ins.push_back(id < 0 ? nullptr : &frame.values[static_cast<size_t>(id)]);
    return ins;
  };
  auto allocate = [&](const ops::OpContext& ctx) -> Status {
    const auto& decl = ctx.declared();
    for (size_t k = 0; k < decl.size(); ++k) {
      if (!decl[k].set) continue;
      for (int64_t n : decl[k].shape)
        if (n < 0)
          return InvalidError("{}: output {} would have a negative dim ({})", d.node->Describe(), k,
                              ShapeToString(decl[k].shape));
      outs[k] = Value(Tensor(decl[k].dtype, decl[k].shape));  // owned: kept across runs
    }
    return Status::Ok();
  };
  bool done = false;
  if (d.cpu) {
    ops::cpu::NodeSlot& slot = *d.slot;
    slot.fusion = {};
    slot.in_layouts.assign(d.inputs.size(), ops::cpu::Layout::kPlain);
    slot.nhwc_ok.assign(d.outputs.size(), false);
    slot.declined = slot.fused = false;
    slot.out_layouts.clear();
    ops::OpContext ctx(*d.node, d.opset, inputs(), &outs);
    ctx.set_pool(shared_->pool.get());
    ctx.set_seed(shared_->seed);
    FERRY_RETURN_IF_ERROR(d.cpu->prepare(ctx, slot));
    if (!slot.declined) {
      FERRY_RETURN_IF_ERROR(allocate(ctx));
      d.cpu->run(ctx, slot);
      done = true;
    }
  }
  if (!done) {
    ops::OpContext ctx(*d.node, d.opset, inputs(), &outs);
    ctx.set_pool(shared_->pool.get());
    ctx.set_seed(shared_->seed);
    FERRY_RETURN_IF_ERROR(d.def->prepare(ctx));
    FERRY_RETURN_IF_ERROR(allocate(ctx));
    d.def->run(ctx);
    FERRY_RETURN_IF_ERROR(ctx.run_status());
  }
  if (!outs[0].is_tensor()) return InvalidError("{}: produced no tensor", d.node->Describe());
  const Tensor& t = outs[0].tensor();
  d.folded = std::make_unique<Tensor>(t.owned() ? t : t.Clone());
  return Status::Ok();
}

namespace {

// Runs fn() as the session computes: the cpu provider's threads set (OpenMP count) and, with
// SessionOptions::flush_denormals, subnormals flushed on the calling thread and every worker
// (without it, and on the reference provider, kept: FTZ/DAZ cleared even if the caller had
// them); the caller's floating-point mode is back (on the workers too) when it returns.
template <typename F>
Status InRunMode(SessionShared& shared, F&& fn) {
  Status st;
  {
    ScopedFlushDenormals mode(shared.flush);
    if (shared.cpu) ops::cpu::BeginRun(shared.cpu.get());
    st = fn();
  }
  if (shared.cpu) ops::cpu::EndRun(shared.cpu.get());  // gives the workers the restored mode
  return st;
}

}  // namespace

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const ir::Model> model,
                                                 SessionOptions options) {
  std::unique_ptr<Session> s(new Session());
  s->model_ = std::move(model);
  s->shared_ = std::make_unique<SessionShared>();
  s->shared_->model = s->model_.get();
  s->shared_->pool = std::make_unique<ThreadPool>(options.threads);
  s->shared_->seed = options.seed;
  s->shared_->provider = options.provider;
  s->shared_->profile = options.profile;
  if (options.provider == "cpu") {
    s->shared_->cpu = ops::cpu::MakeProvider(s->shared_->pool->num_threads());
    s->shared_->flush = options.flush_denormals;
  } else if (options.provider != "reference")
    return UnsupportedError("unknown provider '{}' (known: cpu, reference)", options.provider);
  for (const auto& vi : s->model_->graph.inputs) s->inputs_.push_back(&vi);
  s->root_ = std::make_unique<GraphExecutor>(s->model_->graph, s->shared_.get());
  // Constants folded at build are computed as a run would compute them.
  FERRY_RETURN_IF_ERROR(InRunMode(*s->shared_, [&] { return s->root_->Build({}); }));
  return s;
}

size_t Session::arena_bytes() const {
  return root_->arena_bytes();
}
int Session::threads() const {
  return shared_->pool->num_threads();
}
const std::string& Session::provider() const {
  return shared_->provider;
}
std::vector<NodeReport> Session::node_report() const {
  return root_->Report();
}
void Session::ResetProfile() {
  root_->ResetProfile();
}

std::vector<NodeReport> GraphExecutor::Report() const {
  std::vector<NodeReport> out;
  for (const Step& st : steps_) {
    NodeReport r;
    r.name = st.node->name;
    r.op_type = st.node->op_type;
    r.planned = st.cpu || st.alias || st.constant ? "cpu" : "reference";
    r.provider = st.provider.empty() ? r.planned : st.provider;
    if (st.provider == "fused" && st.fused_into >= 0)
      r.fused_into = steps_[static_cast<size_t>(st.fused_into)].node->name;
    r.total_ms = static_cast<double>(st.total_ns) / 1e6;
    r.calls = st.calls;
    out.push_back(std::move(r));
  }
  return out;
}

namespace {
Status CheckInput(const ir::ValueInfo& vi, const Value& v) {
  const ir::TypeInfo& t = vi.type;
  if (t.kind == ir::TypeInfo::Kind::kTensor) {
    if (!v.is_tensor())
      return InvalidError("input '{}': expected a tensor {}, got {}", vi.name, t.ToString(),
                          v.is_sequence() ? "a sequence" : "nothing");
    const Tensor& x = v.tensor();
    if (t.elem_type != DType::kUndefined && x.dtype() != t.elem_type)
      return InvalidError("input '{}': expected dtype {}, got {} (shape {})", vi.name,
                          DTypeName(t.elem_type), DTypeName(x.dtype()), ShapeToString(x.shape()));
    if (t.shape) {
      bool ok = t.shape->size() == x.shape().size();
      for (size_t i = 0; ok && i < t.shape->size(); ++i)
        if ((*t.shape)[i].value && *(*t.shape)[i].value != x.shape()[i]) ok = false;
      if (!ok)
        return InvalidError("input '{}': expected shape {}, got {}", vi.name, t.ToString(),
                            ShapeToString(x.shape()));
    }
  } else if (t.kind == ir::TypeInfo::Kind::kSequence && !v.is_sequence()) {
    return InvalidError("input '{}': expected {}, got {}", vi.name, t.ToString(),
                        v.is_tensor() ? "a tensor" : "nothing");
  }
  return Status::Ok();
}
}  // namespace

Result<std::vector<Value>> Session::Run(const std::vector<std::pair<std::string, Value>>& inputs,
                                        const RunOptions& options) {
  const ir::Graph& g = model_->graph;
  std::vector<Value> ordered(g.inputs.size());
  std::vector<bool> fed(g.inputs.size(), false);
  for (const auto& [name, v] : inputs) {
    auto it = std::find_if(g.inputs.begin(), g.inputs.end(),
                           [&](const ir::ValueInfo& vi) { return vi.name == name; });
    if (it == g.inputs.end()) {
      std::string names;
      for (const auto* vi : g.RealInputs()) names += (names.empty() ? "" : ", ") + vi->name;
      return InvalidError("unknown input '{}' (the model's inputs are: {})", name, names);
    }
    size_t k = static_cast<size_t>(it - g.inputs.begin());
    FERRY_RETURN_IF_ERROR(CheckInput(*it, v));
    ordered[k] = v;
    fed[k] = true;
  }
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    if (fed[k]) continue;
    const ir::Initializer* init = g.FindInitializer(g.inputs[k].name);
    if (init) {
      ordered[k] = Value(init->tensor);
    } else if (g.inputs[k].type.kind != ir::TypeInfo::Kind::kOptional) {
      return InvalidError("missing input '{}' ({})", g.inputs[k].name, g.inputs[k].type.ToString());
    }
  }
  std::vector<Value> outs;
  FERRY_RETURN_IF_ERROR(
      InRunMode(*shared_, [&] { return root_->Run(nullptr, ordered, &outs, &options); }));
  return outs;
}

}  // namespace ferry::runtime
