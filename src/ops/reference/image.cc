// Reference kernels: Resize (opsets 10-19) and Upsample (opsets 7-9). GridSample, RoiAlign and
// NonMaxSuppression live in image2.cc.
//
// Resize is separable: for every resized axis and every output coordinate we compute the list of
// (input index, weight) taps of the 1-D filter (nearest, linear, cubic, optionally antialiased),
// then each output element is the weighted sum over the cartesian product of its taps. Weights
// and sums are computed in double, as the ONNX numpy reference does.
#include "ops/reference/common.h"
#include "ops/reference/resize.h"

namespace ferry::ops {

namespace {

using Mode = ResizeMode;

// A tensor input counts as given when present and non-empty (opset 11 passes empty tensors).
bool Given(const OpContext& ctx, size_t i) {
  return ctx.input_is_tensor(i) && ctx.input(i).size() > 0;
}

std::vector<double> ReadDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) v[static_cast<size_t>(i)] = t.GetAsDouble(i);
  return v;
}

Result<Mode> ParseMode(const OpContext& ctx) {
  std::string m = ctx.attr_string("mode", "nearest");
  if (m == "nearest") return Mode::kNearest;
  if (m == "linear" || m == "bilinear") return Mode::kLinear;
  if (m == "cubic" && ctx.node().op_type == "Resize") return Mode::kCubic;
  return NodeUnsupported(ctx, "mode '{}' is not supported", m);
}

}  // namespace

Result<ResizeConfig> GetResizeConfig(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.rank();
  const bool upsample = ctx.node().op_type == "Upsample";
  const bool legacy = upsample || ctx.opset() < 11;  // Upsample and Resize-10
  ResizeConfig c;
  FERRY_ASSIGN_OR_RETURN(c.mode, ParseMode(ctx));
  c.ctm = legacy ? "asymmetric" : ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  c.nearest_mode = legacy ? "simple" : ctx.attr_string("nearest_mode", "round_prefer_floor");
  c.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75f);
  c.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
  c.extrapolation_value = ctx.attr_float("extrapolation_value", 0.f);
  c.antialias = ctx.attr_int("antialias", 0) != 0;
  static constexpr std::string_view kCtms[] = {
      "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCtms), std::end(kCtms), c.ctm) == std::end(kCtms))
    return NodeUnsupported(ctx, "coordinate_transformation_mode '{}' is not supported", c.ctm);
  static constexpr std::string_view kNearest[] = {"round_prefer_floor", "round_prefer_ceil",
                                                  "floor", "ceil", "simple"};
  if (std::find(std::begin(kNearest), std::end(kNearest), c.nearest_mode) == std::end(kNearest))
    return NodeUnsupported(ctx, "nearest_mode '{}' is not supported", c.nearest_mode);
  if (c.antialias && c.mode == Mode::kNearest)
    return NodeUnsupported(ctx, "antialias is not supported with mode 'nearest'");

  // Which axes the scales / sizes / roi refer to (opset 18 `axes`; all axes otherwise).
  std::vector<int64_t> axes = ctx.attr_ints("axes");
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : axes) {
    FERRY_ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank, "axes value"));
    if (seen[static_cast<size_t>(a)]) return NodeError(ctx, "axis {} is repeated in axes", a);
    seen[static_cast<size_t>(a)] = true;
  }
  const size_t na = axes.size();

  // Locate the inputs by opset.
  std::vector<double> scales_in, roi_in;
  std::vector<int64_t> sizes_in;
  if (upsample && ctx.opset() < 9) {
    std::vector<float> s = ctx.attr_floats("scales");
    scales_in.assign(s.begin(), s.end());
    if (scales_in.empty()) return NodeError(ctx, "the scales attribute is missing");
  } else if (legacy) {
    if (!Given(ctx, 1)) return NodeError(ctx, "input 1 (scales) is missing");
    scales_in = ReadDoubles(ctx.input(1));
  } else {
    if (Given(ctx, 1)) roi_in = ReadDoubles(ctx.input(1));
    if (Given(ctx, 2)) scales_in = ReadDoubles(ctx.input(2));
    if (Given(ctx, 3)) sizes_in = ctx.input(3).ToInt64Vector();
    if (scales_in.empty() == sizes_in.empty())
      return NodeError(ctx, "exactly one of scales and sizes must be given, got {} and {}",
                       scales_in.empty() ? "none" : "scales", sizes_in.empty() ? "none" : "sizes");
  }
  if (!scales_in.empty() && scales_in.size() != na)
    return NodeError(ctx, "scales has {} values, expected {}", scales_in.size(), na);
  if (!sizes_in.empty() && sizes_in.size() != na)
    return NodeError(ctx, "sizes has {} values, expected {}", sizes_in.size(), na);

  c.roi_start.assign(static_cast<size_t>(rank), 0.0);
  c.roi_end.assign(static_cast<size_t>(rank), 1.0);
  if (c.ctm == "tf_crop_and_resize") {
    if (roi_in.size() != 2 * na)
      return NodeError(ctx, "roi has {} values, expected {} for tf_crop_and_resize", roi_in.size(),
                       2 * na);
    for (size_t i = 0; i < na; ++i) {
      c.roi_start[static_cast<size_t>(axes[i])] = roi_in[i];
      c.roi_end[static_cast<size_t>(axes[i])] = roi_in[na + i];
    }
  }

  c.out = x.shape();
  c.scales.assign(static_cast<size_t>(rank), 1.0);
  c.out_width.assign(x.shape().begin(), x.shape().end());
  if (!scales_in.empty()) {
    for (size_t i = 0; i < na; ++i) {
      size_t d = static_cast<size_t>(axes[i]);
      if (!(scales_in[i] > 0))
        return NodeError(ctx, "scales[{}] is {}, expected > 0", i, scales_in[i]);
      c.scales[d] = scales_in[i];
      c.out_width[d] = static_cast<double>(x.dim(axes[i])) * scales_in[i];
      if (c.ctm == "tf_crop_and_resize") c.out_width[d] *= c.roi_end[d] - c.roi_start[d];
      c.out[d] = static_cast<int64_t>(std::floor(c.out_width[d]));
    }
  } else {
    for (size_t i = 0; i < na; ++i)
      if (sizes_in[i] < 0) return NodeError(ctx, "sizes[{}] is {}, expected >= 0", i, sizes_in[i]);
    std::string policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      return NodeUnsupported(ctx, "keep_aspect_ratio_policy '{}' is not supported", policy);
    double common = policy == "not_larger" ? INFINITY : 0.0;
    for (size_t i = 0; i < na; ++i) {
      double s = static_cast<double>(sizes_in[i]) / static_cast<double>(x.dim(axes[i]));
      common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
    }
    for (size_t i = 0; i < na; ++i) {
      size_t d = static_cast<size_t>(axes[i]);
      double in = static_cast<double>(x.dim(axes[i]));
      if (policy == "stretch") {
        c.out[d] = sizes_in[i];
        c.scales[d] = static_cast<double>(sizes_in[i]) / in;
      } else {
        c.scales[d] = common;
        c.out[d] = static_cast<int64_t>(std::floor(common * in + 0.5));
      }
      c.out_width[d] = static_cast<double>(c.out[d]);
    }
  }
  for (int64_t d = 0; d < rank; ++d)
    if (c.out[d] > 0 && x.dim(d) == 0)
      return NodeError(ctx, "cannot resize empty axis {} to {}", d, c.out[d]);
  return c;
}

namespace {

double CubicWeight(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// Original coordinate of output coordinate x on axis d.
double OriginalCoordinate(const ResizeConfig& c, size_t d, int64_t in_len, int64_t out_len,
                          double x) {
  double scale = c.scales[d], ow = c.out_width[d], in = static_cast<double>(in_len);
  const std::string& m = c.ctm;
  if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(out_len) / ow;
    double offset = in / 2 * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (m == "pytorch_half_pixel") return out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (m == "align_corners") return out_len == 1 ? 0.0 : x * (in - 1) / (ow - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  // tf_crop_and_resize
  double s = c.roi_start[d], e = c.roi_end[d];
  double r = out_len == 1 ? (e - s) * (in - 1) / 2 : x * (e - s) * (in - 1) / (ow - 1);
  return r + s * (in - 1);
}

}  // namespace

ResizeTaps ComputeResizeTaps(const ResizeConfig& c, size_t d, int64_t in_len, int64_t out_len) {
  ResizeTaps t;
  t.begin.push_back(0);
  t.extrapolate.assign(static_cast<size_t>(out_len), 0);
  // Antialiasing stretches the filter by 1/scale when downscaling.
  double support_scale = c.antialias ? std::min(c.scales[d], 1.0) : 1.0;
  std::vector<double> w;
  for (int64_t o = 0; o < out_len; ++o) {
    double xo = OriginalCoordinate(c, d, in_len, out_len, static_cast<double>(o));
    auto add = [&](int64_t i, double weight) {
      t.idx.push_back(std::clamp<int64_t>(i, 0, in_len - 1));
      t.w.push_back(weight);
    };
    if (c.ctm == "tf_crop_and_resize" && (xo < 0 || xo > static_cast<double>(in_len - 1))) {
      t.extrapolate[static_cast<size_t>(o)] = 1;
    } else if (c.mode == Mode::kNearest) {
      double f = std::floor(xo), frac = xo - f;
      int64_t i = static_cast<int64_t>(f);
      const std::string& nm = c.nearest_mode;
      bool up = false;
      if (frac != 0) {
        if (nm == "round_prefer_floor")
          up = frac > 0.5;
        else if (nm == "round_prefer_ceil")
          up = frac >= 0.5;
        else if (nm == "ceil")
          up = true;
        else if (nm == "simple")
          up = c.scales[d] < 1;  // Resize-10 / Upsample: ceil when shrinking
      }
      add(up ? i + 1 : i, 1.0);
    } else {
      // Taps base-k+1 .. base+k around xo, with ratio = xo - base in (0, 1].
      double base_f = std::floor(xo);
      if (base_f == xo) base_f -= 1;
      double ratio = xo - base_f;
      int64_t base = static_cast<int64_t>(base_f);
      // Half-width of the filter: 1 (linear) or 2 (cubic), stretched by 1/scale with antialias.
      double radius = c.mode == Mode::kLinear ? 1.0 : 2.0;
      int64_t k = static_cast<int64_t>(-std::floor(-radius / support_scale));
      w.assign(static_cast<size_t>(2 * k), 0.0);
      double sum = 0;
      for (int64_t j = 0; j < 2 * k; ++j) {
        double dist = static_cast<double>(j - k + 1) - ratio;  // tap position minus xo
        double v;
        if (c.mode == Mode::kLinear)
          v = std::max(0.0, 1 - std::abs(dist * support_scale));
        else
          v = CubicWeight(dist * support_scale, c.cubic_a);
        int64_t i = base - k + 1 + j;
        if (c.exclude_outside && (i < 0 || i >= in_len)) v = 0;
        w[static_cast<size_t>(j)] = v;
        sum += v;
      }
      bool normalize = c.antialias || c.exclude_outside;
      for (int64_t j = 0; j < 2 * k; ++j) {
        double v = normalize ? w[static_cast<size_t>(j)] / sum : w[static_cast<size_t>(j)];
        if (v != 0) add(base - k + 1 + j, v);
      }
    }
    t.begin.push_back(static_cast<int64_t>(t.idx.size()));
  }
  return t;
}

namespace {

Status PrepareResize(OpContext& ctx) {
  bool upsample = ctx.node().op_type == "Upsample";
  size_t max_in = upsample ? (ctx.opset() < 9 ? 1 : 2) : (ctx.opset() < 11 ? 2 : 4);
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, max_in));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  if (!IsNumeric(ctx.input(0).dtype()))
    return NodeUnsupported(ctx, "X has dtype {}, expected a numeric type",
                           DTypeName(ctx.input(0).dtype()));
  FERRY_ASSIGN_OR_RETURN(ResizeConfig c, GetResizeConfig(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), c.out);
  return Status::Ok();
}

template <typename T>
T FromDouble(double v) {
  if constexpr (std::is_integral_v<T>) {
    v = std::nearbyint(v);
    v = std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()),
                   static_cast<double>(std::numeric_limits<T>::max()));
    return static_cast<T>(v);
  } else {
    return static_cast<T>(static_cast<ComputeType<T>>(v));
  }
}

void RunResize(OpContext& ctx) {
  ResizeConfig c = GetResizeConfig(ctx).value();
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  const size_t rank = static_cast<size_t>(x.rank());
  if (y.size() == 0) return;
  std::vector<ResizeTaps> taps(rank);
  for (size_t d = 0; d < rank; ++d)
    taps[d] = ComputeResizeTaps(c, d, x.dim(static_cast<int64_t>(d)), c.out[d]);
  std::vector<int64_t> in_strides = Strides(x.shape());
  VisitNumeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = x.data<T>();
    T* dst = y.data<T>();
    ParallelFor(ctx, y.size(), 256, [&](int64_t lo, int64_t hi) {
      std::vector<int64_t> oc(rank);
      for (int64_t e = lo; e < hi; ++e) {
        bool extrapolate = false;
        for (int64_t r = e, d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
          oc[d] = r % c.out[d];
          r /= c.out[d];
          extrapolate = extrapolate || taps[d].extrapolate[static_cast<size_t>(oc[d])];
        }
        if (extrapolate) {
          dst[e] = FromDouble<T>(c.extrapolation_value);
          continue;
        }
        // Weighted sum over the cartesian product of the axes' taps (innermost axis fastest).
        auto sum = [&](auto&& self, size_t d, int64_t offset) -> double {
          if (d == rank) return static_cast<double>(static_cast<ComputeType<T>>(src[offset]));
          const ResizeTaps& t = taps[d];
          double acc = 0;
          for (int64_t j = t.begin[oc[d]]; j < t.begin[oc[d] + 1]; ++j)
            acc += t.w[j] * self(self, d + 1, offset + t.idx[j] * in_strides[d]);
          return acc;
        };
        dst[e] = FromDouble<T>(sum(sum, 0, 0));
      }
    });
  });
}

constexpr OpDef kOps[] = {
    {"", "Resize", 10, nullptr, PrepareResize, RunResize},
    {"", "Upsample", 7, nullptr, PrepareResize, RunResize},
};

}  // namespace

std::span<const OpDef> ImageOps() {
  return kOps;
}

}  // namespace ferry::ops
