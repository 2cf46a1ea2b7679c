// The GeluTanh pattern (src/ops/cpu/gelu_tanh.cc): tf2onnx's tanh-approximation GELU, nine
// elementwise steps run as one chunked pass. Bit-identical to the steps run one by one on the cpu
// kernels (an observer turns patterns off), within tolerance of the reference; a chain whose
// intermediate is read elsewhere, or whose constant would broadcast the output, is not taken.
#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

// x -> GELU-tanh, magika's operand order; `swap` puts the other operand first everywhere.
GraphBuilder Build(const Shape& x, bool swap, const Shape& one_shape, bool leak, uint32_t seed) {
  GraphBuilder b;
  b.Input("x", Rand(x, seed, -5.f, 5.f));
  b.Const("c1", Tensor::FromVector<float>({0.044715f}, {}));
  b.Const("c2", Tensor::FromVector<float>({0.7978846f}, {}));
  Tensor one(DType::kFloat, one_shape);
  one.data<float>()[0] = 1.f;
  b.Const("one", std::move(one));
  b.Const("half", Tensor::FromVector<float>({0.5f}, {}));
  auto op = [&](const char* type, std::string a, std::string c, const std::string& out) {
    if (swap) std::swap(a, c);
    b.Node(type, {a, c}, {out});
  };
  op("Mul", "c1", "x", "a");
  op("Mul", "x", "a", "b");
  op("Mul", "x", "b", "d");
  op("Add", "x", "d", "e");
  op("Mul", "c2", "e", "f");
  b.Node("Tanh", {"f"}, {"t"});
  op("Add", "one", "t", "u");
  op("Mul", "half", "u", "v");
  op("Mul", "x", "v", "y");
  b.Output("y");
  if (leak) b.Output("e");
  return b;
}

TEST(CpuGeluTanh, BitIdenticalToTheStepsAndCloseToTheReference) {
  struct Case {
    Shape x;
    bool swap;
    Shape one;
    bool leak, fused;
  };
  const Case cases[] = {
      {{10, 51, 508}, false, {1, 1, 1}, false, true},  // magika's, 3-D constant
      {{3, 1000}, true, {}, false, true},
      {{7}, false, {1}, false, true},
      {{2, 513}, false, {}, true, false},        // e is a graph output
      {{5, 9}, false, {1, 1, 1}, false, false},  // the constant would broadcast
  };
  uint32_t seed = 3;
  for (const Case& c : cases) {
    GraphBuilder b = Build(c.x, c.swap, c.one, c.leak, seed++);
    auto report = ExpectMatchesReference(b, 1e-5, 1e-6);
    bool pattern = false;
    for (const auto& r : report) pattern = pattern || r.provider == "cpu (GeluTanh)";
    EXPECT_EQ(pattern, c.fused);
    ExpectPatternBitIdentical(b);
  }
}

}  // namespace
}  // namespace ferry::cpu_test
