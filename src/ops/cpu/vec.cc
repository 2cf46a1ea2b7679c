// The row kernels of vec.h, compiled for the baseline ISA, for AVX2+FMA and for AVX-512.
#include "ops/cpu/vec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ferry::ops::cpu {

namespace base {
#include "ops/cpu/vec_impl.inc"
}  // namespace base

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define FERRY_VEC_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#include "ops/cpu/vec_impl.inc"
}  // namespace avx2
#pragma GCC pop_options
#define FERRY_VEC_AVX512 1
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")
namespace avx512 {
#include "ops/cpu/vec_impl.inc"
}  // namespace avx512
#pragma GCC pop_options
#endif

const VecOps& BaselineVec() {
  static const VecOps t = base::MakeTable("baseline");
  return t;
}

const VecOps* Avx2Vec() {
#ifdef FERRY_VEC_AVX2
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  // Built only where the CPU has it: the table's own code may use the ISA (on an older CPU,
  // or under valgrind, it would be an illegal instruction).
  static const VecOps t = has ? avx2::MakeTable("avx2") : VecOps{};
  return has ? &t : nullptr;
#else
  return nullptr;
#endif
}

const VecOps* Avx512Vec() {
#ifdef FERRY_VEC_AVX512
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  static const VecOps t = has ? avx512::MakeTable("avx512") : VecOps{};
  return has ? &t : nullptr;
#else
  return nullptr;
#endif
}

const VecOps& Vec() {
  static const VecOps& t = Avx512Vec() ? *Avx512Vec() : Avx2Vec() ? *Avx2Vec() : BaselineVec();
  return t;
}

}  // namespace ferry::ops::cpu
