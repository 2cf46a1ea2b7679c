// Session: prepares a model once and runs it many times, from any number of threads at once.
//
// Create() checks the graph: topological order (any listed order is accepted and sorted),
// every value read is produced by an input, initializer or node, every op is supported at the
// model's opset. Run() validates the inputs (names, dtypes, shapes against the declared
// ones), then executes node by node. Intermediate tensors live in an arena per run, laid out
// per input-shape signature from tensor liveness after the first run with that signature; a
// tensor larger than its planned slot (data-dependent shapes) falls back to its own allocation.
//
// Providers: with provider "cpu" (the default) each node whose op has a kernel in ops/cpu/
// that accepts it runs that kernel; the kernel may decline at prepare time (dtype, shape) and
// the node then runs its reference kernel for that run. cpu kernels pack constant weights
// once per session, may absorb a following Add/Relu/Clip (fusion) or a whole matched subgraph
// (pattern kernels, e.g. a decomposed LayerNorm) and may keep activations
// channels-last between cpu nodes; reference kernels, graph outputs and observers always see
// plain tensors, and a run with an observer runs every node unfused. The cpu provider also
// reuses shape arithmetic from the previous run while its inputs are unchanged, and runs
// Reshape-like ops as views of their input. Provider "reference" runs
// every node's reference kernel (the spec).
//
// Threads: a Session may be shared by any number of threads; Run may be called concurrently.
// What Create builds (the plan, packed weights, arena layouts) is shared read-only; what a run
// mutates lives in a run context taken from the session's pool for that run (runtime/context.h),
// so concurrent runs give the same results as the same runs made one after another, and a
// failed run leaves nothing behind. The other members are safe to call at any time too;
// node_report() counts the runs that have finished.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/memory_budget.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ferry::runtime {

struct SessionOptions {
  int threads = 0;    // parallelism of one run (RunOptions::threads overrides); 0: one per core
  uint64_t seed = 0;  // for random ops without a seed attribute
  // The most iterations one Loop node may run before its run fails naming the node (0: no
  // limit: a model's own endless loop runs until stopped). Ferry's own runs of a user's model
  // (optimize/convert's equivalence check) set one, so they end.
  int64_t max_loop_iterations = 0;
  std::string provider = "cpu";  // "cpu" or "reference"
  bool profile = false;          // time every node (NodeReport::total_ms)
  // Provider "cpu": runs (and session build) with subnormal floats flushed to zero on every
  // thread that computes (x86 FTZ + DAZ, core/float_mode.h); the caller's mode is restored
  // afterwards. Provider "reference" never flushes: it is the IEEE spec.
  bool flush_denormals = true;
  // Runs in flight in this process share the machine's cores (runtime/context.h, CoreBudget):
  // a run that asks for more threads than are free gets what is left, at least one. Off: every
  // run gets the threads it asks for, however many runs are in flight.
  bool share_cores = true;
  // The bytes this session's tensors may hold at once, over Create and all runs in flight
  // (core/memory_budget.h says what is charged); 0: DefaultMaxMemory() (3/4 of physical
  // memory, at most half of `ulimit -v`; the CLI's --max-memory). A step whose output would
  // pass it fails its run with kInvalid naming the node, the shape and the bytes, before
  // anything is allocated; a std::bad_alloc inside Create or Run becomes kInvalid too.
  uint64_t max_memory = 0;
};

// One top-level node, in execution order: where it runs and, with profiling, how long it took.
struct NodeReport {
  std::string name, op_type;
  std::string planned;     // "cpu" (a cpu kernel accepts the node) or "reference"
  std::string provider;    // last run: "cpu", "reference", "reference (cpu declined)", "fused",
                           // "cpu (PATTERN)", "cpu (folded constant)", "cpu (unused constant)",
                           // "cpu (memoized)", "cpu (view)", "cpu (channels-last view)" (a
                           // view of a value in a provider layout: Reshape, Identity),
                           // "cpu (shape only)"
  std::string fused_into;  // provider "fused": the node whose cpu kernel computed this one
  double total_ms = 0;     // with SessionOptions::profile, summed over `calls` runs
  int64_t calls = 0;
};

// Called after each top-level node with each of its outputs (for verify and calibration).
// The value is valid only during the call.
using NodeObserver =
    std::function<void(const ir::Node& node, const std::string& output_name, const Value& value)>;

struct RunOptions {
  NodeObserver observer;  // called on the running thread; null: none
  int threads = 0;        // this run's parallelism; 0: SessionOptions::threads
};

class GraphExecutor;
class ContextPool;

class Session {
 public:
  // The model is shared read-only; many sessions may run one model.
  static Result<std::unique_ptr<Session>> Create(std::shared_ptr<const ir::Model> model,
                                                 SessionOptions options = {});
  ~Session();

  const ir::Model& model() const { return *model_; }
  // Graph inputs a caller must (or may, for initializer-backed ones) feed, in graph order.
  const std::vector<const ir::ValueInfo*>& inputs() const { return inputs_; }
  const std::vector<ir::ValueInfo>& outputs() const { return model_->graph.outputs; }

  // Runs with inputs by name; returns the graph outputs in graph order (owned values).
  // Errors: kInvalid for an unknown/missing input or a wrong dtype/shape (naming the input,
  // expected vs got), or any node's failure (naming the node).
  Result<std::vector<Value>> Run(const std::vector<std::pair<std::string, Value>>& inputs,
                                 const RunOptions& options = {});

  // Bytes of the largest arena planned so far (over input signatures): what each concurrent
  // run adds (its run context holds one arena of at most this size).
  size_t arena_bytes() const;
  // Bytes of the weights every run shares: the initializers, and the cpu kernels' packed and
  // folded copies of them (made once per session, whatever the concurrency).
  size_t weights_bytes() const;
  // The session's memory budget: limit, bytes in use, peak.
  const MemoryBudget& memory() const;
  // Run contexts made so far (the most runs that were in flight at once, per thread count).
  size_t contexts() const;
  int threads() const;
  const std::string& provider() const;
  // Per top-level node: planned and last-run provider, and profile times (see SessionOptions).
  std::vector<NodeReport> node_report() const;
  void ResetProfile();

 private:
  Session() = default;
  std::shared_ptr<const ir::Model> model_;
  std::vector<const ir::ValueInfo*> inputs_;
  std::unique_ptr<struct SessionShared> shared_;
  std::unique_ptr<GraphExecutor> root_;
  std::unique_ptr<ContextPool> pool_;
};

}  // namespace ferry::runtime
