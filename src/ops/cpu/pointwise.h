// Internal to the cpu provider: a 1x1, stride-1, unpadded, group-1 float32 convolution on a large
// channels-last image with few channels (the expand / project convs of MobileNetV2 / V3,
// EfficientNet, MnasNet at 112x112 .. 28x28), own AVX-512 kernel. There oneDNN 2.6's
// `brgconv_1x1` runs below half its speed once a post-op is attached (16 -> 64 channels at
// 112x112 with Relu: 0.66 ms, hot caches, against 0.36 for 16 -> 96 without), and a fused
// residual costs a copy of it into the output first. conv.cc picks it per shape (PointwiseWanted).
//
// y[p][k] = act(bias[k] + sum_c x[p][c] * w[k][c] (+ residual[p][k])), p over all N*H*W pixels:
//  * W packed once at prepare per block of up to 64 output channels, [C][P * 16] (P = the block's
//    16-channel vectors, zeros past K);
//  * per block of R pixels (R = 24 / P rounded: 6, 8 or 12 rows, 24 accumulators) and output
//    block, the R x P accumulators start at the bias, take C broadcast-FMA steps (the pixels' C
//    inputs stay in L1 across the output blocks), then get the residual, Relu / Clip / SiLU /
//    HardSwish (act512.h) and a masked store: one pass over the input, one over the output;
//  * pixel blocks split over the OpenMP threads in fixed contiguous chunks; each output element
//    is summed by one thread in a fixed order (bit-identical at any thread count).
// NHWC in, out and residual only. AVX-512F only (PointwiseSupported); elsewhere oneDNN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/cpu/cpu_kernel.h"
#include "ops/cpu/packed.h"

namespace ferry::ops::cpu {

// The CPU has AVX-512F and the kernel is not switched off (FERRY_PW=onednn).
bool PointwiseSupported();
// The rule: images of at least 28x28 with at most 256 input and output channels, or at least
// 14x14 with at most 128 input channels (expansions up to 1024) and SiLU / HardSwish; and at
// least 48 output channels, or 24 with a post-op, or a residual / SiLU / HardSwish (pointwise.cc
// has the measurements); FERRY_PW=own takes every 1x1 stride-1 unpadded NHWC conv,
// FERRY_PW=onednn none.
bool PointwiseWanted(int64_t pixels_per_image, int64_t c, int64_t k, const Fusion& fusion);
// Number of Pointwise runs in this process (tests check the path was taken).
uint64_t PointwiseRuns();

class Pointwise {
 public:
  // m: pixels (N * H * W); c: input channels; k: output channels. fusion: sum and act (kNone,
  // kRelu, kClip, kSwish, kHardSwish).
  Pointwise(int64_t m, int64_t c, int64_t k, const Fusion& fusion);
  // w: [K][C] (the conv's [K][C][1][1]).
  // The packed form of w (a new buffer), and the one Run reads.
  PackedPtr Pack(const float* w) const;
  void SetPacked(PackedPtr p) { w_ = std::move(p); }
  void PackWeights(const float* w) { SetPacked(Pack(w)); }
  // Everything the packed bytes depend on besides w (its PackCache tag).
  std::string PackTag() const;
  // x [m][c], res [m][k] (read when fusion.sum; may alias y), y [m][k], all NHWC; bias [k] or null.
  // ldy > 0: y's pixels are ldy floats apart (a channel slice of a wider tensor; not with a
  // residual). Runs on the calling OpenMP threads.
  void Run(const float* x, const float* bias, const float* res, float* y, int64_t ldy = 0) const;
  // The same for the first m pixels of x / res / y (any m), on the calling thread only (the
  // fused inverted residual block runs one per thread on its rows).
  void RunSerial(const float* x, const float* bias, const float* res, float* y, int64_t m) const;
  int64_t channels_in() const { return c_; }

 private:
  void Go(const float* x, const float* bias, const float* res, float* y, int64_t ldy, int64_t m,
          bool parallel) const;
  int64_t m_, c_, k_;
  Fusion fusion_;
  std::vector<int64_t> block_off_;  // per output block: offset of its packed weights
  PackedPtr w_;                     // packed weights (Pack), shared when constant
  size_t packed_floats_ = 0;        // floats of a packed form
};

}  // namespace ferry::ops::cpu
