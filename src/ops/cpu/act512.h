// Internal to the cpu provider: the post-ops the own AVX-512 convolution kernels (dwconv.cc,
// pointwise.cc) apply to their accumulators before the store: a clamp (Relu / Clip, or none with
// infinite bounds), SiLU and HardSwish on 16 floats.
#pragma once

#include <immintrin.h>

#include <cstdint>

#ifndef FERRY_AVX512
#define FERRY_AVX512 __attribute__((target("avx512f,avx2,fma")))
#endif

namespace ferry::ops::cpu::act512 {

enum class Act : uint8_t { kClamp, kSwish, kHardSwish };

// The first min(n, 16) lanes of a vector (a loop's masked tail).
inline __mmask16 FirstLanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

struct Post {
  Act act = Act::kClamp;
  float lo = 0, hi = 0;  // kClamp bounds (+-inf: none)
};

// x * sigmoid(x): exp(-x) as 2^n * p(r) (vec_impl.inc's polynomial, the scaling by scalef, which
// gives 0 / inf outside the float range), then x * (1 / (1 + e)) with the reciprocal refined
// once from rcp14 (~1e-7 relative; -x clamped to 80 so 1 + e and its reciprocal stay normal). A
// NaN x stays NaN (the product).
FERRY_AVX512 inline __m512 Swish(__m512 v) {
  const __m512 nx =
      _mm512_maskz_min_ps(0xffff, _mm512_sub_ps(_mm512_setzero_ps(), v), _mm512_set1_ps(80.f));
  const __m512 n =
      _mm512_maskz_roundscale_ps(0xffff, _mm512_mul_ps(nx, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), nx);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  const __m512 d = _mm512_add_ps(_mm512_maskz_scalef_ps(0xffff, p, n), _mm512_set1_ps(1.f));
  __m512 q = _mm512_maskz_rcp14_ps(0xffff, d);
  q = _mm512_mul_ps(q, _mm512_fnmadd_ps(d, q, _mm512_set1_ps(2.f)));
  return _mm512_mul_ps(v, q);
}

template <Act A>
FERRY_AVX512 inline __m512 Apply(__m512 v, __m512 lo, __m512 hi) {
  if constexpr (A == Act::kSwish) {
    return Swish(v);
  } else if constexpr (A == Act::kHardSwish) {
    const __m512 g = _mm512_fmadd_ps(v, _mm512_set1_ps(1.f / 6.f), _mm512_set1_ps(0.5f));
    // max/min return their second operand when either is NaN: a NaN v gives g = NaN -> NaN.
    const __m512 gc = _mm512_maskz_min_ps(0xffff, _mm512_set1_ps(1.f),
                                          _mm512_maskz_max_ps(0xffff, _mm512_setzero_ps(), g));
    return _mm512_mul_ps(v, gc);
  } else {
    return _mm512_maskz_min_ps(0xffff, hi, _mm512_maskz_max_ps(0xffff, lo, v));
  }
}

}  // namespace ferry::ops::cpu::act512
