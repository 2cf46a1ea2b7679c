// Reference kernels that gather elements through per-axis index maps: Transpose, Slice, Expand,
// Tile, Pad, DepthToSpace, SpaceToDepth (the reshaping ops, Concat and Split are in
// shape_ops2.cc). Every dtype works, strings included: elements are copied with CopyElement(s).
#include "ops/reference/shape_util.h"

namespace ferry::ops {

namespace {

// ---- shared helpers ----

using shape_util::CheckedProduct;
using shape_util::ElemPtr;
using shape_util::IntsInput;
using shape_util::NormalizeAxes;
using shape_util::OutputFits;

// A gather of the input into the output, axis by axis:
//   out[o_0, ..., o_{r-1}] = in[sum_d idx_d(o_d) * strides[d]]
// with idx_d(o) = maps[d][o], or o when maps[d] is empty. An index of -1 on any axis selects
// the fill element instead. Covers transposes (permuted strides), broadcasts (zero strides),
// slices, tiles and pads.
struct CopyPlan {
  Shape out_shape;
  std::vector<int64_t> strides;
  std::vector<std::vector<int64_t>> maps;
};

void RunCopyPlan(const OpContext& ctx, const CopyPlan& p, DType dt, const void* src, void* dst,
                 const void* fill = nullptr) {
  const size_t elem = DTypeSize(dt);
  const size_t rank = p.out_shape.size();
  if (rank == 0) {
    CopyElement(dt, src, 0, dst, 0, elem);
    return;
  }
  const int64_t total = NumElements(p.out_shape);
  if (total == 0) return;
  const int64_t inner = p.out_shape.back();
  const int64_t rows = total / inner;
  const std::vector<int64_t>& inner_map = p.maps[rank - 1];
  const int64_t inner_stride = p.strides[rank - 1];
  const bool contiguous = inner_map.empty() && inner_stride == 1;
  ParallelFor(ctx, rows, std::max<int64_t>(1, 4096 / inner), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> coord(rank - 1, 0);
    int64_t rem = begin;
    for (size_t d = rank - 1; d-- > 0;) {
      coord[d] = rem % p.out_shape[d];
      rem /= p.out_shape[d];
    }
    for (int64_t row = begin; row < end; ++row) {
      int64_t base = 0;
      bool filled = false;
      for (size_t d = 0; d + 1 < rank; ++d) {
        int64_t ix = p.maps[d].empty() ? coord[d] : p.maps[d][static_cast<size_t>(coord[d])];
        if (ix < 0)
          filled = true;
        else
          base += ix * p.strides[d];
      }
      const int64_t out0 = row * inner;
      if (filled) {
        for (int64_t j = 0; j < inner; ++j) CopyElement(dt, fill, 0, dst, out0 + j, elem);
      } else if (contiguous) {
        CopyElements(dt, ElemPtr(dt, src, base), ElemPtr(dt, dst, out0), inner);
      } else {
        for (int64_t j = 0; j < inner; ++j) {
          int64_t ix = inner_map.empty() ? j : inner_map[static_cast<size_t>(j)];
          if (ix < 0)
            CopyElement(dt, fill, 0, dst, out0 + j, elem);
          else
            CopyElement(dt, src, base + ix * inner_stride, dst, out0 + j, elem);
        }
      }
      for (size_t d = rank - 1; d-- > 0;) {
        if (++coord[d] < p.out_shape[d]) break;
        coord[d] = 0;
      }
    }
  });
}

// The plan that writes the input, viewed with `in_shape`, transposed by `perm`.
CopyPlan TransposePlan(const Shape& in_shape, const std::vector<int64_t>& perm) {
  CopyPlan p;
  std::vector<int64_t> in_strides = Strides(in_shape);
  for (int64_t a : perm) {
    p.out_shape.push_back(in_shape[static_cast<size_t>(a)]);
    p.strides.push_back(in_strides[static_cast<size_t>(a)]);
  }
  p.maps.resize(perm.size());
  return p;
}

// ---- Transpose ----
Result<std::vector<int64_t>> TransposePerm(const OpContext& ctx) {
  const int64_t r = ctx.input(0).rank();
  std::vector<int64_t> perm = ctx.attr_ints("perm");
  if (!ctx.has_attr("perm"))
    for (int64_t d = r - 1; d >= 0; --d) perm.push_back(d);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  bool ok = static_cast<int64_t>(perm.size()) == r;
  for (int64_t a : perm) {
    if (!ok || a < 0 || a >= r || seen[static_cast<size_t>(a)]) {
      ok = false;
      break;
    }
    seen[static_cast<size_t>(a)] = true;
  }
  if (!ok)
    return NodeError(ctx, "perm {} is not a permutation of the {} axes of data {}",
                     ShapeToString(perm), r, ShapeToString(ctx.input(0).shape()));
  return perm;
}

Status PrepareTranspose(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> perm, TransposePerm(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), TransposePlan(ctx.input(0).shape(), perm).out_shape);
  return Status::Ok();
}

void RunTranspose(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  CopyPlan p = TransposePlan(x.shape(), TransposePerm(ctx).value());
  RunCopyPlan(ctx, p, x.dtype(), x.raw(), ctx.output(0).raw());
}

// ---- Slice (starts/ends/axes attributes before opset 10; inputs with steps since) ----
Result<CopyPlan> SlicePlan(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    if (!ctx.has_attr("starts") || !ctx.has_attr("ends"))
      return NodeError(ctx, "the 'starts' and 'ends' attributes are required");
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    axes = ctx.attr_ints("axes");
  } else {
    const std::initializer_list<DType> kIndex = {DType::kInt32, DType::kInt64};
    FERRY_ASSIGN_OR_RETURN(starts, IntsInput(ctx, 1, "starts", kIndex));
    FERRY_ASSIGN_OR_RETURN(ends, IntsInput(ctx, 2, "ends", kIndex));
    if (ctx.has_input(3)) {
      FERRY_ASSIGN_OR_RETURN(axes, IntsInput(ctx, 3, "axes", kIndex));
    }
    if (ctx.has_input(4)) {
      FERRY_ASSIGN_OR_RETURN(steps, IntsInput(ctx, 4, "steps", kIndex));
    }
  }
  const size_t n = starts.size();
  if (axes.empty() && !(ctx.opset() < 10 ? ctx.has_attr("axes") : ctx.has_input(3)))
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty() && !ctx.has_input(4)) steps.assign(n, 1);
  if (ends.size() != n || axes.size() != n || steps.size() != n)
    return NodeError(ctx,
                     "starts, ends, axes and steps have {}, {}, {} and {} entries, expected equal",
                     n, ends.size(), axes.size(), steps.size());
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> norm, NormalizeAxes(ctx, axes, x.rank(), "axis"));
  CopyPlan p{x.shape(), Strides(x.shape()), {}};
  p.maps.resize(static_cast<size_t>(x.rank()));
  for (size_t i = 0; i < n; ++i) {
    const int64_t dim = x.dim(norm[i]), step = steps[i];
    if (step == 0) return NodeError(ctx, "steps[{}] (for axis {}) is 0", i, axes[i]);
    int64_t s = starts[i], e = ends[i], count = 0;
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      if (e > s) count = (e - s - 1) / step + 1;
    } else if (dim > 0) {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      const int64_t mag =
          step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
      if (s > e) count = (s - e - 1) / mag + 1;
    }
    std::vector<int64_t>& map = p.maps[static_cast<size_t>(norm[i])];
    for (int64_t k = 0; k < count; ++k) map.push_back(s + k * step);
    p.out_shape[static_cast<size_t>(norm[i])] = count;
  }
  return p;
}

Status PrepareSlice(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(ctx.opset() < 10 ? CheckArity(ctx, 1, 1) : CheckArity(ctx, 3, 5));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  FERRY_ASSIGN_OR_RETURN(CopyPlan p, SlicePlan(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), p.out_shape);
  return Status::Ok();
}

void RunSlice(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  RunCopyPlan(ctx, SlicePlan(ctx).value(), x.dtype(), x.raw(), ctx.output(0).raw());
}

// ---- Expand ----
Result<CopyPlan> ExpandPlan(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> shape, IntsInput(ctx, 1, "shape"));
  for (int64_t d : shape)
    if (d < 0) return NodeError(ctx, "shape {} has a negative dim", ShapeToString(shape));
  FERRY_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(ctx, {x.shape(), shape}));
  FERRY_RETURN_IF_ERROR(CheckedProduct(ctx, out).status());
  CopyPlan p{out, std::vector<int64_t>(out.size(), 0),
             std::vector<std::vector<int64_t>>(out.size())};
  std::vector<int64_t> in_strides = Strides(x.shape());
  const size_t off = out.size() - x.shape().size();
  for (size_t d = 0; d < x.shape().size(); ++d)
    if (x.shape()[d] != 1) p.strides[off + d] = in_strides[d];
  return p;
}

Status PrepareExpand(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_ASSIGN_OR_RETURN(CopyPlan p, ExpandPlan(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), p.out_shape);
  return Status::Ok();
}

void RunExpand(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  RunCopyPlan(ctx, ExpandPlan(ctx).value(), x.dtype(), x.raw(), ctx.output(0).raw());
}

// ---- Tile (opset 1: tiles and axis scalar inputs; since 6: a repeats vector) ----
// `prepare`: the output is checked against the memory budget (at run time it is allocated and
// charged already: a second check would count it twice).
Result<CopyPlan> TilePlan(const OpContext& ctx, bool prepare) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> repeats;
  if (ctx.opset() < 6) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> tiles, IntsInput(ctx, 1, "tiles"));
    FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> axis, IntsInput(ctx, 2, "axis"));
    if (tiles.size() != 1 || axis.size() != 1)
      return NodeError(ctx, "tiles and axis must hold one value each, have {} and {}", tiles.size(),
                       axis.size());
    FERRY_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(ctx, axis[0], x.rank()));
    repeats.assign(static_cast<size_t>(x.rank()), 1);
    repeats[static_cast<size_t>(a)] = tiles[0];
  } else {
    FERRY_ASSIGN_OR_RETURN(repeats, IntsInput(ctx, 1, "repeats"));
  }
  if (static_cast<int64_t>(repeats.size()) != x.rank())
    return NodeError(ctx, "repeats {} has {} entries, data {} has rank {}", ShapeToString(repeats),
                     repeats.size(), ShapeToString(x.shape()), x.rank());
  CopyPlan p{x.shape(), Strides(x.shape()), {}};
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0)
      return NodeError(ctx, "repeats {} has a negative entry", ShapeToString(repeats));
    if (__builtin_mul_overflow(x.shape()[d], repeats[d], &p.out_shape[d]))
      return NodeError(ctx, "repeats {} overflow axis {} of data {}", ShapeToString(repeats), d,
                       ShapeToString(x.shape()));
  }
  FERRY_ASSIGN_OR_RETURN(const int64_t total, OutputFits(ctx, p.out_shape, x.dtype(), prepare));
  if (total == 0) return p;  // nothing to copy (RunCopyPlan reads no map)
  for (size_t d = 0; d < repeats.size(); ++d) {
    std::vector<int64_t> map(static_cast<size_t>(p.out_shape[d]));
    for (size_t o = 0; o < map.size(); ++o) map[o] = static_cast<int64_t>(o) % x.shape()[d];
    p.maps.push_back(std::move(map));
  }
  return p;
}

Status PrepareTile(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(ctx.opset() < 6 ? CheckArity(ctx, 3, 3) : CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_ASSIGN_OR_RETURN(CopyPlan p, TilePlan(ctx, true));
  ctx.set_output(0, ctx.input(0).dtype(), p.out_shape);
  return Status::Ok();
}

void RunTile(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  RunCopyPlan(ctx, TilePlan(ctx, false).value(), x.dtype(), x.raw(), ctx.output(0).raw());
}

// ---- Pad (paddings/pads and value attributes before opset 11; pads and constant_value inputs
// since; axes input since 18; wrap mode since 19) ----
// Negative pads crop; the remaining pads then extend the cropped data by the mode's rule.
Result<CopyPlan> PadPlan(const OpContext& ctx, bool prepare) {  // as TilePlan
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  std::vector<int64_t> pads, axes;
  if (ctx.opset() < 11) {
    const char* name = ctx.opset() < 2 ? "paddings" : "pads";
    if (!ctx.has_attr(name)) return NodeError(ctx, "the '{}' attribute is missing", name);
    pads = ctx.attr_ints(name);
  } else {
    FERRY_ASSIGN_OR_RETURN(pads, IntsInput(ctx, 1, "pads"));
  }
  if (ctx.opset() >= 18 && ctx.has_input(3)) {
    FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> raw,
                           IntsInput(ctx, 3, "axes", {DType::kInt32, DType::kInt64}));
    FERRY_ASSIGN_OR_RETURN(axes, NormalizeAxes(ctx, raw, r, "axis"));
  } else {
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  }
  const size_t n = axes.size();
  if (pads.size() != 2 * n)
    return NodeError(ctx, "pads {} has {} entries, expected {} for data {}", ShapeToString(pads),
                     pads.size(), 2 * n, ShapeToString(x.shape()));
  const std::string mode = ctx.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return NodeUnsupported(ctx, "mode '{}' is not one of constant, reflect, edge, wrap", mode);
  CopyPlan p{x.shape(), Strides(x.shape()), std::vector<std::vector<int64_t>>(x.shape().size())};
  for (size_t i = 0; i < n; ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const int64_t dim = x.shape()[a], begin = pads[i], end = pads[i + n];
    int64_t out = 0;
    if (__builtin_add_overflow(dim, begin, &out) || __builtin_add_overflow(out, end, &out))
      return NodeError(ctx, "pads {} overflow axis {} of data {}", ShapeToString(pads), a,
                       ShapeToString(x.shape()));
    if (out < 0)
      return NodeError(ctx, "pads {} crop axis {} of data {} below zero", ShapeToString(pads), a,
                       ShapeToString(x.shape()));
    p.out_shape[a] = out;
  }
  // Checked before the index maps (as long as the output's dims) are made.
  FERRY_ASSIGN_OR_RETURN(const int64_t total, OutputFits(ctx, p.out_shape, x.dtype(), prepare));
  if (total == 0) return p;  // nothing to copy (RunCopyPlan reads no map)
  for (size_t i = 0; i < n; ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const int64_t dim = x.shape()[a], begin = pads[i], end = pads[i + n];
    const int64_t out = p.out_shape[a];
    // The cropped extent [first, first + kept) of the input, then padded by max(begin, 0).
    const int64_t first = std::max<int64_t>(0, -begin);
    const int64_t kept = dim + std::min<int64_t>(begin, 0) + std::min<int64_t>(end, 0);
    const int64_t lead = std::max<int64_t>(begin, 0);
    if (mode != "constant" && kept <= 0 && out > 0)
      return NodeError(ctx, "{} padding of axis {} needs data, but it has no elements left", mode,
                       a);
    std::vector<int64_t> map(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      int64_t i_c = o - lead;
      if (i_c < 0 || i_c >= kept) {
        if (mode == "constant") {
          i_c = -1 - first;  // maps to -1 below
        } else if (mode == "edge") {
          i_c = std::clamp<int64_t>(i_c, 0, kept - 1);
        } else if (mode == "wrap") {
          i_c = ((i_c % kept) + kept) % kept;
        } else if (kept == 1) {
          i_c = 0;
        } else {
          const int64_t period = 2 * (kept - 1);
          i_c = ((i_c % period) + period) % period;
          if (i_c >= kept) i_c = period - i_c;
        }
      }
      map[static_cast<size_t>(o)] = first + i_c;
    }
    p.maps[a] = std::move(map);
  }
  return p;
}

Status PreparePad(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(ctx.opset() < 11 ? CheckArity(ctx, 1, 1)
                                         : CheckArity(ctx, 2, ctx.opset() < 18 ? 3 : 4));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "data"));
  const Tensor& x = ctx.input(0);
  if (ctx.opset() >= 11 && ctx.has_input(2)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "constant_value"));
    const Tensor& v = ctx.input(2);
    if (v.dtype() != x.dtype() || v.size() != 1)
      return NodeError(ctx, "constant_value is {} {}, expected one {} element",
                       DTypeName(v.dtype()), ShapeToString(v.shape()), DTypeName(x.dtype()));
  }
  FERRY_ASSIGN_OR_RETURN(CopyPlan p, PadPlan(ctx, true));
  ctx.set_output(0, x.dtype(), p.out_shape);
  return Status::Ok();
}

void RunPad(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor fill(x.dtype(), {});
  if (ctx.opset() >= 11) {
    if (ctx.has_input(2)) CopyElements(x.dtype(), ctx.input(2).raw(), fill.raw(), 1);
  } else {
    const float v = ctx.attr_float("value", 0.f);
    VisitPod(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>)
        fill.data<T>()[0] = v != 0.f;
      else
        fill.data<T>()[0] = static_cast<T>(static_cast<ComputeType<T>>(v));
    });
  }
  RunCopyPlan(ctx, PadPlan(ctx, false).value(), x.dtype(), x.raw(), ctx.output(0).raw(),
              fill.raw());
}

// ---- DepthToSpace (DCR or CRD mode since opset 11) and SpaceToDepth ----
// Both are a reshape to 6-D, a transpose and a reshape back; this builds the transpose plan.
Result<CopyPlan> BlockPlan(const OpContext& ctx, bool to_space) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4)
    return NodeError(ctx, "input has shape {}, expected rank 4 (N, C, H, W)",
                     ShapeToString(x.shape()));
  const int64_t b = ctx.attr_int("blocksize", 0);
  // b * b must not overflow: no real block is wider than 2^31.
  if (b <= 0 || b > (int64_t{1} << 31))
    return NodeError(ctx, "blocksize {} must be in [1, 2^31]", b);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (to_space) {
    if (c % (b * b) != 0)
      return NodeError(ctx, "channels {} are not divisible by blocksize^2 = {}", c, b * b);
    const std::string mode = ctx.opset() >= 11 ? ctx.attr_string("mode", "DCR") : "DCR";
    if (mode == "DCR") return TransposePlan({n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2});
    if (mode == "CRD") return TransposePlan({n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3});
    return NodeUnsupported(ctx, "mode '{}' is not DCR or CRD", mode);
  }
  if (h % b != 0 || w % b != 0)
    return NodeError(ctx, "spatial dims {}x{} are not divisible by blocksize {}", h, w, b);
  return TransposePlan({n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4});
}

template <bool kToSpace>
Status PrepareBlock(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(BlockPlan(ctx, kToSpace).status());
  const Tensor& x = ctx.input(0);
  const int64_t b = ctx.attr_int("blocksize", 0);
  Shape out = kToSpace ? Shape{x.dim(0), x.dim(1) / (b * b), x.dim(2) * b, x.dim(3) * b}
                       : Shape{x.dim(0), x.dim(1) * b * b, x.dim(2) / b, x.dim(3) / b};
  ctx.set_output(0, x.dtype(), out);
  return Status::Ok();
}

template <bool kToSpace>
void RunBlock(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  RunCopyPlan(ctx, BlockPlan(ctx, kToSpace).value(), x.dtype(), x.raw(), ctx.output(0).raw());
}

constexpr OpDef kOps[] = {
    {"", "Transpose", 1, nullptr, PrepareTranspose, RunTranspose},
    {"", "Slice", 1, nullptr, PrepareSlice, RunSlice},
    {"", "Expand", 8, nullptr, PrepareExpand, RunExpand},
    {"", "Tile", 1, nullptr, PrepareTile, RunTile},
    {"", "Pad", 1, nullptr, PreparePad, RunPad},
    {"", "DepthToSpace", 1, nullptr, PrepareBlock<true>, RunBlock<true>},
    {"", "SpaceToDepth", 1, nullptr, PrepareBlock<false>, RunBlock<false>},
};

}  // namespace

std::span<const OpDef> ShapeOps() {
  return kOps;
}

}  // namespace ferry::ops