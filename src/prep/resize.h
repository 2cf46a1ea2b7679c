// Resize filters reproducing Pillow's Image.resize, OpenCV's cv2.resize and torchvision's tensor
// resize on 8-bit images,
// each with its library's arithmetic (coefficients, fixed-point precision, rounding, borders).
// Pure functions: safe to call from many threads at once.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "prep/image.h"
#include "prep/spec.h"

namespace ferry::prep {

// Resizes `in` (1 or 3 channels) to out_height x out_width (each >= 1) with `filter`.
// Precondition (the caller validates): in and out sizes >= 1.
Image Resize(const Image& in, int64_t out_height, int64_t out_width, Filter filter);

// torchvision 0.14's resize of a uint8 tensor (bilinear, with or without antialias) as torch
// 1.13 computes it on the CPU (resize_torchvision.cc); what Resize calls for the torchvision_*
// filters. Same precondition.
Image TorchvisionResize(const Image& in, int64_t out_height, int64_t out_width, bool antialias);
// torchvision's resize of a float tensor (resize.tensor: float): each pixel p taken as
// value[p] (to_tensor's p / 255.f, or p * scale), resized with the same arithmetic, unrounded;
// interleaved HWC.
std::vector<float> TorchvisionResizeFloat(const Image& in, int64_t out_height, int64_t out_width,
                                          bool antialias, const std::array<float, 256>& value);

}  // namespace ferry::prep
