// Reference kernels: sequences (SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt,
// SequenceErase, SequenceLength, SplitToSequence, ConcatFromSequence, SequenceMap) and
// optionals (Optional, OptionalHasElement, OptionalGetElement). An optional is a Value: kNone
// when empty, the contained tensor or sequence otherwise.
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

Status RequireSequence(const OpContext& ctx, size_t i, std::string_view what) {
  if (!ctx.has_input(i)) return NodeError(ctx, "input {} ({}) is missing", i, what);
  if (!ctx.input_value(i).is_sequence())
    return NodeError(ctx, "input {} ({}) must be a sequence", i, what);
  return Status::Ok();
}

// The element type of a sequence value: its declared type, or its first tensor's.
DType ElemType(const Value& seq) {
  if (seq.sequence_elem_type() != DType::kUndefined) return seq.sequence_elem_type();
  return seq.sequence().empty() ? DType::kUndefined : seq.sequence()[0].dtype();
}

// A sequence holding owned copies of `items`.
Value OwnedSequence(const std::vector<Tensor>& items, DType elem_type) {
  std::vector<Tensor> copies;
  copies.reserve(items.size());
  for (const Tensor& t : items) copies.push_back(t.Clone());
  return Value::Sequence(std::move(copies), elem_type);
}

// Reads the optional scalar position input i and maps it into [0, size) (or [0, size] when
// `allow_end`). `def` is used when the input is absent.
Result<int64_t> ReadPosition(const OpContext& ctx, size_t i, int64_t size, bool allow_end,
                             int64_t def) {
  if (!ctx.has_input(i)) return def;
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "position"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kInt32, DType::kInt64}));
  if (ctx.input(i).size() != 1)
    return NodeError(ctx, "position has {} elements, expected a scalar", ctx.input(i).size());
  int64_t p = ctx.input(i).GetAsInt64(0);
  int64_t hi = allow_end ? size : size - 1;
  if (p < -size || p > hi)
    return NodeError(ctx, "position {} is out of range [{}, {}] for a sequence of {} tensors", p,
                     -size, hi, size);
  return p < 0 ? p + size : p;
}

// ---- SequenceEmpty ----
Status PrepareSequenceEmpty(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 0, 0));
  int64_t code = ctx.attr_int("dtype", static_cast<int64_t>(DType::kFloat));
  if (!DTypeFromCode(static_cast<int>(code)))
    return NodeUnsupported(ctx, "dtype {} is not supported", code);
  return Status::Ok();
}

void RunSequenceEmpty(OpContext& ctx) {
  DType dt =
      *DTypeFromCode(static_cast<int>(ctx.attr_int("dtype", static_cast<int64_t>(DType::kFloat))));
  ctx.set_output_value(0, Value::Sequence({}, dt));
}

// ---- SequenceConstruct ----
Status PrepareSequenceConstruct(OpContext& ctx) {
  if (ctx.num_inputs() < 1) return NodeError(ctx, "has no inputs, expected at least 1");
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "inputs"));
    if (ctx.input(i).dtype() != ctx.input(0).dtype())
      return NodeError(ctx, "input {} has dtype {}, expected {} (input 0's)", i,
                       DTypeName(ctx.input(i).dtype()), DTypeName(ctx.input(0).dtype()));
  }
  return Status::Ok();
}

void RunSequenceConstruct(OpContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) items.push_back(ctx.input(i).Clone());
  ctx.set_output_value(0, Value::Sequence(std::move(items), ctx.input(0).dtype()));
}

// ---- SequenceInsert ----
Status PrepareSequenceInsert(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireSequence(ctx, 0, "input_sequence"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "tensor"));
  const Value& seq = ctx.input_value(0);
  DType et = ElemType(seq);
  if (et != DType::kUndefined && et != ctx.input(1).dtype())
    return NodeError(ctx, "tensor has dtype {}, but the sequence holds {}",
                     DTypeName(ctx.input(1).dtype()), DTypeName(et));
  int64_t n = static_cast<int64_t>(seq.sequence().size());
  return ReadPosition(ctx, 2, n, true, n).status();
}

void RunSequenceInsert(OpContext& ctx) {
  const Value& seq = ctx.input_value(0);
  int64_t n = static_cast<int64_t>(seq.sequence().size());
  int64_t pos = ReadPosition(ctx, 2, n, true, n).value();
  Value out = OwnedSequence(seq.sequence(), ctx.input(1).dtype());
  out.sequence().insert(out.sequence().begin() + pos, ctx.input(1).Clone());
  ctx.set_output_value(0, std::move(out));
}

// ---- SequenceAt ----
Status PrepareSequenceAt(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireSequence(ctx, 0, "input_sequence"));
  const auto& items = ctx.input_value(0).sequence();
  int64_t n = static_cast<int64_t>(items.size());
  FERRY_ASSIGN_OR_RETURN(int64_t pos, ReadPosition(ctx, 1, n, false, 0));
  const Tensor& t = items[static_cast<size_t>(pos)];
  ctx.set_output(0, t.dtype(), t.shape());
  return Status::Ok();
}

void RunSequenceAt(OpContext& ctx) {
  const auto& items = ctx.input_value(0).sequence();
  const Tensor& t = items[static_cast<size_t>(
      ReadPosition(ctx, 1, static_cast<int64_t>(items.size()), false, 0).value())];
  CopyElements(t.dtype(), t.raw(), ctx.output(0).raw(), t.size());
}

// ---- SequenceErase ----
Status PrepareSequenceErase(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 2));
  FERRY_RETURN_IF_ERROR(RequireSequence(ctx, 0, "input_sequence"));
  int64_t n = static_cast<int64_t>(ctx.input_value(0).sequence().size());
  if (n == 0) return NodeError(ctx, "cannot erase from an empty sequence");
  return ReadPosition(ctx, 1, n, false, n - 1).status();
}

void RunSequenceErase(OpContext& ctx) {
  const Value& seq = ctx.input_value(0);
  int64_t n = static_cast<int64_t>(seq.sequence().size());
  int64_t pos = ReadPosition(ctx, 1, n, false, n - 1).value();
  Value out = OwnedSequence(seq.sequence(), ElemType(seq));
  out.sequence().erase(out.sequence().begin() + pos);
  ctx.set_output_value(0, std::move(out));
}

// ---- SequenceLength ----
Status PrepareSequenceLength(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireSequence(ctx, 0, "input_sequence"));
  ctx.set_output(0, DType::kInt64, {});
  return Status::Ok();
}

void RunSequenceLength(OpContext& ctx) {
  ctx.output(0).data<int64_t>()[0] = static_cast<int64_t>(ctx.input_value(0).sequence().size());
}

// ---- SplitToSequence ----
struct SplitPlan {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
  bool squeeze = false;  // no split input and keepdims=0: chunks of 1 lose the axis
};

Result<SplitPlan> GetSplitPlan(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  SplitPlan p;
  FERRY_ASSIGN_OR_RETURN(p.axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), x.rank()));
  int64_t len = x.dim(p.axis);
  if (!ctx.has_input(1)) {
    p.sizes.assign(static_cast<size_t>(len), 1);
    p.squeeze = ctx.attr_int("keepdims", 1) == 0;
    return p;
  }
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "split"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt32, DType::kInt64}));
  const Tensor& s = ctx.input(1);
  std::vector<int64_t> v = s.ToInt64Vector();
  if (s.rank() == 0) {
    if (v[0] <= 0) return NodeError(ctx, "split is {}, expected a positive chunk size", v[0]);
    for (int64_t done = 0; done < len; done += v[0]) p.sizes.push_back(std::min(v[0], len - done));
    return p;
  }
  if (s.rank() != 1) return NodeError(ctx, "split has rank {}, expected 0 or 1", s.rank());
  int64_t total = 0;
  for (int64_t d : v) {
    if (d < 0) return NodeError(ctx, "split has a negative size {}", d);
    total += d;
  }
  if (total != len)
    return NodeError(ctx, "split sizes sum to {}, but axis {} has length {}", total, p.axis, len);
  p.sizes = v;
  return p;
}

Status PrepareSplitToSequence(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  if (ctx.input(0).rank() == 0) return NodeError(ctx, "input is a scalar, expected rank >= 1");
  return GetSplitPlan(ctx).status();
}

void RunSplitToSequence(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  SplitPlan p = GetSplitPlan(ctx).value();
  size_t a = static_cast<size_t>(p.axis);
  int64_t outer = Product(x.shape(), 0, a), len = x.dim(p.axis),
          inner = Product(x.shape(), a + 1, x.shape().size());
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t size : p.sizes) {
    Shape s = x.shape();
    s[a] = size;
    if (p.squeeze) s.erase(s.begin() + p.axis);
    Tensor t(x.dtype(), s);
    for (int64_t o = 0; o < outer; ++o)
      CopyElements(x.dtype(), ElemPtr(x, (o * len + start) * inner), ElemPtr(t, o * size * inner),
                   size * inner);
    items.push_back(std::move(t));
    start += size;
  }
  ctx.set_output_value(0, Value::Sequence(std::move(items), x.dtype()));
}

// ---- ConcatFromSequence ----
struct ConcatPlan {
  int64_t axis = 0;  // in the output's rank
  bool new_axis = false;
  Shape out_shape;
};

Result<ConcatPlan> GetConcatPlan(const OpContext& ctx) {
  const auto& items = ctx.input_value(0).sequence();
  if (items.empty()) return NodeError(ctx, "input sequence is empty, expected at least one tensor");
  if (!ctx.has_attr("axis")) return NodeError(ctx, "is missing the required attribute 'axis'");
  ConcatPlan p;
  p.new_axis = ctx.attr_int("new_axis", 0) != 0;
  const Shape& s0 = items[0].shape();
  int64_t out_rank = static_cast<int64_t>(s0.size()) + (p.new_axis ? 1 : 0);
  FERRY_ASSIGN_OR_RETURN(p.axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), out_rank));
  for (size_t i = 0; i < items.size(); ++i) {
    const Tensor& t = items[i];
    if (t.dtype() != items[0].dtype())
      return NodeError(ctx, "tensor {} has dtype {}, expected {}", i, DTypeName(t.dtype()),
                       DTypeName(items[0].dtype()));
    bool ok = t.rank() == static_cast<int64_t>(s0.size());
    for (size_t d = 0; ok && d < s0.size(); ++d)
      if (t.shape()[d] != s0[d] && (p.new_axis || static_cast<int64_t>(d) != p.axis)) ok = false;
    if (!ok)
      return NodeError(
          ctx, "tensor {} has shape {}, which does not match tensor 0's {} along axis {}{}", i,
          ShapeToString(t.shape()), ShapeToString(s0), p.axis, p.new_axis ? " (new_axis=1)" : "");
  }
  p.out_shape = s0;
  if (p.new_axis) {
    p.out_shape.insert(p.out_shape.begin() + p.axis, static_cast<int64_t>(items.size()));
  } else {
    int64_t total = 0;
    for (const Tensor& t : items) total += t.dim(p.axis);
    p.out_shape[static_cast<size_t>(p.axis)] = total;
  }
  return p;
}

Status PrepareConcatFromSequence(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireSequence(ctx, 0, "input_sequence"));
  FERRY_ASSIGN_OR_RETURN(ConcatPlan p, GetConcatPlan(ctx));
  ctx.set_output(0, ctx.input_value(0).sequence()[0].dtype(), p.out_shape);
  return Status::Ok();
}

void RunConcatFromSequence(OpContext& ctx) {
  const auto& items = ctx.input_value(0).sequence();
  ConcatPlan p = GetConcatPlan(ctx).value();
  Tensor& out = ctx.output(0);
  size_t a = static_cast<size_t>(p.axis);
  // View every input as [outer, len_i, inner] over the output's [outer, total, inner].
  int64_t outer = Product(p.out_shape, 0, a), total = p.out_shape[a];
  int64_t inner = Product(p.out_shape, a + 1, p.out_shape.size());
  int64_t offset = 0;
  for (const Tensor& t : items) {
    int64_t len = p.new_axis ? 1 : t.dim(p.axis);
    for (int64_t o = 0; o < outer; ++o)
      CopyElements(t.dtype(), ElemPtr(t, o * len * inner),
                   ElemPtr(out, (o * total + offset) * inner), len * inner);
    offset += len;
  }
}

// ---- SequenceMap ----
Status PrepareSequenceMap(OpContext& ctx) {
  if (ctx.num_inputs() < 1) return NodeError(ctx, "has no inputs, expected at least 1");
  FERRY_RETURN_IF_ERROR(RequireSequence(ctx, 0, "input_sequence"));
  size_t n = ctx.input_value(0).sequence().size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return NodeError(ctx, "additional input {} is missing", i);
    const Value& v = ctx.input_value(i);
    if (v.is_sequence() && v.sequence().size() != n)
      return NodeError(ctx, "input {} is a sequence of {} tensors, expected {} (input 0's length)",
                       i, v.sequence().size(), n);
  }
  SubgraphRunner* body = ctx.subgraph("body");
  if (!body) return NodeError(ctx, "is missing the graph attribute 'body'");
  if (body->graph().inputs.size() != ctx.num_inputs())
    return NodeError(ctx, "body has {} inputs, expected {} (the node's inputs)",
                     body->graph().inputs.size(), ctx.num_inputs());
  if (body->graph().outputs.size() != ctx.num_outputs())
    return NodeError(ctx, "body has {} outputs, expected {} (the node's outputs)",
                     body->graph().outputs.size(), ctx.num_outputs());
  return Status::Ok();
}

void RunSequenceMap(OpContext& ctx) {
  SubgraphRunner* body = ctx.subgraph("body");
  const auto& seq = ctx.input_value(0).sequence();
  std::vector<std::vector<Tensor>> results(ctx.num_outputs());
  for (size_t k = 0; k < seq.size(); ++k) {
    std::vector<Value> ins{Value(seq[k])};
    for (size_t i = 1; i < ctx.num_inputs(); ++i) {
      const Value& v = ctx.input_value(i);
      ins.push_back(v.is_sequence() ? Value(v.sequence()[k]) : v);
    }
    std::vector<Value> outs;
    Status st = body->Run(ins, &outs);
    if (!st.ok()) return ctx.fail(st.With(fmt::format("{} element {}", ctx.node().Describe(), k)));
    for (size_t j = 0; j < results.size(); ++j) {
      if (!outs[j].is_tensor())
        return ctx.fail(InvalidError("{}: body output {} is not a tensor for element {}",
                                     ctx.node().Describe(), j, k));
      results[j].push_back(outs[j].tensor().Clone());
    }
  }
  for (size_t j = 0; j < results.size(); ++j) {
    DType dt = DType::kUndefined;
    if (!results[j].empty())
      dt = results[j][0].dtype();
    else if (body->graph().outputs[j].type.kind == ir::TypeInfo::Kind::kTensor)
      dt = body->graph().outputs[j].type.elem_type;
    ctx.set_output_value(j, Value::Sequence(std::move(results[j]), dt));
  }
}

// ---- Optional ----
Status PrepareOptional(OpContext& ctx) {
  return CheckArity(ctx, 0, 1);
}

void RunOptional(OpContext& ctx) {
  if (!ctx.has_input(0)) return ctx.set_output_value(0, Value());
  const Value& v = ctx.input_value(0);
  if (v.is_tensor()) return ctx.set_output_value(0, Value(v.tensor().Clone()));
  ctx.set_output_value(0, OwnedSequence(v.sequence(), ElemType(v)));
}

// ---- OptionalHasElement (an omitted input reads as an empty optional) ----
Status PrepareOptionalHasElement(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 0, 1));
  ctx.set_output(0, DType::kBool, {});
  return Status::Ok();
}

void RunOptionalHasElement(OpContext& ctx) {
  ctx.output(0).data<bool>()[0] = ctx.has_input(0);
}

// ---- OptionalGetElement ----
Status PrepareOptionalGetElement(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 0, 1));
  if (!ctx.has_input(0)) return NodeError(ctx, "input optional is empty");
  if (ctx.input_is_tensor(0)) ctx.set_output(0, ctx.input(0).dtype(), ctx.input(0).shape());
  return Status::Ok();
}

void RunOptionalGetElement(OpContext& ctx) {
  const Value& v = ctx.input_value(0);
  if (v.is_tensor())
    return CopyElements(v.tensor().dtype(), v.tensor().raw(), ctx.output(0).raw(),
                        v.tensor().size());
  ctx.set_output_value(0, OwnedSequence(v.sequence(), ElemType(v)));
}

constexpr OpDef kOps[] = {
    {"", "SequenceEmpty", 11, nullptr, PrepareSequenceEmpty, RunSequenceEmpty},
    {"", "SequenceConstruct", 11, nullptr, PrepareSequenceConstruct, RunSequenceConstruct},
    {"", "SequenceInsert", 11, nullptr, PrepareSequenceInsert, RunSequenceInsert},
    {"", "SequenceAt", 11, nullptr, PrepareSequenceAt, RunSequenceAt},
    {"", "SequenceErase", 11, nullptr, PrepareSequenceErase, RunSequenceErase},
    {"", "SequenceLength", 11, nullptr, PrepareSequenceLength, RunSequenceLength},
    {"", "SplitToSequence", 11, nullptr, PrepareSplitToSequence, RunSplitToSequence},
    {"", "ConcatFromSequence", 11, nullptr, PrepareConcatFromSequence, RunConcatFromSequence},
    {"", "SequenceMap", 17, nullptr, PrepareSequenceMap, RunSequenceMap},
    {"", "Optional", 15, nullptr, PrepareOptional, RunOptional},
    {"", "OptionalHasElement", 15, nullptr, PrepareOptionalHasElement, RunOptionalHasElement},
    {"", "OptionalGetElement", 15, nullptr, PrepareOptionalGetElement, RunOptionalGetElement},
};

}  // namespace

std::span<const OpDef> SequenceOps() {
  return kOps;
}

}  // namespace ferry::ops
