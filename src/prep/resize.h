// Resize filters reproducing Pillow's Image.resize and OpenCV's cv2.resize on 8-bit images,
// each with its library's arithmetic (coefficients, fixed-point precision, rounding, borders).
// Pure functions: safe to call from many threads at once.
#pragma once

#include <cstdint>

#include "prep/image.h"
#include "prep/spec.h"

namespace ferry::prep {

// Resizes `in` (1 or 3 channels) to out_height x out_width (each >= 1) with `filter`.
// Precondition (the caller validates): in and out sizes >= 1.
Image Resize(const Image& in, int64_t out_height, int64_t out_width, Filter filter);

}  // namespace ferry::prep
