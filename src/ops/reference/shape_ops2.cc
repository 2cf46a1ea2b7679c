// Reference kernels that reshape, join or generate tensors: Reshape, Flatten, Squeeze,
// Unsqueeze, Concat, Split, ConstantOfShape, Range, Trilu, EyeLike, Dropout (the index-map
// ops are in shape_ops.cc). Data movement works for every dtype, strings included.
#include <functional>
#include <random>

#include "ops/reference/shape_util.h"

namespace ferry::ops {

namespace {

// ---- shared helpers ----

using shape_util::CheckedProduct;
using shape_util::ElemPtr;
using shape_util::IntsInput;
using shape_util::NormalizeAxes;

// Sets every element of `y` to the single element at `elem` (of y's dtype).
void FillWith(Tensor& y, const void* elem) {
  const size_t size = DTypeSize(y.dtype());
  for (int64_t i = 0; i < y.size(); ++i) CopyElement(y.dtype(), elem, 0, y.raw(), i, size);
}

// The value 1 of a numeric or bool dtype, in a scalar tensor.
Tensor One(DType dt) {
  Tensor t(dt, {});
  VisitPod(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    t.data<T>()[0] = static_cast<T>(static_cast<ComputeType<T>>(1));
  });
  return t;
}

// Copies input 0 into output 0 unchanged (the reshaping ops).
void RunCopyInput(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  CopyElements(x.dtype(), x.raw(), ctx.output(0).raw(), x.size());
}

// ---- Reshape (`shape` attribute before opset 5, input since; allowzero since 14) ----
Status PrepareReshape(OpContext& ctx) {
  std::vector<int64_t> target;
  if (ctx.opset() < 5) {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
    if (!ctx.has_attr("shape")) return NodeError(ctx, "the 'shape' attribute is missing");
    target = ctx.attr_ints("shape");
  } else {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
    FERRY_ASSIGN_OR_RETURN(target, IntsInput(ctx, 1, "shape"));
  }
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  const Tensor& x = ctx.input(0);
  const bool allow_zero = ctx.opset() >= 14 && ctx.attr_int("allowzero", 0) != 0;
  Shape out(target.size());
  int64_t infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == -1) {
      if (infer >= 0) return NodeError(ctx, "shape {} has more than one -1", ShapeToString(target));
      infer = static_cast<int64_t>(i);
      d = 1;
    } else if (d < -1) {
      return NodeError(ctx, "shape {} has invalid dim {}", ShapeToString(target), d);
    } else if (d == 0 && !allow_zero) {
      if (static_cast<int64_t>(i) >= x.rank())
        return NodeError(ctx, "shape {} copies dim {} but data {} has rank {}",
                         ShapeToString(target), i, ShapeToString(x.shape()), x.rank());
      d = x.dim(static_cast<int64_t>(i));
    }
    out[i] = d;
  }
  FERRY_ASSIGN_OR_RETURN(int64_t known, CheckedProduct(ctx, out));
  if (infer >= 0) {
    if (known == 0)
      return NodeError(ctx, "cannot infer the -1 of shape {}: the other dims multiply to 0",
                       ShapeToString(target));
    if (x.size() % known != 0)
      return NodeError(ctx, "cannot reshape data {} ({} elements) to shape {}",
                       ShapeToString(x.shape()), x.size(), ShapeToString(target));
    out[static_cast<size_t>(infer)] = x.size() / known;
    known = x.size();
  }
  if (known != x.size())
    return NodeError(ctx, "cannot reshape data {} ({} elements) to {} ({} elements)",
                     ShapeToString(x.shape()), x.size(), ShapeToString(out), known);
  ctx.set_output(0, x.dtype(), out);
  return Status::Ok();
}

// ---- Flatten ----
Status PrepareFlatten(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.attr_int("axis", 1), r = x.rank();
  if (axis < -r || axis > r) return NodeError(ctx, "axis {} is out of range for rank {}", axis, r);
  if (axis < 0) axis += r;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? outer : inner) *= x.dim(d);
  ctx.set_output(0, x.dtype(), {outer, inner});
  return Status::Ok();
}

// ---- Squeeze (axes attribute before opset 13, input since) ----
Status PrepareSqueeze(OpContext& ctx) {
  std::vector<int64_t> axes;
  if (ctx.opset() < 13) {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
    axes = ctx.attr_ints("axes");
  } else {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 2));
    if (ctx.has_input(1)) {
      FERRY_ASSIGN_OR_RETURN(axes, IntsInput(ctx, 1, "axes"));
    }
  }
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  const Tensor& x = ctx.input(0);
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(ctx, axes, x.rank(), "axis"));
  for (int64_t a : norm)
    if (x.dim(a) != 1)
      return NodeError(ctx, "cannot squeeze axis {} of data {}: its dim is {}, expected 1", a,
                       ShapeToString(x.shape()), x.dim(a));
  Shape out;
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool squeezed = norm.empty() ? x.dim(d) == 1 : std::count(norm.begin(), norm.end(), d) > 0;
    if (!squeezed) out.push_back(x.dim(d));
  }
  ctx.set_output(0, x.dtype(), out);
  return Status::Ok();
}

// ---- Unsqueeze (axes attribute before opset 13, input since) ----
Status PrepareUnsqueeze(OpContext& ctx) {
  std::vector<int64_t> axes;
  if (ctx.opset() < 13) {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
    if (!ctx.has_attr("axes")) return NodeError(ctx, "the 'axes' attribute is missing");
    axes = ctx.attr_ints("axes");
  } else {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
    FERRY_ASSIGN_OR_RETURN(axes, IntsInput(ctx, 1, "axes"));
  }
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  const Tensor& x = ctx.input(0);
  const int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(ctx, axes, out_rank, "axis"));
  Shape out(static_cast<size_t>(out_rank), 1);
  int64_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d)
    if (std::count(norm.begin(), norm.end(), d) == 0) out[static_cast<size_t>(d)] = x.dim(next++);
  ctx.set_output(0, x.dtype(), out);
  return Status::Ok();
}

// ---- Concat (axis defaults to 1 before opset 4) ----
int64_t ConcatAxis(const OpContext& ctx) {
  int64_t axis = ctx.attr_int("axis", 1);
  return axis < 0 ? axis + ctx.input(0).rank() : axis;
}

Status PrepareConcat(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, std::numeric_limits<size_t>::max()));
  if (ctx.opset() >= 4 && !ctx.has_attr("axis"))
    return NodeError(ctx, "the 'axis' attribute is missing");
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, "inputs"));
  const Tensor& x0 = ctx.input(0);
  if (x0.rank() == 0) return NodeError(ctx, "cannot concatenate scalars");
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", 1), x0.rank()));
  Shape out = x0.shape();
  out[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    if (x.dtype() != x0.dtype())
      return NodeError(ctx, "input {} has dtype {}, input 0 has {}", i, DTypeName(x.dtype()),
                       DTypeName(x0.dtype()));
    bool ok = x.rank() == x0.rank();
    for (int64_t d = 0; ok && d < x.rank(); ++d) ok = d == axis || x.dim(d) == x0.dim(d);
    if (!ok)
      return NodeError(ctx, "input {} has shape {}, which does not match input 0 {} off axis {}", i,
                       ShapeToString(x.shape()), ShapeToString(x0.shape()), axis);
    out[static_cast<size_t>(axis)] += x.dim(axis);
  }
  ctx.set_output(0, x0.dtype(), out);
  return Status::Ok();
}

void RunConcat(OpContext& ctx) {
  Tensor& y = ctx.output(0);
  const int64_t axis = ConcatAxis(ctx);
  int64_t outer = 1, after = 1;
  for (int64_t d = 0; d < y.rank(); ++d) {
    if (d < axis) outer *= y.dim(d);
    if (d > axis) after *= y.dim(d);
  }
  const int64_t out_inner = y.dim(axis) * after;
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    const int64_t in_inner = x.dim(axis) * after;
    for (int64_t o = 0; o < outer; ++o)
      CopyElements(y.dtype(), ElemPtr(y.dtype(), x.raw(), o * in_inner),
                   ElemPtr(y.dtype(), y.raw(), o * out_inner + offset), in_inner);
    offset += in_inner;
  }
}

// ---- Split (split attribute or input before opset 13, input since; num_outputs since 18) ----
Result<std::vector<int64_t>> SplitSizes(const OpContext& ctx, int64_t dim) {
  const int64_t n = static_cast<int64_t>(ctx.num_outputs());
  std::vector<int64_t> split;
  bool given = false;
  if (ctx.opset() < 13 && ctx.has_attr("split")) {
    split = ctx.attr_ints("split");
    given = true;
  } else if ((ctx.opset() < 2 || ctx.opset() >= 13) && ctx.has_input(1)) {
    FERRY_ASSIGN_OR_RETURN(split, IntsInput(ctx, 1, "split"));
    given = true;
  }
  if (given) {
    if (static_cast<int64_t>(split.size()) != n)
      return NodeError(ctx, "split {} has {} entries for {} outputs", ShapeToString(split),
                       split.size(), n);
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return NodeError(ctx, "split {} has a negative size", ShapeToString(split));
      sum += s;
    }
    if (sum != dim)
      return NodeError(ctx, "split {} sums to {}, but the split axis has {} elements",
                       ShapeToString(split), sum, dim);
    return split;
  }
  if (ctx.opset() >= 18 && ctx.has_attr("num_outputs")) {
    int64_t num = ctx.attr_int("num_outputs", 0);
    if (num != n) return NodeError(ctx, "num_outputs is {} but the node has {} outputs", num, n);
  }
  if (n <= 0) return NodeError(ctx, "has no outputs");
  if (dim % n == 0) return std::vector<int64_t>(static_cast<size_t>(n), dim / n);
  if (ctx.opset() < 18)
    return NodeError(
        ctx, "the split axis has {} elements, which do not split evenly into {} outputs", dim, n);
  // Opset 18: chunks of ceil(dim / n); the last one takes what is left.
  const int64_t chunk = (dim + n - 1) / n;
  if (chunk * (n - 1) > dim)
    return NodeError(ctx, "the split axis has {} elements, too few for {} chunks of {}", dim, n,
                     chunk);
  split.assign(static_cast<size_t>(n), chunk);
  split.back() = dim - chunk * (n - 1);
  return split;
}

int64_t SplitAxis(const OpContext& ctx) {
  int64_t axis = ctx.attr_int("axis", 0);
  return axis < 0 ? axis + ctx.input(0).rank() : axis;
}

Status PrepareSplit(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, ctx.opset() < 2 || ctx.opset() >= 13 ? 2 : 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  const Tensor& x = ctx.input(0);
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), x.rank()));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> split, SplitSizes(ctx, x.dim(axis)));
  for (size_t k = 0; k < split.size(); ++k) {
    Shape s = x.shape();
    s[static_cast<size_t>(axis)] = split[k];
    ctx.set_output(k, x.dtype(), s);
  }
  return Status::Ok();
}

void RunSplit(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = SplitAxis(ctx);
  std::vector<int64_t> split = SplitSizes(ctx, x.dim(axis)).value();
  int64_t outer = 1, after = 1;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    if (d > axis) after *= x.dim(d);
  }
  const int64_t in_inner = x.dim(axis) * after;
  int64_t offset = 0;
  for (size_t k = 0; k < split.size(); ++k) {
    const int64_t out_inner = split[k] * after;
    Tensor& y = ctx.output(k);
    for (int64_t o = 0; o < outer; ++o)
      CopyElements(x.dtype(), ElemPtr(x.dtype(), x.raw(), o * in_inner + offset),
                   ElemPtr(x.dtype(), y.raw(), o * out_inner), out_inner);
    offset += out_inner;
  }
}

// ---- ConstantOfShape ----
Status PrepareConstantOfShape(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> shape, IntsInput(ctx, 0, "input"));
  for (int64_t d : shape)
    if (d < 0) return NodeError(ctx, "shape {} has a negative dim", ShapeToString(shape));
  FERRY_RETURN_IF_ERROR(CheckedProduct(ctx, shape).status());
  DType dt = DType::kFloat;
  if (const ir::Attribute* a = ctx.node().attr("value")) {
    if (a->type != ir::AttrType::kTensor || a->t.size() != 1)
      return NodeError(ctx, "the 'value' attribute must be a one-element tensor, has {} elements",
                       a->t.size());
    dt = a->t.dtype();
  }
  ctx.set_output(0, dt, shape);
  return Status::Ok();
}

void RunConstantOfShape(OpContext& ctx) {
  Tensor& y = ctx.output(0);
  const ir::Attribute* a = ctx.node().attr("value");
  Tensor zero(DType::kFloat, {});
  FillWith(y, a ? a->t.raw() : zero.raw());
}

// ---- Range ----
// Number of elements: max(ceil((limit - start) / delta), 0).
Result<int64_t> RangeCount(const OpContext& ctx) {
  const Tensor &start = ctx.input(0), &limit = ctx.input(1), &delta = ctx.input(2);
  int64_t count = 0;
  if (IsFloat(start.dtype())) {
    const double s = start.GetAsDouble(0), l = limit.GetAsDouble(0), d = delta.GetAsDouble(0);
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
      return NodeError(ctx, "start {}, limit {}, delta {} do not define a finite range", s, l, d);
    const double n = std::ceil((l - s) / d);
    if (n > static_cast<double>(int64_t{1} << 40))
      return NodeError(ctx, "range of {} elements is too large", n);
    count = n > 0 ? static_cast<int64_t>(n) : 0;
  } else {
    const int64_t s = start.GetAsInt64(0), l = limit.GetAsInt64(0), d = delta.GetAsInt64(0);
    if (d == 0) return NodeError(ctx, "delta is 0");
    if ((d > 0 && l > s) || (d < 0 && l < s)) {
      const uint64_t span = d > 0 ? static_cast<uint64_t>(l) - static_cast<uint64_t>(s)
                                  : static_cast<uint64_t>(s) - static_cast<uint64_t>(l);
      const uint64_t mag =
          d > 0 ? static_cast<uint64_t>(d) : uint64_t{0} - static_cast<uint64_t>(d);
      const uint64_t n = (span - 1) / mag + 1;
      if (n > (uint64_t{1} << 40)) return NodeError(ctx, "range of {} elements is too large", n);
      count = static_cast<int64_t>(n);
    }
  }
  return count;
}

Status PrepareRange(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  const char* names[] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, names[i]));
    FERRY_RETURN_IF_ERROR(RequireDType(
        ctx, i, {DType::kFloat, DType::kDouble, DType::kInt16, DType::kInt32, DType::kInt64}));
    const Tensor& t = ctx.input(i);
    if (t.dtype() != ctx.input(0).dtype() || t.size() != 1)
      return NodeError(ctx, "{} is {} {}, expected a {} scalar", names[i], DTypeName(t.dtype()),
                       ShapeToString(t.shape()), DTypeName(ctx.input(0).dtype()));
  }
  FERRY_ASSIGN_OR_RETURN(int64_t count, RangeCount(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), {count});
  return Status::Ok();
}

void RunRange(OpContext& ctx) {
  Tensor& y = ctx.output(0);
  VisitNumeric(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_signed_v<T>) {
      // output[i] = start + i * delta, in T's arithmetic (int64 for the integer types).
      using A = std::conditional_t<std::is_floating_point_v<T>, T, int64_t>;
      const A start = static_cast<A>(ctx.input(0).data<T>()[0]);
      const A delta = static_cast<A>(ctx.input(2).data<T>()[0]);
      T* out = y.data<T>();
      for (int64_t i = 0; i < y.size(); ++i)
        out[i] = static_cast<T>(start + static_cast<A>(i) * delta);
    }
  });
}

// ---- Trilu ----
Status PrepareTrilu(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2)
    return NodeError(ctx, "input has shape {}, expected rank >= 2", ShapeToString(x.shape()));
  if (ctx.has_input(1)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "k"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt64}));
    if (ctx.input(1).size() != 1)
      return NodeError(ctx, "k has shape {}, expected a scalar",
                       ShapeToString(ctx.input(1).shape()));
  }
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunTrilu(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const int64_t k = ctx.has_input(1) ? ctx.input(1).data<int64_t>()[0] : 0;
  const bool upper = ctx.attr_int("upper", 1) != 0;
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  const Tensor zero(x.dtype(), {});
  const size_t elem = DTypeSize(x.dtype());
  CopyElements(x.dtype(), x.raw(), y.raw(), x.size());
  for (int64_t base = 0; base < x.size(); base += rows * cols)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        // Keeps j - i >= k (upper) or j - i <= k (lower).
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) CopyElement(x.dtype(), zero.raw(), 0, y.raw(), base + i * cols + j, elem);
      }
}

// ---- EyeLike ----
Status PrepareEyeLike(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2)
    return NodeError(ctx, "input has shape {}, expected rank 2", ShapeToString(x.shape()));
  DType dt = x.dtype();
  if (ctx.has_attr("dtype")) {
    const int64_t code = ctx.attr_int("dtype", 0);
    std::optional<DType> d = DTypeFromCode(static_cast<int>(code));
    if (!d) return NodeUnsupported(ctx, "dtype {} is not supported", code);
    dt = *d;
  }
  if (!IsNumeric(x.dtype()) && x.dtype() != DType::kBool)
    return NodeUnsupported(ctx, "input dtype {} is not numeric or bool", DTypeName(x.dtype()));
  if (!IsNumeric(dt) && dt != DType::kBool)
    return NodeUnsupported(ctx, "output dtype {} is not numeric or bool", DTypeName(dt));
  ctx.set_output(0, dt, x.shape());
  return Status::Ok();
}

void RunEyeLike(OpContext& ctx) {
  Tensor& y = ctx.output(0);
  const int64_t k = ctx.attr_int("k", 0), rows = y.dim(0), cols = y.dim(1);
  std::memset(y.raw(), 0, y.nbytes());
  const Tensor one = One(y.dtype());
  if (k >= cols || k <= -rows) return;
  for (int64_t i = std::max<int64_t>(0, -k); i < rows && i + k < cols; ++i)
    CopyElement(y.dtype(), one.raw(), 0, y.raw(), i * cols + i + k, DTypeSize(y.dtype()));
}

// ---- Dropout ----
// Before opset 7 only an explicit `is_test` = 0 asks for training (an absent is_test runs
// inference, as ONNX Runtime does: exported models are for inference); opsets 7 to 11 are
// inference only; since 12 the ratio and training_mode inputs decide. Training drops each element
// with probability `ratio` and scales the kept ones by 1 / (1 - ratio).
struct DropoutMode {
  bool training = false;
  double ratio = 0.5;
};

Result<DropoutMode> GetDropoutMode(const OpContext& ctx) {
  DropoutMode m;
  if (ctx.opset() < 12) {
    m.ratio = ctx.attr_float("ratio", 0.5f);
    m.training = ctx.opset() < 7 && ctx.attr_int("is_test", 1) == 0;
  } else {
    if (ctx.has_input(1)) {
      FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "ratio"));
      FERRY_RETURN_IF_ERROR(
          RequireDType(ctx, 1, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
      if (ctx.input(1).size() != 1)
        return NodeError(ctx, "ratio has shape {}, expected a scalar",
                         ShapeToString(ctx.input(1).shape()));
      m.ratio = ctx.input(1).GetAsDouble(0);
    }
    if (ctx.has_input(2)) {
      FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "training_mode"));
      FERRY_RETURN_IF_ERROR(RequireDType(ctx, 2, {DType::kBool}));
      if (ctx.input(2).size() != 1)
        return NodeError(ctx, "training_mode has shape {}, expected a scalar",
                         ShapeToString(ctx.input(2).shape()));
      m.training = ctx.input(2).data<bool>()[0];
    }
  }
  if (m.training && !(m.ratio >= 0 && m.ratio <= 1))
    return NodeError(ctx, "ratio {} is outside [0, 1]", m.ratio);
  return m;
}

Status PrepareDropout(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, ctx.opset() < 12 ? 1 : 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  FERRY_RETURN_IF_ERROR(GetDropoutMode(ctx).status());
  const Tensor& x = ctx.input(0);
  ctx.set_output(0, x.dtype(), x.shape());
  if (ctx.num_outputs() > 1)
    ctx.set_output(1, ctx.opset() < 10 ? x.dtype() : DType::kBool, x.shape());
  return Status::Ok();
}

void RunDropout(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  Tensor* mask = ctx.num_outputs() > 1 ? &ctx.output(1) : nullptr;
  const DropoutMode m = GetDropoutMode(ctx).value();
  if (!m.training || m.ratio == 0) {
    CopyElements(x.dtype(), x.raw(), y.raw(), x.size());
    if (mask) FillWith(*mask, One(mask->dtype()).raw());
    return;
  }
  // A Mersenne Twister seeded with the `seed` attribute (or the session seed mixed with the
  // node's output name); each element takes a 53-bit uniform double in [0, 1) from two draws and
  // is kept when it is >= ratio.
  uint64_t seed = ctx.has_attr("seed")
                      ? static_cast<uint64_t>(ctx.attr_int("seed", 0))
                      : ctx.seed() ^ std::hash<std::string>()(ctx.node().outputs[0]);
  std::mt19937 gen(static_cast<uint32_t>(seed));
  const double scale = 1.0 / (1.0 - m.ratio);
  const Tensor one = mask ? One(mask->dtype()) : Tensor();
  const size_t mask_elem = mask ? DTypeSize(mask->dtype()) : 0;
  VisitNumeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    if (mask) std::memset(mask->raw(), 0, mask->nbytes());
    for (int64_t i = 0; i < x.size(); ++i) {
      const uint32_t a = static_cast<uint32_t>(gen()) >> 5, b = static_cast<uint32_t>(gen()) >> 6;
      const double u = (a * 67108864.0 + b) / 9007199254740992.0;
      const bool keep = u >= m.ratio;
      out[i] = keep ? static_cast<T>(static_cast<C>(in[i]) * static_cast<C>(scale))
                    : static_cast<T>(C(0));
      if (keep && mask) CopyElement(mask->dtype(), one.raw(), 0, mask->raw(), i, mask_elem);
    }
  });
}

constexpr OpDef kOps[] = {
    {"", "Reshape", 1, nullptr, PrepareReshape, RunCopyInput},
    {"", "Flatten", 1, nullptr, PrepareFlatten, RunCopyInput},
    {"", "Squeeze", 1, nullptr, PrepareSqueeze, RunCopyInput},
    {"", "Unsqueeze", 1, nullptr, PrepareUnsqueeze, RunCopyInput},
    {"", "Concat", 1, nullptr, PrepareConcat, RunConcat},
    {"", "Split", 1, nullptr, PrepareSplit, RunSplit},
    {"", "ConstantOfShape", 9, nullptr, PrepareConstantOfShape, RunConstantOfShape},
    {"", "Range", 11, nullptr, PrepareRange, RunRange},
    {"", "Trilu", 14, nullptr, PrepareTrilu, RunTrilu},
    {"", "EyeLike", 9, nullptr, PrepareEyeLike, RunEyeLike},
    {"", "Dropout", 1, nullptr, PrepareDropout, RunDropout},
};

}  // namespace

std::span<const OpDef> ShapeOps2() {
  return kOps;
}

}  // namespace ferry::ops
