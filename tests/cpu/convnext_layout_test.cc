// ConvNeXt's permutes: a Transpose reading a convolution's channels-last (or, oneDNN on AVX2,
// 8-channel-blocked) output copies it in every permutation (the cpu kernel reads the stored
// layout); [0,2,3,1] of a channels-last value and [0,3,1,2] into readers that take channels-last
// are views ("cpu (view)", no copy); an equal-shape Add of two layouts converts one operand;
// and a whole ConvNeXt block (depthwise 7x7 -> permute ->
// LayerNorm -> Linear -> GELU -> Linear -> permute -> layer scale -> residual), as torch exports
// it, against the reference. ctest runs these again with oneDNN capped at AVX2.
#include <algorithm>
#include <string>
#include <vector>

#include "cpu_harness.h"

namespace ferry {
namespace {

using cpu_test::ExpectMatchesReference;
using cpu_test::GraphBuilder;
using cpu_test::ProviderOfNode;
using cpu_test::QScalar;
using cpu_test::Rand;
using cpu_test::SetInts;

void ConstNode(GraphBuilder& b, const std::string& name, float v) {
  ir::Node& n = b.Node("Constant", {}, {name});
  ir::Attribute a;
  a.name = "value";
  a.type = ir::AttrType::kTensor;
  a.t = QScalar(DType::kFloat, v);
  n.attributes.push_back(std::move(a));
}

// Conv (channels 13 / 16 / 24: plain-or-NHWC, and blocked under AVX2) -> Transpose(perm), the
// Transpose's output a graph output: the cpu kernel copies from the conv's layout.
TEST(CpuConvNextLayout, TransposeOfConvOutputEveryPerm) {
  uint32_t seed = 7300;
  std::vector<std::vector<int64_t>> perms;
  std::vector<int64_t> perm = {0, 1, 2, 3};
  do perms.push_back(perm);
  while (std::next_permutation(perm.begin(), perm.end()));
  const std::vector<std::vector<int64_t>> some = {
      {0, 2, 3, 1}, {0, 3, 1, 2}, {0, 1, 3, 2}, {3, 2, 1, 0}};
  // Every permutation with 16 channels; the ConvNeXt ones and two others with 13 and 24.
  for (int64_t k : {16, 13, 24}) {
    for (const auto& p : k == 16 ? perms : some) {
      SCOPED_TRACE("k " + std::to_string(k) + " perm " + std::to_string(p[0]) +
                   std::to_string(p[1]) + std::to_string(p[2]) + std::to_string(p[3]));
      GraphBuilder b;
      b.Opset(13);
      b.Input("x", Rand({2, 8, 5, 7}, seed++));
      b.Const("w", Rand({k, 8, 3, 3}, seed++, -0.5f, 0.5f));
      SetInts(b.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
      SetInts(b.Node("Transpose", {"c"}, {"t"}), "perm", p);
      b.Output("t");
      auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
      EXPECT_EQ(ProviderOfNode(report, "Transpose_1"), "cpu");
    }
  }
}

// Conv -> Transpose(0,2,3,1) -> Relu -> Transpose(0,3,1,2) -> Conv: both permutes are views
// where the conv writes channels-last (AVX-512); the second one is in any case (its reader, a
// Conv, takes channels-last, so the plain [N,H,W,C] is stored as the channels-last [N,C,H,W]).
TEST(CpuConvNextLayout, PermutesAroundChannelsLastAreViews) {
  uint32_t seed = 7400;
  for (int64_t k : {13, 16}) {
    SCOPED_TRACE("k " + std::to_string(k));
    GraphBuilder b;
    b.Opset(13);
    b.Input("x", Rand({1, 8, 6, 5}, seed++));
    b.Const("w", Rand({k, 8, 3, 3}, seed++, -0.5f, 0.5f));
    SetInts(b.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
    SetInts(b.Node("Transpose", {"c"}, {"t"}), "perm", {0, 2, 3, 1});
    b.Node("Relu", {"t"}, {"r"});
    SetInts(b.Node("Transpose", {"r"}, {"u"}), "perm", {0, 3, 1, 2});
    b.Const("w2", Rand({4, k, 1, 1}, seed++, -0.5f, 0.5f));
    b.Node("Conv", {"u", "w2"}, {"y"});
    b.Output("y");
    auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
    const std::string first = ProviderOfNode(report, "Transpose_1");
    EXPECT_TRUE(first == "cpu (view)" || first == "cpu") << first;
    EXPECT_EQ(ProviderOfNode(report, "Transpose_3"), "cpu (view)");
  }
}

// An equal-shape Sub/Mul of a convolution's output (channels-last, or blocked under AVX2)
// and a plain tensor: the cpu kernel converts one operand (before: declined to the reference),
// either operand order, the output channels-last (a conv reads it) or plain (a graph output).
TEST(CpuConvNextLayout, BinaryOfTwoLayouts) {
  uint32_t seed = 7600;
  for (int64_t k : {13, 16}) {
    for (const char* op : {"Sub", "Mul"}) {  // (an Add would be fused into the Conv)
      for (bool conv_first : {false, true}) {
        for (bool plain_out : {false, true}) {
          SCOPED_TRACE("k " + std::to_string(k) + " " + op + " conv_first " +
                       std::to_string(conv_first) + " plain_out " + std::to_string(plain_out));
          GraphBuilder b;
          b.Opset(13);
          b.Input("x", Rand({2, 8, 5, 6}, seed++));
          b.Input("r", Rand({2, k, 5, 6}, seed++));
          b.Const("w", Rand({k, 8, 3, 3}, seed++, -0.5f, 0.5f));
          SetInts(b.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
          if (conv_first)
            b.Node(op, {"c", "r"}, {"s"});
          else
            b.Node(op, {"r", "c"}, {"s"});
          if (plain_out) {
            b.Output("s");
          } else {
            b.Const("w2", Rand({3, k, 1, 1}, seed++, -0.5f, 0.5f));
            b.Node("Conv", {"s", "w2"}, {"y"});
            b.Output("y");
          }
          auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
          EXPECT_EQ(ProviderOfNode(report, std::string(op) + "_1"), "cpu");
        }
      }
    }
  }
}

// One ConvNeXt block as torchvision exports it (decomposed LayerNorm, exact GELU, layer scale
// [C,1,1]), then a graph output in NCHW; awkward channel counts and sizes.
TEST(CpuConvNextLayout, ConvNextBlockMatchesReference) {
  uint32_t seed = 7500;
  for (int64_t c : {13, 16, 24}) {
    for (int64_t hw : {5, 9}) {
      SCOPED_TRACE("c " + std::to_string(c) + " hw " + std::to_string(hw));
      GraphBuilder b;
      b.Opset(13);
      b.Input("x0", Rand({1, c, hw, hw + 2}, seed++, -2.f, 2.f));
      // The block's input (and residual) written by a convolution, as in the model (a plain
      // graph input meeting the channels-last branch would make the residual Add decline).
      b.Const("stem", Rand({c, c, 1, 1}, seed++, -0.5f, 0.5f));
      b.Node("Conv", {"x0", "stem"}, {"x"});
      b.Const("dw", Rand({c, 1, 7, 7}, seed++, -0.3f, 0.3f));
      b.Const("dwb", Rand({c}, seed++));
      ir::Node& conv = b.Node("Conv", {"x", "dw", "dwb"}, {"d"});
      SetInts(conv, "pads", {3, 3, 3, 3});
      cpu_test::SetInt(conv, "group", c);
      SetInts(conv, "kernel_shape", {7, 7});
      SetInts(b.Node("Transpose", {"d"}, {"t"}), "perm", {0, 2, 3, 1});
      SetInts(b.Node("ReduceMean", {"t"}, {"m"}), "axes", {-1});
      b.Node("Sub", {"t", "m"}, {"dv"});
      ConstNode(b, "two", 2.f);
      b.Node("Pow", {"dv", "two"}, {"p"});
      SetInts(b.Node("ReduceMean", {"p"}, {"v"}), "axes", {-1});
      ConstNode(b, "eps", 1e-6f);
      b.Node("Add", {"v", "eps"}, {"ve"});
      b.Node("Sqrt", {"ve"}, {"s"});
      b.Node("Div", {"dv", "s"}, {"n"});
      b.Const("g", Rand({c}, seed++));
      b.Node("Mul", {"n", "g"}, {"ng"});
      b.Const("be", Rand({c}, seed++));
      b.Node("Add", {"ng", "be"}, {"ln"});
      b.Const("w1", Rand({c, 4 * c}, seed++, -0.4f, 0.4f));
      b.Node("MatMul", {"ln", "w1"}, {"h"});
      b.Const("b1", Rand({4 * c}, seed++));
      b.Node("Add", {"b1", "h"}, {"hb"});
      ConstNode(b, "sq2", 1.41421354f);
      b.Node("Div", {"hb", "sq2"}, {"hd"});
      b.Node("Erf", {"hd"}, {"he"});
      ConstNode(b, "one", 1.f);
      b.Node("Add", {"he", "one"}, {"hp"});
      b.Node("Mul", {"hb", "hp"}, {"hm"});
      ConstNode(b, "half", 0.5f);
      b.Node("Mul", {"hm", "half"}, {"g1"});
      b.Const("w2", Rand({4 * c, c}, seed++, -0.2f, 0.2f));
      b.Node("MatMul", {"g1", "w2"}, {"o"});
      b.Const("b2", Rand({c}, seed++));
      b.Node("Add", {"b2", "o"}, {"ob"});
      SetInts(b.Node("Transpose", {"ob"}, {"back"}), "perm", {0, 3, 1, 2});
      b.Const("ls", Rand({c, 1, 1}, seed++));
      b.Node("Mul", {"ls", "back"}, {"sc"});
      b.Node("Add", {"sc", "x"}, {"xy"});
      // A reader that takes channels-last, as the next block's conv (a graph output must be plain).
      b.Const("head", Rand({3, c, 1, 1}, seed++, -0.5f, 0.5f));
      b.Node("Conv", {"xy", "head"}, {"y"});
      b.Output("y");
      auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
      int views = 0, fused = 0;
      for (const auto& r : report) {
        views += r.provider == "cpu (view)";
        fused += r.provider == "fused";
        EXPECT_EQ(r.provider.rfind("reference", 0), std::string::npos) << r.name;
      }
      EXPECT_GE(views, 1);          // the permute back, at least
      EXPECT_EQ(fused, 8 + 6 + 1);  // LayerNorm's 8, bias + GELU's 5, the second bias
    }
  }
}

}  // namespace
}  // namespace ferry
