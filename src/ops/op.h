// The op contract. Every operator is an OpDef: `prepare` sees the node's attributes and its
// concrete inputs (shapes and values), validates everything and declares its outputs;
// `run` computes into the outputs and does no checks (debug asserts only). `infer` works on
// the IR alone (symbolic shapes) and may be null until an op needs it.
//
// To add an op: 1. write Prepare/Run in the family file under reference/ (or a new file),
// 2. add its row to that file's OpDef table, 3. add a test (tests/ops/) or let conformance cover it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "ir/graph.h"

namespace ferry::ops {

// Per-node state a prepare may build (pre-packed weights, index tables) for its run.
class OpState {
 public:
  virtual ~OpState() = default;
};

// Runs one subgraph attribute (If/Loop/Scan body) of the node being executed. Implemented by
// the runtime; outer-scope names in the body resolve against the calling frame.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual const ir::Graph& graph() const = 0;
  // Binds `inputs` to the body's graph inputs in order; fills `outputs` in graph-output order
  // with owned values. Returns the body's first error.
  virtual Status Run(std::span<const Value> inputs, std::vector<Value>* outputs) = 0;
};

// Allocates an output tensor (the runtime hands out arena views; default: owned storage).
using OutputAllocator = std::function<Tensor(size_t output_index, DType, const Shape&)>;
using SubgraphLookup = std::function<SubgraphRunner*(std::string_view attr_name)>;

class OpContext {
 public:
  OpContext(const ir::Node& node, int64_t opset, std::vector<const Value*> inputs, std::vector<Value>* outputs)
      : node_(node), opset_(opset), inputs_(std::move(inputs)), outputs_(outputs) {
    declared_.assign(outputs_->size(), Declared{});
  }

  const ir::Node& node() const { return node_; }
  // The opset version of the node's domain imported by the model.
  int64_t opset() const { return opset_; }

  // ---- inputs ----
  size_t num_inputs() const { return inputs_.size(); }
  // Input i is listed, named, and holds a value (not an omitted or empty optional).
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] && !inputs_[i]->is_none(); }
  const Value& input_value(size_t i) const { return *inputs_[i]; }
  // Precondition: has_input(i) and it holds a tensor (prepare checks with input_is_tensor).
  const Tensor& input(size_t i) const { return inputs_[i]->tensor(); }
  bool input_is_tensor(size_t i) const { return has_input(i) && inputs_[i]->is_tensor(); }

  // ---- attributes (shorthands for node()) ----
  int64_t attr_int(std::string_view n, int64_t def) const { return node_.attr_int(n, def); }
  float attr_float(std::string_view n, float def) const { return node_.attr_float(n, def); }
  std::string attr_string(std::string_view n, const std::string& def) const { return node_.attr_string(n, def); }
  std::vector<int64_t> attr_ints(std::string_view n) const { return node_.attr_ints(n); }
  std::vector<float> attr_floats(std::string_view n) const { return node_.attr_floats(n); }
  bool has_attr(std::string_view n) const { return node_.attr(n) != nullptr; }

  // ---- outputs ----
  size_t num_outputs() const { return outputs_->size(); }
  // Output i is listed with a non-empty name (someone may read it).
  bool has_output(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  // prepare: declares output i; the runtime allocates it before run.
  void set_output(size_t i, DType dtype, Shape shape) { declared_[i] = Declared{true, dtype, std::move(shape)}; }
  // run: the tensor declared by set_output.
  Tensor& output(size_t i) { return (*outputs_)[i].tensor(); }
  // run: for outputs whose shape depends on computed data (NonZero, Unique, Loop...).
  Tensor& allocate_output(size_t i, DType dtype, const Shape& shape) {
    (*outputs_)[i] = Value(allocator_ ? allocator_(i, dtype, shape) : Tensor(dtype, shape));
    return (*outputs_)[i].tensor();
  }
  // run: sets a whole value (sequences, optionals). Tensors inside must be owned (Clone()).
  void set_output_value(size_t i, Value v) { (*outputs_)[i] = std::move(v); }

  // ---- services ----
  ThreadPool* pool() const { return pool_; }
  SubgraphRunner* subgraph(std::string_view attr_name) const { return subgraphs_ ? subgraphs_(attr_name) : nullptr; }
  // A per-session seed for random ops (RandomNormal...) without a `seed` attribute.
  uint64_t seed() const { return seed_; }
  // The most iterations one Loop node may run (SessionOptions::max_loop_iterations); 0: no limit.
  int64_t max_loop_iterations() const { return max_loop_iterations_; }
  template <typename T>
  T* state() const { return static_cast<T*>(state_); }
  void set_state(std::unique_ptr<OpState> s) {
    owned_state_ = std::move(s);
    state_ = owned_state_.get();
  }
  // run: reports a failure that only execution can find (a subgraph's error). Kernels without
  // subgraphs never call this: they validate in prepare.
  void fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }

  // ---- runtime side ----
  struct Declared {
    bool set = false;
    DType dtype = DType::kUndefined;
    Shape shape;
  };
  const std::vector<Declared>& declared() const { return declared_; }
  void set_allocator(OutputAllocator a) { allocator_ = std::move(a); }
  void set_pool(ThreadPool* p) { pool_ = p; }
  void set_subgraphs(SubgraphLookup s) { subgraphs_ = std::move(s); }
  void set_seed(uint64_t s) { seed_ = s; }
  void set_max_loop_iterations(int64_t n) { max_loop_iterations_ = n; }
  const Status& run_status() const { return status_; }
  std::unique_ptr<OpState> take_state() { return std::move(owned_state_); }

 private:
  const ir::Node& node_;
  int64_t opset_;
  std::vector<const Value*> inputs_;
  std::vector<Value>* outputs_;
  std::vector<Declared> declared_;
  OutputAllocator allocator_;
  ThreadPool* pool_ = nullptr;
  SubgraphLookup subgraphs_;
  uint64_t seed_ = 0;
  int64_t max_loop_iterations_ = 0;
  OpState* state_ = nullptr;
  std::unique_ptr<OpState> owned_state_;
  Status status_;
};

// IR-level inference context (symbolic shapes). Reserved: ops may leave `infer` null.
class InferContext;

using InferFn = Status (*)(InferContext&);
using PrepareFn = Status (*)(OpContext&);
using RunFn = void (*)(OpContext&);

struct OpDef {
  std::string_view domain;  // "" for the default ONNX domain
  std::string_view name;    // "Conv"
  int since_version;        // first opset this definition covers; it covers up to the next one
  InferFn infer;            // may be null
  PrepareFn prepare;
  RunFn run;
};

// Error helpers that name the node, as house style asks:
//   Conv 'layer1.0.conv1': W has rank 3, expected 4
template <typename... Args>
Status NodeError(const OpContext& ctx, fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kInvalid, ctx.node().Describe() + ": " + fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Status NodeUnsupported(const OpContext& ctx, fmt::format_string<Args...> f, Args&&... args) {
  return Status(StatusCode::kUnsupported, ctx.node().Describe() + ": " + fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ferry::ops
