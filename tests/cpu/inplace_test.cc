// A fused Conv + Add writes its output over the residual when nothing reads the residual later
// (runtime: Step::residual_dies, one arena slot for both): results against the reference on the
// planned (second) run, the arena's size, and the cases that must not share — the conv reading
// the residual itself, a later reader, a residual stored in another layout than the output
// (oneDNN's reorder then reads a copy), a view of the residual read later.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry {
namespace {

using namespace cpu_test;

ir::Node& Conv(GraphBuilder& b, const std::string& x, const std::string& name, int64_t c, int64_t k,
               int64_t ks, uint32_t seed) {
  const float r = 1.f / std::sqrt(static_cast<float>(c * ks * ks));  // keeps the values ~1
  b.Const(name + "_w", Rand({k, c, ks, ks}, seed, -r, r));
  b.Const(name + "_b", Rand({k}, seed + 1));
  ir::Node& n = b.Node("Conv", {x, name + "_w", name + "_b"}, {name});
  const int64_t p = ks / 2;
  SetInts(n, "pads", {p, p, p, p});
  return n;
}

size_t ArenaBytes(GraphBuilder& b) {
  auto s = Session::Create(b.model(), SessionOptions{});
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return 0;
  for (int i = 0; i < 2; ++i) EXPECT_TRUE((*s)->Run(b.feeds()).ok());
  return (*s)->arena_bytes();
}

// x -> a -> t1 -> [b + a -> Relu] -> t2 -> [c + r1] -> 1x1 -> y: two residual blocks (as
// ResNet's: the residual is the block's input, read by its first conv and the Add) in place;
// `later`: a 1x1 conv also reads a at the end (a lives on: no sharing for the first block).
void Chain(GraphBuilder& b, int64_t c, int64_t hw, int64_t ks, bool later) {
  b.Input("x", Rand({1, c, hw, hw}, 1));
  Conv(b, "x", "a", c, c, 3, 10);
  Conv(b, "a", "t1", c, c, ks, 15);
  Conv(b, "t1", "b", c, c, ks, 20);
  b.Node("Add", {"b", "a"}, {"s1"});
  b.Node("Relu", {"s1"}, {"r1"});
  Conv(b, "r1", "t2", c, c, ks, 25);
  Conv(b, "t2", "c", c, c, ks, 30);
  b.Node("Add", {"r1", "c"}, {"s2"});
  Conv(b, "s2", "y", c, 3, 1, 40);
  b.Output("y");
  if (later) {
    Conv(b, "a", "z", c, 3, 1, 50);
    b.Output("z");
  }
}

TEST(CpuInPlace, ResidualChainsShareOneSlot) {
  for (int64_t ks : {int64_t{1}, int64_t{3}, int64_t{5}}) {  // own GEMM / Winograd / oneDNN
    SCOPED_TRACE("kernel " + std::to_string(ks));
    GraphBuilder b;
    Chain(b, 32, 20, ks, false);
    ExpectMatchesReference(b, 1e-4, 1e-4);
    GraphBuilder longer;
    Chain(longer, 32, 20, ks, true);
    ExpectMatchesReference(longer, 1e-4, 1e-4);
    // a, r1 and s2 share a slot, t1 / t2 the other: two values' bytes; with a read at the
    // end, r1 needs a third.
    const size_t value = 32 * 20 * 20 * sizeof(float);
    EXPECT_EQ(ArenaBytes(b), 2 * value);
    EXPECT_EQ(ArenaBytes(longer), 3 * value);
  }
}

// Add(conv(x), x): the conv reads its residual, so it may not write over it.
TEST(CpuInPlace, ConvReadingItsResidualDoesNotShare) {
  for (int64_t ks : {int64_t{1}, int64_t{3}, int64_t{5}}) {
    GraphBuilder b;
    b.Input("x", Rand({1, 16, 9, 11}, 2));
    Conv(b, "x", "a", 16, 16, 3, 60);
    Conv(b, "a", "b", 16, 16, ks, 70);
    b.Node("Add", {"b", "a"}, {"s"});
    Conv(b, "s", "y", 16, 3, 1, 80);
    b.Output("y");
    ExpectMatchesReference(b, 1e-4, 1e-4);
  }
}

// A view of the residual (a Reshape shares its tensor) read after the block: no sharing.
TEST(CpuInPlace, ResidualViewReadLaterDoesNotShare) {
  GraphBuilder b;
  b.Input("x", Rand({1, 16, 10, 10}, 4));
  Conv(b, "x", "a", 16, 16, 3, 110);
  b.Const("shape", Tensor::FromVector<int64_t>({1, 1600}, {2}));
  b.Node("Reshape", {"a", "shape"}, {"flat"});
  Conv(b, "a", "t", 16, 16, 3, 120);
  Conv(b, "t", "c", 16, 16, 3, 130);
  b.Node("Add", {"c", "a"}, {"s"});
  Conv(b, "s", "y", 16, 3, 1, 140);
  b.Output("y");
  b.Node("Relu", {"flat"}, {"z"});
  b.Output("z");
  ExpectMatchesReference(b, 1e-4, 1e-4);
}

// The residual plain (a Relu of the graph input), the conv's output channels-last: the
// convolution's sum post-op needs the residual reordered into its output, which is the same
// memory.
TEST(CpuInPlace, ResidualInAnotherLayout) {
  for (int64_t ks : {int64_t{3}, int64_t{5}, int64_t{7}}) {
    GraphBuilder b;
    b.Input("x", Rand({1, 16, 12, 12}, 3));
    b.Node("Relu", {"x"}, {"r"});
    Conv(b, "x", "b", 16, 16, ks, 90);
    b.Node("Add", {"b", "r"}, {"s"});
    Conv(b, "s", "y", 16, 3, 1, 100);
    b.Output("y");
    ExpectMatchesReference(b, 1e-4, 1e-4);
  }
}

}  // namespace
}  // namespace ferry
