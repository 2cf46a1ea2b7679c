// Internal to the runtime: one run of one graph, step by step (run_steps.cc, run_views.cc).
//
// For each step, in this order, the first way that applies computes its outputs:
//   1. skipped: absorbed by a fusion or a pattern kernel that ran earlier;
//   2. a lazy DequantizeLinear (not computed at its position, see Step::lazy);
//   3. a fast path: a memo step whose inputs did not change (its last outputs), a Constant;
//   4. a pattern kernel hosted here (it may decline: the steps then run one by one);
//   5. shared values: a folded constant, a Constant, an Identity of an owned tensor;
//   6. a view of the input (Reshape-like steps, NCHW<->NHWC Transposes of channels-last data);
//   7. shapes only (every reader is a Shape / Size);
//   8. the step's cpu kernel (it may decline);
//   9. its reference kernel, with channels-last inputs converted to plain first.
// Then a memo step keeps its outputs, a folding step publishes its value, the observer sees
// the outputs, and values last read here are freed.
#pragma once

#include <chrono>
#include <vector>

#include "runtime/executor.h"

namespace ferry::runtime {

class StepRunner {
 public:
  // `plan`: the arena layout for this signature (tensors placed at `base`), or null in a
  // planning run, whose observations go to `rec`. `fuse`: fusions and patterns on (cpu
  // provider, no observer).
  StepRunner(const GraphExecutor& e, ExecState& state, const RunEnv& env, Frame& frame,
             const ArenaLayout* plan, std::byte* base, PlanRecorder* rec, bool fuse,
             const RunOptions* opts);
  Status RunStep(size_t s);

 private:
  using Layout = ops::cpu::Layout;
  using Clock = std::chrono::steady_clock;

  Value& val(int id) { return frame_.values[U(id)]; }
  void FreeValues(size_t s);
  void Profile(size_t s, Clock::time_point t0, int64_t exclude_ns);
  bool FastPath(size_t s);
  Status Materialize(int id);
  Status RunPattern(size_t s, bool* ran);
  bool ShareValue(size_t s);
  Status RunView(size_t s, bool* ran);
  bool RelayoutView(size_t s);
  Status DeclaredShape(size_t s, const Tensor& x, Shape* shape);
  Status RunShapeOnly(size_t s, bool* ran);
  Status RunCpu(size_t s, bool* ran);
  void SetSlotInputs(size_t s, ops::cpu::NodeSlot& slot, std::vector<const Value*>* ins);
  void RecordCpuPlan(size_t s, const ops::cpu::NodeSlot& slot);
  Status RunReference(size_t s);
  void SaveMemo(size_t s);
  void PublishFold(size_t s);
  void MarkFused(size_t host, const std::vector<size_t>& absorbed);
  std::vector<const Value*> StepInputs(size_t s);
  ops::OpContext MakeContext(size_t s, std::vector<const Value*> ins, std::vector<Value>* outs);
  // Output `k` of the current step: an arena view when the plan has a slot that fits, else an
  // owned (uninitialised) tensor. Kernels that size an output while they run call it through
  // their context; outputs declared at prepare go through AllocateDeclared, which checks them.
  Tensor Alloc(size_t k, DType dt, const Shape& shape);
  // Output `k` as a view of its arena slot when the plan has one that fits (a planning run
  // records the write instead and says no).
  bool ArenaView(size_t k, DType dt, const Shape& shape, Tensor* view);
  // An owned tensor (uninitialised, except strings), charged to the session's budget.
  Tensor Owned(DType dt, const Shape& shape);
  Status AllocateDeclared(const ops::OpContext& ctx, std::vector<Value>* outs);

  const GraphExecutor& e_;
  const std::vector<Step>& steps_;
  ExecState& state_;
  const RunEnv& env_;
  Frame& frame_;
  const ArenaLayout* plan_;
  std::byte* base_;
  PlanRecorder* rec_;
  const bool cpu_on_, fuse_, profile_;
  const RunOptions* opts_;
  const MemoryBudget* budget_;   // the session's, installed on this thread by Session::Run
  std::vector<Layout> layouts_;  // per value: how its tensor is stored this run
  std::vector<bool> skip_;       // per step: absorbed by a kernel that ran
  // The current step.
  size_t cur_ = 0;
  std::vector<int> out_ids_;  // where its outputs go (output 0: the fused value when fused)
  std::vector<Value> outs_;
  bool strided_now_ = false;  // output 0 may go to a strided slot (its kernel takes it)
  int64_t used_stride_ = 0;   // the stride it got
  int64_t lazy_ns_ = 0;       // time materializing lazy inputs (reported on their own steps)
};

}  // namespace ferry::runtime
