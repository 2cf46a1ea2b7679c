// Internal to the cpu provider: a 3x3, stride-1, dilation-1, group-1 float32 convolution as one
// GEMM over all output pixels (im2col), own AVX-512 kernel, for small images with many channels
// (ResNet-18's layer4, 7x7 x 512 -> 512), where each weight is used by only ~49 pixels and the
// speed depends on streaming the weights from L3 while the FMA units stay busy. conv.cc picks it
// per shape (ChooseConvAlgo, ConvAlgo::kGemm). 1x1 stride-1 unpadded convolutions (s.r == 1) too
// (PointwiseGemm): the GEMM depth is C and A is the NHWC input itself, read in place.
//
// Y[pixel][k] = sum_{tap, c} A[pixel][tap * C + c] * B[tap * C + c][k] (+ bias, residual, Relu /
// Clip):
//  * B (the weights) packed once at prepare: [K/64 panels][9 * C][64], zero columns past K;
//  * A packed per run from the input (any layout; NHWC read directly, others first copied to
//    NHWC) into blocks of 6 pixels, [pixel block][9 * C][6], zeros where the tap falls in the
//    padding;
//  * for each 64-column panel and each 128-long K chunk, a 6 x 64 register tile (24 zmm
//    accumulators) per pixel block, the C tile kept in a small [pixels][64] buffer between the
//    chunks; B is prefetched into L2 two chunks ahead (its lines spread over the passes) while
//    the current chunk (32 KB) is reused from L1 by every pixel block;
//  * the epilogue adds the residual, clamps (Relu / Clip) and writes the output layout (NHWC
//    vectorized, any other Layout through a scalar path). The bias initializes the C tile.
// Panels are split over the OpenMP threads, each thread packing its own A (deterministic: each
// output element is summed by one thread in a fixed order). AVX-512F only (ConvGemmSupported);
// elsewhere conv.cc keeps oneDNN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/cpu/cpu_kernel.h"
#include "ops/cpu/packed.h"
#include "ops/cpu/winograd.h"

namespace ferry::ops::cpu {

// The CPU has AVX-512F and the AVX-512 kernels are allowed (WinogradAvx512(): not forced off by
// FERRY_WINOGRAD_ISA=avx2 / SetWinogradAvx512(0)).
bool ConvGemmSupported();
// A 1x1, stride-1, unpadded convolution of this shape (s.r == 1) runs as ConvGemm: small images
// with many channels, where oneDNN streams the weights from L3 without prefetching. The
// environment variable FERRY_CONV1X1 (gemm: every such conv, onednn: none) overrides the rule.
bool PointwiseGemm(const WinogradShape& s);
// Number of ConvGemm runs in this process (tests check the path was taken).
uint64_t ConvGemmRuns();

class ConvGemm {
 public:
  // `in`, `out`, `res`: layouts of the input, output and residual (Fusion::sum). fusion.act:
  // kNone, kRelu, kClip, kSwish or kHardSwish (not kGelu).
  ConvGemm(const WinogradShape& s, Layout in, Layout out, Layout res, const Fusion& fusion);
  // w: [K][C][3][3] float32 (row-major).
  // The packed form of w (a new buffer), and the one Run reads.
  PackedPtr Pack(const float* w) const;
  void SetPacked(PackedPtr p) { b_ = std::move(p); }
  void PackWeights(const float* w) { SetPacked(Pack(w)); }
  // Everything the packed bytes depend on besides w (its PackCache tag).
  std::string PackTag() const;
  size_t scratch_bytes() const { return total_; }
  // bias: [K] or null; res: the residual in layout `res` (read only when fusion.sum), may alias
  // y; scratch: scratch_bytes(), 64-byte aligned. Runs on the calling OpenMP threads.
  void Run(const float* x, const float* bias, const float* res, float* y, void* scratch) const;

 private:
  WinogradShape s_;
  Layout in_, out_, res_;
  Fusion fusion_;
  int64_t m_ = 0;             // output pixels (N * OH * OW)
  int64_t kk_ = 0;            // GEMM depth, 9 * C
  int64_t panels_ = 0;        // ceil(K / 64)
  int threads_ = 1;           // at most this many threads, one copy of A each
  PackedPtr b_;               // packed weights (Pack), shared when constant
  size_t packed_floats_ = 0;  // floats of a packed form
  // Scratch layout (byte offsets).
  size_t off_x_ = 0, off_a_ = 0, off_c_ = 0, off_r_ = 0, off_bias_ = 0, total_ = 0;
};

}  // namespace ferry::ops::cpu
