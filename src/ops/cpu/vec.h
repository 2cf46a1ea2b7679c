// Internal to the cpu provider: float32 row kernels (elementwise, reductions, softmax, layer
// norm) compiled twice, for the baseline ISA and for AVX2+FMA (function-level target, no
// -march flag), and picked once at run time (`Vec()`). Every loop is written so the compiler
// vectorizes it (`#pragma omp simd`); transcendental functions use an own polynomial `exp`.
#pragma once

#include <cstdint>

// A loop compiled for AVX-512, AVX2 and the baseline, one picked at load time by the CPU (GCC
// `target_clones`, resolved through an ifunc). Under ThreadSanitizer the loop is compiled once,
// for the baseline: the ifunc resolver runs while the dynamic loader relocates the binary, before
// TSan's runtime is initialised, and GCC instruments it (a SIGSEGV before main).
#if defined(__SANITIZE_THREAD__)
#define FERRY_TARGET_CLONES
#else
#define FERRY_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

namespace ferry::ops::cpu {

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kPow, kCount };
enum class UnOp : uint8_t {
  kRelu,
  kClip,
  kSqrt,
  kExp,
  kNeg,
  kReciprocal,
  kAbs,
  kTanh,
  kSigmoid,
  kErf,
  kSquare,       // Pow(x, 2)
  kCopy,         // Pow(x, 1)
  kPowHalf,      // Pow(x, 0.5)
  kHardSigmoid,  // max(0, min(1, lo * x + hi)): lo = alpha, hi = beta
  kHardSwish,    // x * max(0, min(1, x / 6 + 0.5))
  kSilu,         // x * sigmoid(x)
  kCount
};

// How the two operands of a binary row advance: both, A only (B is one value), B only.
enum class RowKind : uint8_t { kVV, kVS, kSV };

struct VecOps {
  // y[i] = A op B over n elements; kVS reads b[0] for every i, kSV reads a[0].
  using BinaryRow = void (*)(const float* a, const float* b, float* y, int64_t n);
  BinaryRow binary[static_cast<int>(BinOp::kCount)][3];
  // y[i] = f(x[i]); lo/hi are Clip's bounds (HardSigmoid's alpha/beta).
  using UnaryRow = void (*)(const float* x, float* y, int64_t n, float lo, float hi);
  UnaryRow unary[static_cast<int>(UnOp::kCount)];
  // Sum of x[0..n).
  float (*sum)(const float* x, int64_t n);
  // out[j] = sum over p < n of x[p * blk + j], j < blk (a channel-blocked image's per-channel
  // sums).
  void (*sum_lanes)(const float* x, int64_t n, int64_t blk, float* out);
  // Softmax of one contiguous row of n > 0 elements.
  void (*softmax)(const float* x, float* y, int64_t n);
  // y = (x - mean) / sqrt(var + eps) * gamma + beta over one row of n > 0 elements (biased
  // variance); gamma / beta may be null (1 / 0), `gamma_step`/`beta_step` 0 repeats g[0]/b[0].
  void (*layer_norm)(const float* x, float* y, int64_t n, float eps, const float* gamma,
                     int64_t gamma_step, const float* beta, int64_t beta_step);
  // The GELU patterns (gelu_tanh.cc) in one pass, the same float operations in the same order
  // as their steps (bit-identical): erf form y = (x * (Erf(x / c) + one)) * half (x * c when
  // !div); tanh form y = x * (half * (one + Tanh(c2 * (x + x * (x * (c1 * x)))))).
  void (*gelu_erf)(const float* x, float* y, int64_t n, bool div, float c, float one, float half);
  void (*gelu_tanh)(const float* x, float* y, int64_t n, float c1, float c2, float one, float half);
  const char* isa;
};

// The best table for this CPU (AVX-512, else AVX2+FMA, else the baseline).
const VecOps& Vec();
// Both tables, for tests (Avx2Vec() is null on a CPU without AVX2+FMA).
const VecOps& BaselineVec();
const VecOps* Avx2Vec();
const VecOps* Avx512Vec();  // null without AVX-512 F/VL/BW/DQ

}  // namespace ferry::ops::cpu
