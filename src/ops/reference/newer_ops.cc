// Reference kernels for ops added in opsets 18-24 that fit no older family: CenterCropPad (18),
// AffineGrid (20), DeformConv (19), TensorScatter (24), Swish (24).
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

Status RequireFloatInput(const OpContext& ctx, size_t i, std::string_view what) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  return RequireDType(ctx, i, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16});
}

// Stores `v` as element i of a float tensor of any width.
void StoreFloat(Tensor& t, int64_t i, double v) {
  VisitNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_integral_v<T>) t.data<T>()[i] = T(static_cast<ComputeType<T>>(v));
  });
}

// Sets every element of `t` to zero (empty strings for a string tensor).
void ZeroFill(Tensor& t) {
  if (t.dtype() == DType::kString)
    std::fill(t.data<std::string>(), t.data<std::string>() + t.size(), std::string());
  else
    std::memset(t.raw(), 0, t.nbytes());
}

// ---- CenterCropPad: crop or zero-pad each listed axis to `shape`, keeping the centre ----
// Per axis, the input index of output index o is o + offset, where offset = (dim - want) / 2
// when cropping (the extra element of an odd difference is cut at the end) and
// -((want - dim) / 2) when padding (the extra zero goes at the end); out of range reads zero.
Result<std::vector<int64_t>> CropPadOffsets(const OpContext& ctx, Shape* out) {
  const Tensor& x = ctx.input(0);
  const Tensor& want = ctx.input(1);
  const int64_t rank = x.rank();
  std::vector<int64_t> axes;
  if (ctx.has_attr("axes")) {
    for (int64_t a : ctx.attr_ints("axes")) {
      FERRY_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ctx, a, rank, "axes"));
      if (std::find(axes.begin(), axes.end(), n) != axes.end())
        return NodeError(ctx, "axes lists axis {} twice", n);
      axes.push_back(n);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  if (want.rank() != 1 || want.dim(0) != static_cast<int64_t>(axes.size()))
    return NodeError(ctx, "shape has shape {}, expected [{}] (one size per axis)",
                     ShapeToString(want.shape()), axes.size());
  *out = x.shape();
  std::vector<int64_t> offset(static_cast<size_t>(rank), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t w = want.GetAsInt64(static_cast<int64_t>(k)), dim = x.dim(axes[k]);
    if (w < 0) return NodeError(ctx, "shape[{}] is {}, expected >= 0", k, w);
    (*out)[static_cast<size_t>(axes[k])] = w;
    offset[static_cast<size_t>(axes[k])] = w <= dim ? (dim - w) / 2 : -((w - dim) / 2);
  }
  return offset;
}

Status PrepareCenterCropPad(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input_data"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "shape"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt32, DType::kInt64}));
  Shape out;
  FERRY_RETURN_IF_ERROR(CropPadOffsets(ctx, &out).status());
  ctx.set_output(0, ctx.input(0).dtype(), out);
  return Status::Ok();
}

void RunCenterCropPad(OpContext& ctx) {
  Shape shape;
  std::vector<int64_t> offset = CropPadOffsets(ctx, &shape).value();
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  ZeroFill(y);
  if (y.size() == 0) return;
  const size_t rank = shape.size();
  const std::vector<int64_t> in_strides = Strides(x.shape());
  const size_t elem = x.dtype() == DType::kString ? 0 : DTypeSize(x.dtype());
  std::vector<int64_t> idx(rank, 0);  // the output multi-index of element o
  for (int64_t o = 0; o < y.size(); ++o) {
    int64_t src = 0;
    bool inside = true;
    for (size_t a = 0; a < rank && inside; ++a) {
      const int64_t i = idx[a] + offset[a];
      inside = i >= 0 && i < x.dim(static_cast<int64_t>(a));
      src += i * in_strides[a];
    }
    if (inside) CopyElement(x.dtype(), x.raw(), src, y.raw(), o, elem);
    for (size_t a = rank; a-- > 0;) {
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
    }
  }
}

// ---- AffineGrid: grid[n, (d,) h, w] = theta[n] @ (x_w, y_h, (z_d,) 1) ----
// Base coordinates in [-1, 1] per spatial dim of size s: -1 + 2i / (s - 1) with align_corners
// (-1 when s is 1), else -1 + (2i + 1) / s (pixel centres).
Status PrepareAffineGrid(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireFloatInput(ctx, 0, "theta"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "size"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt64}));
  const Tensor& theta = ctx.input(0);
  const Tensor& size = ctx.input(1);
  if (size.rank() != 1 || (size.dim(0) != 4 && size.dim(0) != 5))
    return NodeError(ctx, "size has shape {}, expected [4] (N, C, H, W) or [5] (N, C, D, H, W)",
                     ShapeToString(size.shape()));
  const int64_t nsp = size.dim(0) - 2;
  std::vector<int64_t> sz = size.ToInt64Vector();
  for (int64_t d : sz)
    if (d < 0) return NodeError(ctx, "size {} has a negative value", ShapeToString(sz));
  if (theta.shape() != Shape{sz[0], nsp, nsp + 1})
    return NodeError(ctx, "theta has shape {}, expected [{}, {}, {}] for size {}",
                     ShapeToString(theta.shape()), sz[0], nsp, nsp + 1, ShapeToString(sz));
  Shape out{sz[0]};
  out.insert(out.end(), sz.begin() + 2, sz.end());
  out.push_back(nsp);
  ctx.set_output(0, theta.dtype(), out);
  return Status::Ok();
}

void RunAffineGrid(OpContext& ctx) {
  const Tensor& theta = ctx.input(0);
  Tensor& grid = ctx.output(0);
  const bool align = ctx.attr_int("align_corners", 0) != 0;
  const int64_t nsp = grid.shape().back();
  if (grid.size() == 0) return;  // a zero dim: the other sizes may be anything
  // Spatial dims innermost first: W, H(, D); coordinate k of a point is base[k][index along k].
  std::vector<std::vector<double>> base(static_cast<size_t>(nsp));
  for (int64_t k = 0; k < nsp; ++k) {
    const int64_t s = grid.dim(nsp - k);
    for (int64_t i = 0; i < s; ++i)
      base[static_cast<size_t>(k)].push_back(
          align ? (s > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(s - 1) : -1.0)
                : -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(s));
  }
  const int64_t points = grid.size() / std::max<int64_t>(1, grid.dim(0) * nsp);
  std::vector<double> p(static_cast<size_t>(nsp) + 1, 1.0);
  for (int64_t n = 0; n < grid.dim(0); ++n) {
    for (int64_t q = 0; q < points; ++q) {
      int64_t rest = q;
      for (int64_t k = 0; k < nsp; ++k) {  // q's index along W, then H, then D
        const int64_t s = grid.dim(nsp - k);
        p[static_cast<size_t>(k)] = base[static_cast<size_t>(k)][static_cast<size_t>(rest % s)];
        rest /= s;
      }
      for (int64_t r = 0; r < nsp; ++r) {
        double v = 0;
        for (int64_t c = 0; c <= nsp; ++c)
          v += theta.GetAsDouble((n * nsp + r) * (nsp + 1) + c) * p[static_cast<size_t>(c)];
        StoreFloat(grid, (n * points + q) * nsp + r, v);
      }
    }
  }
}

// ---- DeformConv (2-D): Conv whose taps sample X bilinearly at offset positions ----
// Tap (ki, kj) of output (oh, ow) reads X at (oh * sH - padT + ki * dH + offset_h,
// ow * sW - padL + kj * dW + offset_w), bilinear over the four neighbours with zeros outside X,
// times mask (default 1). offset is [N, offset_group * kH * kW * 2, oH, oW] ((h, w) pairs per
// tap), mask [N, offset_group * kH * kW, oH, oW]; input channel c uses offset group
// c / (C / offset_group).
struct DeformGeom {
  int64_t n = 0, c = 0, h = 0, w = 0, oc = 0, kh = 0, kw = 0, oh = 0, ow = 0;
  int64_t group = 1, offset_group = 1;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
};

Result<DeformGeom> GetDeformGeom(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& off = ctx.input(2);
  if (x.rank() != 4)
    return NodeUnsupported(ctx, "X has rank {}: only 2-D DeformConv (rank 4) is supported",
                           x.rank());
  if (w.rank() != 4) return NodeError(ctx, "W has rank {}, expected 4", w.rank());
  DeformGeom g;
  g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
  g.oc = w.dim(0), g.kh = w.dim(2), g.kw = w.dim(3);
  g.group = ctx.attr_int("group", 1);
  g.offset_group = ctx.attr_int("offset_group", 1);
  if (g.group <= 0 || g.c % g.group != 0 || g.oc % g.group != 0 || w.dim(1) * g.group != g.c)
    return NodeError(ctx, "group {} does not fit X channels {} and W shape {}", g.group, g.c,
                     ShapeToString(w.shape()));
  if (g.offset_group <= 0 || g.c % g.offset_group != 0)
    return NodeError(ctx, "offset_group {} does not divide X channels {}", g.offset_group, g.c);
  auto ints = [&](std::string_view name, size_t n, int64_t def) {
    std::vector<int64_t> v = ctx.attr_ints(name);
    return v.empty() ? std::vector<int64_t>(n, def) : v;
  };
  std::vector<int64_t> ks = ints("kernel_shape", 2, 0), st = ints("strides", 2, 1),
                       dl = ints("dilations", 2, 1), pads = ints("pads", 4, 0);
  if (ctx.has_attr("kernel_shape") && ks != std::vector<int64_t>{g.kh, g.kw})
    return NodeError(ctx, "kernel_shape {} differs from W's spatial shape [{}, {}]",
                     ShapeToString(ks), g.kh, g.kw);
  if (st.size() != 2 || st[0] <= 0 || st[1] <= 0)
    return NodeError(ctx, "strides {} must be 2 positive values", ShapeToString(st));
  if (dl.size() != 2 || dl[0] <= 0 || dl[1] <= 0)
    return NodeError(ctx, "dilations {} must be 2 positive values", ShapeToString(dl));
  if (pads.size() != 4 || *std::min_element(pads.begin(), pads.end()) < 0)
    return NodeError(ctx, "pads {} must be 4 values >= 0", ShapeToString(pads));
  g.sh = st[0], g.sw = st[1], g.dh = dl[0], g.dw = dl[1], g.pt = pads[0], g.pl = pads[1];
  const int64_t ext_h = (g.kh - 1) * g.dh + 1, ext_w = (g.kw - 1) * g.dw + 1;
  const int64_t span_h = g.h + pads[0] + pads[2] - ext_h, span_w = g.w + pads[1] + pads[3] - ext_w;
  if (g.kh < 1 || g.kw < 1 || span_h < 0 || span_w < 0)
    return NodeError(ctx, "kernel {}x{} (dilations {}) does not fit X {} with pads {}", g.kh, g.kw,
                     ShapeToString(dl), ShapeToString(x.shape()), ShapeToString(pads));
  g.oh = span_h / g.sh + 1, g.ow = span_w / g.sw + 1;
  const int64_t taps = g.offset_group * g.kh * g.kw;
  if (off.shape() != Shape{g.n, taps * 2, g.oh, g.ow})
    return NodeError(ctx, "offset has shape {}, expected {}", ShapeToString(off.shape()),
                     ShapeToString(Shape{g.n, taps * 2, g.oh, g.ow}));
  if (ctx.has_input(3) && ctx.input(3).shape() != Shape{g.oc})
    return NodeError(ctx, "B has shape {}, expected [{}]", ShapeToString(ctx.input(3).shape()),
                     g.oc);
  if (ctx.has_input(4) && ctx.input(4).shape() != Shape{g.n, taps, g.oh, g.ow})
    return NodeError(ctx, "mask has shape {}, expected {}", ShapeToString(ctx.input(4).shape()),
                     ShapeToString(Shape{g.n, taps, g.oh, g.ow}));
  return g;
}

Status PrepareDeformConv(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 5));
  FERRY_RETURN_IF_ERROR(RequireFloatInput(ctx, 0, "X"));
  const DType dt = ctx.input(0).dtype();
  const char* names[] = {"X", "W", "offset", "B", "mask"};
  for (size_t i = 1; i < 5; ++i) {
    if (i >= 3 && !ctx.has_input(i)) continue;
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, names[i]));
    if (ctx.input(i).dtype() != dt)
      return NodeError(ctx, "{} has dtype {}, expected {} (X's)", names[i],
                       DTypeName(ctx.input(i).dtype()), DTypeName(dt));
  }
  FERRY_ASSIGN_OR_RETURN(DeformGeom g, GetDeformGeom(ctx));
  ctx.set_output(0, dt, {g.n, g.oc, g.oh, g.ow});
  return Status::Ok();
}

std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) v[static_cast<size_t>(i)] = t.GetAsDouble(i);
  return v;
}

// X[plane] at (y, x), bilinear, zero outside [0, h) x [0, w).
double Bilinear(const double* plane, int64_t h, int64_t w, double y, double x) {
  if (!(y > -1.0 && y < static_cast<double>(h) && x > -1.0 && x < static_cast<double>(w)))
    return 0.0;  // also NaN
  const double fy = std::floor(y), fx = std::floor(x);
  const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const double ty = y - fy, tx = x - fx;
  auto at = [&](int64_t yy, int64_t xx) {
    return yy >= 0 && yy < h && xx >= 0 && xx < w ? plane[yy * w + xx] : 0.0;
  };
  return (1 - ty) * ((1 - tx) * at(y0, x0) + tx * at(y0, x0 + 1)) +
         ty * ((1 - tx) * at(y0 + 1, x0) + tx * at(y0 + 1, x0 + 1));
}

void RunDeformConv(OpContext& ctx) {
  const DeformGeom g = GetDeformGeom(ctx).value();
  const std::vector<double> x = AsDoubles(ctx.input(0)), w = AsDoubles(ctx.input(1)),
                            off = AsDoubles(ctx.input(2));
  const std::vector<double> mask =
      ctx.has_input(4) ? AsDoubles(ctx.input(4)) : std::vector<double>{};
  Tensor& y = ctx.output(0);
  const int64_t cpg = g.c / g.group, ocpg = g.oc / g.group, cpog = g.c / g.offset_group;
  const int64_t taps = g.kh * g.kw, opix = g.oh * g.ow;
  // Per (batch, input channel): the kH*kW sampled values of every output pixel.
  std::vector<double> cols(static_cast<size_t>(taps * opix));
  std::vector<double> acc(static_cast<size_t>(g.oc * opix));
  for (int64_t n = 0; n < g.n; ++n) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t c = 0; c < g.c; ++c) {
      const int64_t og = c / cpog;
      const double* plane = x.data() + (n * g.c + c) * g.h * g.w;
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t ki = t / g.kw, kj = t % g.kw;
        const double* oy = off.data() + ((n * g.offset_group + og) * taps + t) * 2 * opix;
        const double* ox = oy + opix;
        const double* m =
            mask.empty() ? nullptr : mask.data() + ((n * g.offset_group + og) * taps + t) * opix;
        for (int64_t p = 0; p < opix; ++p) {
          const int64_t i = p / g.ow, j = p % g.ow;
          const double sy = static_cast<double>(i * g.sh - g.pt + ki * g.dh) + oy[p];
          const double sx = static_cast<double>(j * g.sw - g.pl + kj * g.dw) + ox[p];
          double v = Bilinear(plane, g.h, g.w, sy, sx);
          cols[static_cast<size_t>(t * opix + p)] = m ? v * m[p] : v;
        }
      }
      const int64_t grp = c / cpg;
      for (int64_t o = grp * ocpg; o < (grp + 1) * ocpg; ++o) {
        const double* wk = w.data() + (o * cpg + c % cpg) * taps;
        double* a = acc.data() + o * opix;
        for (int64_t t = 0; t < taps; ++t)
          for (int64_t p = 0; p < opix; ++p)
            a[p] += wk[t] * cols[static_cast<size_t>(t * opix + p)];
      }
    }
    for (int64_t o = 0; o < g.oc; ++o) {
      const double b = ctx.has_input(3) ? ctx.input(3).GetAsDouble(o) : 0.0;
      for (int64_t p = 0; p < opix; ++p)
        StoreFloat(y, (n * g.oc + o) * opix + p, acc[static_cast<size_t>(o * opix + p)] + b);
    }
  }
}

// ---- TensorScatter: present = past with update written along `axis` at write_indices ----
// For every index p over the dims before `axis` (batch b = p's first), update rows s in
// [0, seq) go to cache row write_indices[b] + s ("linear": must lie in [0, max_seq)) or that
// modulo max_seq ("circular"). write_indices defaults to zeros.
struct ScatterGeom {
  int64_t outer = 1, per_batch = 1, max_seq = 0, seq = 0, inner = 1;
  bool circular = false;
};

Result<ScatterGeom> GetScatterGeom(const OpContext& ctx) {
  const Tensor& past = ctx.input(0);
  const Tensor& upd = ctx.input(1);
  ScatterGeom g;
  const std::string mode = ctx.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular")
    return NodeError(ctx, "mode is '{}', expected linear or circular", mode);
  g.circular = mode == "circular";
  if (past.rank() < 2) return NodeError(ctx, "past_cache has rank {}, expected >= 2", past.rank());
  FERRY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, ctx.attr_int("axis", -2), past.rank()));
  if (axis == 0)
    return NodeError(ctx, "axis is the batch axis 0; the sequence axis must follow it");
  bool fits = upd.rank() == past.rank();
  for (int64_t i = 0; fits && i < past.rank(); ++i)
    fits = i == axis ? upd.dim(i) <= past.dim(i) : upd.dim(i) == past.dim(i);
  if (!fits)
    return NodeError(ctx,
                     "update has shape {}, expected past_cache's {} with at most {} on axis {}",
                     ShapeToString(upd.shape()), ShapeToString(past.shape()), past.dim(axis), axis);
  for (int64_t i = 0; i < axis; ++i) g.outer *= past.dim(i);
  g.per_batch = past.dim(0) == 0 ? 1 : g.outer / past.dim(0);
  g.max_seq = past.dim(axis);
  g.seq = upd.dim(axis);
  for (int64_t i = axis + 1; i < past.rank(); ++i) g.inner *= past.dim(i);
  return g;
}

Status PrepareTensorScatter(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "past_cache"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "update"));
  const Tensor& past = ctx.input(0);
  if (ctx.input(1).dtype() != past.dtype())
    return NodeError(ctx, "update has dtype {}, expected {} (past_cache's)",
                     DTypeName(ctx.input(1).dtype()), DTypeName(past.dtype()));
  FERRY_ASSIGN_OR_RETURN(ScatterGeom g, GetScatterGeom(ctx));
  if (ctx.has_input(2)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "write_indices"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 2, {DType::kInt64}));
    const Tensor& wi = ctx.input(2);
    if (wi.shape() != Shape{past.dim(0)})
      return NodeError(ctx, "write_indices has shape {}, expected [{}] (the batch)",
                       ShapeToString(wi.shape()), past.dim(0));
    if (!g.circular)
      for (int64_t b = 0; b < wi.size(); ++b) {
        const int64_t at = wi.GetAsInt64(b);
        if (g.seq > 0 && (at < 0 || at > g.max_seq - g.seq))
          return NodeError(ctx,
                           "write_indices[{}] is {}: {} update rows do not fit a cache of {} "
                           "from there (mode linear)",
                           b, at, g.seq, g.max_seq);
      }
  }
  ctx.set_output(0, past.dtype(), past.shape());
  return Status::Ok();
}

void RunTensorScatter(OpContext& ctx) {
  const ScatterGeom g = GetScatterGeom(ctx).value();
  const Tensor& past = ctx.input(0);
  const Tensor& upd = ctx.input(1);
  Tensor& out = ctx.output(0);
  const DType dt = past.dtype();
  CopyElements(dt, past.raw(), out.raw(), past.size());
  const size_t elem = dt == DType::kString ? 0 : DTypeSize(dt);
  for (int64_t p = 0; p < g.outer; ++p) {
    int64_t at = ctx.has_input(2) ? ctx.input(2).GetAsInt64(p / g.per_batch) : 0;
    if (g.circular && g.seq > 0) at = ((at % g.max_seq) + g.max_seq) % g.max_seq;  // no overflow
    for (int64_t s = 0; s < g.seq; ++s) {
      int64_t row = at + s;
      if (g.circular) row %= g.max_seq;
      const int64_t dst = (p * g.max_seq + row) * g.inner, src = (p * g.seq + s) * g.inner;
      for (int64_t k = 0; k < g.inner; ++k)
        CopyElement(dt, upd.raw(), src + k, out.raw(), dst + k, elem);
    }
  }
}

// ---- Swish (24): y = x * sigmoid(alpha * x) ----
Status PrepareSwish(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireFloatInput(ctx, 0, "X"));
  ctx.set_output(0, ctx.input(0).dtype(), ctx.input(0).shape());
  return Status::Ok();
}

void RunSwish(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const double alpha = ctx.attr_float("alpha", 1.f);
  for (int64_t i = 0; i < x.size(); ++i) {
    const double v = x.GetAsDouble(i);
    StoreFloat(y, i, v / (1.0 + std::exp(-alpha * v)));
  }
}

constexpr OpDef kOps[] = {
    {"", "CenterCropPad", 18, nullptr, PrepareCenterCropPad, RunCenterCropPad},
    {"", "AffineGrid", 20, nullptr, PrepareAffineGrid, RunAffineGrid},
    {"", "DeformConv", 19, nullptr, PrepareDeformConv, RunDeformConv},
    {"", "TensorScatter", 24, nullptr, PrepareTensorScatter, RunTensorScatter},
    {"", "Swish", 24, nullptr, PrepareSwish, RunSwish},
};

}  // namespace

std::span<const OpDef> NewerOps() {
  return kOps;
}

}  // namespace ferry::ops
