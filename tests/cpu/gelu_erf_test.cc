// The GeluErf pattern (src/ops/cpu/gelu_tanh.cc): the exact GELU (x / c or x * c, Erf, + 1,
// * x, * 0.5) where no MatMul or Conv absorbs it, five elementwise steps as one pass in any
// layout. Bit-identical to the steps run one by one on the cpu kernels (an observer turns
// patterns off), within tolerance of the reference; after a MatMul or a Conv (+ bias Add,
// + Identity: paddle2onnx's blocks) the runtime's GELU fusion keeps it; a chain whose
// intermediate is read elsewhere is not taken.
#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

enum class Source { kInput, kConv, kConvRelu, kMatMul };

GraphBuilder Build(Source src, bool mul_form, bool leak, uint32_t seed) {
  GraphBuilder b;
  const Shape xs = src == Source::kMatMul ? Shape{6, 40} : Shape{1, 16, 13, 11};
  b.Input("in", Rand(xs, seed, -3.f, 3.f));
  std::string x = "in";
  if (src == Source::kConv || src == Source::kConvRelu) {
    b.Const("w", Rand({32, 16, 3, 3}, seed + 1, -0.2f, 0.2f));
    SetInts(b.Node("Conv", {"in", "w"}, {"conv"}), "pads", {1, 1, 1, 1});
    x = "conv";
    if (src == Source::kConvRelu) {
      b.Node("Relu", {"conv"}, {"x"});
      x = "x";
    } else {  // paddle2onnx's bias Add and Identity
      b.Const("bias", Rand({1, 32, 1, 1}, seed + 3));
      b.Node("Add", {"conv", "bias"}, {"cb"});
      b.Node("Identity", {"cb"}, {"x"});
      x = "x";
    }
  } else if (src == Source::kMatMul) {
    b.Const("w", Rand({40, 24}, seed + 1, -0.3f, 0.3f));
    b.Node("MatMul", {"in", "w"}, {"x"});
    x = "x";
  }
  b.Const("c", Tensor::FromVector<float>({mul_form ? 0.70710677f : 1.4142135f}, {}));
  b.Const("one", Tensor::FromVector<float>({1.f}, {}));
  b.Const("half", Tensor::FromVector<float>({0.5f}, {}));
  b.Node(mul_form ? "Mul" : "Div", {x, "c"}, {"d"}).name = "host";
  b.Node("Erf", {"d"}, {"e"});
  b.Node("Add", {"e", "one"}, {"u"});
  b.Node("Mul", {x, "u"}, {"v"});
  b.Node("Mul", {"v", "half"}, {"y"});
  if (src == Source::kConv || src == Source::kConvRelu) {  // a layout-aware reader after
    b.Const("w2", Rand({8, 32, 1, 1}, seed + 2, -0.2f, 0.2f));
    b.Node("Conv", {"y", "w2"}, {"z"});
    b.Output("z");
  } else {
    b.Output("y");
  }
  if (leak) b.Output("u");
  return b;
}

TEST(CpuGeluErf, BitIdenticalToTheStepsAndCloseToTheReference) {
  struct Case {
    Source src;
    bool mul_form, leak;
    std::string provider;  // the first step's (Div or Mul)
  };
  const Case cases[] = {
      {Source::kConvRelu, false, false, "cpu (GeluErf)"},  // channels-last
      {Source::kConv, false, false, "fused"},  // Conv + bias Add + Identity + GELU: one conv
      {Source::kInput, true, false, "cpu (GeluErf)"},  // the x * (1 / sqrt 2) form, plain
      {Source::kMatMul, false, false, "fused"},        // oneDNN's gelu_erf post-op keeps it
      {Source::kInput, false, true, "cpu"},            // u is a graph output: steps one by one
  };
  uint32_t seed = 70;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.provider + (c.mul_form ? " mul" : " div"));
    GraphBuilder b = Build(c.src, c.mul_form, c.leak, seed += 3);
    auto report = ExpectMatchesReference(b, 1e-5, 1e-6);
    EXPECT_EQ(ProviderOfNode(report, "host"), c.provider);
    if (c.provider == "fused") continue;  // the post-op is oneDNN's own erf
    ExpectPatternBitIdentical(b);
  }
}

}  // namespace
}  // namespace ferry::cpu_test
