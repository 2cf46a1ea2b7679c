// Internal to the cpu provider: a grouped 3x3 float32 convolution with 4, 8 or 16 channels per
// group and as many outputs as inputs per group (ResNeXt's 32x4d blocks at 56x56 and 28x28,
// RegNet's 8-wide groups), stride 1 or 2, dilation 1, own AVX-512 kernel, NHWC in, out and
// residual. conv.cc picks it per shape (GroupedWanted).
//
// y[n][oy][ox][k] = act(bias[k] + sum_{ky, kx, j} x[n][oy*s + ky - pt][ox*s + kx - pl][g*G + j] *
// w[k][j][ky][kx] (+ residual)), g = k / G:
//  * a vector of 16 output channels holds 16 / G whole groups, whose inputs are the same 16
//    channels of the input pixel (C % 16, whole groups of 4 / 8, in a masked last vector); the
//    weights packed once at prepare as [ceil(C / 16)][9][G][16] (lane l of row j:
//    w[v*16 + l][j], zeros past C);
//  * per output row and vector, tiles of 8 output pixels (8 zmm accumulators); per tap row ky and
//    in-group input j, each input pixel of the row's window is loaded once and its channel j of
//    every group spread over its group's lanes (one permute: G = 16 a broadcast load), then used
//    by the 3 taps kx of every output pixel it feeds (24 FMAs per 10 permutes at stride 1);
//    pixels outside the image read a zero vector;
//  * bias, residual and the activation (act512.h) applied in registers before the store.
// The (image, output row, vector) items are split over the OpenMP threads in fixed contiguous
// chunks; each output element is summed by one thread in a fixed order (bit-identical at any
// thread count). AVX-512F only; elsewhere oneDNN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/cpu/cpu_kernel.h"
#include "ops/cpu/dwconv.h"
#include "ops/cpu/packed.h"

namespace ferry::ops::cpu {

// 0: off (oneDNN), 1: every eligible grouped conv, -1: back to the default (the rule, or the
// environment variable FERRY_GROUPED = onednn / own, read once). Takes effect at the next prepare
// that rebuilds a Conv's state.
void SetGroupedMode(int mode);
// Whether conv.cc should run this grouped conv here (any fused post-op): AVX-512F, 3x3, K == C,
// and by the rule 4 per group at stride 1 or 2, or 8 per group at stride 1 on 256+ channels (a
// multiple of 16); forced on, 4 / 8 / 16 per group at stride 1 or 2. `s` as for the depthwise
// kernel.
bool GroupedWanted(const DwShape& s, int64_t groups, int64_t k);
// Number of GroupedConv runs in this process (tests check the path was taken).
uint64_t GroupedRuns();

class GroupedConv {
 public:
  // fusion: sum (an NHWC residual) and act (kNone, kRelu, kClip, kSwish, kHardSwish).
  GroupedConv(const DwShape& s, int64_t groups, const Fusion& fusion);
  // w: [C][G][3][3] float32 (row-major).
  // The packed form of w (a new buffer), and the one Run reads.
  PackedPtr Pack(const float* w) const;
  void SetPacked(PackedPtr p) { w_ = std::move(p); }
  void PackWeights(const float* w) { SetPacked(Pack(w)); }
  // Everything the packed bytes depend on besides w (its PackCache tag).
  std::string PackTag() const;
  // x, res (read when fusion.sum; may alias y), y: NHWC; bias [C] or null. Runs on the calling
  // thread's OpenMP team.
  void Run(const float* x, const float* bias, const float* res, float* y) const;

 private:
  DwShape s_;
  int64_t per_group_ = 0;
  Fusion fusion_;
  PackedPtr w_;               // packed weights (Pack), shared when constant
  size_t packed_floats_ = 0;  // floats of a packed form
};

}  // namespace ferry::ops::cpu
