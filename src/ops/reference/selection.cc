// Reference kernels: Compress, NonZero, OneHot, TopK, Unique (selection by value).
#include <numeric>

#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

// ---- shared helpers ----

const void* ElemPtr(const void* base, DType dt, int64_t i) {
  return static_cast<const char*>(base) + i * static_cast<int64_t>(DTypeSize(dt));
}
void* ElemPtr(void* base, DType dt, int64_t i) {
  return static_cast<char*>(base) + i * static_cast<int64_t>(DTypeSize(dt));
}

int64_t DimProduct(const Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

// Three-way comparison giving a total order: floats compare numerically (-0 == +0) with every
// NaN equal to every other and greater than any number (numpy's sort order).
template <typename T>
int Compare3(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, bool>) {
    return a < b ? -1 : (b < a ? 1 : 0);
  } else {
    using C = ComputeType<T>;
    C x = static_cast<C>(a), y = static_cast<C>(b);
    if constexpr (std::is_floating_point_v<C>) {
      bool nx = std::isnan(x), ny = std::isnan(y);
      if (nx || ny) return nx == ny ? 0 : (nx ? 1 : -1);
    }
    return x < y ? -1 : (y < x ? 1 : 0);
  }
}

template <typename T>
bool IsNonZero(const T& v) {
  if constexpr (std::is_same_v<T, std::string>)
    return !v.empty();
  else if constexpr (std::is_same_v<T, bool>)
    return v;
  else
    return static_cast<ComputeType<T>>(v) != ComputeType<T>(0);
}

// ---- Compress ----

// Selected positions along the compressed dim (the flattened input when there is no axis).
std::vector<int64_t> CompressSelection(const Tensor& cond, int64_t dim) {
  std::vector<int64_t> sel;
  const bool* c = cond.data<bool>();
  for (int64_t i = 0; i < std::min(cond.size(), dim); ++i)
    if (c[i]) sel.push_back(i);
  return sel;
}

Status PrepareCompress(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "condition"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kBool}));
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.rank() != 1) return NodeError(ctx, "condition has rank {}, expected 1", cond.rank());
  bool has_axis = ctx.has_attr("axis");
  int64_t axis = 0;
  if (has_axis) {
    FERRY_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, ctx.attr_int("axis", 0), x.rank()));
  }
  int64_t dim = has_axis ? x.dim(axis) : x.size();
  // A shorter condition drops the tail; a longer one may only be false past the end.
  for (int64_t i = dim; i < cond.size(); ++i)
    if (cond.data<bool>()[i])
      return NodeError(ctx, "condition[{}] is true but the compressed {} has only {} entries", i,
                       has_axis ? fmt::format("axis {}", axis) : std::string("input"), dim);
  int64_t count = static_cast<int64_t>(CompressSelection(cond, dim).size());
  Shape out = {count};
  if (has_axis) {
    out = x.shape();
    out[static_cast<size_t>(axis)] = count;
  }
  ctx.set_output(0, x.dtype(), std::move(out));
  return Status::Ok();
}

void RunCompress(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  DType dt = x.dtype();
  bool has_axis = ctx.has_attr("axis");
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < 0) axis += x.rank();
  size_t a = static_cast<size_t>(axis);
  int64_t outer = has_axis ? DimProduct(x.shape(), 0, a) : 1;
  int64_t dim = has_axis ? x.dim(axis) : x.size();
  int64_t inner = has_axis ? DimProduct(x.shape(), a + 1, x.shape().size()) : 1;
  std::vector<int64_t> sel = CompressSelection(ctx.input(1), dim);
  int64_t n = static_cast<int64_t>(sel.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      CopyElements(dt, ElemPtr(x.raw(), dt, (o * dim + sel[static_cast<size_t>(j)]) * inner),
                   ElemPtr(out.raw(), dt, (o * n + j) * inner), inner);
}

// ---- NonZero: output [rank, count] (a scalar counts as rank 1, as numpy does) ----
Status PrepareNonZero(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  return Status::Ok();
}

void RunNonZero(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> hits;
  VisitDType(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* d = x.data<T>();
    for (int64_t i = 0; i < x.size(); ++i)
      if (IsNonZero(d[i])) hits.push_back(i);
  });
  Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
  std::vector<int64_t> strides = Strides(shape);
  int64_t n = static_cast<int64_t>(hits.size());
  Tensor& out = ctx.allocate_output(0, DType::kInt64, {static_cast<int64_t>(shape.size()), n});
  int64_t* o = out.data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    for (size_t d = 0; d < shape.size(); ++d) {
      o[static_cast<int64_t>(d) * n + j] = rem / strides[d];
      rem %= strides[d];
    }
  }
}

// ---- OneHot ----
int64_t OneHotDepth(const OpContext& ctx) {
  return static_cast<int64_t>(std::trunc(ctx.input(1).GetAsDouble(0)));
}

// Index element i as a position in [0, depth), or -1 when it selects nothing. Non-integer
// indices are truncated toward zero; negative ones count from the end since opset 11.
int64_t OneHotTarget(const OpContext& ctx, const Tensor& idx, int64_t i, int64_t depth) {
  double v = std::trunc(idx.GetAsDouble(i));
  bool allow_negative = ctx.opset() >= 11;
  double lo = allow_negative ? -static_cast<double>(depth) : 0.0;
  if (!(v >= lo && v < static_cast<double>(depth))) return -1;  // NaN included
  int64_t t = static_cast<int64_t>(v);
  return t < 0 ? t + depth : t;
}

Status PrepareOneHot(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "indices"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "depth"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "values"));
  const Tensor& idx = ctx.input(0);
  const Tensor& depth_t = ctx.input(1);
  const Tensor& values = ctx.input(2);
  if (!IsNumeric(idx.dtype()))
    return NodeUnsupported(ctx, "indices has dtype {}, expected a numeric type",
                           DTypeName(idx.dtype()));
  if (!IsNumeric(depth_t.dtype()))
    return NodeUnsupported(ctx, "depth has dtype {}, expected a numeric type",
                           DTypeName(depth_t.dtype()));
  if (depth_t.size() != 1 || depth_t.rank() > 1)
    return NodeError(ctx, "depth has shape {}, expected a scalar or a 1-element vector",
                     ShapeToString(depth_t.shape()));
  double depth_v = depth_t.GetAsDouble(0);
  if (!(depth_v >= 0 && depth_v < 9.0e15))
    return NodeError(ctx, "depth is {}, expected a non-negative value", depth_v);
  if (values.rank() != 1 || values.dim(0) != 2)
    return NodeError(ctx, "values has shape {}, expected [2] ([off_value, on_value])",
                     ShapeToString(values.shape()));
  int64_t r = idx.rank();
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", -1), r + 1));
  Shape out = idx.shape();
  out.insert(out.begin() + axis, OneHotDepth(ctx));
  ctx.set_output(0, values.dtype(), std::move(out));
  return Status::Ok();
}

void RunOneHot(OpContext& ctx) {
  const Tensor& idx = ctx.input(0);
  const Tensor& values = ctx.input(2);
  Tensor& out = ctx.output(0);
  DType dt = values.dtype();
  size_t elem = DTypeSize(dt);
  int64_t depth = OneHotDepth(ctx);
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += idx.rank() + 1;
  size_t a = static_cast<size_t>(axis);
  int64_t outer = DimProduct(idx.shape(), 0, a);
  int64_t inner = DimProduct(idx.shape(), a, idx.shape().size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      int64_t target = OneHotTarget(ctx, idx, o * inner + in, depth);
      for (int64_t d = 0; d < depth; ++d)
        CopyElement(dt, values.raw(), d == target ? 1 : 0, out.raw(), (o * depth + d) * inner + in,
                    elem);
    }
  }
}

// ---- TopK (k: attribute before opset 10, input after; largest/sorted since opset 11) ----
Result<int64_t> TopKValue(const OpContext& ctx) {
  if (ctx.opset() < 10) {
    if (!ctx.has_attr("k")) return NodeError(ctx, "attribute k is required before opset 10");
    return ctx.attr_int("k", 0);
  }
  const Tensor& k = ctx.input(1);
  if (k.dtype() != DType::kInt64 || k.size() != 1 || k.rank() > 1)
    return NodeError(ctx, "K has dtype {} and shape {}, expected a 1-element int64 tensor",
                     DTypeName(k.dtype()), ShapeToString(k.shape()));
  return k.data<int64_t>()[0];
}

Status PrepareTopK(OpContext& ctx) {
  if (ctx.opset() < 10) {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  } else {
    FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "K"));
  }
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  const Tensor& x = ctx.input(0);
  if (!IsNumeric(x.dtype()))
    return NodeUnsupported(ctx, "X has dtype {}, expected a numeric type", DTypeName(x.dtype()));
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", -1), x.rank()));
  FERRY_ASSIGN_OR_RETURN(int64_t k, TopKValue(ctx));
  if (k < 0 || k > x.dim(axis))
    return NodeError(ctx, "k is {}, expected 0 to {} (dim {} of X shape {})", k, x.dim(axis), axis,
                     ShapeToString(x.shape()));
  int64_t largest = ctx.attr_int("largest", 1), sorted = ctx.attr_int("sorted", 1);
  if ((largest != 0 && largest != 1) || (sorted != 0 && sorted != 1))
    return NodeError(ctx, "largest {} and sorted {} must each be 0 or 1", largest, sorted);
  Shape out = x.shape();
  out[static_cast<size_t>(axis)] = k;
  ctx.set_output(0, x.dtype(), out);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kInt64, out);
  return Status::Ok();
}

void RunTopK(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.attr_int("axis", -1);
  if (axis < 0) axis += x.rank();
  size_t a = static_cast<size_t>(axis);
  int64_t k = TopKValue(ctx).value();
  bool largest = ctx.attr_int("largest", 1) != 0;
  int64_t outer = DimProduct(x.shape(), 0, a);
  int64_t dim = x.dim(axis);
  int64_t inner = DimProduct(x.shape(), a + 1, x.shape().size());
  Tensor& values = ctx.output(0);
  int64_t* indices = ctx.num_outputs() > 1 ? ctx.output(1).data<int64_t>() : nullptr;
  VisitNumeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = x.data<T>();
    T* dst = values.data<T>();
    std::vector<int64_t> order(static_cast<size_t>(dim));
    // Sorted output always (valid for sorted=0 too); ties keep the lower index first.
    auto before = [&](int64_t base, int64_t i, int64_t j) {
      int c = Compare3(src[base + i * inner], src[base + j * inner]);
      if (c == 0) return i < j;
      return largest ? c > 0 : c < 0;
    };
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        int64_t base = o * dim * inner + in;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int64_t i, int64_t j) { return before(base, i, j); });
        for (int64_t j = 0; j < k; ++j) {
          int64_t from = order[static_cast<size_t>(j)];
          int64_t to = o * k * inner + j * inner + in;
          dst[to] = src[base + from * inner];
          if (indices) indices[to] = from;
        }
      }
    }
  });
}

// ---- Unique (sorted or in first-occurrence order; flattened or slices along axis) ----
Status PrepareUnique(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  if (ctx.has_attr("axis")) {
    FERRY_RETURN_IF_ERROR(
        NormalizeAxis(ctx, ctx.attr_int("axis", 0), ctx.input(0).rank()).status());
  }
  int64_t sorted = ctx.attr_int("sorted", 1);
  if (sorted != 0 && sorted != 1) return NodeError(ctx, "sorted is {}, expected 0 or 1", sorted);
  return Status::Ok();
}

void RunUnique(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  DType dt = x.dtype();
  bool has_axis = ctx.has_attr("axis");
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < 0) axis += x.rank();
  size_t a = static_cast<size_t>(axis);
  // Slice s holds elements (o, s, in) at (o * n + s) * inner + in.
  int64_t outer = has_axis ? DimProduct(x.shape(), 0, a) : 1;
  int64_t n = has_axis ? x.dim(axis) : x.size();
  int64_t inner = has_axis ? DimProduct(x.shape(), a + 1, x.shape().size()) : 1;

  // Slices ordered by value (lexicographic over (o, in)); stable, so among equal slices the
  // first occurrence comes first.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::vector<int64_t> group_of(static_cast<size_t>(n));
  std::vector<int64_t> first, count;  // per unique slice, in sorted order
  VisitDType(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* d = x.data<T>();
    auto cmp = [&](int64_t s1, int64_t s2) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          int c = Compare3(d[(o * n + s1) * inner + in], d[(o * n + s2) * inner + in]);
          if (c != 0) return c;
        }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t i, int64_t j) { return cmp(i, j) < 0; });
    for (size_t p = 0; p < order.size(); ++p) {
      if (p == 0 || cmp(order[p - 1], order[p]) != 0) {
        first.push_back(order[p]);
        count.push_back(0);
      }
      group_of[static_cast<size_t>(order[p])] = static_cast<int64_t>(first.size()) - 1;
      ++count.back();
    }
  });
  int64_t u = static_cast<int64_t>(first.size());
  // rank[g]: output position of sorted group g.
  std::vector<int64_t> rank(first.size());
  std::iota(rank.begin(), rank.end(), int64_t{0});
  if (ctx.attr_int("sorted", 1) == 0) {
    std::vector<int64_t> by_first(first.size());
    std::iota(by_first.begin(), by_first.end(), int64_t{0});
    std::sort(by_first.begin(), by_first.end(), [&](int64_t g1, int64_t g2) {
      return first[static_cast<size_t>(g1)] < first[static_cast<size_t>(g2)];
    });
    for (size_t p = 0; p < by_first.size(); ++p)
      rank[static_cast<size_t>(by_first[p])] = static_cast<int64_t>(p);
  }

  Shape y_shape = {u};
  if (has_axis) {
    y_shape = x.shape();
    y_shape[a] = u;
  }
  Tensor& y = ctx.allocate_output(0, dt, y_shape);
  for (size_t g = 0; g < first.size(); ++g) {
    int64_t r = rank[g];
    for (int64_t o = 0; o < outer; ++o)
      CopyElements(dt, ElemPtr(x.raw(), dt, (o * n + first[g]) * inner),
                   ElemPtr(y.raw(), dt, (o * u + r) * inner), inner);
  }
  if (ctx.num_outputs() > 1) {
    int64_t* p = ctx.allocate_output(1, DType::kInt64, {u}).data<int64_t>();
    for (size_t g = 0; g < first.size(); ++g) p[rank[g]] = first[g];
  }
  if (ctx.num_outputs() > 2) {
    int64_t* p = ctx.allocate_output(2, DType::kInt64, {n}).data<int64_t>();
    for (int64_t s = 0; s < n; ++s)
      p[s] = rank[static_cast<size_t>(group_of[static_cast<size_t>(s)])];
  }
  if (ctx.num_outputs() > 3) {
    int64_t* p = ctx.allocate_output(3, DType::kInt64, {u}).data<int64_t>();
    for (size_t g = 0; g < first.size(); ++g) p[rank[g]] = count[g];
  }
}

constexpr OpDef kOps[] = {
    {"", "Compress", 9, nullptr, PrepareCompress, RunCompress},
    {"", "NonZero", 9, nullptr, PrepareNonZero, RunNonZero},
    {"", "OneHot", 9, nullptr, PrepareOneHot, RunOneHot},
    {"", "TopK", 1, nullptr, PrepareTopK, RunTopK},
    {"", "Unique", 11, nullptr, PrepareUnique, RunUnique},
};

}  // namespace

std::span<const OpDef> SelectionOps() {
  return kOps;
}

}  // namespace ferry::ops
