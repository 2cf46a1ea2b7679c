// GraphExecutor::Run: one run of a graph with a run context's state — the frame, the arena
// layout for this input signature (or a planning run that makes it), every step in order
// (StepRunner), the outputs handed back owned. Also what Create and the Session ask of a plan:
// fresh run states, reports, lazily folded constants.
#include <algorithm>

#include "runtime/step_runner.h"

namespace ferry::runtime {

namespace {

std::string Signature(std::span<const Value> inputs) {
  std::string s;
  for (const auto& v : inputs) {
    if (v.is_tensor())
      s += std::to_string(static_cast<int>(v.tensor().dtype())) + ShapeToString(v.tensor().shape());
    else if (v.is_map())  // a map's size sizes its readers' outputs (CastMap)
      s += "M" + std::to_string(v.tensor().size());
    else
      s += v.is_sequence() ? "S" : "N";
    s += ";";
  }
  return s;
}

// Whether `inputs` have the dtypes and shapes of the state's last run (with the same fusion);
// when not, they become the last ones.
bool SameInputs(ExecState& state, std::span<const Value> inputs, bool fuse) {
  bool same = state.last_fuse == fuse && state.last_inputs.size() == inputs.size();
  for (size_t i = 0; same && i < inputs.size(); ++i) {
    const auto& [dt, shape] = state.last_inputs[i];
    same = inputs[i].is_tensor() || inputs[i].is_map()
               ? inputs[i].tensor().dtype() == dt && inputs[i].tensor().shape() == shape
               : dt == DType::kUndefined && shape.empty();
  }
  if (same) return true;
  state.last_fuse = fuse;
  state.last_inputs.clear();
  for (const Value& v : inputs) {
    const bool t = v.is_tensor() || v.is_map();  // a map: its values' dtype and count
    state.last_inputs.emplace_back(t ? v.tensor().dtype() : DType::kUndefined,
                                   t ? v.tensor().shape() : Shape{});
  }
  return false;
}

}  // namespace

void GraphExecutor::ResolveOuter(const GraphExecutor& parent) {
  outer_parent_ = &parent;
  outer_parent_ids_.clear();
  for (const auto& [id, name] : outer_) {
    const int pid = parent.IdOf(name);
    if (pid < 0) {  // not the parent's: look names up at run time
      outer_parent_ = nullptr;
      outer_parent_ids_.clear();
      return;
    }
    outer_parent_ids_.push_back(pid);
  }
}

std::unique_ptr<ExecState> GraphExecutor::NewState(ops::cpu::Provider* cpu) const {
  auto state = std::make_unique<ExecState>();
  state->steps.resize(steps_.size());
  state->memo_gen.assign(names_.size(), 0);
  const auto make_slot = [&](const ops::OpDef* def, std::vector<bool> const_inputs,
                             ops::cpu::PackCache* packs) {
    auto slot = std::make_unique<ops::cpu::NodeSlot>();
    slot->provider = cpu;
    slot->reference = def;
    slot->const_inputs = std::move(const_inputs);
    slot->packs = packs;
    return slot;
  };
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    if (!cpu) continue;
    if (st.cpu) state->steps[s].slot = make_slot(st.def, st.const_inputs, st.packs.get());
    if (st.pattern) {
      state->steps[s].pattern_slot =
          make_slot(st.def, st.pattern->const_inputs, st.pattern->packs.get());
      state->steps[s].pattern_slot->params = st.pattern->params;
    }
  }
  return state;
}

std::shared_ptr<const ArenaLayout> GraphExecutor::FindPlan(const std::string& sig) const {
  std::lock_guard<std::mutex> lock(plans_mu_);
  auto it = plans_.find(sig);
  return it == plans_.end() ? nullptr : it->second;
}

std::shared_ptr<const ArenaLayout> GraphExecutor::PublishPlan(const std::string& sig,
                                                              ArenaLayout layout) const {
  std::lock_guard<std::mutex> lock(plans_mu_);
  auto [it, inserted] = plans_.emplace(sig, nullptr);
  if (inserted) it->second = std::make_shared<const ArenaLayout>(std::move(layout));
  return it->second;
}

size_t GraphExecutor::max_arena_bytes() const {
  std::lock_guard<std::mutex> lock(plans_mu_);
  size_t b = 0;
  for (const auto& [k, p] : plans_) b = std::max(b, p->total);
  return b;
}

size_t GraphExecutor::packed_bytes() const {
  size_t b = 0;
  for (const Step& st : steps_) {
    if (st.packs) b += st.packs->bytes();
    if (st.pattern) b += st.pattern->packs->bytes();
    if (st.fold_cell)
      if (auto t = st.fold_cell->Get()) b += t->nbytes();
    if (st.built) b += st.built->nbytes();
    for (const auto& [name, sub] : st.subgraphs) b += sub->packed_bytes();
  }
  return b;
}

Status GraphExecutor::Run(ExecState& state, const RunEnv& env, const Frame* parent,
                          std::span<const Value> inputs, std::vector<Value>* outputs,
                          const RunOptions* opts) const {
  state.values.resize(names_.size());
  Frame frame{this, state.values, parent};
  // Every value but the pinned ones is released when the run ends, whichever way it ends.
  struct Clear {
    std::vector<Value>& v;
    const std::vector<bool>& pinned;
    ~Clear() {
      for (size_t i = 0; i < v.size(); ++i)
        if (!pinned[i]) v[i] = Value();
    }
  } clear{state.values, pinned_};
  for (const auto& [id, v] : constants_)
    if (!pinned_[U(id)] || frame.values[U(id)].is_none()) frame.values[U(id)] = v;
  for (size_t i = 0; i < input_ids_.size() && i < inputs.size(); ++i)
    frame.values[U(input_ids_[i])] = inputs[i];
  for (size_t k = 0; k < outer_.size(); ++k) {
    const auto& [id, name] = outer_[k];
    if (parent && parent->exec == outer_parent_) {
      frame.values[U(id)] = parent->values[U(outer_parent_ids_[k])];
      continue;
    }
    for (const Frame* f = parent; f; f = f->parent) {
      const int pid = f->exec->IdOf(name);
      if (pid >= 0 && !f->values[U(pid)].is_none()) {
        frame.values[U(id)] = f->values[U(pid)];
        break;
      }
    }
  }
  // Fused runs and unfused runs (with an observer) keep separate arena plans: fusion moves
  // where values are first written.
  const bool fuse = shared_->cpu() && !(opts && opts->observer);
  if (!SameInputs(state, inputs, fuse) || !state.last_plan) {
    state.last_plan = FindPlan((fuse ? "F" : "U") + Signature(inputs));
    state.last_sig = (fuse ? "F" : "U") + Signature(inputs);
  }
  const ArenaLayout* plan = state.last_plan.get();
  std::byte* base = plan ? state.arena.Reserve(plan->total) : nullptr;
  std::unique_ptr<PlanRecorder> rec;
  if (!plan) rec = std::make_unique<PlanRecorder>(names_.size(), static_cast<int>(steps_.size()));
  StepRunner runner(*this, state, env, frame, plan, base, rec.get(), fuse, opts);
  for (size_t s = 0; s < steps_.size(); ++s) FERRY_RETURN_IF_ERROR(runner.RunStep(s));
  outputs->clear();
  for (int id : output_ids_) {
    Value v = frame.values[U(id)];
    if (v.is_tensor() && !v.tensor().owned()) v = Value(v.tensor().Clone());
    for (auto& t : v.sequence())
      if (!t.owned()) t = t.Clone();
    outputs->push_back(std::move(v));
  }
  if (rec) state.last_plan = PublishPlan(state.last_sig, rec->Finish(placeable_));
  return Status::Ok();
}

Result<std::shared_ptr<const Tensor>> GraphExecutor::MaterializeLazy(size_t step, ExecState& state,
                                                                     const RunEnv& env,
                                                                     const Frame& frame) const {
  const Step& d = steps_[step];
  if (auto v = d.fold_cell->Get()) return v;
  std::vector<Value> outs(d.outputs.size());
  const auto inputs = [&] {
    std::vector<const Value*> ins;
    for (int id : d.inputs) ins.push_back(id < 0 ? nullptr : &frame.values[U(id)]);
    return ins;
  };
  const auto allocate = [&](const ops::OpContext& ctx) -> Status {
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
  const auto context = [&] {
    ops::OpContext ctx(*d.node, d.opset, inputs(), &outs);
    ctx.set_pool(env.pool);
    ctx.set_seed(shared_->seed);
    ctx.set_max_loop_iterations(shared_->max_loop_iterations);
    return ctx;
  };
  bool done = false;
  if (d.cpu) {
    ops::cpu::NodeSlot& slot = *state.steps[step].slot;
    slot.fusion = {};
    slot.in_layouts.assign(d.inputs.size(), ops::cpu::Layout::kPlain);
    slot.nhwc_ok.assign(d.outputs.size(), false);
    slot.declined = slot.fused = false;
    slot.out_layouts.clear();
    ops::OpContext ctx = context();
    FERRY_RETURN_IF_ERROR(d.cpu->prepare(ctx, slot));
    if (!slot.declined) {
      FERRY_RETURN_IF_ERROR(allocate(ctx));
      d.cpu->run(ctx, slot);
      done = true;
    }
  }
  if (!done) {
    ops::OpContext ctx = context();
    FERRY_RETURN_IF_ERROR(d.def->prepare(ctx));
    FERRY_RETURN_IF_ERROR(allocate(ctx));
    d.def->run(ctx);
    FERRY_RETURN_IF_ERROR(ctx.run_status());
  }
  if (!outs[0].is_tensor()) return InvalidError("{}: produced no tensor", d.node->Describe());
  const Tensor& t = outs[0].tensor();
  return d.fold_cell->Publish(t.owned() ? t : t.Clone());
}

std::vector<NodeReport> GraphExecutor::Report(const ExecState* state) const {
  std::vector<NodeReport> out;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& st = steps_[s];
    const StepState* ss = state ? &state->steps[s] : nullptr;
    NodeReport r;
    r.name = st.node->name;
    r.op_type = st.node->op_type;
    r.planned = st.cpu || st.alias || st.constant ? "cpu" : "reference";
    r.provider = !ss || ss->provider.empty() ? r.planned : ss->provider;
    if (ss && ss->provider == "fused" && ss->fused_into >= 0)
      r.fused_into = steps_[U(ss->fused_into)].node->name;
    if (ss) {
      r.total_ms = static_cast<double>(ss->total_ns) / 1e6;
      r.calls = ss->calls;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ferry::runtime
