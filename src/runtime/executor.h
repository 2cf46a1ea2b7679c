// Internal to the runtime: the plan of one graph (GraphExecutor, built once by Session::Create)
// and the state one run context keeps for it (ExecState). Not installed; session.h is the API.
//
// Sharing between threads: a GraphExecutor, its Steps and SessionShared are built by Create and
// read-only afterwards, so any number of runs read them at once. The only members written after
// Create sit behind their own lock, each named below: the arena layouts planned per input
// signature (`plans_mu_`), a folded constant's value (`FoldCell`) and the packed weights of a
// cpu node (`ops::cpu::PackCache`). Everything a run mutates — arena memory, kernel slots and
// their states, memoized shapes, layouts, profile counters — lives in an ExecState, which one
// run uses at a time (runtime/context.h hands them out).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/buffer_pool.h"
#include "core/memory_budget.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "ops/cpu/cpu_kernel.h"
#include "ops/op.h"
#include "runtime/arena.h"
#include "runtime/session.h"

namespace ferry::runtime {

// Session-wide, read-only after Create.
struct SessionShared {
  const ir::Model* model = nullptr;
  uint64_t seed = 0;
  int64_t max_loop_iterations = 0;  // SessionOptions::max_loop_iterations
  std::string provider;
  int threads = 1;                   // SessionOptions::threads resolved: a run's default
  ops::cpu::ProviderPtr cpu_engine;  // the cpu provider's shared engine; null with "reference"
  bool profile = false;
  bool flush = false;       // SessionOptions::flush_denormals, with the cpu provider
  bool share_cores = true;  // SessionOptions::share_cores
  // SessionOptions::max_memory: charged by the tensors and arenas of Create and every run.
  std::shared_ptr<MemoryBudget> budget;
  // Owned tensors of 1 MiB or more that the runs allocate outside the arena (graph outputs,
  // mostly): a released one is kept (up to 1 GiB idle) for the next run's request of its size
  // (core/buffer_pool.h). Null with the reference provider.
  std::shared_ptr<BufferPool> buffers;
  bool cpu() const { return cpu_engine != nullptr; }
};

// A value computed once by whichever run needs it first and shared read-only by every run
// after (a DequantizeLinear of initializers). Thread-safe.
class FoldCell {
 public:
  std::shared_ptr<const Tensor> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }
  // Keeps `t` unless a value is there already; returns the one kept.
  std::shared_ptr<const Tensor> Publish(Tensor t) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!value_) value_ = std::make_shared<const Tensor>(std::move(t));
    return value_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Tensor> value_;
};

class GraphExecutor;
struct ExecState;

// One node of a graph in execution order, as planned at Create. Read-only afterwards but for
// the members behind their own lock (`fold_cell`, the pack caches).
struct Step {
  const ir::Node* node = nullptr;
  const ops::OpDef* def = nullptr;
  int64_t opset = 0;
  std::vector<int> inputs, outputs;
  std::vector<int> frees;      // values last read here
  bool has_subgraphs = false;  // a graph attribute (If/Loop/Scan body): `subgraphs`
  std::map<std::string, std::unique_ptr<GraphExecutor>, std::less<>> subgraphs;
  // cpu provider: the kernel, its shared packed weights, and the fusion this step may host.
  const ops::cpu::KernelDef* cpu = nullptr;
  std::vector<bool> const_inputs;  // input i is the same every run (NodeSlot::const_inputs)
  std::unique_ptr<ops::cpu::PackCache> packs;
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
  // cpu provider: a step whose inputs are all the same every run, computed once at Create
  // (its reference kernel) and then shared like a Constant (`constant` points at it).
  std::unique_ptr<Tensor> built;
  // cpu provider: a Reshape/Flatten/Squeeze/Unsqueeze/Identity/Transpose whose output may be a
  // view of its input: no copy. Build extends the input's lifetime (arena slot included) to the
  // output's last reader.
  bool view = false;
  // cpu provider: every output is read only by Shape/Size steps: only its shapes are made.
  bool shape_only = false;
  // cpu provider: a step whose inputs are constants or other memoized steps' outputs (Shape
  // and Size: any input, keyed by its shape) — the shape arithmetic of exported transformers.
  // A run context keeps its outputs of the last run with the generations of its inputs (or the
  // input's shape); a later run in that context whose inputs have the same generations reuses
  // them (StepState::memo_*).
  bool memo = false;
  bool memo_by_shape = false;  // Shape, Size
  // cpu provider: a DequantizeLinear of initializers (QDQ weights and biases), computed by the
  // first run that needs it and shared by every later run (`fold_cell`). `lazy` (not read by a
  // subgraph): in runs without an observer it does not run at its position; its value is
  // computed when a step that runs reads it (MaterializeLazy), so the float copy of an int8
  // weight a pattern kernel reads directly is never made.
  bool fold = false;
  bool lazy = false;
  std::unique_ptr<FoldCell> fold_cell;
  // cpu provider: a pattern kernel that computes this step and `absorbed` ones (host step).
  struct PatternPlan {
    std::string_view name;
    std::string provider;  // "cpu (NAME)"
    const ops::cpu::KernelDef* kernel = nullptr;
    std::vector<size_t> absorbed;
    std::vector<int> inputs;
    int output = -1;
    std::vector<float> params;
    std::vector<bool> const_inputs;
    std::unique_ptr<ops::cpu::PackCache> packs;
  };
  std::unique_ptr<PatternPlan> pattern;
};

// The frame of one graph's run: its values by id (the run state's buffer, reused from run to
// run), and the caller's frame (outer-scope reads).
struct Frame {
  const GraphExecutor* exec;
  std::vector<Value>& values;
  const Frame* parent;
};

// A run's resources outside the graph: the run context's cpu provider (stream, scratch) and
// thread pool, and the options of this run.
struct RunEnv {
  ops::cpu::Provider* cpu = nullptr;  // null with provider "reference"
  ThreadPool* pool = nullptr;
  const RunOptions* opts = nullptr;
};

class GraphExecutor {
 public:
  GraphExecutor(const ir::Graph& g, const SessionShared* shared) : graph_(g), shared_(shared) {}

  // Names and the values of enclosing graphs that are the same every run (initializers,
  // Constant outputs, steps folded at Create).
  using ConstValues = std::map<std::string, const Tensor*, std::less<>>;
  // `outer` = names visible from enclosing scopes (empty for the main graph); `outer_const`
  // = those among them that are the same every run, with their values: a subgraph folds steps
  // on them, kernels in it pack them once, memo steps may read them.
  Status Build(const std::set<std::string>& outer, const ConstValues& outer_const = {});
  // Runs the graph with `state` (one run at a time per state); `parent` is the calling frame
  // (subgraphs), `opts` null inside subgraphs (no observer there).
  Status Run(ExecState& state, const RunEnv& env, const Frame* parent,
             std::span<const Value> inputs, std::vector<Value>* outputs,
             const RunOptions* opts) const;

  // A fresh run state for this graph (and, lazily, its subgraphs).
  std::unique_ptr<ExecState> NewState(ops::cpu::Provider* cpu) const;

  const ir::Graph& graph() const { return graph_; }
  const SessionShared& shared() const { return *shared_; }
  int IdOf(const std::string& name) const {
    auto it = ids_.find(name);
    return it == ids_.end() ? -1 : it->second;
  }
  const std::vector<Step>& steps() const { return steps_; }
  // Largest arena one run of this graph needs (subgraphs not included), over the input
  // signatures planned so far.
  size_t max_arena_bytes() const;
  // Bytes of the cpu nodes' packed weights and the constants folded at Create or on the first
  // run (shared by all runs), subgraphs included.
  size_t packed_bytes() const;
  // Per step: planned provider from the plan, last-run provider and times from `state`.
  std::vector<NodeReport> Report(const ExecState* state) const;

 private:
  friend class StepRunner;
  // What the cpu provider's planning reads about the graph (cpu_plan.cc): per value, whether
  // it is the same every run, whether a subgraph reads it, its readers (step, input index) and
  // its producer step (-1: an input, initializer or outer value).
  struct PlanInfo {
    std::vector<bool> is_const, sub_read;
    std::vector<std::vector<std::pair<size_t, size_t>>> users;
    std::vector<int> producer;
  };
  void PlanCpu(const std::vector<std::vector<std::string>>& reads);
  void PlanFolds(PlanInfo& info);
  void FoldAtCreate(PlanInfo& info);
  void PlanLayouts(const PlanInfo& info);
  void PlanFusions(const PlanInfo& info, const std::vector<int>& pattern_of,
                   std::vector<bool>* absorbed);
  // The fusion chain a fusing kernel at step s may absorb (see cpu_plan.cc); false: none.
  bool FusionChain(const PlanInfo& info, const std::vector<int>& pattern_of,
                   const std::vector<bool>& absorbed, const std::vector<bool>& fused_in, size_t s,
                   ops::cpu::Fusion* f, std::vector<size_t>* absorb, int* out, int* residual) const;
  bool MatchGelu(const PlanInfo& info, const std::vector<bool>& absorbed, int v, size_t scale,
                 size_t mul, std::vector<size_t>* steps) const;
  bool ConstScalar(const PlanInfo& info, int id, float* out) const;
  // The tensor of a value the same every run (an initializer, a Constant or folded step), or null.
  const Tensor* ConstTensor(const PlanInfo& info, int id) const;
  std::shared_ptr<const ops::cpu::Fusion::Affine> BatchNormAffine(const PlanInfo& info,
                                                                  const Step& bn) const;
  void PlanPatterns(const PlanInfo& info, std::vector<int>* pattern_of);
  void PlanMemo(const PlanInfo& info, const std::vector<bool>& absorbed);
  int Intern(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, static_cast<int>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }
  Status BuildSteps(const std::vector<size_t>& order);
  Status BuildSubgraphs(const std::set<std::string>& visible,
                        const std::unordered_map<std::string, size_t>& producer);
  void PlanLiveness(const std::vector<std::vector<std::string>>& reads);
  // After PlanCpu: the values kept in ExecState::values across runs (`pinned_`).
  void PlanPinned();
  // The arena layout planned for `sig`, or null; Publish keeps the first one planned.
  std::shared_ptr<const ArenaLayout> FindPlan(const std::string& sig) const;
  std::shared_ptr<const ArenaLayout> PublishPlan(const std::string& sig, ArenaLayout layout) const;
  // Computes a lazy DequantizeLinear's value (once per session) from its constant inputs.
  Result<std::shared_ptr<const Tensor>> MaterializeLazy(size_t step, ExecState& state,
                                                        const RunEnv& env,
                                                        const Frame& frame) const;

  const ir::Graph& graph_;
  const SessionShared* shared_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, int> ids_;
  std::vector<int> input_ids_, output_ids_;
  std::vector<std::pair<int, Value>> constants_;
  std::vector<std::pair<int, std::string>> outer_;  // ids read from enclosing scopes
  ConstValues outer_const_;                         // Build's `outer_const`
  // Per outer_ entry, its id in the enclosing graph `outer_parent_` (resolved when that graph's
  // Build completes); a run called from another frame looks names up instead.
  const GraphExecutor* outer_parent_ = nullptr;
  std::vector<int> outer_parent_ids_;
  void ResolveOuter(const GraphExecutor& parent);
  std::vector<Step> steps_;
  std::vector<bool> is_output_;
  // Per value: the same tensor every run, set once in a context's frame and kept there between
  // runs (never freed by a step, never cleared at the end of a run): initializers that are not
  // also graph inputs, and Constant / folded-at-create steps' outputs. Copying each into the
  // frame at every run (a shape vector allocated and freed per value) was a tenth of
  // silero-vad's time per chunk: its If branches hold ~150 constants.
  std::vector<bool> pinned_;
  std::vector<bool> nhwc_ok_;  // per value: every reader is a cpu kernel that takes channels-last
  // per value: its only reader is a Concat (no graph output, no subgraph read), so its producer
  // may write it in its place in the Concat's output (the arena plan decides)
  std::vector<bool> placeable_;
  std::vector<int> lazy_producer_;  // per value: its lazy DequantizeLinear step, or -1
  // Memoization (Step::memo): per value, 1 when the same every run (an initializer, a shared
  // Constant, a folded DequantizeLinear), 2 when written by a memo step, else 0.
  std::vector<uint8_t> memo_src_;
  mutable std::mutex plans_mu_;
  mutable std::map<std::string, std::shared_ptr<const ArenaLayout>> plans_;
};

// What one run context keeps for one step between its runs.
struct StepState {
  std::unique_ptr<ops::cpu::NodeSlot> slot, pattern_slot;  // cpu kernel / pattern kernel
  // Memo step: the outputs of this context's last run and what they were computed from.
  bool memo_valid = false;
  std::vector<uint64_t> memo_in_gens;
  Shape memo_shape;
  std::vector<Value> memo_outs;
  std::shared_ptr<const Tensor> folded;  // this context's copy of Step::fold_cell's value
  // Subgraph run states, made on first use.
  std::map<std::string, std::unique_ptr<ExecState>, std::less<>> subgraphs;
  // Last run (a static text, or the pattern plan's `provider`) and profile.
  std::string_view provider;
  int fused_into = -1;
  int64_t total_ns = 0, calls = 0;
};

// One run context's state for one graph. Used by one run at a time.
struct ExecState {
  std::vector<StepState> steps;
  // The frame's values during a run; between runs only the pinned ones are set
  // (GraphExecutor::pinned_).
  std::vector<Value> values;
  // The input dtypes and shapes of the last run (its signature, `last_sig`, made only when
  // they change).
  std::vector<std::pair<DType, Shape>> last_inputs;
  bool last_fuse = false;
  // Per value, the generation of its memo step's last output in this context (a fresh number
  // whenever recomputed); 0 for values that are the same every run.
  std::vector<uint64_t> memo_gen;
  uint64_t memo_counter = 0;
  // The arena: the layout of the last signature run and this context's memory for it.
  std::string last_sig;
  std::shared_ptr<const ArenaLayout> last_plan;
  ArenaBuffer arena;
  void ResetProfile();
};

// Value and id shorthands.
inline size_t U(int id) {
  return static_cast<size_t>(id);
}

// Shape and Size: their output depends on the input's (logical) shape only.
bool ReadsOnlyShape(const ir::Node& n);
// Names a graph reads that it does not define itself (outer-scope references), recursively
// through nested subgraphs.
void CollectFreeNames(const ir::Graph& g, std::set<std::string>* out);

}  // namespace ferry::runtime
