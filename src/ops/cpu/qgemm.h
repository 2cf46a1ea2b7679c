// Own int8 GEMM of the cpu provider (qgemm.cc): C[m, n] = sum_k (A[m, k] - za[m]) *
// (B[k, n] - zb[n]) with A and B each uint8 or int8, accumulated in int32 with two's complement
// wrap-around: bit for bit the reference MatMulInteger (ops/reference/quant.cc).
//
// Signedness is folded into the zero points: a signed A becomes A + 128 (uint8) with za + 128,
// an unsigned B becomes B - 128 (int8) with zb - 128, and
//   C = sum A'B' - za' colsum(B') - zb' rowsum(A') + K za' zb'   (mod 2^32).
// Two paths, picked at run time:
//  * AVX512-VNNI: vpdpbusd (u8 x s8, four products summed into int32, no saturation); B packed
//    in 16-column panels of 4-byte k groups, an 8x32 microkernel;
//  * AVX2 without VNNI: vpmaddubsw would saturate u8 x s8 pair sums at int16 (255 * -128 * 2 <
//    -32768), so both operands are widened to int16 and multiplied with vpmaddwd (pairs summed
//    into int32, exact); B packed in 8-column panels of 2-element k groups, a 6x16 microkernel;
//    when every B' is within +-64 (reduced-range weights, as ONNX Runtime's quantizer writes them
//    for such CPUs) no pair sum can saturate and vpmaddubsw + vpmaddwd by ones run on VNNI's
//    4-byte k groups (a 4x16 microkernel; FERRY_INT8_AVX2=wide keeps the widening path).
// Without AVX2 QGemmIsa() is kNone and the kernels decline (the reference runs).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ferry::ops::cpu {

enum class QIsa : int { kNone = 0, kAvx2 = 1, kAvx512Vnni = 2 };

// The path this CPU takes (the best of the two it supports), or the forced one.
QIsa QGemmIsa();
// Tests: caps the path at `isa` (kAvx2 forces the widening path on a VNNI CPU); -1 restores.
void SetQGemmIsaForTesting(int isa);

// Whether qmatmul.cc may hand a GEMM to oneDNN's int8 matmul (u8/s8 x s8 -> s32, constant 2-D B,
// no weight zero point): only where the CPU has VNNI (oneDNN then runs AMX or VNNI code, exact
// in int32; on plain AVX2, or capped there by ONEDNN_MAX_CPU_ISA, it would use the saturating
// vpmaddubsw, so oneDNN's effective ISA is checked too). FERRY_INT8_GEMM=own and
// SetQGemmOneDnnForTesting(false) keep everything on the own GEMM.
bool QGemmUseOneDnn();
void SetQGemmOneDnnForTesting(bool allowed);

struct QPackedB {
  QIsa isa = QIsa::kNone;
  int64_t k = 0, n = 0, kp = 0, npad = 0;  // kp: K rounded to the k group, npad: to the panel
  std::shared_ptr<int8_t[]> data;          // 64-byte aligned
  std::vector<int32_t> colsum, zb;         // per column (npad): sum_k B', zb'
};

// Packs B [k, n] (row stride ldb elements) with zero points zb (n values, or one when
// zb_scalar, or none when null) for `isa`.
void QPackB(QIsa isa, const void* b, bool b_signed, int64_t k, int64_t n, int64_t ldb,
            const int32_t* zb, bool zb_scalar, QPackedB* out);

// What the GEMM writes: int32 C, or float(C) * scale[n] (+ bias[n]) — a Cast, a Mul and an Add
// in that order, unfused. scale and bias hold npad values.
struct QOutput {
  int32_t* i32 = nullptr;
  float* f32 = nullptr;
  const float* scale = nullptr;
  const float* bias = nullptr;
  int64_t ldc = 0;
};

// C for M rows of A (row stride lda) against packed B; za: M values, or one when za_scalar.
// Splits the work over the provider's OpenMP threads when it is large enough.
void QGemm(const QPackedB& b, const void* a, bool a_signed, int64_t m, int64_t lda,
           const int32_t* za, bool za_scalar, const QOutput& out);

// The float epilogue alone: out.f32[r, j] = float(acc[r, j]) * out.scale[j] (+ out.bias[j]),
// rows of n values (row stride n in both), multiply then add.
void QEpilogue(const int32_t* acc, int64_t rows, int64_t n, const QOutput& out);

}  // namespace ferry::ops::cpu
