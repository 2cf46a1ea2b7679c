// Internal to the cpu provider: row kernels of the comparison, logic, Where, Cast and
// GlobalMaxPool kernels
// (logic.cc), compiled for the baseline ISA, AVX2 and AVX-512 (function-level target, as vec.h)
// and picked once at run time (`LogicVec()`); tests take either table.
#pragma once

#include <cstdint>

namespace ferry::ops::cpu {

struct LogicRows {
  // y[i] = a op b as bool (0 / 1). [op: Equal, Less, Greater, LessOrEqual, GreaterOrEqual]
  // [type: float, int32, int64, bool][RowKind: both advance, b one value, a one value].
  using CmpRow = void (*)(const void* a, const void* b, uint8_t* y, int64_t n);
  CmpRow cmp[5][4][3];
  CmpRow logic[3][3];  // And, Or, Xor on bool, [RowKind]
  void (*not_row)(const uint8_t* x, uint8_t* y, int64_t n);
  // Integer Add, Sub, Mul (wrapping) [op][type: int32, int64][RowKind].
  using ArithRowFn = void (*)(const void* a, const void* b, void* y, int64_t n);
  ArithRowFn arith[3][2][3];
  // out[i] = c ? x : z for 1 / 4 / 8-byte elements; [mask: 4 c advances, 2 x, 1 z].
  using WhereRow = void (*)(const uint8_t* c, const void* x, const void* z, void* out, int64_t n);
  WhereRow where[3][8];
  // [from: bool/uint8, int8, int32, int64, float][to: float, int32, int64, bool]; null: none
  // (float to an integer is left to the reference).
  using CastRowFn = void (*)(const void* x, void* y, int64_t n);
  CastRowFn cast[5][4];
  // The maximum of x[0..n), n > 0 (NaN when any is NaN): GlobalMaxPool's plane.
  float (*max_row)(const float* x, int64_t n);
  const char* isa;
};

// The best table for this CPU; both vector tables for tests (null without the ISA).
const LogicRows& LogicVec();
const LogicRows& BaselineLogic();
const LogicRows* Avx2Logic();
const LogicRows* Avx512Logic();
// Tests: make LogicVec() return this table (null: the CPU's best) for kernels prepared later.
void SetLogicTableForTesting(const LogicRows* t);

}  // namespace ferry::ops::cpu
