// Reference kernels: GridSample, RoiAlign, NonMaxSuppression (Resize and Upsample are in
// image.cc).
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

Status RequireFloat(const OpContext& ctx, size_t i) {
  return RequireDType(ctx, i, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16});
}

// ---- GridSample (opset 16: 4-D, bilinear/nearest/bicubic; opset 20: N-D, linear/cubic) ----
enum class GsMode { kLinear, kNearest, kCubic };
enum class GsPad { kZeros, kBorder, kReflection };

struct GsConfig {
  GsMode mode = GsMode::kLinear;
  GsPad pad = GsPad::kZeros;
  bool align_corners = false;
};

Result<GsConfig> GetGsConfig(const OpContext& ctx) {
  GsConfig c;
  std::string mode = ctx.attr_string("mode", ctx.opset() < 20 ? "bilinear" : "linear");
  if (mode == "bilinear" || mode == "linear")
    c.mode = GsMode::kLinear;
  else if (mode == "nearest")
    c.mode = GsMode::kNearest;
  else if (mode == "bicubic" || mode == "cubic")
    c.mode = GsMode::kCubic;
  else
    return NodeUnsupported(ctx, "mode '{}' is not supported", mode);
  std::string pad = ctx.attr_string("padding_mode", "zeros");
  if (pad == "zeros")
    c.pad = GsPad::kZeros;
  else if (pad == "border")
    c.pad = GsPad::kBorder;
  else if (pad == "reflection")
    c.pad = GsPad::kReflection;
  else
    return NodeUnsupported(ctx, "padding_mode '{}' is not supported", pad);
  c.align_corners = ctx.attr_int("align_corners", 0) != 0;
  return c;
}

Status PrepareGridSample(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "grid"));
  FERRY_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  FERRY_RETURN_IF_ERROR(RequireFloat(ctx, 1));
  FERRY_RETURN_IF_ERROR(GetGsConfig(ctx).status());
  const Tensor& x = ctx.input(0);
  const Tensor& g = ctx.input(1);
  if (x.rank() < 3 || (ctx.opset() < 20 && x.rank() != 4))
    return NodeError(ctx, "X has rank {}, expected {}", x.rank(), ctx.opset() < 20 ? "4" : ">= 3");
  int64_t nsp = x.rank() - 2;
  if (g.rank() != x.rank() || g.dim(0) != x.dim(0) || g.dim(g.rank() - 1) != nsp)
    return NodeError(ctx, "grid has shape {}, expected [{}, ..., {}] of rank {}",
                     ShapeToString(g.shape()), x.dim(0), nsp, x.rank());
  Shape out{x.dim(0), x.dim(1)};
  out.insert(out.end(), g.shape().begin() + 1, g.shape().end() - 1);
  ctx.set_output(0, x.dtype(), out);
  return Status::Ok();
}

// Reflects x into [lo, hi] by bouncing off the borders.
double Reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    double dx = lo - x;
    int64_t n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    double dx = x - hi;
    int64_t n = static_cast<int64_t>(dx / range);
    double r = dx - static_cast<double>(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

double CubicCoeff(double x) {  // Keys kernel with a = -0.75, as PyTorch
  constexpr double a = -0.75;
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

void RunGridSample(OpContext& ctx) {
  GsConfig c = GetGsConfig(ctx).value();
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  Tensor& y = ctx.output(0);
  const size_t nsp = static_cast<size_t>(x.rank() - 2);
  const int64_t n_batch = x.dim(0), channels = x.dim(1);
  Shape dims(x.shape().begin() + 2, x.shape().end());
  const int64_t in_size = NumElements(dims);
  const int64_t out_size = y.size() / std::max<int64_t>(1, n_batch * channels);
  std::vector<int64_t> strides = Strides(dims);
  std::vector<double> lo(nsp), hi(nsp);
  for (size_t i = 0; i < nsp; ++i) {
    lo[i] = c.align_corners ? 0.0 : -0.5;
    hi[i] = c.align_corners ? static_cast<double>(dims[i] - 1) : static_cast<double>(dims[i]) - 0.5;
  }
  VisitNumeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_integral_v<T>) {
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      std::vector<std::vector<int64_t>> idx(nsp);  // per dim: tap input index, -1 = zero padding
      std::vector<std::vector<double>> wts(nsp);
      for (int64_t n = 0; n < n_batch; ++n) {
        for (int64_t o = 0; o < out_size; ++o) {
          for (size_t i = 0; i < nsp; ++i) {
            // grid holds (x, y, ...) i.e. the innermost dimension first.
            double g = grid.GetAsDouble((n * out_size + o) * static_cast<int64_t>(nsp) +
                                        static_cast<int64_t>(nsp - 1 - i));
            double d = static_cast<double>(dims[i]);
            double v = c.align_corners ? (g + 1) / 2 * (d - 1) : ((g + 1) * d - 1) / 2;
            // Nearest rounds half to even in every rank (PyTorch, ONNX Runtime, the onnx
            // reference).
            if (c.mode == GsMode::kNearest) v = std::nearbyint(v);
            if (v < lo[i] || v > hi[i]) {
              if (c.pad == GsPad::kBorder)
                v = std::clamp(v, 0.0, d - 1);
              else if (c.pad == GsPad::kReflection)
                v = Reflect(v, lo[i], hi[i]);
            }
            auto tap = [&](int64_t k, double w) {
              if (c.pad == GsPad::kBorder)
                k = std::clamp<int64_t>(k, 0, dims[i] - 1);
              else if (c.pad == GsPad::kReflection)
                k = static_cast<int64_t>(Reflect(static_cast<double>(k), lo[i], hi[i]));
              if (k < 0 || k >= dims[i]) k = -1;
              idx[i].push_back(k);
              wts[i].push_back(w);
            };
            idx[i].clear();
            wts[i].clear();
            if (c.mode == GsMode::kNearest) {
              tap(static_cast<int64_t>(v), 1.0);
            } else {
              double f = std::floor(v), t = v - f;
              int64_t k0 = static_cast<int64_t>(f);
              if (c.mode == GsMode::kLinear) {
                tap(k0, 1 - t);
                tap(k0 + 1, t);
              } else {
                for (int64_t j = -1; j <= 2; ++j)
                  tap(k0 + j, CubicCoeff(static_cast<double>(j) - t));
              }
            }
          }
          for (int64_t ch = 0; ch < channels; ++ch) {
            const T* plane = src + (n * channels + ch) * in_size;
            auto sum = [&](auto&& self, size_t i, int64_t offset) -> double {
              if (i == nsp) return static_cast<double>(static_cast<ComputeType<T>>(plane[offset]));
              double acc = 0;
              for (size_t j = 0; j < idx[i].size(); ++j)
                if (idx[i][j] >= 0)
                  acc += wts[i][j] * self(self, i + 1, offset + idx[i][j] * strides[i]);
              return acc;
            };
            dst[(n * channels + ch) * out_size + o] =
                T(static_cast<ComputeType<T>>(sum(sum, 0, 0)));
          }
        }
      }
    }
  });
}

// ---- RoiAlign ----
Status PrepareRoiAlign(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, 3));
  FERRY_RETURN_IF_ERROR(RequireFloat(ctx, 0));
  FERRY_RETURN_IF_ERROR(RequireFloat(ctx, 1));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 2, {DType::kInt64, DType::kInt32}));
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& bi = ctx.input(2);
  if (x.rank() != 4) return NodeError(ctx, "X has rank {}, expected 4", x.rank());
  if (rois.rank() != 2 || rois.dim(1) != 4)
    return NodeError(ctx, "rois has shape {}, expected [num_rois, 4]", ShapeToString(rois.shape()));
  if (bi.rank() != 1 || bi.dim(0) != rois.dim(0))
    return NodeError(ctx, "batch_indices has shape {}, expected [{}]", ShapeToString(bi.shape()),
                     rois.dim(0));
  for (int64_t i = 0; i < bi.size(); ++i)
    if (bi.GetAsInt64(i) < 0 || bi.GetAsInt64(i) >= x.dim(0))
      return NodeError(ctx, "batch_indices[{}] is {}, expected in [0, {})", i, bi.GetAsInt64(i),
                       x.dim(0));
  std::string mode = ctx.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max")
    return NodeUnsupported(ctx, "mode '{}' is not supported", mode);
  std::string ctm = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return NodeUnsupported(ctx, "coordinate_transformation_mode '{}' is not supported", ctm);
  int64_t oh = ctx.attr_int("output_height", 1), ow = ctx.attr_int("output_width", 1);
  if (oh <= 0 || ow <= 0 || ctx.attr_int("sampling_ratio", 0) < 0)
    return NodeError(
        ctx, "output_height {} / output_width {} must be positive, sampling_ratio >= 0", oh, ow);
  ctx.set_output(0, x.dtype(), {rois.dim(0), x.dim(1), oh, ow});
  return Status::Ok();
}

// One bilinear sample point: four input offsets and weights (all zero when outside).
struct RoiSample {
  int64_t pos[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
};

RoiSample BilinearSample(double y, double x, int64_t height, int64_t width) {
  RoiSample s;
  // NaN coordinates (NaN or infinite roi boxes) sample nothing, like points outside.
  if (!(y >= -1.0 && y <= static_cast<double>(height) && x >= -1.0 &&
        x <= static_cast<double>(width)))
    return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low);
  double hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = y_low * width + x_low;
  s.pos[1] = y_low * width + x_high;
  s.pos[2] = y_high * width + x_low;
  s.pos[3] = y_high * width + x_high;
  s.w[0] = hy * hx;
  s.w[1] = hy * lx;
  s.w[2] = ly * hx;
  s.w[3] = ly * lx;
  return s;
}

void RunRoiAlign(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& batch_indices = ctx.input(2);
  Tensor& y = ctx.output(0);
  const int64_t channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const int64_t oh = y.dim(2), ow = y.dim(3);
  const bool max_mode = ctx.attr_string("mode", "avg") == "max";
  // Opset 10 has no coordinate_transformation_mode and behaves as output_half_pixel.
  const bool half_pixel = ctx.opset() >= 16 && ctx.attr_string("coordinate_transformation_mode",
                                                               "half_pixel") == "half_pixel";
  const double spatial_scale = ctx.attr_float("spatial_scale", 1.f);
  const int64_t sampling_ratio = ctx.attr_int("sampling_ratio", 0);
  VisitNumeric(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_integral_v<T>) {
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t r = 0; r < rois.dim(0); ++r) {
        double offset = half_pixel ? 0.5 : 0.0;
        double start_w = rois.GetAsDouble(r * 4 + 0) * spatial_scale - offset;
        double start_h = rois.GetAsDouble(r * 4 + 1) * spatial_scale - offset;
        double end_w = rois.GetAsDouble(r * 4 + 2) * spatial_scale - offset;
        double end_h = rois.GetAsDouble(r * 4 + 3) * spatial_scale - offset;
        double roi_w = end_w - start_w, roi_h = end_h - start_h;
        if (!half_pixel) {  // malformed ROIs are forced to 1x1
          roi_w = std::max(roi_w, 1.0);
          roi_h = std::max(roi_h, 1.0);
        }
        double bin_h = roi_h / static_cast<double>(oh), bin_w = roi_w / static_cast<double>(ow);
        int64_t grid_h =
            sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(bin_h));
        int64_t grid_w =
            sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(bin_w));
        double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
        std::vector<RoiSample> samples;
        for (int64_t ph = 0; ph < oh; ++ph)
          for (int64_t pw = 0; pw < ow; ++pw)
            for (int64_t iy = 0; iy < grid_h; ++iy) {
              double yy = start_h + static_cast<double>(ph) * bin_h +
                          (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
              for (int64_t ix = 0; ix < grid_w; ++ix) {
                double xx = start_w + static_cast<double>(pw) * bin_w +
                            (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
                samples.push_back(BilinearSample(yy, xx, height, width));
              }
            }
        int64_t b = batch_indices.GetAsInt64(r);
        for (int64_t ch = 0; ch < channels; ++ch) {
          const T* plane = src + (b * channels + ch) * height * width;
          size_t si = 0;
          for (int64_t p = 0; p < oh * ow; ++p) {
            double acc = 0;
            bool first = true;
            for (int64_t k = 0; k < grid_h * grid_w; ++k, ++si) {
              const RoiSample& s = samples[si];
              double v[4];
              for (int q = 0; q < 4; ++q)
                v[q] = s.w[q] * static_cast<double>(static_cast<ComputeType<T>>(plane[s.pos[q]]));
              if (!max_mode) {
                acc += v[0] + v[1] + v[2] + v[3];
              } else {
                // As ONNX Runtime: the max over samples of the largest weighted corner.
                double m = std::max(std::max(v[0], v[1]), std::max(v[2], v[3]));
                acc = first ? m : std::max(acc, m);
                first = false;
              }
            }
            if (!max_mode) acc /= count;
            dst[((r * channels + ch) * oh * ow) + p] = T(static_cast<ComputeType<T>>(acc));
          }
        }
      }
    }
  });
}

// ---- NonMaxSuppression ----
Status PrepareNonMaxSuppression(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 5));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "boxes"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "scores"));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kFloat}));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, 1, {DType::kFloat}));
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4)
    return NodeError(ctx, "boxes has shape {}, expected [batches, boxes, 4]",
                     ShapeToString(boxes.shape()));
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    return NodeError(ctx, "scores has shape {}, expected [{}, classes, {}]",
                     ShapeToString(scores.shape()), boxes.dim(0), boxes.dim(1));
  if (ctx.has_input(2)) FERRY_RETURN_IF_ERROR(RequireDType(ctx, 2, {DType::kInt64}));
  for (size_t i : {2, 3, 4}) {
    if (!ctx.has_input(i)) continue;
    if (i > 2) FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kFloat}));
    if (ctx.input(i).size() != 1)
      return NodeError(ctx, "input {} has shape {}, expected a single value", i,
                       ShapeToString(ctx.input(i).shape()));
  }
  int64_t cpb = ctx.attr_int("center_point_box", 0);
  if (cpb != 0 && cpb != 1) return NodeError(ctx, "center_point_box is {}, expected 0 or 1", cpb);
  return Status::Ok();
}

struct Box {
  float y1, x1, y2, x2;  // y1 <= y2, x1 <= x2
};

Box ReadBox(const float* p, bool center_point) {
  if (center_point) {
    float xc = p[0], yc = p[1], w = p[2], h = p[3];
    return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
  }
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
}

// True when the IOU of a and b exceeds the threshold.
bool Suppresses(const Box& a, const Box& b, float iou_threshold) {
  float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0 || ih <= 0 || iw <= 0) return false;
  float inter = ih * iw;
  return inter / (area_a + area_b - inter) > iou_threshold;
}

void RunNonMaxSuppression(OpContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  const int64_t batches = boxes.dim(0), n_boxes = boxes.dim(1), classes = scores.dim(1);
  int64_t max_out = ctx.has_input(2) ? ctx.input(2).data<int64_t>()[0] : 0;
  float iou_threshold = ctx.has_input(3) ? ctx.input(3).data<float>()[0] : 0.f;
  bool has_score_threshold = ctx.has_input(4);
  float score_threshold = has_score_threshold ? ctx.input(4).data<float>()[0] : 0.f;
  bool center_point = ctx.attr_int("center_point_box", 0) == 1;
  std::vector<int64_t> selected;  // triples (batch, class, box)
  for (int64_t b = 0; b < batches && max_out > 0; ++b) {
    std::vector<Box> bx(static_cast<size_t>(n_boxes));
    for (int64_t i = 0; i < n_boxes; ++i)
      bx[static_cast<size_t>(i)] =
          ReadBox(boxes.data<float>() + (b * n_boxes + i) * 4, center_point);
    for (int64_t c = 0; c < classes; ++c) {
      const float* sc = scores.data<float>() + (b * classes + c) * n_boxes;
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n_boxes; ++i)
        if (!has_score_threshold || sc[i] > score_threshold) order.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t l, int64_t r) { return sc[l] > sc[r]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool suppressed = false;
        for (int64_t k : kept)
          if (Suppresses(bx[static_cast<size_t>(k)], bx[static_cast<size_t>(i)], iou_threshold)) {
            suppressed = true;
            break;
          }
        if (!suppressed) kept.push_back(i);
      }
      for (int64_t k : kept) selected.insert(selected.end(), {b, c, k});
    }
  }
  int64_t n = static_cast<int64_t>(selected.size()) / 3;
  Tensor& out = ctx.allocate_output(0, DType::kInt64, {n, 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
}

constexpr OpDef kOps[] = {
    {"", "GridSample", 16, nullptr, PrepareGridSample, RunGridSample},
    {"", "RoiAlign", 10, nullptr, PrepareRoiAlign, RunRoiAlign},
    {"", "NonMaxSuppression", 10, nullptr, PrepareNonMaxSuppression, RunNonMaxSuppression},
};

}  // namespace

std::span<const OpDef> ImageOps2() {
  return kOps;
}

}  // namespace ferry::ops
