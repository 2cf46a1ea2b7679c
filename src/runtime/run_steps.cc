// StepRunner: how one step of a run computes its outputs (the order is in step_runner.h).
#include <cstring>

#include "runtime/step_runner.h"

namespace ferry::runtime {

namespace {

// Memoized outputs are kept only up to this size per step (shape arithmetic is a few bytes).
constexpr size_t kMemoBytes = 64 << 10;

// A subgraph attribute of the step being run, bound to the calling frame and to the run
// context's state for that subgraph.
class Runner final : public ops::SubgraphRunner {
 public:
  Runner(const GraphExecutor* e, ExecState* state, const RunEnv* env, const Frame* f)
      : exec_(e), state_(state), env_(env), frame_(f) {}
  const ir::Graph& graph() const override { return exec_->graph(); }
  Status Run(std::span<const Value> inputs, std::vector<Value>* outputs) override {
    return exec_->Run(*state_, *env_, frame_, inputs, outputs, nullptr);
  }

 private:
  const GraphExecutor* exec_;
  ExecState* state_;
  const RunEnv* env_;
  const Frame* frame_;
};

}  // namespace

StepRunner::StepRunner(const GraphExecutor& e, ExecState& state, const RunEnv& env, Frame& frame,
                       const ArenaLayout* plan, std::byte* base, PlanRecorder* rec, bool fuse,
                       const RunOptions* opts)
    : e_(e),
      steps_(e.steps()),
      state_(state),
      env_(env),
      frame_(frame),
      plan_(plan),
      base_(base),
      rec_(rec),
      cpu_on_(e.shared().cpu()),
      fuse_(fuse),
      profile_(e.shared().profile),
      opts_(opts),
      budget_(e.shared().budget.get()),
      layouts_(cpu_on_ ? frame.values.size() : 0, Layout::kPlain),
      skip_(cpu_on_ ? steps_.size() : 0, false) {}

void StepRunner::FreeValues(size_t s) {
  for (int id : steps_[s].frees) {
    if (rec_) rec_->Freed(id, static_cast<int>(s));
    val(id) = Value();
  }
}

void StepRunner::Profile(size_t s, Clock::time_point t0, int64_t exclude_ns) {
  if (!profile_) return;
  StepState& ss = state_.steps[s];
  ss.total_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count() - exclude_ns;
  ++ss.calls;
}

Status StepRunner::RunStep(size_t s) {
  const Step& st = steps_[s];
  StepState& ss = state_.steps[s];
  if (cpu_on_ && skip_[s]) {
    FreeValues(s);
    return Status::Ok();
  }
  if (fuse_ && st.lazy) {
    // Computed when a step that runs reads it (Materialize); until then unused.
    ss.provider = "cpu (unused constant)";
    if (profile_) ++ss.calls;
    FreeValues(s);
    return Status::Ok();
  }
  const Clock::time_point t0 = profile_ ? Clock::now() : Clock::time_point();
  if (fuse_ && (ss.memo_valid || st.constant) && FastPath(s)) {
    Profile(s, t0, 0);
    FreeValues(s);
    return Status::Ok();
  }
  cur_ = s;
  lazy_ns_ = 0;
  out_ids_ = st.outputs;
  outs_.assign(st.outputs.size(), Value());
  strided_now_ = false;
  used_stride_ = 0;
  bool ran = false;
  if (fuse_ && st.pattern) FERRY_RETURN_IF_ERROR(RunPattern(s, &ran));
  if (!ran) {
    for (int id : st.inputs) FERRY_RETURN_IF_ERROR(Materialize(id));
    if (st.fusion.sum) FERRY_RETURN_IF_ERROR(Materialize(st.residual));
    ran = ShareValue(s);
  }
  if (st.view && cpu_on_ && !ran) FERRY_RETURN_IF_ERROR(RunView(s, &ran));
  if (st.shape_only && fuse_ && !ran) FERRY_RETURN_IF_ERROR(RunShapeOnly(s, &ran));
  if (st.cpu && !ran) FERRY_RETURN_IF_ERROR(RunCpu(s, &ran));
  if (!ran) FERRY_RETURN_IF_ERROR(RunReference(s));
  if (fuse_ && st.memo) SaveMemo(s);
  if (cpu_on_ && st.fold) PublishFold(s);
  if (opts_ && opts_->observer)
    for (size_t k = 0; k < st.outputs.size(); ++k)
      if (st.outputs[k] >= 0) opts_->observer(*st.node, st.node->outputs[k], val(st.outputs[k]));
  Profile(s, t0, lazy_ns_);
  FreeValues(s);
  return Status::Ok();
}

// A memo step whose inputs did not change since this context's last run of it (its outputs
// reused), and a Constant (its tensor shared). False when neither applies.
bool StepRunner::FastPath(size_t s) {
  const Step& st = steps_[s];
  StepState& ss = state_.steps[s];
  if (ss.memo_valid) {
    bool hit = true;
    if (st.memo_by_shape) {
      const Value& v = val(st.inputs[0]);
      hit = v.is_tensor() && v.tensor().shape() == ss.memo_shape;
    } else {
      for (size_t i = 0; hit && i < st.inputs.size(); ++i)
        hit = st.inputs[i] < 0 ||
              (e_.memo_src_[U(st.inputs[i])] == 2 ? state_.memo_gen[U(st.inputs[i])] : 0) ==
                  ss.memo_in_gens[i];
    }
    if (!hit) return false;
    for (size_t k = 0; k < st.outputs.size(); ++k) {
      val(st.outputs[k]) = ss.memo_outs[k];  // shared
      layouts_[U(st.outputs[k])] = Layout::kPlain;
    }
    ss.provider = "cpu (memoized)";
    return true;
  }
  if (e_.is_output_[U(st.outputs[0])]) return false;
  Value& out = val(st.outputs[0]);
  // Pinned (kept from the last run) unless an unfused run left the reference kernel's copy.
  if (!out.is_tensor() || out.tensor().raw() != st.constant->raw() ||
      out.tensor().shape() != st.constant->shape() || out.tensor().dtype() != st.constant->dtype())
    out = Value(*st.constant);  // shared
  layouts_[U(st.outputs[0])] = Layout::kPlain;
  ss.provider = st.built ? "cpu (folded at create)" : "cpu";
  return true;
}

// A lazy DequantizeLinear's value, computed (once per session) when a step that runs reads it.
Status StepRunner::Materialize(int id) {
  if (!fuse_ || id < 0) return Status::Ok();
  const int p = e_.lazy_producer_[U(id)];
  if (p < 0 || !val(id).is_none()) return Status::Ok();
  const Clock::time_point m0 = profile_ ? Clock::now() : Clock::time_point();
  StepState& ds = state_.steps[U(p)];
  if (!ds.folded) {
    FERRY_ASSIGN_OR_RETURN(ds.folded, e_.MaterializeLazy(U(p), state_, env_, frame_));
  }
  val(id) = Value(*ds.folded);  // shared
  layouts_[U(id)] = Layout::kPlain;
  ds.provider = "cpu (folded constant)";
  if (profile_) {
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - m0).count();
    ds.total_ns += ns;
    lazy_ns_ += ns;
  }
  return Status::Ok();
}

std::vector<const Value*> StepRunner::StepInputs(size_t s) {
  std::vector<const Value*> ins;
  for (int id : steps_[s].inputs) ins.push_back(id < 0 ? nullptr : &val(id));
  return ins;
}

ops::OpContext StepRunner::MakeContext(size_t s, std::vector<const Value*> ins,
                                       std::vector<Value>* outs) {
  const Step& st = steps_[s];
  ops::OpContext ctx(*st.node, st.opset, std::move(ins), outs);
  ctx.set_pool(env_.pool);
  ctx.set_seed(e_.shared().seed);
  ctx.set_max_loop_iterations(e_.shared().max_loop_iterations);
  return ctx;
}

bool StepRunner::ArenaView(size_t k, DType dt, const Shape& shape, Tensor* view) {
  const int id = k < out_ids_.size() ? out_ids_[k] : -1;
  const Step& st = steps_[cur_];
  if (id >= 0 && dt != DType::kString && !e_.is_output_[U(id)] && !st.memo) {
    const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dt);
    if (plan_) {
      const ArenaSlot& slot = plan_->slots[U(id)];
      const bool strided = slot.pixel_stride > 0;
      if (bytes > 0 && bytes <= slot.size && (!strided || (k == 0 && strided_now_))) {
        if (strided) used_stride_ = slot.pixel_stride;
        *view = Tensor::View(dt, shape, base_ + slot.offset);
        return true;
      }
    } else if (rec_) {
      rec_->Written(id, static_cast<int>(cur_), bytes);
    }
  }
  return false;
}

Tensor StepRunner::Alloc(size_t k, DType dt, const Shape& shape) {
  Tensor view;
  return ArenaView(k, dt, shape, &view) ? view : Owned(dt, shape);
}

Tensor StepRunner::Owned(DType dt, const Shape& shape) {
  // Every kernel writes all of its outputs (the arena's reused bytes are not zero either):
  // zero-filling a graph output on every run cost a memset and fresh page faults.
  if (dt == DType::kString) return Tensor(dt, shape);
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dt);
  BufferPool* pool = e_.shared().buffers.get();
  Tensor t;
  if (pool && pool->Pools(bytes)) {
    void* data = nullptr;
    std::shared_ptr<void> owner = pool->Get(bytes, &data);
    t = Tensor::Adopt(dt, shape, std::move(owner), data);
  } else {
    t = Tensor::Uninitialized(dt, shape);
  }
#ifdef FERRY_POISON_OUTPUTS
  std::memset(t.raw(), 0xFF, t.nbytes());  // NaN as float, -1 as integer
#endif
  return t;
}

Status StepRunner::AllocateDeclared(const ops::OpContext& ctx, std::vector<Value>* outs) {
  const auto& decl = ctx.declared();
  for (size_t k = 0; k < decl.size(); ++k) {
    if (!decl[k].set) continue;
    for (int64_t d : decl[k].shape)
      if (d < 0)
        return InvalidError("{}: output {} would have a negative dim ({})",
                            steps_[cur_].node->Describe(), k, ShapeToString(decl[k].shape));
    // Checked before anything is allocated: the bytes (no overflow), and unless the output goes
    // to an arena slot (charged with the arena), what the session's budget has left.
    uint64_t bytes = 0;
    const bool sized = TensorBytesChecked(decl[k].dtype, decl[k].shape, &bytes);
    Tensor t;
    if (!sized || !ArenaView(k, decl[k].dtype, decl[k].shape, &t)) {
      if (!sized || (budget_ && !budget_->Fits(bytes))) {
        const std::string what =
            fmt::format("{}: output {} {}{}", steps_[cur_].node->Describe(), k,
                        DTypeName(decl[k].dtype), ShapeToString(decl[k].shape));
        FERRY_RETURN_IF_ERROR(TensorBytes(decl[k].dtype, decl[k].shape, what).status());
        FERRY_RETURN_IF_ERROR(CheckFits(budget_, bytes, what));
      }
      t = Owned(decl[k].dtype, decl[k].shape);
    }
    (*outs)[k] = Value(std::move(t));
  }
  return Status::Ok();
}

void StepRunner::MarkFused(size_t host, const std::vector<size_t>& absorbed) {
  for (size_t t : absorbed) {
    skip_[t] = true;
    state_.steps[t].provider = "fused";
    state_.steps[t].fused_into = static_cast<int>(host);
  }
}

// A pattern kernel computes this step and the steps it absorbed, or declines.
Status StepRunner::RunPattern(size_t s, bool* ran) {
  const Step::PatternPlan& pp = *steps_[s].pattern;
  for (int id : pp.inputs) FERRY_RETURN_IF_ERROR(Materialize(id));
  ops::cpu::NodeSlot& slot = *state_.steps[s].pattern_slot;
  std::vector<const Value*> ins;
  slot.in_layouts.clear();
  for (int id : pp.inputs) {
    ins.push_back(id < 0 ? nullptr : &val(id));
    slot.in_layouts.push_back(id < 0 ? Layout::kPlain : layouts_[U(id)]);
  }
  slot.nhwc_ok.assign(1, e_.nhwc_ok_[U(pp.output)]);
  slot.fusion = {};
  slot.declined = slot.fused = false;
  slot.out_layouts.clear();
  std::vector<Value> pouts(1);
  ops::OpContext ctx = MakeContext(s, std::move(ins), &pouts);
  FERRY_RETURN_IF_ERROR(pp.kernel->prepare(ctx, slot));
  if (slot.declined) return Status::Ok();
  out_ids_ = {pp.output};
  ctx.set_allocator([this](size_t k, DType dt, const Shape& shape) { return Alloc(k, dt, shape); });
  FERRY_RETURN_IF_ERROR(AllocateDeclared(ctx, &pouts));
  pp.kernel->run(ctx, slot);
  val(pp.output) = std::move(pouts[0]);
  layouts_[U(pp.output)] = slot.out_layouts.empty() ? Layout::kPlain : slot.out_layouts[0];
  MarkFused(s, pp.absorbed);
  state_.steps[s].provider = pp.provider;
  *ran = true;
  return Status::Ok();
}

// Values shared instead of computed (cpu provider): a folded constant, a Constant's tensor, an
// Identity of an owned tensor (an initializer, a graph input). Views (arena slots) are not
// shared: their slot may be reused after the input's last reader.
bool StepRunner::ShareValue(size_t s) {
  if (!cpu_on_) return false;
  const Step& st = steps_[s];
  StepState& ss = state_.steps[s];
  if (st.fold && !ss.folded) ss.folded = st.fold_cell->Get();
  const size_t out = st.outputs.empty() || st.outputs[0] < 0 ? 0 : U(st.outputs[0]);
  if (ss.folded) {
    val(st.outputs[0]) = Value(*ss.folded);  // shared
    layouts_[out] = Layout::kPlain;
    ss.provider = "cpu (folded constant)";
    return true;
  }
  if (st.constant && !e_.is_output_[out]) {
    val(st.outputs[0]) = Value(*st.constant);  // shared
    layouts_[out] = Layout::kPlain;
    ss.provider = st.built ? "cpu (folded at create)" : "cpu";
    return true;
  }
  if (st.alias) {
    const size_t in = U(st.inputs[0]);
    const Value& v = frame_.values[in];
    if (v.is_tensor() && v.tensor().owned()) {
      frame_.values[out] = v;
      layouts_[out] = layouts_[in];
      ss.provider = "cpu";
      return true;
    }
  }
  return false;
}

// Every reader is a Shape/Size: declare the outputs (the reference prepare validates), compute
// nothing. The tensors have no elements to read.
Status StepRunner::RunShapeOnly(size_t s, bool* ran) {
  const Step& st = steps_[s];
  ops::OpContext ctx = MakeContext(s, StepInputs(s), &outs_);
  FERRY_RETURN_IF_ERROR(st.def->prepare(ctx));
  const auto& decl = ctx.declared();
  bool ok = decl.size() == st.outputs.size();
  for (size_t k = 0; ok && k < decl.size(); ++k)
    ok = decl[k].set && decl[k].dtype != DType::kString;
  for (size_t k = 0; ok && k < decl.size(); ++k) {
    val(st.outputs[k]) = Value(Tensor::View(decl[k].dtype, decl[k].shape, nullptr));
    layouts_[U(st.outputs[k])] = Layout::kPlain;
  }
  if (ok) state_.steps[s].provider = "cpu (shape only)";
  *ran = ok;
  return Status::Ok();
}

// The slot's per-run inputs: the step's inputs (plus the residual of a fused sum at the
// kernel's fuse_input), their layouts, and which outputs may be written channels-last.
void StepRunner::SetSlotInputs(size_t s, ops::cpu::NodeSlot& slot, std::vector<const Value*>* ins) {
  const Step& st = steps_[s];
  slot.fusion = fuse_ ? st.fusion : ops::cpu::Fusion{};
  if (slot.fusion.sum) {
    ins->resize(static_cast<size_t>(st.cpu->fuse_input), nullptr);
    ins->push_back(&val(st.residual));
  }
  slot.in_layouts.clear();
  for (size_t i = 0; i < ins->size(); ++i) {
    const int id = i < st.inputs.size() ? st.inputs[i] : st.residual;
    slot.in_layouts.push_back(id < 0 || !(*ins)[i] ? Layout::kPlain : layouts_[U(id)]);
  }
  if (slot.fusion.sum) slot.in_layouts.back() = layouts_[U(st.residual)];
  slot.nhwc_ok.assign(st.outputs.size(), false);
  // With fusion requested, output 0 lands in the fused value, or (fusion refused) in its own.
  for (size_t k = 0; k < st.outputs.size(); ++k) {
    const int id = st.outputs[k];
    bool ok = fuse_ && id >= 0 && e_.nhwc_ok_[U(id)];
    if (k == 0 && slot.fusion.any()) ok = ok && e_.nhwc_ok_[U(st.fused_output)];
    slot.nhwc_ok[k] = ok;
  }
  slot.declined = false;
  slot.fused = false;
  slot.strided_out_ok = false;
  slot.out_pixel_stride = 0;
  slot.place_offsets.clear();
  slot.out_layouts.clear();
}

// A planning run notes what the kernel allows: a strided output, Concat inputs in place, an
// output written over its residual.
void StepRunner::RecordCpuPlan(size_t s, const ops::cpu::NodeSlot& slot) {
  const Step& st = steps_[s];
  if (!rec_ || !fuse_) return;
  if (slot.strided_out_ok && out_ids_[0] >= 0) rec_->StridedOk(out_ids_[0]);
  for (size_t i = 0; i < slot.place_offsets.size() && i < st.inputs.size(); ++i)
    if (slot.place_offsets[i] >= 0 && st.inputs[i] >= 0 && out_ids_[0] >= 0)
      rec_->Placeable(st.inputs[i], out_ids_[0], slot.place_offsets[i], slot.place_pixel_stride);
  if (slot.fused && st.fusion.sum && st.residual_dies) {
    const size_t o = rec_->size(st.fused_output), r = rec_->size(st.residual);
    if (r > 0 && o == r) rec_->WrittenOver(st.fused_output, st.residual);
  }
}

Status StepRunner::RunCpu(size_t s, bool* ran) {
  const Step& st = steps_[s];
  StepState& ss = state_.steps[s];
  ops::cpu::NodeSlot& slot = *ss.slot;
  std::vector<const Value*> ins = StepInputs(s);
  SetSlotInputs(s, slot, &ins);
  ops::OpContext ctx = MakeContext(s, std::move(ins), &outs_);
  FERRY_RETURN_IF_ERROR(st.cpu->prepare(ctx, slot));
  if (slot.declined) {
    ss.provider = "reference (cpu declined)";
    return Status::Ok();
  }
  if (slot.fused) out_ids_[0] = st.fused_output;
  ctx.set_allocator([this](size_t k, DType dt, const Shape& shape) { return Alloc(k, dt, shape); });
  strided_now_ = fuse_ && slot.strided_out_ok;
  FERRY_RETURN_IF_ERROR(AllocateDeclared(ctx, &outs_));
  slot.out_pixel_stride = used_stride_;
  st.cpu->run(ctx, slot);
  RecordCpuPlan(s, slot);
  for (size_t k = 0; k < st.outputs.size(); ++k) {
    if (out_ids_[k] < 0) continue;
    val(out_ids_[k]) = std::move(outs_[k]);
    layouts_[U(out_ids_[k])] = k < slot.out_layouts.size() ? slot.out_layouts[k] : Layout::kPlain;
  }
  if (slot.fused) MarkFused(s, st.absorb);
  ss.provider = "cpu";
  *ran = true;
  return Status::Ok();
}

Status StepRunner::RunReference(size_t s) {
  const Step& st = steps_[s];
  StepState& ss = state_.steps[s];
  std::vector<const Value*> ins;
  std::vector<Value> converted;  // plain copies of channels-last inputs
  if (cpu_on_)
    for (int id : st.inputs)
      if (id >= 0 && layouts_[U(id)] != Layout::kPlain) {
        converted.reserve(st.inputs.size());  // no reallocation: `ins` points into it
        break;
      }
  for (int id : st.inputs) {
    if (id < 0) {
      ins.push_back(nullptr);
      continue;
    }
    const Value& v = val(id);
    // Shape and Size read only the (logical) shape: no conversion.
    if (cpu_on_ && layouts_[U(id)] != Layout::kPlain && !ReadsOnlyShape(*st.node)) {
      Tensor t(v.tensor().dtype(), v.tensor().shape());
      ops::cpu::ConvertLayout(v.tensor(), layouts_[U(id)], &t, Layout::kPlain);
      converted.emplace_back(std::move(t));
      ins.push_back(&converted.back());
    } else {
      ins.push_back(&v);
    }
  }
  ops::OpContext ctx = MakeContext(s, std::move(ins), &outs_);
  std::vector<std::unique_ptr<Runner>> runners;
  if (!st.subgraphs.empty())
    ctx.set_subgraphs([&](std::string_view attr) -> ops::SubgraphRunner* {
      auto it = st.subgraphs.find(attr);
      if (it == st.subgraphs.end()) return nullptr;
      std::unique_ptr<ExecState>& sub = ss.subgraphs[std::string(attr)];
      if (!sub) sub = it->second->NewState(env_.cpu);
      runners.push_back(std::make_unique<Runner>(it->second.get(), sub.get(), &env_, &frame_));
      return runners.back().get();
    });
  ctx.set_allocator([this](size_t k, DType dt, const Shape& shape) { return Alloc(k, dt, shape); });
  FERRY_RETURN_IF_ERROR(st.def->prepare(ctx));
  FERRY_RETURN_IF_ERROR(AllocateDeclared(ctx, &outs_));
  st.def->run(ctx);
  FERRY_RETURN_IF_ERROR(ctx.run_status());
  for (size_t k = 0; k < st.outputs.size(); ++k) {
    if (st.outputs[k] < 0) continue;
    val(st.outputs[k]) = std::move(outs_[k]);
    if (cpu_on_) layouts_[U(st.outputs[k])] = Layout::kPlain;
  }
  if (!st.cpu) ss.provider = st.alias || st.constant ? "reference (cpu declined)" : "reference";
  return Status::Ok();
}

// Keeps this run's outputs for later runs of this context with the same inputs (small plain
// tensors only), and gives the outputs fresh generations: readers memoized on the old outputs
// recompute.
void StepRunner::SaveMemo(size_t s) {
  const Step& st = steps_[s];
  StepState& ss = state_.steps[s];
  size_t bytes = 0;
  bool keep = true;
  for (int id : st.outputs) {
    const Value& v = val(id);
    keep = keep && v.is_tensor() && layouts_[U(id)] == Layout::kPlain &&
           v.tensor().dtype() != DType::kString;
    if (keep) bytes += v.tensor().nbytes();
  }
  keep = keep && bytes <= kMemoBytes;
  ss.memo_valid = false;
  ss.memo_outs.clear();
  if (keep) {
    for (int id : st.outputs) {
      Value& v = val(id);
      if (!v.tensor().owned()) v = Value(v.tensor().Clone());
      ss.memo_outs.push_back(v);
    }
    ss.memo_in_gens.clear();
    for (int id : st.inputs)
      ss.memo_in_gens.push_back(id < 0 || e_.memo_src_[U(id)] != 2 ? 0 : state_.memo_gen[U(id)]);
    ss.memo_valid = true;
    if (st.memo_by_shape) {
      const Value& x = val(st.inputs[0]);
      ss.memo_valid = x.is_tensor();
      if (x.is_tensor()) ss.memo_shape = x.tensor().shape();
    }
  }
  for (int id : st.outputs) state_.memo_gen[U(id)] = ++state_.memo_counter;
}

// A folding DequantizeLinear computed at its position: its value is kept for every later run.
void StepRunner::PublishFold(size_t s) {
  const Step& st = steps_[s];
  StepState& ss = state_.steps[s];
  if (ss.folded) return;
  const size_t out = U(st.outputs[0]);
  if (frame_.values[out].is_tensor() && layouts_[out] == Layout::kPlain)
    ss.folded = st.fold_cell->Publish(frame_.values[out].tensor().Clone());
}

}  // namespace ferry::runtime
