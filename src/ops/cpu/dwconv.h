// Internal to the cpu provider: a 2-D depthwise float32 convolution (group == C_in == C_out,
// weights [C, 1, kh, kw]), dilation 1, own AVX-512 kernel, NHWC in and out, for the inverted
// residual blocks of EfficientNet / MobileNetV3 / MnasNet. conv.cc picks it per shape
// (DwConvWanted).
//
// y[n][oy][ox][c] = act(bias[c] + sum_{ky, kx} x[n][oy*sh + ky - pt][ox*sw + kx - pl][c] *
// w[c][ky][kx] (+ residual)):
//  * the weights packed once at prepare as [kh * kw][Cp] (Cp: C rounded up to 16, zeros past C);
//  * per output row (n, oy), the rows ky whose input row exists, the channels in chunks whose
//    weights fit in L1; the pixels whose taps all fall inside the image in register tiles of 8
//    pixels x 16 channels (8 zmm accumulators; for 3x3 / 5x5 at stride 1 / 2 each input vector
//    of a tap row loaded once and used for every output pixel it feeds), every channel block of a
//    tile before the next tile; the border pixels and the last < 8 interior ones in tiles of T
//    pixels x B channel blocks (T * B accumulators), the taps clipped; a masked block for
//    C % 16;
//  * bias, residual and the activation (Relu / Clip / SiLU with an own exp polynomial and a
//    refined reciprocal / HardSwish) applied in registers before the store.
// An input in another layout is first copied to NHWC, a plain output written to NHWC scratch and
// transposed. The output rows are split over the OpenMP threads in fixed contiguous chunks; each
// output element is summed by one thread in a fixed order (bit-identical at any thread count).
// AVX-512F only (DwConvSupported); elsewhere conv.cc keeps oneDNN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/cpu/cpu_kernel.h"
#include "ops/cpu/packed.h"

namespace ferry::ops::cpu {

struct DwShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input [N, C, H, W] (C == output channels)
  int64_t kh = 0, kw = 0;              // kernel
  int64_t sh = 1, sw = 1;              // strides
  int64_t oh = 0, ow = 0;              // output spatial size
  int64_t pad_t = 0, pad_l = 0;        // leading pads (the trailing ones follow from oh, ow)
};

// The CPU has AVX-512F and the kernel is not switched off (FERRY_DWCONV=onednn or
// SetDwConvMode(0)).
bool DwConvSupported();
// 0: off (oneDNN), 1: every eligible depthwise conv, -1: back to the default (the rule, or the
// environment variable FERRY_DWCONV = onednn / own / auto, read once). Takes effect at the next
// prepare that rebuilds a Conv's state.
void SetDwConvMode(int mode);
// Whether conv.cc should run this depthwise conv (with fusion f) here: supported, stride 1 or 2,
// and the shape class measured faster than oneDNN (src/ops/cpu/README.md), or forced on.
bool DwConvWanted(const DwShape& s, const Fusion& f);
// Number of DwConv runs in this process (tests check the path was taken).
uint64_t DwConvRuns();

class DwConv {
 public:
  // `in`, `out`, `res`: layouts of the input, output and residual (read when fusion.sum).
  // fusion.act: kNone, kRelu, kClip, kSwish or kHardSwish.
  DwConv(const DwShape& s, Layout in, Layout out, Layout res, const Fusion& fusion);
  // w: [C][1][kh][kw] float32 (row-major).
  // The packed form of w (a new buffer), and the one Run reads.
  PackedPtr Pack(const float* w) const;
  void SetPacked(PackedPtr p) { w_ = std::move(p); }
  void PackWeights(const float* w) { SetPacked(Pack(w)); }
  // Everything the packed bytes depend on besides w (its PackCache tag).
  std::string PackTag() const;
  size_t scratch_bytes() const { return total_; }
  // bias: [C] or null; res: the residual (may alias y); scratch: scratch_bytes(), 64-byte
  // aligned. Runs on the calling thread's OpenMP team.
  void Run(const float* x, const float* bias, const float* res, float* y, void* scratch) const;
  // Output rows [oy_begin, oy_end) of image 0 of `band` (the prepared shape with another h, oh
  // and pad_t: a horizontal strip of a larger image), on the calling thread only: x, y NHWC
  // strips, no residual; bias_padded: padded_channels() floats, 64-byte aligned.
  void RunRows(const DwShape& band, const float* x, const float* bias_padded, float* y,
               int64_t oy_begin, int64_t oy_end) const;
  int64_t padded_channels() const { return cp_; }

 private:
  DwShape s_;
  Layout in_, out_, res_;
  Fusion fusion_;
  int64_t cp_ = 0;            // C rounded up to 16
  PackedPtr w_;               // packed weights (Pack), shared when constant
  size_t packed_floats_ = 0;  // floats of a packed form
  // Scratch layout (byte offsets).
  size_t off_x_ = 0, off_y_ = 0, off_r_ = 0, off_bias_ = 0, total_ = 0;
};

}  // namespace ferry::ops::cpu
