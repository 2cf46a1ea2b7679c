// Internal to the cpu provider: a network's first convolution — few input channels (an RGB image,
// at most 4), plain NCHW input, up to 64 output channels written channels-last — with an own
// AVX-512 kernel. oneDNN 2.6 needs the image reordered to NHWC first (a pass over it) and then
// runs its NHWC kernel at ~60 GFLOP/s on these shapes (ResNet-18's 7x7 stride-2 3 -> 64: 1.85 ms
// with the reorder); the own kernel reads the plain rows where they are. conv.cc picks it
// (StemWanted).
//
// y[n][oy][ox][k] = act(bias[k] + sum_{c, ky, kx} x[n][c][oy*sh + ky - pt][ox*sw + kx - pl] *
// w[k][c][ky][kx]):
//  * W packed once at prepare as [C][kh][kw][P * 16] (P = ceil(K / 16) vectors, zeros past K);
//  * per output row, tiles of R pixels (24 accumulators: R = 6 / 8 / 12 for 4 / 3 / 1-2 vectors):
//    for every tap with its input row inside the image, each pixel's input broadcast and FMA'd
//    with the tap's K weights; pixels whose taps all fall inside the row skip the bounds checks;
//  * Relu / Clip / SiLU / HardSwish (act512.h) on the registers, a masked store per pixel;
//  * output rows split over the OpenMP threads in fixed contiguous chunks; each output element
//    summed by one thread in a fixed order (bit-identical at any thread count).
// AVX-512F only (StemSupported); elsewhere oneDNN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/cpu/cpu_kernel.h"
#include "ops/cpu/dwconv.h"
#include "ops/cpu/packed.h"

namespace ferry::ops::cpu {

// The window of a depthwise conv (input [N, C, H, W] plain here, kernel, strides, output size,
// leading pads) plus the output channels.
struct StemShape : DwShape {
  int64_t k = 0;
};

// The CPU has AVX-512F and the kernel is not switched off (FERRY_STEM=onednn).
bool StemSupported();
// Whether the kernel can compute this conv: AVX-512 (StemSupported), C <= 4, K <= 64, kernels up
// to 11x11, no residual, no GELU, a non-empty output.
bool StemTakes(const StemShape& s, const Fusion& fusion);
// What StemTakes, and by measurement (stem.cc) kernels up to 3x3 with 24+ output channels or a
// SiLU / HardSwish; FERRY_STEM=own takes every shape StemTakes.
bool StemWanted(const StemShape& s, const Fusion& fusion);
// Tests: 0 never, 1 every shape the kernel takes (as FERRY_STEM=own), -1 back to the environment.
void SetStemModeForTesting(int mode);
// Whether the first conv + MaxPool pattern (stem.cc) computes this conv and the pool after it:
// by measurement kernels up to 7x7 with 24+ output channels or a SiLU / HardSwish (the 7x7 stems
// too, which StemWanted leaves to oneDNN on their own); FERRY_STEM_POOL=own every shape the
// kernel takes (up to 11x11), =onednn never (the conv and the pool then run separately).
bool StemPoolWanted(const StemShape& s, const Fusion& fusion);
// Tests: 0 never, 1 every shape the kernel takes (as FERRY_STEM_POOL=own), -1 the environment.
// Takes effect at the next session build (matching) and state build (prepare).
void SetStemPoolModeForTesting(int mode);
// Number of first conv + MaxPool pattern runs in this process (tests).
uint64_t StemPoolRuns();
// Tests: the conv rows one strip of the pattern may buffer, in bytes (a few: one pooled row per
// strip); 0 the default. Takes effect when the pattern's state is built.
void SetStemPoolStripBytesForTesting(int64_t bytes);
// Number of StemConv runs in this process (tests).
uint64_t StemRuns();

class StemConv {
 public:
  // fusion.act: kNone, kRelu, kClip, kSwish or kHardSwish (no sum).
  StemConv(const StemShape& s, const Fusion& fusion);
  // w: [K][C][kh][kw].
  // The packed form of w (a new buffer), and the one Run reads.
  PackedPtr Pack(const float* w) const;
  void SetPacked(PackedPtr p) { w_ = std::move(p); }
  void PackWeights(const float* w) { SetPacked(Pack(w)); }
  // Everything the packed bytes depend on besides w (its PackCache tag).
  std::string PackTag() const;
  // x: plain [N, C, H, W]; bias [K] or null; y: NHWC [N, OH, OW, K].
  void Run(const float* x, const float* bias, float* y) const;
  // Output rows [r0, r1) (row = n * OH + oy) on the calling thread, written to `dst` one after
  // the other (OW * K floats each) or, when dst is null, to their place in y.
  void RunRows(const float* x, const float* bias, float* y, int64_t r0, int64_t r1,
               float* dst) const;
  const StemShape& shape() const { return s_; }

 private:
  StemShape s_;
  Fusion fusion_;
  int64_t vecs_ = 1;
  PackedPtr w_;               // packed weights (Pack), shared when constant
  size_t packed_floats_ = 0;  // floats of a packed form
};

}  // namespace ferry::ops::cpu
