// Reference kernels: MaxPool, AveragePool, LpPool, their Global* forms, MaxUnpool, MaxRoiPool.
//
// The windowed pools share one geometry: per spatial axis, output index o covers the input
// positions o * stride - pad_begin + k * dilation, k in [0, kernel). prepare lists, per axis and
// output index, the positions that fall inside the input (and how many taps fall inside the
// padded input, for count_include_pad); run walks the product of those lists.
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat, DType::kDouble,
                                                      DType::kFloat16, DType::kBFloat16};

int64_t CeilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

// Reads the ints attribute `name`, which must have `n` values >= `min`; `def` fills it when absent
// (an empty list counts as absent).
Result<std::vector<int64_t>> AxisInts(const OpContext& ctx, std::string_view name, size_t n,
                                      int64_t def, int64_t min) {
  std::vector<int64_t> v = ctx.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(n, def);
  if (v.size() != n)
    return NodeError(ctx, "{} {} has {} values, expected {}", name, ShapeToString(v), v.size(), n);
  for (int64_t x : v)
    if (x < min) return NodeError(ctx, "{} {} has a value below {}", name, ShapeToString(v), min);
  return v;
}

// X must be a tensor of one of `types` with rank >= 3 (N, C, spatial...).
Status CheckPoolInput(const OpContext& ctx, std::initializer_list<DType> types,
                      int64_t min_rank = 3) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, types));
  const Tensor& x = ctx.input(0);
  if (x.rank() < min_rank)
    return NodeError(ctx, "X has shape {}, expected rank {} or more (N, C, spatial...)",
                     ShapeToString(x.shape()), min_rank);
  return Status::Ok();
}

// The layout of a windowed pool and its per-axis tap tables.
struct PoolState : OpState {
  int64_t planes = 0, in_size = 0, out_size = 0;
  Shape in, out;
  std::vector<int64_t> in_strides, col_major_strides;  // spatial, row- and column-major
  // taps[axis][o]: input positions covered by output index o; padded_taps[axis][o]: how many of
  // its taps lie in [-pad_begin, in + pad_end).
  std::vector<std::vector<std::vector<int64_t>>> taps;
  std::vector<std::vector<int64_t>> padded_taps;
  bool col_major_indices = false;  // MaxPool storage_order = 1
  bool count_include_pad = false;  // AveragePool
  double p = 2;                    // LpPool
};

// Validates kernel_shape, strides, dilations, pads, auto_pad and ceil_mode of a pool over X
// (input 0), declares output 0 as [N, C, out...] and stores the geometry as the node's state.
Result<PoolState*> PreparePoolWindow(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t r = static_cast<size_t>(x.rank() - 2);
  const std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (kernel.size() != r)
    return NodeError(ctx, "kernel_shape {} has {} values, expected {} for X of shape {}",
                     ShapeToString(kernel), kernel.size(), r, ShapeToString(x.shape()));
  for (int64_t k : kernel)
    if (k < 1) return NodeError(ctx, "kernel_shape {} has a value below 1", ShapeToString(kernel));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> strides, AxisInts(ctx, "strides", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, AxisInts(ctx, "dilations", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> pads, AxisInts(ctx, "pads", 2 * r, 0, 0));
  const bool ceil_mode = ctx.attr_int("ceil_mode", 0) != 0;
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && !auto_pad.empty() && auto_pad != "VALID" &&
      auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return NodeError(ctx, "auto_pad '{}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                     auto_pad);

  auto st = std::make_unique<PoolState>();
  st->planes = x.dim(0) * x.dim(1);
  st->in.assign(x.shape().begin() + 2, x.shape().end());
  st->out.resize(r);
  st->taps.resize(r);
  st->padded_taps.resize(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = st->in[i], s = strides[i], d = dilations[i];
    const int64_t eff = (kernel[i] - 1) * d + 1;
    int64_t begin = pads[i], end = pads[i + r], out = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = CeilDiv(in, s);
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in);
      begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else {
      if (auto_pad == "VALID") begin = end = 0;
      const int64_t span = in + begin + end - eff;
      if (span < 0)
        return NodeError(ctx,
                         "spatial axis {}: input size {} with pads {}+{} is smaller than the "
                         "dilated kernel size {}",
                         i, in, begin, end, eff);
      out = (ceil_mode ? CeilDiv(span, s) : span / s) + 1;
      // ceil_mode drops a last window that would start in the end padding.
      if (ceil_mode && (out - 1) * s >= in + begin) --out;
    }
    st->out[i] = out;
    st->taps[i].resize(static_cast<size_t>(out));
    st->padded_taps[i].resize(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      for (int64_t k = 0; k < kernel[i]; ++k) {
        const int64_t pos = o * s - begin + k * d;
        if (pos >= 0 && pos < in) st->taps[i][static_cast<size_t>(o)].push_back(pos);
        if (pos >= -begin && pos < in + end) ++st->padded_taps[i][static_cast<size_t>(o)];
      }
      if (st->taps[i][static_cast<size_t>(o)].empty())
        return NodeError(ctx,
                         "spatial axis {}: the window of output index {} covers no input "
                         "element (input {}, pads {}+{}, kernel {}, dilation {})",
                         i, o, in, begin, end, kernel[i], d);
    }
  }
  st->in_size = NumElements(st->in);
  st->out_size = NumElements(st->out);
  st->in_strides = Strides(st->in);
  st->col_major_strides.assign(r, 1);
  for (size_t i = 1; i < r; ++i)
    st->col_major_strides[i] = st->col_major_strides[i - 1] * st->in[i - 1];
  Shape y_shape = {x.dim(0), x.dim(1)};
  y_shape.insert(y_shape.end(), st->out.begin(), st->out.end());
  ctx.set_output(0, x.dtype(), y_shape);
  PoolState* raw = st.get();
  ctx.set_state(std::move(st));
  return raw;
}

// Walks the input elements under one output element's window (per-task scratch space).
class WindowWalker {
 public:
  explicit WindowWalker(const PoolState& st) : st_(st), o_(st.in.size()), k_(st.in.size()) {}

  // Calls fn(row_major_offset, column_major_offset) for every input element (plane-relative)
  // in the window of output element `out_index`, in row-major order.
  template <typename Fn>
  void ForEach(int64_t out_index, Fn&& fn) {
    const size_t r = o_.size();
    for (size_t d = r; d-- > 0;) {
      o_[d] = static_cast<size_t>(out_index % st_.out[d]);
      out_index /= st_.out[d];
      k_[d] = 0;
    }
    for (;;) {
      int64_t rm = 0, cm = 0;
      for (size_t d = 0; d < r; ++d) {
        const int64_t pos = st_.taps[d][o_[d]][k_[d]];
        rm += pos * st_.in_strides[d];
        cm += pos * st_.col_major_strides[d];
      }
      fn(rm, cm);
      for (size_t d = r;;) {
        if (d == 0) return;
        --d;
        if (++k_[d] < st_.taps[d][o_[d]].size()) break;
        k_[d] = 0;
      }
    }
  }

  // Taps of the window inside the padded input (the count_include_pad divisor).
  int64_t PaddedCount(int64_t out_index) const {
    int64_t n = 1;
    for (size_t d = o_.size(); d-- > 0;) {
      n *= st_.padded_taps[d][static_cast<size_t>(out_index % st_.out[d])];
      out_index /= st_.out[d];
    }
    return n;
  }

 private:
  const PoolState& st_;
  std::vector<size_t> o_, k_;
};

// Calls fn(WindowWalker&, const T* x_plane, int64_t plane, int64_t out_index) for every output
// element of a windowed pool, with the (n, c) planes split across the thread pool.
template <typename T, typename Fn>
void ForEachPoolOutput(OpContext& ctx, Fn&& fn) {
  const PoolState& st = *ctx.state<PoolState>();
  const T* x = ctx.input(0).data<T>();
  ParallelFor(ctx, st.planes, 1, [&](int64_t begin, int64_t end) {
    WindowWalker walker(st);
    for (int64_t p = begin; p < end; ++p)
      for (int64_t o = 0; o < st.out_size; ++o) fn(walker, x + p * st.in_size, p, o);
  });
}

// ---- MaxPool (Indices output since opset 8, int8/uint8 since 12) ----
Status PrepareMaxPool(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(CheckPoolInput(ctx, {DType::kFloat, DType::kDouble, DType::kFloat16,
                                             DType::kBFloat16, DType::kInt8, DType::kUint8}));
  const int64_t order = ctx.attr_int("storage_order", 0);
  if (order != 0 && order != 1)
    return NodeError(ctx, "storage_order is {}, expected 0 or 1", order);
  FERRY_ASSIGN_OR_RETURN(PoolState * st, PreparePoolWindow(ctx));
  st->col_major_indices = order == 1;
  if (ctx.num_outputs() > 1 && ctx.has_output(1)) {
    Shape shape = {ctx.input(0).dim(0), ctx.input(0).dim(1)};
    shape.insert(shape.end(), st->out.begin(), st->out.end());
    ctx.set_output(1, DType::kInt64, shape);
  }
  return Status::Ok();
}

template <typename T>
void RunMaxPoolTyped(OpContext& ctx) {
  using A = ComputeType<T>;
  const PoolState& st = *ctx.state<PoolState>();
  T* y = ctx.output(0).data<T>();
  int64_t* indices =
      ctx.num_outputs() > 1 && ctx.has_output(1) ? ctx.output(1).data<int64_t>() : nullptr;
  ForEachPoolOutput<T>(ctx, [&](WindowWalker& walker, const T* xp, int64_t p, int64_t o) {
    A best{};
    int64_t best_at = -1;
    walker.ForEach(o, [&](int64_t rm, int64_t cm) {
      const A v = static_cast<A>(xp[rm]);
      // The first maximum wins; a NaN propagates.
      if (best_at < 0 || v > best || (v != v && best == best)) {
        best = v;
        best_at = st.col_major_indices ? cm : rm;
      }
    });
    y[p * st.out_size + o] = static_cast<T>(best);
    if (indices) indices[p * st.out_size + o] = p * st.in_size + best_at;
  });
}

void RunMaxPool(OpContext& ctx) {
  VisitNumeric(ctx.input(0).dtype(),
               [&](auto tag) { RunMaxPoolTyped<typename decltype(tag)::type>(ctx); });
}

// ---- AveragePool (count_include_pad since 7, ceil_mode since 10, dilations since 19) ----
Status PrepareAveragePool(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(CheckPoolInput(ctx, kFloatTypes));
  FERRY_ASSIGN_OR_RETURN(PoolState * st, PreparePoolWindow(ctx));
  st->count_include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  return Status::Ok();
}

template <typename T>
void RunAveragePoolTyped(OpContext& ctx) {
  using A = ComputeType<T>;
  const PoolState& st = *ctx.state<PoolState>();
  T* y = ctx.output(0).data<T>();
  ForEachPoolOutput<T>(ctx, [&](WindowWalker& walker, const T* xp, int64_t p, int64_t o) {
    A sum = 0;
    int64_t n = 0;
    walker.ForEach(o, [&](int64_t rm, int64_t) {
      sum += static_cast<A>(xp[rm]);
      ++n;
    });
    if (st.count_include_pad) n = walker.PaddedCount(o);
    y[p * st.out_size + o] = static_cast<T>(sum / static_cast<A>(n));
  });
}

void RunAveragePool(OpContext& ctx) {
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<ComputeType<T>>) RunAveragePoolTyped<T>(ctx);
  });
}

// ---- LpPool (p a float in opset 1, an int since 2; ceil_mode and dilations since 18) ----
Result<double> ReadP(const OpContext& ctx) {
  const ir::Attribute* a = ctx.node().attr("p");
  double p = 2;
  if (a)
    p = a->type == ir::AttrType::kFloat ? static_cast<double>(a->f) : static_cast<double>(a->i);
  if (!(p > 0)) return NodeError(ctx, "p is {}, expected a positive value", p);
  return p;
}

Status PrepareLpPool(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(CheckPoolInput(ctx, kFloatTypes));
  FERRY_ASSIGN_OR_RETURN(double p, ReadP(ctx));
  FERRY_ASSIGN_OR_RETURN(PoolState * st, PreparePoolWindow(ctx));
  st->p = p;
  return Status::Ok();
}

template <typename T>
void RunLpPoolTyped(OpContext& ctx) {
  using A = ComputeType<T>;
  const PoolState& st = *ctx.state<PoolState>();
  T* y = ctx.output(0).data<T>();
  const A p = static_cast<A>(st.p);
  ForEachPoolOutput<T>(ctx, [&](WindowWalker& walker, const T* xp, int64_t plane, int64_t o) {
    A sum = 0;
    walker.ForEach(
        o, [&](int64_t rm, int64_t) { sum += std::pow(std::abs(static_cast<A>(xp[rm])), p); });
    y[plane * st.out_size + o] = static_cast<T>(std::pow(sum, A(1) / p));
  });
}

void RunLpPool(OpContext& ctx) {
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<ComputeType<T>>) RunLpPoolTyped<T>(ctx);
  });
}

// ---- GlobalAveragePool, GlobalMaxPool, GlobalLpPool: one window per (n, c) plane ----
enum class GlobalKind { kAverage, kMax, kLp };

template <GlobalKind kKind>
Status PrepareGlobalPool(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(CheckPoolInput(ctx, kFloatTypes, 2));
  if constexpr (kKind == GlobalKind::kLp) FERRY_RETURN_IF_ERROR(ReadP(ctx).status());
  Shape shape = ctx.input(0).shape();
  std::fill(shape.begin() + 2, shape.end(), 1);
  ctx.set_output(0, ctx.input(0).dtype(), shape);
  return Status::Ok();
}

template <GlobalKind kKind, typename T>
void RunGlobalPoolTyped(OpContext& ctx) {
  using A = ComputeType<T>;
  const Tensor& x = ctx.input(0);
  const int64_t planes = x.dim(0) * x.dim(1), n = planes > 0 ? x.size() / planes : 0;
  const A p = kKind == GlobalKind::kLp ? static_cast<A>(ReadP(ctx).value()) : A(2);
  const T* xd = x.data<T>();
  T* y = ctx.output(0).data<T>();
  ParallelFor(ctx, planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t pl = begin; pl < end; ++pl) {
      const T* xp = xd + pl * n;
      A acc = kKind == GlobalKind::kMax ? -std::numeric_limits<A>::infinity() : A(0);
      for (int64_t i = 0; i < n; ++i) {
        const A v = static_cast<A>(xp[i]);
        if constexpr (kKind == GlobalKind::kAverage) acc += v;
        if constexpr (kKind == GlobalKind::kMax) acc = (v > acc || v != v) ? v : acc;
        if constexpr (kKind == GlobalKind::kLp) acc += std::pow(std::abs(v), p);
      }
      if constexpr (kKind == GlobalKind::kAverage) acc /= static_cast<A>(n);
      if constexpr (kKind == GlobalKind::kLp) acc = std::pow(acc, A(1) / p);
      y[pl] = static_cast<T>(acc);
    }
  });
}

template <GlobalKind kKind>
void RunGlobalPool(OpContext& ctx) {
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<ComputeType<T>>) RunGlobalPoolTyped<kKind, T>(ctx);
  });
}

// ---- MaxUnpool (opset 9): scatters X into zeros at the flat indices I ----
Status PrepareMaxUnpool(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(CheckPoolInput(ctx, kFloatTypes));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "I"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kInt64}));
  const Tensor &x = ctx.input(0), &ind = ctx.input(1);
  if (ind.shape() != x.shape())
    return NodeError(ctx, "I has shape {}, expected X's shape {}", ShapeToString(ind.shape()),
                     ShapeToString(x.shape()));
  const size_t r = static_cast<size_t>(x.rank() - 2);
  const std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (kernel.size() != r)
    return NodeError(ctx, "kernel_shape {} has {} values, expected {} for X of shape {}",
                     ShapeToString(kernel), kernel.size(), r, ShapeToString(x.shape()));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> strides, AxisInts(ctx, "strides", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> pads, AxisInts(ctx, "pads", 2 * r, 0, 0));
  Shape y_shape;
  if (ctx.has_input(2)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "output_shape"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 2, {DType::kInt64}));
    y_shape = ctx.input(2).ToInt64Vector();
    if (static_cast<int64_t>(y_shape.size()) != x.rank() || y_shape[0] != x.dim(0) ||
        y_shape[1] != x.dim(1))
      return NodeError(ctx, "output_shape {} must have rank {} and start with X's N, C {}",
                       ShapeToString(y_shape), x.rank(), ShapeToString({x.dim(0), x.dim(1)}));
    for (int64_t d : y_shape)
      if (d < 0)
        return NodeError(ctx, "output_shape {} has a negative dim", ShapeToString(y_shape));
  } else {
    y_shape = {x.dim(0), x.dim(1)};
    for (size_t i = 0; i < r; ++i) {
      const int64_t d =
          (x.dim(static_cast<int64_t>(i) + 2) - 1) * strides[i] + kernel[i] - pads[i] - pads[i + r];
      if (d < 0) return NodeError(ctx, "spatial axis {}: output size would be {}", i, d);
      y_shape.push_back(d);
    }
  }
  const int64_t total = NumElements(y_shape);
  const int64_t* id = ind.data<int64_t>();
  for (int64_t i = 0; i < ind.size(); ++i)
    if (id[i] < 0 || id[i] >= total)
      return NodeError(ctx, "I[{}] = {} is out of range for the output of shape {} ({} elements)",
                       i, id[i], ShapeToString(y_shape), total);
  ctx.set_output(0, x.dtype(), y_shape);
  return Status::Ok();
}

void RunMaxUnpool(OpContext& ctx) {
  const Tensor &x = ctx.input(0), &ind = ctx.input(1);
  Tensor& y = ctx.output(0);
  const size_t elem = DTypeSize(x.dtype());
  std::memset(y.raw(), 0, y.nbytes());  // all-zero bits are 0 in every float type
  const int64_t* id = ind.data<int64_t>();
  for (int64_t i = 0; i < x.size(); ++i) CopyElement(x.dtype(), x.raw(), i, y.raw(), id[i], elem);
}

// ---- MaxRoiPool: X [N, C, H, W], rois [R, 5] = (batch, x1, y1, x2, y2) -> [R, C, ph, pw] ----
Status PrepareMaxRoiPool(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(CheckPoolInput(ctx, kFloatTypes));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "rois"));
  const Tensor &x = ctx.input(0), &rois = ctx.input(1);
  if (x.rank() != 4)
    return NodeError(ctx, "X has shape {}, expected rank 4", ShapeToString(x.shape()));
  if (rois.dtype() != x.dtype())
    return NodeError(ctx, "rois has dtype {}, expected {} like X", DTypeName(rois.dtype()),
                     DTypeName(x.dtype()));
  if (rois.rank() != 2 || rois.dim(1) != 5)
    return NodeError(ctx, "rois has shape {}, expected [num_rois, 5]", ShapeToString(rois.shape()));
  const std::vector<int64_t> pooled = ctx.attr_ints("pooled_shape");
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1)
    return NodeError(ctx, "pooled_shape {} must be 2 positive values", ShapeToString(pooled));
  for (int64_t i = 0; i < rois.dim(0); ++i) {
    const double b = rois.GetAsDouble(i * 5);
    if (!(b >= 0 && b < static_cast<double>(x.dim(0))) || b != std::floor(b))
      return NodeError(ctx, "rois[{}] has batch index {}, expected an integer in [0, {})", i, b,
                       x.dim(0));
  }
  ctx.set_output(0, x.dtype(), {rois.dim(0), x.dim(1), pooled[0], pooled[1]});
  return Status::Ok();
}

template <typename T>
void RunMaxRoiPoolTyped(OpContext& ctx) {
  using A = ComputeType<T>;
  const Tensor &x = ctx.input(0), &rois = ctx.input(1);
  const int64_t channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const std::vector<int64_t> pooled = ctx.attr_ints("pooled_shape");
  const int64_t ph = pooled[0], pw = pooled[1];
  const double scale = ctx.attr_float("spatial_scale", 1.f);
  const T* xd = x.data<T>();
  T* y = ctx.output(0).data<T>();
  // One task per (roi, channel); bins follow Caffe's ROI pooling: the roi is rounded to whole
  // pixels, split into ph x pw bins of real size, each bin widened to whole pixels and clipped.
  ParallelFor(ctx, rois.dim(0) * channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t roi = task / channels, c = task % channels;
      const int64_t n = static_cast<int64_t>(rois.GetAsDouble(roi * 5));
      auto coord = [&](int k) {
        return static_cast<int64_t>(std::round(rois.GetAsDouble(roi * 5 + k) * scale));
      };
      const int64_t x1 = coord(1), y1 = coord(2), x2 = coord(3), y2 = coord(4);
      const double bin_h =
          static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(ph);
      const double bin_w =
          static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(pw);
      const T* xp = xd + (n * channels + c) * height * width;
      T* yp = y + task * ph * pw;
      for (int64_t i = 0; i < ph; ++i) {
        const int64_t h0 =
            std::clamp<int64_t>(static_cast<int64_t>(std::floor(i * bin_h)) + y1, 0, height);
        const int64_t h1 =
            std::clamp<int64_t>(static_cast<int64_t>(std::ceil((i + 1) * bin_h)) + y1, 0, height);
        for (int64_t j = 0; j < pw; ++j) {
          const int64_t w0 =
              std::clamp<int64_t>(static_cast<int64_t>(std::floor(j * bin_w)) + x1, 0, width);
          const int64_t w1 =
              std::clamp<int64_t>(static_cast<int64_t>(std::ceil((j + 1) * bin_w)) + x1, 0, width);
          A best = h1 > h0 && w1 > w0 ? -std::numeric_limits<A>::infinity() : A(0);  // empty bin: 0
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w)
              best = std::max(best, static_cast<A>(xp[h * width + w]));
          yp[i * pw + j] = static_cast<T>(best);
        }
      }
    }
  });
}

void RunMaxRoiPool(OpContext& ctx) {
  VisitNumeric(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<ComputeType<T>>) RunMaxRoiPoolTyped<T>(ctx);
  });
}

constexpr OpDef kOps[] = {
    {"", "MaxPool", 1, nullptr, PrepareMaxPool, RunMaxPool},
    {"", "AveragePool", 1, nullptr, PrepareAveragePool, RunAveragePool},
    {"", "LpPool", 1, nullptr, PrepareLpPool, RunLpPool},
    {"", "GlobalAveragePool", 1, nullptr, PrepareGlobalPool<GlobalKind::kAverage>,
     RunGlobalPool<GlobalKind::kAverage>},
    {"", "GlobalMaxPool", 1, nullptr, PrepareGlobalPool<GlobalKind::kMax>,
     RunGlobalPool<GlobalKind::kMax>},
    {"", "GlobalLpPool", 1, nullptr, PrepareGlobalPool<GlobalKind::kLp>,
     RunGlobalPool<GlobalKind::kLp>},
    {"", "MaxUnpool", 9, nullptr, PrepareMaxUnpool, RunMaxUnpool},
    {"", "MaxRoiPool", 1, nullptr, PrepareMaxRoiPool, RunMaxRoiPool},
};

}  // namespace

std::span<const OpDef> PoolOps() {
  return kOps;
}

}  // namespace ferry::ops
