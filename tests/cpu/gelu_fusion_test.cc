// torch's exact GELU (x / sqrt(2) -> Erf -> Add 1 -> Mul x -> Mul 0.5, as nn.GELU exports it;
// ConvNeXt's and the transformers' MLPs) after a MatMul: fused into the MatMul as oneDNN's
// gelu_erf post-op (the five steps reported "fused"), with and without a bias Add, in the Div
// and the Mul(1 / sqrt(2)) form, with the halving last or first (HF's 0.5 * x * (1 + erf)),
// operands either way round, small (the own-GEMM class, kept on oneDNN when GELU is fused) and
// large; chains that are not exactly GELU run step by step, and a Conv (which takes no GELU) before
// it leaves the steps alone. Each against the reference.
#include <string>

#include "cpu_harness.h"
#include "ops/cpu/gemm_avx2.h"

namespace ferry {
namespace {

using cpu_test::ExpectMatchesReference;
using cpu_test::GraphBuilder;
using cpu_test::QScalar;
using cpu_test::Rand;

enum Variant {
  kDiv,
  kMulForm,
  kSwapped,
  kConstantNodes,
  kHalfFirst,
  kAddTwo,
  kHalfIsOther,
  kErfReadTwice,
  kHalfFirstQuarter
};

// A float scalar as a Constant node (what torch exports) or an initializer.
void Scalar(GraphBuilder& b, const std::string& name, float v, bool node) {
  if (!node) {
    b.Const(name, QScalar(DType::kFloat, v));
    return;
  }
  ir::Node& n = b.Node("Constant", {}, {name});
  ir::Attribute a;
  a.name = "value";
  a.type = ir::AttrType::kTensor;
  a.t = QScalar(DType::kFloat, v);
  n.attributes.push_back(std::move(a));
}

// Appends GELU(v) -> "y" in the given variant; returns whether it is exactly GELU's form.
bool AddGelu(GraphBuilder& b, const std::string& v, Variant var) {
  const bool node = var == kConstantNodes;
  if (var == kHalfFirst || var == kHalfFirstQuarter) {  // 0.5 * x * (1 + erf(x / sqrt(2)))
    Scalar(b, "half", var == kHalfFirst ? 0.5f : 0.25f, node);
    b.Node("Mul", {v, "half"}, {"h"});
    Scalar(b, "s", 1.41421356f, node);
    b.Node("Div", {v, "s"}, {"d"});
    b.Node("Erf", {"d"}, {"e"});
    Scalar(b, "one", 1.f, node);
    b.Node("Add", {"e", "one"}, {"p"});
    b.Node("Mul", {"h", "p"}, {"y"});
    b.Output("y");
    return var == kHalfFirst;
  }
  if (var == kMulForm) {
    Scalar(b, "s", 0.70710678f, node);
    b.Node("Mul", {"s", v}, {"d"});
  } else {
    Scalar(b, "s", 1.41421356f, node);
    b.Node("Div", {v, "s"}, {"d"});
  }
  b.Node("Erf", {"d"}, {"e"});
  Scalar(b, "one", var == kAddTwo ? 2.f : 1.f, node);
  if (var == kSwapped)
    b.Node("Add", {"one", "e"}, {"p"});
  else
    b.Node("Add", {"e", "one"}, {"p"});
  if (var == kSwapped)
    b.Node("Mul", {"p", v}, {"q"});
  else
    b.Node("Mul", {v, "p"}, {"q"});
  Scalar(b, "half", var == kHalfIsOther ? 0.25f : 0.5f, node);
  b.Node("Mul", {"q", "half"}, {"y"});
  b.Output("y");
  if (var == kErfReadTwice) b.Output("e");
  return var == kDiv || var == kMulForm || var == kSwapped || var == kConstantNodes;
}

TEST(CpuGeluFusion, MatMulTakesExactGelu) {
  uint32_t seed = 7000;
  struct Case {
    Shape a;
    int64_t n;
  };
  // [2,7,13] x [13,37]: under 2^18 multiply-adds (the own GEMM's class); [3,50,96] x [96,384]:
  // above (oneDNN, split over the threads).
  for (const Case& c : {Case{{2, 7, 13}, 37}, Case{{3, 50, 96}, 384}}) {
    for (Variant var : {kDiv, kMulForm, kSwapped, kConstantNodes, kHalfFirst, kAddTwo, kHalfIsOther,
                        kErfReadTwice, kHalfFirstQuarter}) {
      for (bool bias : {false, true}) {
        for (int packed : {-1, 1}) {
          SCOPED_TRACE("k " + std::to_string(c.a.back()) + " variant " + std::to_string(var) +
                       " bias " + std::to_string(bias) + " packed " + std::to_string(packed));
          ops::cpu::SetPackedGemmOverride(packed);
          const int64_t k = c.a.back();
          GraphBuilder b;
          b.Opset(13);
          b.Input("x", Rand(c.a, seed++, -1.f, 1.f));
          b.Const("w", Rand({k, c.n}, seed++, -0.5f, 0.5f));
          b.Node("MatMul", {"x", "w"}, {"m"});
          std::string v = "m";
          if (bias) {
            b.Const("bias", Rand({c.n}, seed++, -1.f, 1.f));
            b.Node("Add", {"bias", "m"}, {"mb"});
            v = "mb";
          }
          const bool gelu = AddGelu(b, v, var);
          auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
          int fused = 0;
          for (const auto& r : report) {
            if (r.provider == "fused") {
              ++fused;
              EXPECT_EQ(r.fused_into, "MatMul_0") << r.name;
            } else {
              EXPECT_EQ(r.provider, "cpu") << r.name;
            }
          }
          EXPECT_EQ(fused, (bias ? 1 : 0) + (gelu ? 5 : 0));
        }
      }
    }
  }
  ops::cpu::SetPackedGemmOverride(-1);
}

// A Conv takes no GELU: the steps after it run on their own or as the GeluErf pattern (one
// pass, hosted by the Div; whether it is taken depends on the layouts the ISA gives the Conv),
// never fused into the Conv; a residual Add before them is still fused into the Conv.
// After a Conv (+ a residual Add) the GELU is the conv's gelu_erf post-op: all five steps,
// and the Add, fused into it (PP-OCRv6's blocks; the GeluErf pattern leaves them).
TEST(CpuGeluFusion, ConvTakesGelu) {
  for (bool residual : {false, true}) {
    SCOPED_TRACE("residual " + std::to_string(residual));
    GraphBuilder b;
    b.Opset(13);
    b.Input("x", Rand({1, 8, 6, 7}, 7100, -1.f, 1.f));
    b.Const("w", Rand({12, 8, 3, 3}, 7101, -0.5f, 0.5f));
    b.Node("Conv", {"x", "w"}, {"c"});
    std::string v = "c";
    if (residual) {
      b.Input("r", Rand({1, 12, 4, 5}, 7102));
      b.Node("Add", {"c", "r"}, {"cr"});
      v = "cr";
    }
    AddGelu(b, v, kDiv);
    auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
    int into_conv = 0;
    for (const auto& r : report) {
      EXPECT_NE(r.provider, "cpu (GeluErf)") << r.name;
      if (r.provider == "fused" && r.fused_into == "Conv_0") ++into_conv;
    }
    EXPECT_EQ(into_conv, residual ? 6 : 5);
  }
}

}  // namespace
}  // namespace ferry
