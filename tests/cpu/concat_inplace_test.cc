// Concat in place: an input whose only reader is the Concat is written by its producer straight
// into its place in the Concat's output (runtime: the arena plan's placements; the own 1x1 and
// Winograd kernels write a channel slice of the channels-last output with the wider pixel
// stride, NodeSlot::out_pixel_stride; any producer writes a contiguous place: plain / blocked
// with one row), and the Concat skips it. Each case against the reference on the planned
// (second) run, and the count of inputs the Concat found in place (ConcatInputsInPlace) on that
// run — SqueezeNet's fire module with both expand convs placed, a producer that cannot take the
// stride (oneDNN's 5x5; Winograd with a separate SiLU pass), an input with a second reader, the
// same input twice, two images, a graph-output Concat, nested plain Concats of MatMuls.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ops/cpu/families.h"
#include "ops/cpu/pointwise.h"
#include "ops/cpu/winograd.h"

namespace ferry {
namespace {

using namespace cpu_test;

void Conv(GraphBuilder& b, const std::string& x, const std::string& y, int64_t c, int64_t k,
          int64_t ks, uint32_t seed, const char* act = "Relu") {
  const float r = 1.f / std::sqrt(static_cast<float>(c * ks * ks));
  b.Const(y + "_w", Rand({k, c, ks, ks}, seed, -r, r));
  b.Const(y + "_b", Rand({k}, seed + 1));
  const std::string pre = act ? y + "_pre" : y;
  const int64_t p = ks / 2;
  SetInts(b.Node("Conv", {x, y + "_w", y + "_b"}, {pre}), "pads", {p, p, p, p});
  if (!act) return;
  if (std::string(act) == "SiLU") {
    b.Node("Sigmoid", {pre}, {y + "_sig"});
    b.Node("Mul", {pre, y + "_sig"}, {y});
  } else {
    b.Node(act, {pre}, {y});
  }
}

// Runs the model twice on the cpu provider (the plan is made on the first run) against the
// reference (ExpectMatchesReference); returns how many Concat inputs the second run found in
// place (the first, unplanned run never finds one: its outputs are fresh tensors).
uint64_t InPlaceOnSecondRun(GraphBuilder& b, int threads) {
  const uint64_t before = ops::cpu::ConcatInputsInPlace();
  ExpectMatchesReference(b, 1e-4, 1e-4, threads);
  return ops::cpu::ConcatInputsInPlace() - before;
}

// The own kernels take the stride (AVX-512).
bool Strided() {
  return ops::cpu::PointwiseSupported() && ops::cpu::WinogradAvx512();
}

// SqueezeNet's fire module: squeeze 1x1 -> Relu -> [expand 1x1 -> Relu | expand 3x3 -> Relu] ->
// Concat -> a 1x1 conv reads it. `e3`: the second expand's kernel size; `act`: its activation.
void Fire(GraphBuilder& b, int64_t n, int64_t hw, int64_t e3, const char* act, uint32_t seed) {
  b.Input("x", Rand({n, 24, hw, hw}, seed));
  Conv(b, "x", "sq", 24, 16, 1, seed + 1);
  Conv(b, "sq", "e1", 16, 64, 1, seed + 3);
  Conv(b, "sq", "e3", 16, 64, e3, seed + 5, act);
  SetInt(b.Node("Concat", {"e1", "e3"}, {"cat"}), "axis", 1);
  Conv(b, "cat", "y", 128, 8, 1, seed + 7);
  b.Output("y");
}

TEST(CpuConcatInPlace, FireModuleExpandsWriteTheirPlaces) {
  // The 3x3 runs as Winograd at one thread and, in chunks of tiles, at two (in phases it would
  // run oneDNN's direct convolution there, which is then copied).
  GraphBuilder b;
  Fire(b, 1, 30, 3, "Relu", 9500);
  const uint64_t placed = InPlaceOnSecondRun(b, 1);
  if (Strided()) {
    EXPECT_EQ(placed, 2u);
  }
  GraphBuilder two;
  Fire(two, 2, 29, 3, "Relu", 9510);  // two images, odd size
  const uint64_t placed2 = InPlaceOnSecondRun(two, 1);
  if (Strided()) {
    EXPECT_EQ(placed2, 2u);
  }
  GraphBuilder threads2;
  Fire(threads2, 1, 30, 3, "Relu", 9520);
  const uint64_t placed3 = InPlaceOnSecondRun(threads2, 2);
  if (Strided()) {
    EXPECT_EQ(placed3, 2u);
  }
}

TEST(CpuConcatInPlace, ProducersWithoutStrideAreCopied) {
  GraphBuilder b5;
  Fire(b5, 1, 30, 5, "Relu", 9530);  // 5x5: oneDNN
  const uint64_t placed = InPlaceOnSecondRun(b5, 1);
  if (Strided()) {
    EXPECT_EQ(placed, 1u);
  }
  GraphBuilder silu;
  Fire(silu, 1, 30, 3, "SiLU", 9540);  // Winograd's SiLU is a separate pass over a dense output
  const uint64_t placed2 = InPlaceOnSecondRun(silu, 1);
  if (Strided()) {
    EXPECT_EQ(placed2, 1u);
  }
}

TEST(CpuConcatInPlace, SharedInputsAreCopied) {
  // e1 also read by a second conv: it must stay whole.
  GraphBuilder b;
  Fire(b, 1, 30, 3, "Relu", 9550);
  Conv(b, "e1", "z", 64, 4, 1, 9560);
  b.Output("z");
  const uint64_t placed = InPlaceOnSecondRun(b, 1);
  if (Strided()) {
    EXPECT_EQ(placed, 1u);
  }
  // The same value twice: one place only, so none.
  GraphBuilder twice;
  twice.Input("x", Rand({1, 24, 30, 30}, 9570));
  Conv(twice, "x", "e", 24, 64, 1, 9571);
  SetInt(twice.Node("Concat", {"e", "e"}, {"cat"}), "axis", 1);
  Conv(twice, "cat", "y", 128, 8, 1, 9573);
  twice.Output("y");
  EXPECT_EQ(InPlaceOnSecondRun(twice, 1), 0u);
  // The Concat's output a graph output (outside the arena): nothing placed.
  GraphBuilder out;
  out.Input("x", Rand({1, 24, 30, 30}, 9580));
  Conv(out, "x", "a", 24, 64, 1, 9581);
  Conv(out, "x", "c", 24, 64, 1, 9583);
  SetInt(out.Node("Concat", {"a", "c"}, {"cat"}), "axis", 1);
  out.Output("cat");
  EXPECT_EQ(InPlaceOnSecondRun(out, 1), 0u);
}

TEST(CpuConcatInPlace, ViewOfTheConcatOutlivesItsInputs) {
  // Two MatMuls placed in a plain Concat, a Reshape view of it (and a view of that) read only
  // at the end, after a chain of same-sized values: the Concat's slot, which holds the placed
  // inputs, must live until the views' last reader (no later value may reuse it).
  GraphBuilder b;
  b.Input("x", Rand({1, 12}, 9600));
  b.Const("w0", Rand({12, 5}, 9601));
  b.Const("w1", Rand({12, 6}, 9602));
  b.Node("MatMul", {"x", "w0"}, {"m0"});
  b.Node("MatMul", {"x", "w1"}, {"m1"});
  SetInt(b.Node("Concat", {"m0", "m1"}, {"cat"}), "axis", 1);
  b.Const("col", cpu_test::Int64s({11, 1}));
  b.Node("Reshape", {"cat", "col"}, {"r"});
  std::string t = "x";
  for (int i = 0; i < 4; ++i) {  // values of the same size, produced after the Concat
    const std::string w = "cw" + std::to_string(i), y = "c" + std::to_string(i);
    b.Const(w, Rand({i == 0 ? 12 : 11, 11}, 9610 + i));
    b.Node("MatMul", {t, w}, {y + "_m"});
    b.Node("Relu", {y + "_m"}, {y});
    t = y;
  }
  b.Const("row", cpu_test::Int64s({1, 11}));
  b.Node("Reshape", {"r", "row"}, {"rr"});
  b.Node("Add", {t, "rr"}, {"y"});
  b.Output("y");
  EXPECT_EQ(InPlaceOnSecondRun(b, 1), 2u);
}

TEST(CpuConcatInPlace, NestedPlainConcats) {
  // [1, k] MatMul outputs (plain, one row: contiguous places, any producer), a Concat of a
  // Concat: all four MatMuls and the inner Concat write their places.
  GraphBuilder b;
  b.Input("x", Rand({1, 12}, 9590));
  std::vector<std::string> parts;
  for (int i = 0; i < 4; ++i) {
    const std::string w = "w" + std::to_string(i), y = "m" + std::to_string(i);
    b.Const(w, Rand({12, 5 + i}, 9591 + i));
    b.Node("MatMul", {"x", w}, {y});
    parts.push_back(y);
  }
  SetInt(b.Node("Concat", {parts[0], parts[1]}, {"inner"}), "axis", 1);
  SetInt(b.Node("Concat", {"inner", parts[2], parts[3]}, {"outer"}), "axis", 1);
  b.Node("Relu", {"outer"}, {"y"});
  b.Output("y");
  EXPECT_EQ(InPlaceOnSecondRun(b, 1), 5u);
}

}  // namespace
}  // namespace ferry
