// Reference kernels: Constant, Identity, Shape, Size.
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

// ---- Constant ----
Status PrepareConstant(OpContext& ctx) {
  const ir::Node& n = ctx.node();
  if (n.attributes.size() != 1)
    return NodeError(ctx, "needs exactly one value attribute, has {}", n.attributes.size());
  const ir::Attribute& a = n.attributes[0];
  // The attribute's type must be the one its name says (a `value` of type TENSORS holds no
  // tensor: folding it wrote an initializer of element type 0).
  using T = ir::AttrType;
  static constexpr std::pair<std::string_view, T> kTypes[] = {
      {"value", T::kTensor},        {"sparse_value", T::kSparseTensor},
      {"value_float", T::kFloat},   {"value_floats", T::kFloats},
      {"value_int", T::kInt},       {"value_ints", T::kInts},
      {"value_string", T::kString}, {"value_strings", T::kStrings}};
  for (const auto& [name, type] : kTypes)
    if (a.name == name && a.type != type && !(name == "sparse_value" && a.type == T::kTensor))
      return NodeError(ctx, "attribute '{}' has type {}, expected {}", a.name,
                       static_cast<int>(a.type), static_cast<int>(type));
  if ((a.name == "value" || a.name == "sparse_value") && a.t.dtype() == DType::kUndefined)
    return NodeError(ctx, "attribute '{}' holds a tensor of undefined element type", a.name);
  if (a.name == "value" || a.name == "sparse_value")
    ctx.set_output(0, a.t.dtype(), a.t.shape());
  else if (a.name == "value_float")
    ctx.set_output(0, DType::kFloat, {});
  else if (a.name == "value_floats")
    ctx.set_output(0, DType::kFloat, {static_cast<int64_t>(a.floats.size())});
  else if (a.name == "value_int")
    ctx.set_output(0, DType::kInt64, {});
  else if (a.name == "value_ints")
    ctx.set_output(0, DType::kInt64, {static_cast<int64_t>(a.ints.size())});
  else if (a.name == "value_string")
    ctx.set_output(0, DType::kString, {});
  else if (a.name == "value_strings")
    ctx.set_output(0, DType::kString, {static_cast<int64_t>(a.strings.size())});
  else
    return NodeUnsupported(ctx, "unknown value attribute '{}'", a.name);
  return Status::Ok();
}

void RunConstant(OpContext& ctx) {
  const ir::Attribute& a = ctx.node().attributes[0];
  Tensor& out = ctx.output(0);
  if (a.name == "value" || a.name == "sparse_value")
    CopyElements(a.t.dtype(), a.t.raw(), out.raw(), a.t.size());
  else if (a.name == "value_float")
    out.data<float>()[0] = a.f;
  else if (a.name == "value_floats")
    std::copy(a.floats.begin(), a.floats.end(), out.data<float>());
  else if (a.name == "value_int")
    out.data<int64_t>()[0] = a.i;
  else if (a.name == "value_ints")
    std::copy(a.ints.begin(), a.ints.end(), out.data<int64_t>());
  else if (a.name == "value_string")
    out.data<std::string>()[0] = a.s;
  else
    std::copy(a.strings.begin(), a.strings.end(), out.data<std::string>());
}

// ---- Identity (tensors, sequences and optionals pass through) ----
Status PrepareIdentity(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  if (ctx.input_is_tensor(0)) ctx.set_output(0, ctx.input(0).dtype(), ctx.input(0).shape());
  return Status::Ok();
}

void RunIdentity(OpContext& ctx) {
  const Value& in = ctx.input_value(0);
  if (in.is_tensor()) {
    CopyElements(in.tensor().dtype(), in.tensor().raw(), ctx.output(0).raw(), in.tensor().size());
    return;
  }
  Value v = in;
  for (Tensor& t : v.sequence()) t = t.Clone();
  ctx.set_output_value(0, std::move(v));
}

// ---- Shape (start/end since opset 15) ----
struct ShapeRange {
  int64_t start, end;
};
ShapeRange ShapeSlice(const OpContext& ctx) {
  int64_t r = ctx.input(0).rank();
  int64_t s = ctx.attr_int("start", 0), e = ctx.attr_int("end", r);
  if (s < 0) s += r;
  if (e < 0) e += r;
  s = std::clamp<int64_t>(s, 0, r);
  e = std::clamp<int64_t>(e, 0, r);
  return {s, std::max(s, e)};
}

Status PrepareShape(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  ShapeRange r = ShapeSlice(ctx);
  ctx.set_output(0, DType::kInt64, {r.end - r.start});
  return Status::Ok();
}

void RunShape(OpContext& ctx) {
  ShapeRange r = ShapeSlice(ctx);
  for (int64_t i = r.start; i < r.end; ++i)
    ctx.output(0).data<int64_t>()[i - r.start] = ctx.input(0).dim(i);
}

// ---- Size ----
Status PrepareSize(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  ctx.set_output(0, DType::kInt64, {});
  return Status::Ok();
}

void RunSize(OpContext& ctx) {
  ctx.output(0).data<int64_t>()[0] = ctx.input(0).size();
}

constexpr OpDef kOps[] = {
    {"", "Constant", 1, nullptr, PrepareConstant, RunConstant},
    {"", "Identity", 1, nullptr, PrepareIdentity, RunIdentity},
    {"", "Shape", 1, nullptr, PrepareShape, RunShape},
    {"", "Size", 1, nullptr, PrepareSize, RunSize},
};

}  // namespace

std::span<const OpDef> BasicOps() {
  return kOps;
}

}  // namespace ferry::ops
