// Resize's parameters and 1-D filter taps, as the reference kernel computes them (image.cc); the
// cpu provider's Resize (ops/cpu/resize.cc) reuses them so both pick the same input pixels and
// weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/op.h"

namespace ferry::ops {

enum class ResizeMode { kNearest, kLinear, kCubic };

struct ResizeConfig {
  ResizeMode mode = ResizeMode::kNearest;
  std::string ctm;           // coordinate_transformation_mode
  std::string nearest_mode;  // round_prefer_floor, round_prefer_ceil, floor, ceil, simple
  double cubic_a = -0.75;
  bool exclude_outside = false, antialias = false;
  double extrapolation_value = 0;
  Shape out;
  std::vector<double> scales;     // per axis: length_resized / length_original
  std::vector<double> out_width;  // per axis: in * scale, possibly fractional
  std::vector<double> roi_start, roi_end;
};

// The node's configuration (Resize opsets 10-19, Upsample 7-9); errors name the node.
Result<ResizeConfig> GetResizeConfig(const OpContext& ctx);

// The taps of one axis: for output coordinate o, taps [begin[o], begin[o+1]) of idx / w, or
// extrapolate[o] when tf_crop_and_resize maps it outside the input.
struct ResizeTaps {
  std::vector<int64_t> begin, idx;
  std::vector<double> w;
  std::vector<uint8_t> extrapolate;
};
ResizeTaps ComputeResizeTaps(const ResizeConfig& c, size_t axis, int64_t in_len, int64_t out_len);

}  // namespace ferry::ops
