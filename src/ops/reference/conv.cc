// Reference kernels: Conv, ConvTranspose, Col2Im.
//
// All three slide an N-d kernel over an "image" (Conv: the input; ConvTranspose and Col2Im: the
// output) in steps that form a grid of "columns" (Conv: the output positions; ConvTranspose: the
// input positions; Col2Im: the blocks). Per spatial axis, a kernel tap k at column j touches
//   image position = j * stride - pad_begin + k * dilation.
// prepare lists, once per node, every (tap, column row) pair that lands inside the image together
// with the range of the innermost column index that stays inside (a TapRow); run then is a plain
// direct convolution: Conv gathers image -> columns, ConvTranspose and Col2Im scatter back.
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

constexpr std::initializer_list<DType> kFloatTypes = {DType::kFloat, DType::kDouble,
                                                      DType::kFloat16, DType::kBFloat16};

int64_t FloorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t CeilDiv(int64_t a, int64_t b) {
  return -FloorDiv(-a, b);
}

// Multi-index of linear index `i` in `dims` (row-major).
void Unravel(int64_t i, const Shape& dims, std::vector<int64_t>* index) {
  for (size_t d = dims.size(); d-- > 0;) {
    (*index)[d] = i % dims[d];
    i /= dims[d];
  }
}

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

Result<AutoPad> ReadAutoPad(const OpContext& ctx) {
  std::string s = ctx.attr_string("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  return NodeError(ctx, "auto_pad '{}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", s);
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

// The sliding-window layout of one node, spatial axes only.
struct Window {
  Shape image, cols, kernel;
  std::vector<int64_t> strides, dilations, pads;  // pads: the begin side of each axis
};

// One kernel tap applied to one row of columns (all column axes but the innermost fixed):
// columns col + j, j in [lo, hi), touch image elements image + j * (innermost stride).
// `image` is the offset of column j = 0, which may lie outside the image when lo > 0.
struct TapRow {
  int64_t tap, image, col, lo, hi;
};

std::vector<TapRow> BuildTapRows(const Window& w) {
  const size_t r = w.kernel.size(), last = r - 1;
  const std::vector<int64_t> image_strides = Strides(w.image), col_strides = Strides(w.cols);
  const Shape outer_cols(w.cols.begin(), w.cols.end() - 1);
  const int64_t rows = NumElements(outer_cols), taps = NumElements(w.kernel);
  std::vector<int64_t> k(r), c(last);
  std::vector<TapRow> out;
  for (int64_t tap = 0; tap < taps; ++tap) {
    Unravel(tap, w.kernel, &k);
    const int64_t off = k[last] * w.dilations[last] - w.pads[last], s = w.strides[last];
    const int64_t lo = std::max<int64_t>(0, CeilDiv(-off, s));
    const int64_t hi = std::min(w.cols[last], FloorDiv(w.image[last] - 1 - off, s) + 1);
    if (lo >= hi) continue;
    for (int64_t row = 0; row < rows; ++row) {
      Unravel(row, outer_cols, &c);
      int64_t image = off, col = 0;
      bool inside = true;
      for (size_t d = 0; d < last && inside; ++d) {
        const int64_t pos = c[d] * w.strides[d] - w.pads[d] + k[d] * w.dilations[d];
        inside = pos >= 0 && pos < w.image[d];
        image += pos * image_strides[d];
        col += c[d] * col_strides[d];
      }
      if (inside) out.push_back({tap, image, col, lo, hi});
    }
  }
  return out;
}

// What prepare hands to run.
struct WindowState : OpState {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  int64_t image_size = 0, col_size = 0, kernel_size = 0, inner_stride = 1;
  std::vector<TapRow> taps;
};

void SetWindowState(OpContext& ctx, std::unique_ptr<WindowState> st, const Window& w) {
  st->image_size = NumElements(w.image);
  st->col_size = NumElements(w.cols);
  st->kernel_size = NumElements(w.kernel);
  st->inner_stride = w.strides.back();
  st->taps = BuildTapRows(w);
  ctx.set_state(std::move(st));
}

// Conv: y[col + j] += w[tap] * x[image + j * s].
template <typename A>
void GatherTaps(const std::vector<TapRow>& taps, int64_t s, const A* w, const A* x, A* y) {
  for (const TapRow& t : taps) {
    const A wv = w[t.tap];
    A* yr = y + t.col;
    if (s == 1) {
      for (int64_t j = t.lo; j < t.hi; ++j) yr[j] += wv * x[t.image + j];
    } else {
      for (int64_t j = t.lo; j < t.hi; ++j) yr[j] += wv * x[t.image + j * s];
    }
  }
}

// ConvTranspose: y[image + j * s] += w[tap] * x[col + j].
template <typename A>
void ScatterTaps(const std::vector<TapRow>& taps, int64_t s, const A* w, const A* x, A* y) {
  for (const TapRow& t : taps) {
    const A wv = w[t.tap];
    const A* xr = x + t.col;
    for (int64_t j = t.lo; j < t.hi; ++j) y[t.image + j * s] += wv * xr[j];
  }
}

// The elements of `t` in the compute type: the tensor's own data, or a converted copy in `buf`.
template <typename T>
const ComputeType<T>* AsCompute(const Tensor& t, std::vector<ComputeType<T>>* buf) {
  if constexpr (std::is_same_v<T, ComputeType<T>>) {
    return t.data<T>();
  } else {
    const T* p = t.data<T>();
    buf->resize(static_cast<size_t>(t.size()));
    for (int64_t i = 0; i < t.size(); ++i)
      (*buf)[static_cast<size_t>(i)] = static_cast<float>(p[i]);
    return buf->data();
  }
}

Status RequireSameDType(const OpContext& ctx, size_t i, std::string_view what) {
  if (ctx.input(i).dtype() != ctx.input(0).dtype())
    return NodeError(ctx, "{} has dtype {}, expected {} like X", what,
                     DTypeName(ctx.input(i).dtype()), DTypeName(ctx.input(0).dtype()));
  return Status::Ok();
}

// Checks X, W (same dtype and rank >= 3), group, kernel_shape and an optional bias of
// `out_channels`.
Status CheckConvInputs(const OpContext& ctx, int64_t out_channels_dim) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "W"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, kFloatTypes));
  FERRY_RETURN_IF_ERROR(RequireSameDType(ctx, 1, "W"));
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  if (x.rank() < 3)
    return NodeError(ctx, "X has shape {}, expected rank 3 or more (N, C, spatial...)",
                     ShapeToString(x.shape()));
  if (w.rank() != x.rank())
    return NodeError(ctx, "W has shape {}, expected rank {} like X {}", ShapeToString(w.shape()),
                     x.rank(), ShapeToString(x.shape()));
  const int64_t group = ctx.attr_int("group", 1);
  if (group < 1) return NodeError(ctx, "group is {}, expected at least 1", group);
  if (ctx.has_attr("kernel_shape")) {
    const std::vector<int64_t> ks = ctx.attr_ints("kernel_shape");
    const Shape w_kernel(w.shape().begin() + 2, w.shape().end());
    if (ks != w_kernel)
      return NodeError(ctx, "kernel_shape {} does not match W's spatial dims {} (W shape {})",
                       ShapeToString(ks), ShapeToString(w_kernel), ShapeToString(w.shape()));
  }
  if (ctx.has_input(2)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "B"));
    FERRY_RETURN_IF_ERROR(RequireSameDType(ctx, 2, "B"));
    const Tensor& b = ctx.input(2);
    if (b.rank() != 1 || b.dim(0) != out_channels_dim)
      return NodeError(ctx, "B has shape {}, expected [{}] (one bias per output channel)",
                       ShapeToString(b.shape()), out_channels_dim);
  }
  return Status::Ok();
}

// ---- Conv ----
Status PrepareConv(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "W"));
  const int64_t m = ctx.input(1).rank() > 0 ? ctx.input(1).dim(0) : 0;
  FERRY_RETURN_IF_ERROR(CheckConvInputs(ctx, m));
  const Tensor &x = ctx.input(0), &w = ctx.input(1);
  const int64_t group = ctx.attr_int("group", 1);
  if (m % group != 0)
    return NodeError(ctx, "W has {} output channels, not divisible by group {}", m, group);
  if (w.dim(1) * group != x.dim(1))
    return NodeError(ctx, "W has {} input channels per group, X has {} channels (group {})",
                     w.dim(1), x.dim(1), group);

  const size_t r = static_cast<size_t>(x.rank() - 2);
  Window win;
  win.image.assign(x.shape().begin() + 2, x.shape().end());
  win.kernel.assign(w.shape().begin() + 2, w.shape().end());
  FERRY_ASSIGN_OR_RETURN(win.strides, AxisInts(ctx, "strides", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(win.dilations, AxisInts(ctx, "dilations", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> pads, AxisInts(ctx, "pads", 2 * r, 0, 0));
  FERRY_ASSIGN_OR_RETURN(AutoPad auto_pad, ReadAutoPad(ctx));
  win.pads.resize(r);
  win.cols.resize(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = win.image[i], s = win.strides[i];
    const int64_t eff = (win.kernel[i] - 1) * win.dilations[i] + 1;
    int64_t begin = pads[i], end = pads[i + r];
    if (auto_pad == AutoPad::kValid) {
      begin = end = 0;
    } else if (auto_pad != AutoPad::kNotSet) {
      const int64_t out = CeilDiv(in, s);
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in);
      begin = auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      end = total - begin;
    }
    if (in + begin + end < eff)
      return NodeError(ctx,
                       "spatial axis {}: input size {} with pads {}+{} is smaller than the "
                       "dilated kernel size {}",
                       i, in, begin, end, eff);
    win.pads[i] = begin;
    win.cols[i] = (in + begin + end - eff) / s + 1;
  }
  Shape y_shape = {x.dim(0), m};
  y_shape.insert(y_shape.end(), win.cols.begin(), win.cols.end());
  ctx.set_output(0, x.dtype(), y_shape);

  auto st = std::make_unique<WindowState>();
  st->batch = x.dim(0);
  st->in_channels = x.dim(1);
  st->out_channels = m;
  st->group = group;
  SetWindowState(ctx, std::move(st), win);
  return Status::Ok();
}

template <typename T>
void RunConvTyped(OpContext& ctx) {
  using A = ComputeType<T>;
  const WindowState& st = *ctx.state<WindowState>();
  std::vector<A> x_buf, w_buf, b_buf;
  const A* x = AsCompute<T>(ctx.input(0), &x_buf);
  const A* w = AsCompute<T>(ctx.input(1), &w_buf);
  const A* b = ctx.has_input(2) ? AsCompute<T>(ctx.input(2), &b_buf) : nullptr;
  T* y = ctx.output(0).data<T>();
  const int64_t cg = st.in_channels / st.group, mg = st.out_channels / st.group;
  // One task per output plane (n, m): y[n, m] = b[m] + sum over the group's channels c of
  // x[n, c] correlated with w[m, c].
  ParallelFor(ctx, st.batch * st.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(static_cast<size_t>(st.col_size));
    for (int64_t p = begin; p < end; ++p) {
      const int64_t n = p / st.out_channels, m = p % st.out_channels, g = m / mg;
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t c = 0; c < cg; ++c) {
        const A* xc = x + (n * st.in_channels + g * cg + c) * st.image_size;
        const A* wc = w + (m * cg + c) * st.kernel_size;
        GatherTaps(st.taps, st.inner_stride, wc, xc, acc.data());
      }
      const A bias = b ? b[m] : A(0);
      T* yp = y + p * st.col_size;
      for (int64_t i = 0; i < st.col_size; ++i)
        yp[i] = static_cast<T>(acc[static_cast<size_t>(i)] + bias);
    }
  });
}

void RunConv(OpContext& ctx) {
  VisitDType(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<ComputeType<T>>) RunConvTyped<T>(ctx);
  });
}

// ---- ConvTranspose ----
Status PrepareConvTranspose(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "W"));
  const Tensor& w = ctx.input(1);
  const int64_t group = ctx.attr_int("group", 1);
  const int64_t m = w.rank() > 1 ? w.dim(1) * std::max<int64_t>(group, 1) : 0;
  FERRY_RETURN_IF_ERROR(CheckConvInputs(ctx, m));
  const Tensor& x = ctx.input(0);
  if (w.dim(0) != x.dim(1))
    return NodeError(ctx, "W has {} input channels (shape {}), X has {} channels", w.dim(0),
                     ShapeToString(w.shape()), x.dim(1));
  if (x.dim(1) % group != 0)
    return NodeError(ctx, "X has {} channels, not divisible by group {}", x.dim(1), group);

  const size_t r = static_cast<size_t>(x.rank() - 2);
  Window win;  // image = the output, columns = the input
  win.cols.assign(x.shape().begin() + 2, x.shape().end());
  win.kernel.assign(w.shape().begin() + 2, w.shape().end());
  FERRY_ASSIGN_OR_RETURN(win.strides, AxisInts(ctx, "strides", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(win.dilations, AxisInts(ctx, "dilations", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> pads, AxisInts(ctx, "pads", 2 * r, 0, 0));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> out_pad, AxisInts(ctx, "output_padding", r, 0, 0));
  FERRY_ASSIGN_OR_RETURN(AutoPad auto_pad, ReadAutoPad(ctx));
  std::vector<int64_t> out_shape = ctx.attr_ints("output_shape");
  if (out_shape.size() == r + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && out_shape.size() != r)
    return NodeError(ctx, "output_shape {} has {} values, expected {} (spatial dims)",
                     ShapeToString(out_shape), out_shape.size(), r);
  win.pads.resize(r);
  win.image.resize(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t in = win.cols[i], s = win.strides[i];
    const int64_t full = s * (in - 1) + out_pad[i] + (win.kernel[i] - 1) * win.dilations[i] + 1;
    int64_t begin = pads[i], end = pads[i + r];
    if (!out_shape.empty() || auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower) {
      // The output size is given (output_shape, or input * stride for SAME_*): the pads follow.
      // When that output is larger than the full result, the extra part is at the end (zeros).
      const int64_t out = !out_shape.empty() ? out_shape[i] : in * s;
      const int64_t total = std::max<int64_t>(0, full - out);
      begin = auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      end = full - out - begin;
    } else if (auto_pad == AutoPad::kValid) {
      begin = end = 0;
    }
    win.pads[i] = begin;
    win.image[i] = full - begin - end;
    if (win.image[i] < 0)
      return NodeError(ctx, "spatial axis {}: output size would be {} (input {}, pads {}+{})", i,
                       win.image[i], in, begin, end);
  }
  Shape y_shape = {x.dim(0), m};
  y_shape.insert(y_shape.end(), win.image.begin(), win.image.end());
  ctx.set_output(0, x.dtype(), y_shape);

  auto st = std::make_unique<WindowState>();
  st->batch = x.dim(0);
  st->in_channels = x.dim(1);
  st->out_channels = m;
  st->group = group;
  SetWindowState(ctx, std::move(st), win);
  return Status::Ok();
}

template <typename T>
void RunConvTransposeTyped(OpContext& ctx) {
  using A = ComputeType<T>;
  const WindowState& st = *ctx.state<WindowState>();
  std::vector<A> x_buf, w_buf, b_buf;
  const A* x = AsCompute<T>(ctx.input(0), &x_buf);
  const A* w = AsCompute<T>(ctx.input(1), &w_buf);
  const A* b = ctx.has_input(2) ? AsCompute<T>(ctx.input(2), &b_buf) : nullptr;
  T* y = ctx.output(0).data<T>();
  const int64_t cg = st.in_channels / st.group, mg = st.out_channels / st.group;
  // One task per output plane (n, m): every input channel c of m's group scatters
  // x[n, c] * w[c, m mod mg] into it.
  ParallelFor(ctx, st.batch * st.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(static_cast<size_t>(st.image_size));
    for (int64_t p = begin; p < end; ++p) {
      const int64_t n = p / st.out_channels, m = p % st.out_channels, g = m / mg;
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        const A* xc = x + (n * st.in_channels + c) * st.col_size;
        const A* wc = w + (c * mg + m % mg) * st.kernel_size;
        ScatterTaps(st.taps, st.inner_stride, wc, xc, acc.data());
      }
      const A bias = b ? b[m] : A(0);
      T* yp = y + p * st.image_size;
      for (int64_t i = 0; i < st.image_size; ++i)
        yp[i] = static_cast<T>(acc[static_cast<size_t>(i)] + bias);
    }
  });
}

void RunConvTranspose(OpContext& ctx) {
  VisitDType(ctx.input(0).dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<ComputeType<T>>) RunConvTransposeTyped<T>(ctx);
  });
}

// ---- Col2Im (opset 18): input [N, C * prod(block_shape), L] -> [N, C, image_shape...] ----
Status PrepareCol2Im(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "image_shape"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "block_shape"));
  const Tensor& x = ctx.input(0);
  if (!IsNumeric(x.dtype()))
    return NodeUnsupported(ctx, "input has dtype {}, expected a numeric type",
                           DTypeName(x.dtype()));
  for (size_t i = 1; i < 3; ++i) {
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kInt64}));
    if (ctx.input(i).rank() != 1)
      return NodeError(ctx, "{} has shape {}, expected a 1-D tensor",
                       i == 1 ? "image_shape" : "block_shape", ShapeToString(ctx.input(i).shape()));
  }
  Window win;
  win.image = ctx.input(1).ToInt64Vector();
  win.kernel = ctx.input(2).ToInt64Vector();
  const size_t r = win.image.size();
  if (r == 0 || win.kernel.size() != r)
    return NodeError(ctx, "image_shape {} and block_shape {} must have the same, non-zero length",
                     ShapeToString(win.image), ShapeToString(win.kernel));
  for (size_t i = 0; i < r; ++i)
    if (win.image[i] < 1 || win.kernel[i] < 1)
      return NodeError(ctx, "image_shape {} and block_shape {} must be positive",
                       ShapeToString(win.image), ShapeToString(win.kernel));
  if (x.rank() != 3)
    return NodeError(ctx, "input has shape {}, expected rank 3 [N, C * prod(block_shape), L]",
                     ShapeToString(x.shape()));
  const int64_t block = NumElements(win.kernel);
  if (x.dim(1) % block != 0)
    return NodeError(ctx, "input dim 1 is {}, not a multiple of prod(block_shape {}) = {}",
                     x.dim(1), ShapeToString(win.kernel), block);
  FERRY_ASSIGN_OR_RETURN(win.strides, AxisInts(ctx, "strides", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(win.dilations, AxisInts(ctx, "dilations", r, 1, 1));
  FERRY_ASSIGN_OR_RETURN(std::vector<int64_t> pads, AxisInts(ctx, "pads", 2 * r, 0, 0));
  win.pads.assign(pads.begin(), pads.begin() + static_cast<int64_t>(r));
  win.cols.resize(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t eff = (win.kernel[i] - 1) * win.dilations[i] + 1;
    const int64_t padded = win.image[i] + pads[i] + pads[i + r];
    if (padded < eff)
      return NodeError(ctx, "axis {}: padded image size {} is smaller than the dilated block {}", i,
                       padded, eff);
    win.cols[i] = (padded - eff) / win.strides[i] + 1;
  }
  if (NumElements(win.cols) != x.dim(2))
    return NodeError(ctx, "input has {} blocks (dim 2), expected {} (a {} grid of blocks)",
                     x.dim(2), NumElements(win.cols), ShapeToString(win.cols));
  Shape y_shape = {x.dim(0), x.dim(1) / block};
  y_shape.insert(y_shape.end(), win.image.begin(), win.image.end());
  ctx.set_output(0, x.dtype(), y_shape);

  auto st = std::make_unique<WindowState>();
  st->batch = x.dim(0);
  st->in_channels = x.dim(1);
  st->out_channels = x.dim(1) / block;
  SetWindowState(ctx, std::move(st), win);
  return Status::Ok();
}

template <typename T>
void RunCol2ImTyped(OpContext& ctx) {
  using A = ComputeType<T>;
  const WindowState& st = *ctx.state<WindowState>();
  const T* x = ctx.input(0).data<T>();
  T* y = ctx.output(0).data<T>();
  const int64_t s = st.inner_stride;
  ParallelFor(ctx, st.batch * st.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(static_cast<size_t>(st.image_size));
    for (int64_t p = begin; p < end; ++p) {
      std::fill(acc.begin(), acc.end(), A(0));
      // Plane p = (n, c) reads rows p * kernel_size + tap of the [N, C * K, L] input.
      for (const TapRow& t : st.taps) {
        const T* xr = x + (p * st.kernel_size + t.tap) * st.col_size + t.col;
        for (int64_t j = t.lo; j < t.hi; ++j)
          acc[static_cast<size_t>(t.image + j * s)] += static_cast<A>(xr[j]);
      }
      T* yp = y + p * st.image_size;
      for (int64_t i = 0; i < st.image_size; ++i)
        yp[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
    }
  });
}

void RunCol2Im(OpContext& ctx) {
  VisitNumeric(ctx.input(0).dtype(),
               [&](auto tag) { RunCol2ImTyped<typename decltype(tag)::type>(ctx); });
}

constexpr OpDef kOps[] = {
    {"", "Conv", 1, nullptr, PrepareConv, RunConv},
    {"", "ConvTranspose", 1, nullptr, PrepareConvTranspose, RunConvTranspose},
    {"", "Col2Im", 18, nullptr, PrepareCol2Im, RunCol2Im},
};

}  // namespace

std::span<const OpDef> ConvOps() {
  return kOps;
}

}  // namespace ferry::ops
