// Reference kernels: If, Loop, Scan. Their bodies are subgraphs run through
// ctx.subgraph(...); outputs depend on what the bodies compute, so run allocates them.
#include <cstring>
#include <limits>
#include <memory>

#include "core/memory_budget.h"
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

// ---- helpers ----

const char* ElemPtr(const Tensor& t, int64_t i) {
  return static_cast<const char*>(t.raw()) + i * static_cast<int64_t>(DTypeSize(t.dtype()));
}
char* ElemPtr(Tensor& t, int64_t i) {
  return static_cast<char*>(t.raw()) + i * static_cast<int64_t>(DTypeSize(t.dtype()));
}

int64_t Product(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

// The sub-tensor of `x` at position `t` along `axis` (rank one less), in owned storage.
Tensor TakeAlongAxis(const Tensor& x, int64_t axis, int64_t t) {
  const Shape& s = x.shape();
  size_t a = static_cast<size_t>(axis);
  int64_t outer = Product(s, 0, a), len = s[a], inner = Product(s, a + 1, s.size());
  Shape out_shape = s;
  out_shape.erase(out_shape.begin() + axis);
  Tensor out(x.dtype(), out_shape);
  for (int64_t o = 0; o < outer; ++o)
    CopyElements(x.dtype(), ElemPtr(x, (o * len + t) * inner), ElemPtr(out, o * inner), inner);
  return out;
}

// Writes `piece` (rank one less than `out`) at position `t` along `axis` of `out`.
void PutAlongAxis(Tensor& out, int64_t axis, int64_t t, const Tensor& piece) {
  const Shape& s = out.shape();
  size_t a = static_cast<size_t>(axis);
  int64_t outer = Product(s, 0, a), len = s[a], inner = Product(s, a + 1, s.size());
  for (int64_t o = 0; o < outer; ++o)
    CopyElements(out.dtype(), ElemPtr(piece, o * inner), ElemPtr(out, (o * len + t) * inner),
                 inner);
}

// Emits `v` as output i with fresh storage (tensors through the allocator, sequences cloned).
void EmitValue(OpContext& ctx, size_t i, const Value& v) {
  if (v.is_tensor()) {
    const Tensor& t = v.tensor();
    Tensor& out = ctx.allocate_output(i, t.dtype(), t.shape());
    CopyElements(t.dtype(), t.raw(), out.raw(), t.size());
    return;
  }
  Value copy = v;
  for (Tensor& t : copy.sequence()) t = t.Clone();
  ctx.set_output_value(i, std::move(copy));
}

// Dtype and shape for stacking zero iterations of a body output: from its declared type,
// with unknown dims read as 0.
std::pair<DType, Shape> EmptyStackType(const ir::ValueInfo& vi) {
  DType dt = vi.type.kind == ir::TypeInfo::Kind::kTensor ? vi.type.elem_type : DType::kUndefined;
  if (dt == DType::kUndefined) dt = DType::kFloat;
  Shape s;
  if (vi.type.shape)
    for (const ir::Dim& d : *vi.type.shape) s.push_back(d.value.value_or(0));
  return {dt, s};
}

// Checks that every element of a scan output is a tensor of one dtype and shape.
Status CheckStackable(const OpContext& ctx, const std::vector<Value>& items, size_t k) {
  for (size_t t = 0; t < items.size(); ++t) {
    if (!items[t].is_tensor())
      return Status(StatusCode::kUnsupported,
                    fmt::format("{}: scan output {} is not a tensor in iteration {}",
                                ctx.node().Describe(), k, t));
    const Tensor& a = items[0].tensor();
    const Tensor& b = items[t].tensor();
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
      return InvalidError("{}: scan output {} changes from {} {} to {} {} in iteration {}",
                          ctx.node().Describe(), k, DTypeName(a.dtype()), ShapeToString(a.shape()),
                          DTypeName(b.dtype()), ShapeToString(b.shape()), t);
  }
  return Status::Ok();
}

// ---- If ----
Status PrepareIf(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "cond"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kBool}));
  if (ctx.input(0).size() != 1)
    return NodeError(ctx, "cond has {} elements (shape {}), expected 1", ctx.input(0).size(),
                     ShapeToString(ctx.input(0).shape()));
  for (const char* branch : {"then_branch", "else_branch"}) {
    SubgraphRunner* g = ctx.subgraph(branch);
    if (!g) return NodeError(ctx, "is missing the graph attribute '{}'", branch);
    if (g->graph().outputs.size() != ctx.num_outputs())
      return NodeError(ctx, "{} has {} outputs, expected {} (the node's outputs)", branch,
                       g->graph().outputs.size(), ctx.num_outputs());
  }
  return Status::Ok();
}

void RunIf(OpContext& ctx) {
  const char* branch = ctx.input(0).data<bool>()[0] ? "then_branch" : "else_branch";
  std::vector<Value> outs;
  Status st = ctx.subgraph(branch)->Run({}, &outs);
  if (!st.ok()) return ctx.fail(st.With(ctx.node().Describe() + " " + branch));
  for (size_t i = 0; i < ctx.num_outputs() && i < outs.size(); ++i) EmitValue(ctx, i, outs[i]);
}

// ---- Loop ----
Status PrepareLoop(OpContext& ctx) {
  if (ctx.num_inputs() < 2)
    return NodeError(ctx, "has {} inputs, expected at least 2", ctx.num_inputs());
  if (ctx.has_input(0)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "M"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kInt64}));
    if (ctx.input(0).size() != 1)
      return NodeError(ctx, "M has {} elements, expected 1", ctx.input(0).size());
  }
  if (ctx.has_input(1)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "cond"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kBool}));
    if (ctx.input(1).size() != 1)
      return NodeError(ctx, "cond has {} elements, expected 1", ctx.input(1).size());
  }
  if (!ctx.has_input(0) && !ctx.has_input(1))
    return NodeUnsupported(ctx, "has neither M nor cond: the loop would never end");
  SubgraphRunner* body = ctx.subgraph("body");
  if (!body) return NodeError(ctx, "is missing the graph attribute 'body'");
  size_t n = ctx.num_inputs() - 2;
  const ir::Graph& g = body->graph();
  if (g.inputs.size() != n + 2)
    return NodeError(ctx, "body has {} inputs, expected {} (iteration, cond and {} loop-carried)",
                     g.inputs.size(), n + 2, n);
  if (ctx.num_outputs() < n)
    return NodeError(ctx, "has {} outputs, expected at least {} (the loop-carried values)",
                     ctx.num_outputs(), n);
  if (g.outputs.size() != 1 + ctx.num_outputs())
    return NodeError(ctx, "body has {} outputs, expected {} (cond and the node's {} outputs)",
                     g.outputs.size(), 1 + ctx.num_outputs(), ctx.num_outputs());
  return Status::Ok();
}

// A Loop's scan outputs are stacked when it ends: with a trip count M, M iterations of what this
// one produced must fit the memory budget (so a trip count of 2^31 over a scan output is refused
// in its first iteration, not after minutes of gathering); without M, what has been gathered so
// far must. Outputs from index `first` of `outs` are the scan outputs; `*gathered` adds this
// iteration's bytes. kInvalid naming the node, the first scan output's shape and the bytes.
Status CheckScanBudget(const OpContext& ctx, const std::vector<Value>& outs, size_t first,
                       int64_t iter, uint64_t* gathered) {
  uint64_t step = 0;
  for (size_t j = first; j < outs.size(); ++j)
    if (outs[j].is_tensor()) step += outs[j].tensor().nbytes();
  *gathered += step;
  const std::shared_ptr<MemoryBudget>& budget = MemoryBudget::Current();
  if (!budget) return Status::Ok();
  uint64_t need = *gathered;
  int64_t trips = iter + 1;
  if (ctx.has_input(0)) {
    trips = ctx.input(0).data<int64_t>()[0];
    if (__builtin_mul_overflow(step, static_cast<uint64_t>(trips), &need))
      need = std::numeric_limits<uint64_t>::max();
  }
  if (need <= budget->limit()) return Status::Ok();
  std::string what = "a sequence";
  if (outs[first].is_tensor())
    what = fmt::format("{} {}", DTypeName(outs[first].tensor().dtype()),
                       ShapeToString(outs[first].tensor().shape()));
  return InvalidError(
      "{}: {} iterations of scan outputs taking {} each (scan output 0: {}) need {}, over the "
      "memory budget ({} limit; --max-memory / SessionOptions::max_memory)",
      ctx.node().Describe(), trips, FormatBytes(step), what,
      need == std::numeric_limits<uint64_t>::max() ? std::string("more than 2^64 bytes")
                                                   : FormatBytes(need),
      FormatBytes(budget->limit()));
}

void RunLoop(OpContext& ctx) {
  SubgraphRunner* body = ctx.subgraph("body");
  size_t n = ctx.num_inputs() - 2, k = ctx.num_outputs() - n;
  int64_t max_trips = ctx.has_input(0) ? ctx.input(0).data<int64_t>()[0] : INT64_MAX;
  bool cond = ctx.has_input(1) ? ctx.input(1).data<bool>()[0] : true;
  std::vector<Value> carried(n);
  for (size_t i = 0; i < n; ++i) carried[i] = ctx.input_value(2 + i);
  std::vector<std::vector<Value>> scans(k);
  uint64_t gathered = 0;  // bytes of the scan outputs so far
  int64_t iter = 0;
  const int64_t limit = ctx.max_loop_iterations();
  for (; iter < max_trips && cond; ++iter) {
    if (limit > 0 && iter >= limit)
      return ctx.fail(InvalidError("{}: still running after {} iterations (this run's limit)",
                                   ctx.node().Describe(), limit));
    std::vector<Value> ins;
    ins.reserve(n + 2);
    ins.emplace_back(Tensor::FromVector<int64_t>({iter}, {}));
    ins.emplace_back(Tensor::FromVector<bool>({cond}, {}));
    for (auto& v : carried) ins.push_back(std::move(v));
    std::vector<Value> outs;
    Status st = body->Run(ins, &outs);
    if (!st.ok())
      return ctx.fail(st.With(fmt::format("{} iteration {}", ctx.node().Describe(), iter)));
    if (!outs[0].is_tensor() || outs[0].tensor().size() != 1 ||
        outs[0].tensor().dtype() != DType::kBool)
      return ctx.fail(InvalidError("{}: body's cond output is not a bool scalar in iteration {}",
                                   ctx.node().Describe(), iter));
    cond = outs[0].tensor().data<bool>()[0];
    for (size_t i = 0; i < n; ++i) carried[i] = std::move(outs[1 + i]);
    if (k > 0) {
      Status st = CheckScanBudget(ctx, outs, 1 + n, iter, &gathered);
      if (!st.ok()) return ctx.fail(st);
    }
    for (size_t j = 0; j < k; ++j) scans[j].push_back(std::move(outs[1 + n + j]));
  }
  for (size_t i = 0; i < n; ++i) EmitValue(ctx, i, carried[i]);
  const ir::Graph& g = body->graph();
  for (size_t j = 0; j < k; ++j) {
    std::vector<Value>& items = scans[j];
    if (items.empty()) {
      auto [dt, s] = EmptyStackType(g.outputs[1 + n + j]);
      s.insert(s.begin(), 0);
      ctx.allocate_output(n + j, dt, s);
      continue;
    }
    Status st = CheckStackable(ctx, items, j);
    if (!st.ok()) return ctx.fail(st);
    const Tensor& first = items[0].tensor();
    Shape s = first.shape();
    s.insert(s.begin(), static_cast<int64_t>(items.size()));
    Tensor& out = ctx.allocate_output(n + j, first.dtype(), s);
    for (size_t t = 0; t < items.size(); ++t)
      CopyElements(first.dtype(), items[t].tensor().raw(),
                   ElemPtr(out, static_cast<int64_t>(t) * first.size()), first.size());
  }
}

// ---- Scan ----
// Opset 8: inputs (sequence_lens, states..., scans...), batch axis 0 and sequence axis 1.
// Opset 9+: inputs (states..., scans...), per-input axes and directions, no batch.
struct ScanLayout {
  size_t first_state = 0;  // index of the first state input
  size_t n = 0, m = 0, k = 0;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
  int64_t seq_len = 0;  // opset 9+: the common scan length; opset 8: the max sequence length
};

Result<ScanLayout> GetScanLayout(const OpContext& ctx) {
  ScanLayout l;
  bool v8 = ctx.opset() < 9;
  l.first_state = v8 ? 1 : 0;
  int64_t m = ctx.attr_int("num_scan_inputs", -1);
  size_t avail = ctx.num_inputs() > l.first_state ? ctx.num_inputs() - l.first_state : 0;
  if (m < 1 || static_cast<size_t>(m) > avail)
    return NodeError(ctx, "num_scan_inputs is {}, expected 1 to {}", m, avail);
  l.m = static_cast<size_t>(m);
  l.n = avail - l.m;
  if (ctx.num_outputs() < l.n)
    return NodeError(ctx, "has {} outputs, expected at least {} (the state variables)",
                     ctx.num_outputs(), l.n);
  l.k = ctx.num_outputs() - l.n;
  for (size_t i = l.first_state; i < ctx.num_inputs(); ++i)
    FERRY_RETURN_IF_ERROR(
        RequireTensor(ctx, i, i < l.first_state + l.n ? "initial state" : "scan input"));
  auto per_input = [&](const char* name, size_t count, std::vector<int64_t>* out) -> Status {
    *out = ctx.attr_ints(name);
    if (out->empty()) out->assign(count, 0);
    if (out->size() != count)
      return NodeError(ctx, "{} has {} values, expected {}", name, out->size(), count);
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(per_input(v8 ? "directions" : "scan_input_directions", l.m, &l.in_dirs));
  if (v8) {
    l.in_axes.assign(l.m, 1);
    l.out_axes.assign(l.k, 1);
    l.out_dirs.assign(l.k, 0);
  } else {
    FERRY_RETURN_IF_ERROR(per_input("scan_input_axes", l.m, &l.in_axes));
    FERRY_RETURN_IF_ERROR(per_input("scan_output_axes", l.k, &l.out_axes));
    FERRY_RETURN_IF_ERROR(per_input("scan_output_directions", l.k, &l.out_dirs));
  }
  for (int64_t d : l.in_dirs)
    if (d != 0 && d != 1) return NodeError(ctx, "scan input direction {} is not 0 or 1", d);
  for (int64_t d : l.out_dirs)
    if (d != 0 && d != 1) return NodeError(ctx, "scan output direction {} is not 0 or 1", d);
  for (size_t j = 0; j < l.m; ++j) {
    const Tensor& x = ctx.input(l.first_state + l.n + j);
    int64_t min_rank = v8 ? 2 : 1;
    if (x.rank() < min_rank)
      return NodeError(ctx, "scan input {} has rank {}, expected at least {}", j, x.rank(),
                       min_rank);
    Result<int64_t> axis = NormalizeAxis(ctx, l.in_axes[j], x.rank(), "scan_input_axes value");
    if (!axis.ok()) return axis.status();
    l.in_axes[j] = axis.value();
    int64_t len = x.dim(l.in_axes[j]);
    if (j == 0) l.seq_len = len;
    if (len != l.seq_len)
      return NodeError(ctx, "scan input {} has length {} along its scan axis, expected {}", j, len,
                       l.seq_len);
    if (v8 && x.dim(0) != ctx.input(l.first_state + l.n).dim(0))
      return NodeError(ctx, "scan input {} has batch size {}, expected {}", j, x.dim(0),
                       ctx.input(l.first_state + l.n).dim(0));
  }
  return l;
}

Status PrepareScan(OpContext& ctx) {
  FERRY_ASSIGN_OR_RETURN(ScanLayout l, GetScanLayout(ctx));
  SubgraphRunner* body = ctx.subgraph("body");
  if (!body) return NodeError(ctx, "is missing the graph attribute 'body'");
  const ir::Graph& g = body->graph();
  if (g.inputs.size() != l.n + l.m)
    return NodeError(ctx, "body has {} inputs, expected {} ({} states and {} scan inputs)",
                     g.inputs.size(), l.n + l.m, l.n, l.m);
  if (g.outputs.size() != l.n + l.k)
    return NodeError(ctx, "body has {} outputs, expected {} (the node's outputs)", g.outputs.size(),
                     l.n + l.k);
  if (ctx.opset() < 9) {
    int64_t batch = ctx.input(l.first_state + l.n).dim(0);
    for (size_t i = 0; i < l.n; ++i)
      if (ctx.input(l.first_state + i).rank() < 1 || ctx.input(l.first_state + i).dim(0) != batch)
        return NodeError(ctx, "initial state {} has shape {}, expected batch size {} first", i,
                         ShapeToString(ctx.input(l.first_state + i).shape()), batch);
    if (ctx.has_input(0)) {
      FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "sequence_lens"));
      FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kInt64, DType::kInt32}));
      std::vector<int64_t> lens = ctx.input(0).ToInt64Vector();
      if (static_cast<int64_t>(lens.size()) != batch)
        return NodeError(ctx, "sequence_lens has {} values, expected {} (the batch size)",
                         lens.size(), batch);
      for (int64_t v : lens)
        if (v < 0 || v > l.seq_len)
          return NodeError(ctx, "sequence_lens value {} is out of range [0, {}]", v, l.seq_len);
    }
  }
  return Status::Ok();
}

// Runs the body over `len` steps of the scan inputs (already without a batch axis). Returns
// the final states in `states` and each scan output's per-step elements in `elems`.
Status ScanSteps(OpContext& ctx, SubgraphRunner* body, const ScanLayout& l,
                 const std::vector<Tensor>& xs, const std::vector<int64_t>& axes, int64_t len,
                 std::vector<Value>* states, std::vector<std::vector<Value>>* elems) {
  elems->assign(l.k, {});
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Value> ins = std::move(*states);
    for (size_t j = 0; j < l.m; ++j)
      ins.emplace_back(TakeAlongAxis(xs[j], axes[j], l.in_dirs[j] ? len - 1 - t : t));
    std::vector<Value> outs;
    Status st = body->Run(ins, &outs);
    if (!st.ok()) return st.With(fmt::format("{} iteration {}", ctx.node().Describe(), t));
    states->assign(outs.begin(), outs.begin() + static_cast<std::ptrdiff_t>(l.n));
    for (size_t j = 0; j < l.k; ++j) (*elems)[j].push_back(std::move(outs[l.n + j]));
  }
  for (size_t i = 0; i < l.n; ++i)
    if (!(*states)[i].is_tensor())
      return InvalidError("{}: state {} is not a tensor", ctx.node().Describe(), i);
  for (size_t j = 0; j < l.k; ++j) FERRY_RETURN_IF_ERROR(CheckStackable(ctx, (*elems)[j], j));
  return Status::Ok();
}

void RunScan9(OpContext& ctx, SubgraphRunner* body, const ScanLayout& l) {
  std::vector<Value> states;
  for (size_t i = 0; i < l.n; ++i) states.push_back(ctx.input_value(i));
  std::vector<Tensor> xs;
  for (size_t j = 0; j < l.m; ++j) xs.push_back(ctx.input(l.n + j));
  std::vector<std::vector<Value>> elems;
  Status st = ScanSteps(ctx, body, l, xs, l.in_axes, l.seq_len, &states, &elems);
  if (!st.ok()) return ctx.fail(st);
  for (size_t i = 0; i < l.n; ++i) EmitValue(ctx, i, states[i]);
  for (size_t j = 0; j < l.k; ++j) {
    DType dt;
    Shape s;
    if (elems[j].empty())
      std::tie(dt, s) = EmptyStackType(body->graph().outputs[l.n + j]);
    else
      dt = elems[j][0].tensor().dtype(), s = elems[j][0].tensor().shape();
    int64_t r = static_cast<int64_t>(s.size()) + 1, axis = l.out_axes[j];
    if (axis < -r || axis >= r)
      return ctx.fail(InvalidError("{}: scan_output_axes value {} is out of range for rank {}",
                                   ctx.node().Describe(), axis, r));
    if (axis < 0) axis += r;
    s.insert(s.begin() + axis, l.seq_len);
    Tensor& out = ctx.allocate_output(l.n + j, dt, s);
    for (int64_t t = 0; t < l.seq_len; ++t)
      PutAlongAxis(out, axis, l.out_dirs[j] ? l.seq_len - 1 - t : t,
                   elems[j][static_cast<size_t>(t)].tensor());
  }
}

void RunScan8(OpContext& ctx, SubgraphRunner* body, const ScanLayout& l) {
  int64_t batch = ctx.input(l.first_state + l.n).dim(0);
  std::vector<int64_t> lens = ctx.has_input(0)
                                  ? ctx.input(0).ToInt64Vector()
                                  : std::vector<int64_t>(static_cast<size_t>(batch), l.seq_len);
  std::vector<int64_t> axes(l.m, 0);  // the sequence axis once the batch axis is taken away
  std::vector<std::vector<Value>> final_states(static_cast<size_t>(batch));
  std::vector<std::vector<std::vector<Value>>> elems(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> states;
    for (size_t i = 0; i < l.n; ++i)
      states.emplace_back(TakeAlongAxis(ctx.input(l.first_state + i), 0, b));
    std::vector<Tensor> xs;
    for (size_t j = 0; j < l.m; ++j)
      xs.push_back(TakeAlongAxis(ctx.input(l.first_state + l.n + j), 0, b));
    size_t bi = static_cast<size_t>(b);
    Status st = ScanSteps(ctx, body, l, xs, axes, lens[bi], &states, &elems[bi]);
    if (!st.ok()) return ctx.fail(st);
    final_states[bi] = std::move(states);
  }
  if (batch == 0) {
    for (size_t i = 0; i < l.n; ++i) EmitValue(ctx, i, ctx.input_value(l.first_state + i));
    for (size_t j = 0; j < l.k; ++j) {
      auto [dt, s] = EmptyStackType(body->graph().outputs[l.n + j]);
      s.insert(s.begin(), {0, l.seq_len});
      ctx.allocate_output(l.n + j, dt, s);
    }
    return;
  }
  for (size_t i = 0; i < l.n; ++i) {
    const Tensor& s0 = final_states[0][i].tensor();
    Shape s = s0.shape();
    s.insert(s.begin(), batch);
    Tensor& out = ctx.allocate_output(i, s0.dtype(), s);
    for (int64_t b = 0; b < batch; ++b) {
      const Tensor& sb = final_states[static_cast<size_t>(b)][i].tensor();
      if (sb.dtype() != s0.dtype() || sb.shape() != s0.shape())
        return ctx.fail(InvalidError(
            "{}: final state {} has shape {} in batch {}, but {} in batch 0", ctx.node().Describe(),
            i, ShapeToString(sb.shape()), b, ShapeToString(s0.shape())));
      PutAlongAxis(out, 0, b, sb);
    }
  }
  for (size_t j = 0; j < l.k; ++j) {
    // The element type: from the first batch that ran at least one step.
    const Tensor* e0 = nullptr;
    for (const auto& eb : elems)
      if (!eb[j].empty()) {
        e0 = &eb[j][0].tensor();
        break;
      }
    auto [dt, s] = e0 ? std::pair<DType, Shape>{e0->dtype(), e0->shape()}
                      : EmptyStackType(body->graph().outputs[l.n + j]);
    Shape elem_shape = s;
    s.insert(s.begin(), {batch, l.seq_len});
    Tensor& out = ctx.allocate_output(l.n + j, dt, s);
    // Steps past a batch's sequence length are zeros (outputs are not zero-filled for us).
    if (dt != DType::kString && out.nbytes() > 0) std::memset(out.raw(), 0, out.nbytes());
    int64_t elem_size = NumElements(elem_shape);
    for (int64_t b = 0; b < batch; ++b) {
      const auto& items = elems[static_cast<size_t>(b)][j];
      for (size_t t = 0; t < items.size(); ++t) {
        const Tensor& e = items[t].tensor();
        if (e.dtype() != dt || e.shape() != elem_shape)
          return ctx.fail(InvalidError("{}: scan output {} has shape {} in batch {}, expected {}",
                                       ctx.node().Describe(), j, ShapeToString(e.shape()), b,
                                       ShapeToString(elem_shape)));
        CopyElements(dt, e.raw(),
                     ElemPtr(out, (b * l.seq_len + static_cast<int64_t>(t)) * elem_size),
                     elem_size);
      }
    }
  }
}

void RunScan(OpContext& ctx) {
  Result<ScanLayout> l = GetScanLayout(ctx);
  SubgraphRunner* body = ctx.subgraph("body");
  if (ctx.opset() < 9)
    RunScan8(ctx, body, l.value());
  else
    RunScan9(ctx, body, l.value());
}

constexpr OpDef kOps[] = {
    {"", "If", 1, nullptr, PrepareIf, RunIf},
    {"", "Loop", 1, nullptr, PrepareLoop, RunLoop},
    {"", "Scan", 8, nullptr, PrepareScan, RunScan},
};

}  // namespace

std::span<const OpDef> ControlFlowOps() {
  return kOps;
}

}  // namespace ferry::ops
