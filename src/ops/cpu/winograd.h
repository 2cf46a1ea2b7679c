// Internal to the cpu provider: Winograd convolution F(2x2,3x3) and F(4x4,3x3) for 3x3, stride-1,
// dilation-1, group-1 float32 convolutions (conv.cc picks it per shape, see ChooseConvAlgo).
//
// Y = A^T [ (G g G^T) . (B^T d B) ] A per output tile of m x m (m = 2 or 4, input tile m + 2):
//  * the filter transform U = G g G^T is computed once (in double) at prepare time, stored as
//    [position][K/16][C][16];
//  * the input transform reads 8 channels at a time from an nChw8c (Layout::kBlocked8) input
//    (other layouts are first packed into a zero-padded nChw8c copy) and writes
//    V[position][tile][C];
//  * one GEMM per position, M[p] = V[p] x U[p] ([tiles x C] x [C x K]), own AVX2/FMA kernel
//    (6 tiles x 16 output channels per step);
//  * the output transform adds the bias, the fused residual (Fusion::sum) and the activation and
//    writes nChw8c (or any other Layout through a scalar path);
//  * the three phases run over the whole image (a barrier after each) or, where WinogradChunk
//    says so, start to end per chunk of tiles on one thread.
// The kernels are compiled for AVX2+FMA with a function attribute and used only when the CPU has
// them (WinogradSupported); without them conv.cc keeps oneDNN's direct convolution.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/cpu/cpu_kernel.h"
#include "ops/cpu/packed.h"

namespace ferry::ops::cpu {

// kGemm: im2col + own AVX-512 GEMM (conv_gemm.h), for small images with many channels.
enum class ConvAlgo : uint8_t { kAuto, kDirect, kWinograd2, kWinograd4, kGemm };

// Forces an algorithm for every eligible convolution (tests, ferry_micro); kAuto restores the rule.
// Without a forced value, the environment variable FERRY_CONV_ALGO (direct, winograd2, winograd4,
// gemm) is read once, for benchmarking from the command line. Takes effect at the next prepare that
// rebuilds a Conv's state (new sessions always do).
void SetConvAlgoOverride(ConvAlgo a);
ConvAlgo ConvAlgoOverride();
// Grouped (not depthwise) convolutions on oneDNN with an NHWC input keep NHWC in and out (on by
// default; FERRY_GROUPED_LAYOUT=onednn lets oneDNN choose its blocked layouts). Set 1 / 0 to
// force, -1 back to the default (tests, A/B runs); takes effect at the next prepare.
void SetGroupedConvNhwc(int on);
bool GroupedConvNhwc();
// Grouped convolutions prepared on oneDNN with NHWC in and out (tests check the path was taken).
uint64_t GroupedNhwcPrepares();
// Number of Winograd convolutions run by this process (tests check the path was taken).
uint64_t WinogradRuns();
// AVX2 and FMA are available (the only build of these kernels).
bool WinogradSupported();
// Whether the Winograd GEMM runs its AVX-512 kernel (CPU has AVX-512F, unless
// FERRY_WINOGRAD_ISA=avx2). SetWinogradAvx512(0) forces AVX2, 1 AVX-512 where the CPU has it,
// -1 back to the default (tests).
bool WinogradAvx512();
void SetWinogradAvx512(int on);

// Element (n, c, y, x) of an [N, C, H, W] tensor stored in layout l (blocked layouts: C a
// multiple of the block).
inline int64_t LayoutIndex(Layout l, int64_t C, int64_t H, int64_t W, int64_t n, int64_t c,
                           int64_t y, int64_t x) {
  switch (l) {
    case Layout::kNhwc:
      return ((n * H + y) * W + x) * C + c;
    case Layout::kBlocked8:
      return (((n * (C / 8) + c / 8) * H + y) * W + x) * 8 + c % 8;
    case Layout::kBlocked16:
      return (((n * (C / 16) + c / 16) * H + y) * W + x) * 16 + c % 16;
    case Layout::kPlain:
      break;
  }
  return ((n * C + c) * H + y) * W + x;
}

struct WinogradShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input [N, C, H, W]
  int64_t k = 0;                       // output channels
  int64_t oh = 0, ow = 0;              // output spatial size
  int64_t pad_t = 0, pad_l = 0;        // leading pads (the trailing ones follow from oh, ow)
  int64_t r = 3;                       // kernel size r x r (Winograd: 3; ConvGemm: 1 or 3)
};

// The algorithm for a 3x3 stride-1 group-1 convolution of this shape run on `threads` threads,
// by measurement (src/ops/cpu/README.md): kDirect, kWinograd2, kWinograd4 or (AVX-512) kGemm.
ConvAlgo ChooseConvAlgo(const WinogradShape& s, int threads);

// Tiles per chunk when a Winograd conv of this shape and tile side m runs in chunks (each chunk's
// three phases on one thread, see winograd.cc RunChunks) for `threads` threads; 0: the three
// phases over the whole image, one parallel region with a barrier after each phase.
int64_t WinogradChunk(const WinogradShape& s, int m, int threads);
// Forces the split for convs prepared from now on: 1 chunks, 0 phases, -1 back to the rule
// (tests; FERRY_WINOGRAD_SPLIT=chunks|phases from the command line).
void SetWinogradSplit(int chunks);

class WinogradConv {
 public:
  // tile: 2 or 4. `in`, `out`, `res`: layouts of the input, output and residual (Fusion::sum).
  WinogradConv(const WinogradShape& s, int tile, Layout in, Layout out, Layout res,
               const Fusion& fusion);
  // w: [K][C][3][3] float32 (row-major).
  // The packed form of w (a new buffer), and the one Run reads.
  PackedPtr Pack(const float* w) const;
  void SetPacked(PackedPtr p) { u_ = std::move(p); }
  void PackWeights(const float* w) { SetPacked(Pack(w)); }
  // Everything the packed bytes depend on besides w (its PackCache tag).
  std::string PackTag() const;
  size_t scratch_bytes() const;
  // bias: [K] or null; res: the residual in layout `res` (read only when fusion.sum), may alias y;
  // scratch: scratch_bytes(), 64-byte aligned. ldy > 0: y's pixels are ldy floats apart (a
  // channel slice of a wider tensor; only with a channels-last output, K % 8 == 0 and no
  // residual). Runs on the calling OpenMP threads.
  void Run(const float* x, const float* bias, const float* res, float* y, void* scratch,
           int64_t ldy = 0) const;

  int tile() const { return m_; }

 private:
  bool DirectInput() const;  // x read as it is (nChw8c, or NHWC with C % 8 == 0), not repacked

  WinogradShape s_;
  int m_, a_;              // output tile side, input tile side (m + 2)
  int64_t cp_, kp_;        // C rounded up to 8, K rounded up to 16
  int64_t th_, tw_, t_;    // tiles per column, per row, in all (N * th * tw)
  Layout in_, out_, res_;  // as given
  Fusion fusion_;
  PackedPtr u_;               // packed weights (Pack), shared when constant
  size_t packed_floats_ = 0;  // floats of a packed form
  // Scratch layout (byte offsets).
  size_t off_x_ = 0, off_v_ = 0, off_m_ = 0, off_r_ = 0, off_b_ = 0, total_ = 0;
  int64_t chunk_ = 0;  // tiles per chunk (WinogradChunk), 0: phases over the whole image
  int slots_ = 1;      // v / m buffers (one per thread in chunks)
};

}  // namespace ferry::ops::cpu
