// Internal to the cpu provider: the own max pooling loops (pool.cc) on channel vectors, shared
// with stem.cc's first conv + MaxPool pattern.
#pragma once

#include <cstdint>

namespace ferry::ops::cpu {

// Max pooling on channel vectors: `images` images of h x w pixels, each pixel `vc` contiguous
// floats (NHWC: the C channels of an image; channel-blocked: one block of 8 / 16).
struct VecPoolGeom {
  int64_t images = 0, vc = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 0, kw = 0, sh = 0, sw = 0, dh = 0, dw = 0, pt = 0, pl = 0;
};

// Windows of at most this many taps (larger ones stay on oneDNN).
inline constexpr int64_t kMaxTaps = 256;

// One output row (image `img`, row `oy`) of max pooling on channel vectors: y (img, oy) from x,
// both laid out as `g` says. Every window must hold at least one input pixel (the reference
// prepare rejects others); pads never win; a NaN in a window is the result, as in the reference.
using VecMaxPoolRowFn = void (*)(const float* x, float* y, const VecPoolGeom& g, int64_t img,
                                 int64_t oy);
// The row function on the widest ISA the CPU has (SetMaxPoolIsaForTesting caps it).
VecMaxPoolRowFn VecMaxPoolRow();

// One output row (plane `plane` = n * C + c, row `oy`) of max pooling on plain NCHW planes (`g`
// with vc 1, images = N * C): taps in row-major window order, the first maximum wins, a NaN in
// a window is the result, a window with no input pixel gives 0 (the reference's rules). Used
// where oneDNN has only its slow simple_nchw / ref pooling (uneven pads on plain layouts).
void PlainMaxPoolRow(const float* x, float* y, const VecPoolGeom& g, int64_t plane, int64_t oy);

}  // namespace ferry::ops::cpu
