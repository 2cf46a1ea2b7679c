// Session: the API over the plan (GraphExecutor, built once by Create) and the run contexts
// (ContextPool) concurrent runs take their mutable state from.
#include "runtime/session.h"

#include <algorithm>
#include <new>

#include "core/float_mode.h"
#include "core/thread_pool.h"
#include "runtime/context.h"
#include "runtime/executor.h"

namespace ferry::runtime {

namespace {

// Runs fn() as the session computes: the cpu provider's threads set (OpenMP count) and, with
// SessionOptions::flush_denormals, subnormals flushed on the calling thread and every worker
// (without it, and on the reference provider, kept: FTZ/DAZ cleared even if the caller had
// them); the caller's floating-point mode is back (on the workers too) when it returns.
// The session's memory budget is installed on the calling thread meanwhile, and running out of
// memory anyway (an allocation the budget does not see) is an error, not an exception.
template <typename F>
Status InRunMode(const SessionShared& shared, ops::cpu::Provider* cpu, F&& fn) {
  Status st;
  {
    ScopedFlushDenormals mode(shared.flush);
    MemoryBudget::Scope budget(shared.budget);
    if (cpu) ops::cpu::BeginRun(cpu);
    try {
      st = fn();
    } catch (const std::bad_alloc&) {
      st = InvalidError("out of memory (the allocator refused; {} in use of the {} budget)",
                        FormatBytes(shared.budget->in_use()), FormatBytes(shared.budget->limit()));
    }
  }
  if (cpu) ops::cpu::EndRun(cpu);  // gives the workers the restored mode
  return st;
}

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

// The threads a run takes from the process's cores, given back when it ends.
class CoreLease {
 public:
  CoreLease(int want, bool share) : share_(share), got_(share ? CoreBudget::Acquire(want) : want) {}
  ~CoreLease() {
    if (share_) CoreBudget::Release(got_);
  }
  CoreLease(const CoreLease&) = delete;
  CoreLease& operator=(const CoreLease&) = delete;
  int threads() const { return got_; }

 private:
  bool share_;
  int got_;
};

}  // namespace

Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::Create(std::shared_ptr<const ir::Model> model,
                                                 SessionOptions options) {
  std::unique_ptr<Session> s(new Session());
  s->model_ = std::move(model);
  s->shared_ = std::make_unique<SessionShared>();
  SessionShared& sh = *s->shared_;
  sh.model = s->model_.get();
  sh.threads = options.threads > 0 ? options.threads : ThreadPool::DefaultThreads();
  sh.seed = options.seed;
  sh.max_loop_iterations = options.max_loop_iterations;
  sh.provider = options.provider;
  sh.profile = options.profile;
  sh.share_cores = options.share_cores;
  sh.budget = std::make_shared<MemoryBudget>(options.max_memory);
  if (options.provider == "cpu") {
    sh.cpu_engine = ops::cpu::MakeProvider(sh.threads);
    sh.flush = options.flush_denormals;
    sh.buffers = BufferPool::Create(size_t{1} << 20, size_t{1} << 30);
  } else if (options.provider != "reference") {
    return UnsupportedError("unknown provider '{}' (known: cpu, reference)", options.provider);
  }
  for (const auto& vi : s->model_->graph.inputs) s->inputs_.push_back(&vi);
  s->root_ = std::make_unique<GraphExecutor>(s->model_->graph, s->shared_.get());
  s->pool_ = std::make_unique<ContextPool>();
  FERRY_RETURN_IF_ERROR(InRunMode(sh, sh.cpu_engine.get(), [&] { return s->root_->Build({}); }));
  return s;
}

size_t Session::arena_bytes() const {
  return root_->max_arena_bytes();
}
size_t Session::weights_bytes() const {
  size_t b = 0;
  for (const auto& init : model_->graph.initializers) b += init.tensor.nbytes();
  return b + root_->packed_bytes();
}
const MemoryBudget& Session::memory() const {
  return *shared_->budget;
}
size_t Session::contexts() const {
  return pool_->size();
}
int Session::threads() const {
  return shared_->threads;
}
const std::string& Session::provider() const {
  return shared_->provider;
}
std::vector<NodeReport> Session::node_report() const {
  return pool_->Report(*root_);
}
void Session::ResetProfile() {
  pool_->ResetProfile();
}

Result<std::vector<Value>> Session::Run(const std::vector<std::pair<std::string, Value>>& inputs,
                                        const RunOptions& options) {
  const ir::Graph& g = model_->graph;
  std::vector<Value> ordered(g.inputs.size());
  std::vector<bool> fed(g.inputs.size(), false);
  for (const auto& [name, v] : inputs) {
    auto it = std::find_if(g.inputs.begin(), g.inputs.end(),
                           [&name = name](const ir::ValueInfo& vi) { return vi.name == name; });
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
  const int want = options.threads > 0 ? options.threads : shared_->threads;
  CoreLease cores(want, shared_->share_cores);
  RunContext* ctx = pool_->Acquire(cores.threads(), *root_);
  RunEnv env;
  env.cpu = ctx->cpu.get();
  env.pool = ctx->pool.get();
  env.opts = &options;
  std::vector<Value> outs;
  const Status st = InRunMode(*shared_, env.cpu, [&] {
    return root_->Run(*ctx->root, env, nullptr, ordered, &outs, &options);
  });
  pool_->Release(ctx, !st.ok());
  if (!st.ok()) return st;
  return outs;
}

}  // namespace ferry::runtime
