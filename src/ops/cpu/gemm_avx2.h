// Internal to the cpu provider: an own float32 GEMM for a constant 2-D right-hand side, built
// on one AVX2/FMA 6x16 register-tiled microkernel (12 ymm accumulators; A broadcast one float at
// a time, B streamed from a packed panel of 16 columns).
//
// B [K, N] is packed once into ceil(N / 16) panels of K x 16 floats (zero-padded last panel).
// The product walks K in blocks of kKc rows (a panel block of 16 KiB stays in L1, the A rows it
// meets in L2), the panels in contiguous per-thread chunks (deterministic split), and 6-row tiles
// of A; the last K block applies the epilogue on the registers: + bias (a broadcast C addressed
// by row/column strides), + residual (same shape as the output), then Relu or Clip.
// Compiled for AVX2+FMA by function attribute; callers check GemmAvx2Supported() first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ferry::ops::cpu {

// AVX2 and FMA are available (the only build of these kernels).
bool GemmAvx2Supported();

// c[r * ldc + j] (+)= sum_i a[r * lda + i] * b[i * 16 + j] for r < rows (1..6), j < cols
// (1..16): the shared microkernel; accumulate adds to c, else c is overwritten.
void GemmTile6x16(const float* a, int64_t lda, const float* b, int64_t k, float* c, int64_t ldc,
                  int rows, int cols, bool accumulate);

// Owns B packed into 16-column panels.
class PackedB {
 public:
  // b is [k, n] row-major, or with trans [n, k] row-major.
  void Pack(const float* b, int64_t k, int64_t n, bool trans);
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  const float* data() const { return data_.get(); }
  size_t bytes() const;

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> data_;
  int64_t k_ = 0, n_ = 0;
};

struct GemmEpilogue {
  const float* bias = nullptr;  // bias[row * bias_rs + col * bias_cs]
  int64_t bias_rs = 0, bias_cs = 0;
  const float* residual = nullptr;  // [m, n] row-major, must not alias y
  enum class Act : uint8_t { kNone, kRelu, kClip } act = Act::kNone;
  float lo = 0.f, hi = 0.f;  // kClip bounds
};

// y [m, n] = epilogue(a [m, k] (row stride lda) x B) on `threads` OpenMP threads.
void PackedGemm(const float* a, int64_t m, int64_t lda, const PackedB& b, float* y,
                const GemmEpilogue& e, int threads);

// y [m, n] = epilogue(a [m, k] (row stride lda) x b^T), b [n, k] row-major read where it is
// (no packed copy), m <= kGemvMaxRows: a matrix-vector product (a classifier's Linear at batch
// 1) reads every weight once per run in any layout, so a large constant B keeps one copy.
// Columns split over `threads` in contiguous chunks; each output's sum order is fixed. AVX-512
// (8 or 4 rows of b streamed at once, prefetched) where the CPU has it, else AVX2
// (FERRY_GEMV_AVX2=1 forces AVX2, read once). One thread, loaded Xeon, p50 own vs oneDNN
// packed: AlexNet's 9216x4096 Linear 11.0 vs 14.3 ms, 4096x4096 3.1 vs 3.7, MobileNetV2's
// 1280x1000 0.23 vs 0.26; memory added 147 vs 293 MB, first run 12 vs 136 ms.
inline constexpr int64_t kGemvMaxRows = 4;
void GemvTransB(const float* a, int64_t m, int64_t lda, const float* b, int64_t k, int64_t n,
                float* y, const GemmEpilogue& e, int threads);
// How many GemvTransB calls ran in this process (tests).
uint64_t GemvRuns();

// Path choice for MatMul/Gemm with a constant 2-D B: 1 takes the packed path wherever it
// applies; -1 (automatic, the default) and 0 keep oneDNN (the packed path measured level with it,
// src/ops/cpu/README.md). Without a forced value, FERRY_GEMM=onednn|packed is read once. Takes
// effect at the next prepare that rebuilds a MatMul/Gemm state.
void SetPackedGemmOverride(int v);
int PackedGemmOverride();
// Number of packed GEMMs run by this process (tests check the path was taken).
uint64_t PackedGemmRuns();

}  // namespace ferry::ops::cpu
