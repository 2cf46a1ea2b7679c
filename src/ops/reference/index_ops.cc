// Reference kernels: Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND,
// ReverseSequence. Every index value is validated in prepare; run trusts them.
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

// ---- shared helpers ----

// Pointer to element i of a buffer of dtype `dt` (strings are std::string arrays).
const void* ElemPtr(const void* base, DType dt, int64_t i) {
  return static_cast<const char*>(base) + i * static_cast<int64_t>(DTypeSize(dt));
}
void* ElemPtr(void* base, DType dt, int64_t i) {
  return static_cast<char*>(base) + i * static_cast<int64_t>(DTypeSize(dt));
}

// Element i of an int32/int64 index tensor.
int64_t IndexAt(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}

// Maps an index validated to lie in [-dim, dim) to [0, dim).
int64_t WrapIndex(int64_t v, int64_t dim) {
  return v < 0 ? v + dim : v;
}

// Product of shape[begin, end).
int64_t DimProduct(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

// Checks every value of index tensor `idx` lies in [-dim, dim).
Status CheckIndexValues(const OpContext& ctx, const Tensor& idx, std::string_view what,
                        int64_t axis, const Shape& data_shape) {
  int64_t dim = data_shape[static_cast<size_t>(axis)];
  for (int64_t i = 0; i < idx.size(); ++i) {
    int64_t v = IndexAt(idx, i);
    if (v < -dim || v >= dim) {
      if (dim == 0)
        return NodeError(
            ctx, "{} value {} (element {}) indexes axis {} of data shape {}, which is empty", what,
            v, i, axis, ShapeToString(data_shape));
      return NodeError(
          ctx, "{} value {} (element {}) is out of range [{}, {}] for axis {} of data shape {}",
          what, v, i, -dim, dim - 1, axis, ShapeToString(data_shape));
    }
  }
  return Status::Ok();
}

// Indices of GatherElements/ScatterElements: same rank as data, no dim larger than data's
// (except along `axis`, where the values are bounded instead).
Status CheckElementsShape(const OpContext& ctx, const Shape& data, const Shape& idx, int64_t axis) {
  if (idx.size() != data.size())
    return NodeError(ctx, "indices has rank {} (shape {}), expected the rank of data {} ({})",
                     idx.size(), ShapeToString(idx), data.size(), ShapeToString(data));
  for (size_t d = 0; d < idx.size(); ++d)
    if (static_cast<int64_t>(d) != axis && idx[d] > data[d])
      return NodeError(ctx, "indices shape {} exceeds data shape {} on dim {}", ShapeToString(idx),
                       ShapeToString(data), d);
  return Status::Ok();
}

// ---- scatter reductions ----
enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

// Parses `reduction` (opset 16: none/add/mul, opset 18: also max/min).
Status ParseReduction(const OpContext& ctx, Reduction* r) {
  std::string s = ctx.attr_string("reduction", "none");
  int64_t opset = ctx.opset();
  if (s == "none")
    *r = Reduction::kNone;
  else if (s == "add" && opset >= 16)
    *r = Reduction::kAdd;
  else if (s == "mul" && opset >= 16)
    *r = Reduction::kMul;
  else if (s == "max" && opset >= 18)
    *r = Reduction::kMax;
  else if (s == "min" && opset >= 18)
    *r = Reduction::kMin;
  else
    return NodeError(ctx, "reduction '{}' is not valid at opset {}", s, opset);
  if (*r != Reduction::kNone && ctx.input(0).dtype() == DType::kString)
    return NodeUnsupported(ctx, "reduction '{}' is not defined for string data", s);
  return Status::Ok();
}

template <typename T>
void Combine(Reduction r, T* dst, const T& src) {
  if constexpr (std::is_same_v<T, std::string>) {
    *dst = src;
  } else if constexpr (std::is_same_v<T, bool>) {  // numpy semantics: add/max = or, mul/min = and
    if (r == Reduction::kNone)
      *dst = src;
    else if (r == Reduction::kAdd || r == Reduction::kMax)
      *dst = *dst || src;
    else
      *dst = *dst && src;
  } else {
    using C = ComputeType<T>;
    C a = static_cast<C>(*dst), b = static_cast<C>(src), v = b;
    switch (r) {
      case Reduction::kNone:
        break;
      case Reduction::kAdd:
        v = static_cast<C>(a + b);
        break;
      case Reduction::kMul:
        v = static_cast<C>(a * b);
        break;
      case Reduction::kMax:
        v = a < b ? b : a;
        break;
      case Reduction::kMin:
        v = b < a ? b : a;
        break;
    }
    if constexpr (std::is_floating_point_v<C>) {  // max/min propagate NaN, as numpy's do
      if ((r == Reduction::kMax || r == Reduction::kMin) && (std::isnan(a) || std::isnan(b)))
        v = std::numeric_limits<C>::quiet_NaN();
    }
    *dst = T(v);
  }
}

// dst[di + j] op= src[si + j] for j in [0, n).
void CombineRange(Reduction r, DType dt, const void* src, int64_t si, void* dst, int64_t di,
                  int64_t n) {
  if (r == Reduction::kNone) {
    CopyElements(dt, ElemPtr(src, dt, si), ElemPtr(dst, dt, di), n);
    return;
  }
  VisitDType(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = static_cast<const T*>(src) + si;
    T* d = static_cast<T*>(dst) + di;
    for (int64_t j = 0; j < n; ++j) Combine(r, &d[j], s[j]);
  });
}

// ---- Gather ----
Status PrepareGather(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "indices"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt32, DType::kInt64}));
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), data.rank()));
  FERRY_RETURN_IF_ERROR(CheckIndexValues(ctx, idx, "indices", axis, data.shape()));
  Shape out(data.shape().begin(), data.shape().begin() + axis);
  out.insert(out.end(), idx.shape().begin(), idx.shape().end());
  out.insert(out.end(), data.shape().begin() + axis + 1, data.shape().end());
  ctx.set_output(0, data.dtype(), std::move(out));
  return Status::Ok();
}

void RunGather(OpContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  Tensor& out = ctx.output(0);
  DType dt = data.dtype();
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < 0) axis += data.rank();
  size_t a = static_cast<size_t>(axis);
  int64_t outer = DimProduct(data.shape(), 0, a);
  int64_t dim = data.dim(axis);
  int64_t inner = DimProduct(data.shape(), a + 1, data.shape().size());
  int64_t n = idx.size();
  ParallelFor(ctx, outer * n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      int64_t o = k / n, j = k % n;
      int64_t src = (o * dim + WrapIndex(IndexAt(idx, j), dim)) * inner;
      CopyElements(dt, ElemPtr(data.raw(), dt, src), ElemPtr(out.raw(), dt, k * inner), inner);
    }
  });
}

// ---- GatherElements ----
Status PrepareGatherElements(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "indices"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt32, DType::kInt64}));
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), data.rank()));
  FERRY_RETURN_IF_ERROR(CheckElementsShape(ctx, data.shape(), idx.shape(), axis));
  FERRY_RETURN_IF_ERROR(CheckIndexValues(ctx, idx, "indices", axis, data.shape()));
  ctx.set_output(0, data.dtype(), idx.shape());
  return Status::Ok();
}

// Offset in data of the element that indices position `i` refers to (GatherElements and
// ScatterElements): the position's own coordinates with the axis coordinate replaced.
int64_t ElementsOffset(const Tensor& idx, const std::vector<int64_t>& idx_strides,
                       const std::vector<int64_t>& data_strides, const Shape& data_shape,
                       int64_t axis, int64_t i) {
  int64_t rem = i, off = 0;
  for (size_t d = 0; d < idx_strides.size(); ++d) {
    int64_t c = rem / idx_strides[d];
    rem -= c * idx_strides[d];
    if (static_cast<int64_t>(d) == axis) c = WrapIndex(IndexAt(idx, i), data_shape[d]);
    off += c * data_strides[d];
  }
  return off;
}

void RunGatherElements(OpContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  Tensor& out = ctx.output(0);
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < 0) axis += data.rank();
  std::vector<int64_t> is = Strides(idx.shape()), ds = Strides(data.shape());
  size_t elem = DTypeSize(data.dtype());
  ParallelFor(ctx, idx.size(), 256, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      CopyElement(data.dtype(), data.raw(), ElementsOffset(idx, is, ds, data.shape(), axis, i),
                  out.raw(), i, elem);
  });
}

// ---- Scatter (opset 9-10 name) / ScatterElements ----
Status PrepareScatterElements(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "indices"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "updates"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt32, DType::kInt64}));
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  if (upd.dtype() != data.dtype())
    return NodeError(ctx, "updates has dtype {}, expected the dtype of data ({})",
                     DTypeName(upd.dtype()), DTypeName(data.dtype()));
  if (upd.shape() != idx.shape())
    return NodeError(ctx, "updates has shape {}, expected the shape of indices {}",
                     ShapeToString(upd.shape()), ShapeToString(idx.shape()));
  Reduction r;
  FERRY_RETURN_IF_ERROR(ParseReduction(ctx, &r));
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), data.rank()));
  FERRY_RETURN_IF_ERROR(CheckElementsShape(ctx, data.shape(), idx.shape(), axis));
  FERRY_RETURN_IF_ERROR(CheckIndexValues(ctx, idx, "indices", axis, data.shape()));
  ctx.set_output(0, data.dtype(), data.shape());
  return Status::Ok();
}

void RunScatterElements(OpContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  Tensor& out = ctx.output(0);
  Reduction r = Reduction::kNone;
  (void)ParseReduction(ctx, &r);
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < 0) axis += data.rank();
  CopyElements(data.dtype(), data.raw(), out.raw(), data.size());
  std::vector<int64_t> is = Strides(idx.shape()), ds = Strides(data.shape());
  // Sequential, in index order: duplicates reduce (or the last one wins) as the reference does.
  for (int64_t i = 0; i < idx.size(); ++i)
    CombineRange(r, data.dtype(), upd.raw(), i, out.raw(),
                 ElementsOffset(idx, is, ds, data.shape(), axis, i), 1);
}

// ---- GatherND / ScatterND: index tuples along the last dim of indices ----

// Checks every tuple component j of `idx` (last dim k) lies in [-s, s) for s = data dim
// first_dim + j.
Status CheckTupleValues(const OpContext& ctx, const Tensor& idx, const Shape& data_shape,
                        size_t first_dim) {
  int64_t k = idx.dim(idx.rank() - 1);
  for (int64_t i = 0; i < idx.size(); ++i) {
    size_t d = first_dim + static_cast<size_t>(i % k);
    int64_t dim = data_shape[d], v = IndexAt(idx, i);
    if (v < -dim || v >= dim)
      return NodeError(
          ctx, "indices value {} (element {}) is out of range [{}, {}] for dim {} of data shape {}",
          v, i, -dim, dim - 1, d, ShapeToString(data_shape));
  }
  return Status::Ok();
}

// Data offset of the index tuple starting at indices element `t * k`, relative to the start of
// its batch (strides are data's, from dim first_dim on).
int64_t TupleOffset(const Tensor& idx, int64_t t, int64_t k, const Shape& data_shape,
                    const std::vector<int64_t>& strides, size_t first_dim) {
  int64_t off = 0;
  for (int64_t j = 0; j < k; ++j) {
    size_t d = first_dim + static_cast<size_t>(j);
    off += WrapIndex(IndexAt(idx, t * k + j), data_shape[d]) * strides[d];
  }
  return off;
}

Status PrepareGatherND(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "indices"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt64, DType::kInt32}));
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  int64_t b = ctx.attr_int("batch_dims", 0);
  int64_t r = data.rank(), q = idx.rank();
  if (r < 1 || q < 1)
    return NodeError(ctx, "data rank {} and indices rank {} must both be >= 1", r, q);
  if (b < 0 || b >= std::min(r, q))
    return NodeError(ctx,
                     "batch_dims {} is out of range [0, {}) for data rank {} and indices rank {}",
                     b, std::min(r, q), r, q);
  for (int64_t d = 0; d < b; ++d)
    if (data.dim(d) != idx.dim(d))
      return NodeError(ctx, "batch dim {} differs: data shape {}, indices shape {}", d,
                       ShapeToString(data.shape()), ShapeToString(idx.shape()));
  int64_t k = idx.dim(q - 1);
  if (k < 1 || k > r - b)
    return NodeError(ctx, "indices last dim is {}, expected 1 to {} (data rank {} - batch_dims {})",
                     k, r - b, r, b);
  FERRY_RETURN_IF_ERROR(CheckTupleValues(ctx, idx, data.shape(), static_cast<size_t>(b)));
  Shape out(idx.shape().begin(), idx.shape().end() - 1);
  out.insert(out.end(), data.shape().begin() + b + k, data.shape().end());
  ctx.set_output(0, data.dtype(), std::move(out));
  return Status::Ok();
}

void RunGatherND(OpContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  Tensor& out = ctx.output(0);
  DType dt = data.dtype();
  size_t b = static_cast<size_t>(ctx.attr_int("batch_dims", 0));
  int64_t k = idx.dim(idx.rank() - 1);
  int64_t batches = DimProduct(data.shape(), 0, b);
  int64_t tuples = idx.size() / std::max<int64_t>(k, 1);  // total index tuples
  int64_t per_batch = batches > 0 ? tuples / batches : 0;
  int64_t slice = DimProduct(data.shape(), b + static_cast<size_t>(k), data.shape().size());
  int64_t batch_stride = DimProduct(data.shape(), b, data.shape().size());
  std::vector<int64_t> strides = Strides(data.shape());
  ParallelFor(ctx, tuples, 16, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t src =
          (t / per_batch) * batch_stride + TupleOffset(idx, t, k, data.shape(), strides, b);
      CopyElements(dt, ElemPtr(data.raw(), dt, src), ElemPtr(out.raw(), dt, t * slice), slice);
    }
  });
}

Status PrepareScatterND(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "indices"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "updates"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt64, DType::kInt32}));
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  if (upd.dtype() != data.dtype())
    return NodeError(ctx, "updates has dtype {}, expected the dtype of data ({})",
                     DTypeName(upd.dtype()), DTypeName(data.dtype()));
  Reduction red;
  FERRY_RETURN_IF_ERROR(ParseReduction(ctx, &red));
  int64_t r = data.rank(), q = idx.rank();
  if (r < 1 || q < 1)
    return NodeError(ctx, "data rank {} and indices rank {} must both be >= 1", r, q);
  int64_t k = idx.dim(q - 1);
  if (k < 1 || k > r)
    return NodeError(ctx, "indices last dim is {}, expected 1 to data rank {}", k, r);
  Shape want(idx.shape().begin(), idx.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + k, data.shape().end());
  if (upd.shape() != want)
    return NodeError(ctx, "updates has shape {}, expected {} (indices shape {}, data shape {})",
                     ShapeToString(upd.shape()), ShapeToString(want), ShapeToString(idx.shape()),
                     ShapeToString(data.shape()));
  FERRY_RETURN_IF_ERROR(CheckTupleValues(ctx, idx, data.shape(), 0));
  ctx.set_output(0, data.dtype(), data.shape());
  return Status::Ok();
}

void RunScatterND(OpContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  Tensor& out = ctx.output(0);
  Reduction r = Reduction::kNone;
  (void)ParseReduction(ctx, &r);
  int64_t k = idx.dim(idx.rank() - 1);
  int64_t tuples = idx.size() / k;
  int64_t slice = DimProduct(data.shape(), static_cast<size_t>(k), data.shape().size());
  std::vector<int64_t> strides = Strides(data.shape());
  CopyElements(data.dtype(), data.raw(), out.raw(), data.size());
  // Sequential, in index order: duplicates reduce (or the last one wins) as the reference does.
  for (int64_t t = 0; t < tuples; ++t)
    CombineRange(r, data.dtype(), upd.raw(), t * slice, out.raw(),
                 TupleOffset(idx, t, k, data.shape(), strides, 0), slice);
}

// ---- ReverseSequence ----
Status PrepareReverseSequence(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "sequence_lens"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt64, DType::kInt32}));
  const Tensor& x = ctx.input(0);
  const Tensor& lens = ctx.input(1);
  if (x.rank() < 2) return NodeError(ctx, "input has rank {}, expected >= 2", x.rank());
  int64_t ba = ctx.attr_int("batch_axis", 1), ta = ctx.attr_int("time_axis", 0);
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    return NodeError(ctx, "batch_axis {} and time_axis {} must be 0 and 1 in some order", ba, ta);
  int64_t batch = x.dim(ba), time = x.dim(ta);
  if (lens.rank() != 1 || lens.dim(0) != batch)
    return NodeError(ctx, "sequence_lens has shape {}, expected [{}] (the batch dim)",
                     ShapeToString(lens.shape()), batch);
  for (int64_t i = 0; i < batch; ++i) {
    int64_t v = IndexAt(lens, i);
    if (v < 0 || v > time)
      return NodeError(ctx, "sequence_lens value {} (batch {}) is out of range [0, {}]", v, i,
                       time);
  }
  ctx.set_output(0, x.dtype(), x.shape());
  return Status::Ok();
}

void RunReverseSequence(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& lens = ctx.input(1);
  Tensor& out = ctx.output(0);
  DType dt = x.dtype();
  int64_t ba = ctx.attr_int("batch_axis", 1), ta = ctx.attr_int("time_axis", 0);
  std::vector<int64_t> strides = Strides(x.shape());
  int64_t inner = DimProduct(x.shape(), 2, x.shape().size());
  for (int64_t b = 0; b < x.dim(ba); ++b) {
    int64_t len = IndexAt(lens, b);
    for (int64_t t = 0; t < x.dim(ta); ++t) {
      int64_t src_t = t < len ? len - 1 - t : t;
      int64_t src = b * strides[ba] + src_t * strides[ta];
      int64_t dst = b * strides[ba] + t * strides[ta];
      CopyElements(dt, ElemPtr(x.raw(), dt, src), ElemPtr(out.raw(), dt, dst), inner);
    }
  }
}

constexpr OpDef kOps[] = {
    {"", "Gather", 1, nullptr, PrepareGather, RunGather},
    {"", "GatherElements", 11, nullptr, PrepareGatherElements, RunGatherElements},
    {"", "GatherND", 11, nullptr, PrepareGatherND, RunGatherND},
    {"", "Scatter", 9, nullptr, PrepareScatterElements, RunScatterElements},
    {"", "ScatterElements", 11, nullptr, PrepareScatterElements, RunScatterElements},
    {"", "ScatterND", 11, nullptr, PrepareScatterND, RunScatterND},
    {"", "ReverseSequence", 10, nullptr, PrepareReverseSequence, RunReverseSequence},
};

}  // namespace

std::span<const OpDef> IndexOps() {
  return kOps;
}

}  // namespace ferry::ops
