// cpu kernels of the ONNX Runtime contrib ops (ops/cpu/contrib.cc) against their reference
// kernels on seeded awkward shapes: SkipLayerNormalization and LayerNormalization below opset 17
// within float tolerance; QLinearAdd, QLinearGlobalAveragePool, QGemm and QLinearConv (oneDNN's
// QConv, or the own int8 GEMM kernel for full-range weights without VNNI) bit for bit (int8
// kernels match the int8 reference exactly), at 1 and 2 threads.
#include "cpu/cpu_harness.h"

namespace ferry::cpu_test {
namespace {

constexpr const char* kMs = "com.microsoft";

// The builder's model imports com.microsoft 1 and the node is in that domain.
ir::Node& MsNode(GraphBuilder& b, const std::string& op, std::vector<std::string> in,
                 std::vector<std::string> out) {
  auto m = std::const_pointer_cast<ir::Model>(b.model());
  bool has = false;
  for (const auto& o : m->opset_imports) has = has || o.domain == kMs;
  if (!has) m->opset_imports.push_back({kMs, 1});
  ir::Node& n = b.Node(op, std::move(in), std::move(out));
  n.domain = kMs;
  return n;
}

std::string CpuProvider(const std::vector<runtime::NodeReport>& report, const std::string& op) {
  return ProviderOfOp(report, op);
}

TEST(CpuContrib, SkipLayerNormMatchesReference) {
  struct Case {
    Shape x, skip;
    bool beta, bias, sum;
  };
  const Case cases[] = {
      {{2, 13, 48}, {2, 13, 48}, true, true, false}, {{1, 7, 127}, {1, 7, 127}, false, false, true},
      {{3, 5, 33}, {1, 5, 33}, true, false, false},  {{3, 5, 33}, {5, 33}, true, true, true},
      {{17, 256}, {17, 256}, true, true, false},     {{1, 1, 1}, {1, 1, 1}, true, true, false}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      GraphBuilder b;
      const int64_t h = c.x.back();
      b.Input("x", Rand(c.x, seed, -3, 3)).Input("skip", Rand(c.skip, seed + 1));
      seed += 2;
      b.Const("gamma", Rand({h}, seed++));
      std::vector<std::string> ins = {"x", "skip", "gamma"};
      if (c.beta || c.bias) {
        ins.push_back(c.beta ? "beta" : "");
        if (c.beta) b.Const("beta", Rand({h}, seed++));
      }
      if (c.bias) {
        ins.push_back("bias");
        b.Const("bias", Rand({h}, seed++));
      }
      std::vector<std::string> outs = {"y"};
      if (c.sum) outs = {"y", "", "", "sum"};
      ir::Node& n = MsNode(b, "SkipLayerNormalization", ins, outs);
      SetFloat(n, "epsilon", 1e-5f);
      b.Output("y");
      if (c.sum) b.Output("sum");
      auto report = ExpectMatchesReference(b, 1e-4, 1e-5, threads);
      EXPECT_EQ(CpuProvider(report, "SkipLayerNormalization"), "cpu") << ShapeToString(c.x);
    }
  }
}

TEST(CpuContrib, AttentionMatchesReference) {
  struct Case {
    int64_t b, s, d, heads;
    int mask;  // 0 none, 1 key lengths, 2 end/start, 3 raw 2-D, 4 raw 3-D
    bool causal, qkv_sizes, attn_bias;
  };
  const Case cases[] = {
      {2, 13, 48, 4, 1, false, false, false}, {1, 7, 24, 3, 0, true, false, true},
      {3, 5, 30, 5, 2, false, false, false},  {2, 9, 24, 2, 3, true, true, false},
      {1, 1, 16, 1, 4, false, false, true},   {2, 17, 64, 4, 4, false, false, false}};
  uint32_t seed = 300;
  for (const Case& c : cases) {
    GraphBuilder b;
    const int64_t dq = c.d, dv = c.qkv_sizes ? c.d / 2 : c.d, cols = 2 * dq + dv;
    b.Input("x", Rand({c.b, c.s, c.d}, seed, -1, 1));
    b.Const("w", Rand({c.d, cols}, seed + 1, -0.3f, 0.3f)).Const("bias", Rand({cols}, seed + 2));
    std::vector<std::string> ins = {"x", "w", "bias"};
    if (c.mask != 0 || c.attn_bias) ins.push_back(c.mask != 0 ? "mask" : "");
    if (c.mask == 1 || c.mask == 2) {
      Tensor m(DType::kInt32, {c.mask == 1 ? c.b : 2 * c.b});
      for (int64_t i = 0; i < m.size(); ++i)
        m.data<int32_t>()[i] = static_cast<int32_t>(i < c.b ? c.s - i % c.s : i % 2);
      b.Input("mask", m);
    } else if (c.mask >= 3) {
      Tensor m = RandInts<int32_t>(
          DType::kInt32, c.mask == 3 ? Shape{c.b, c.s} : Shape{c.b, c.s, c.s}, 0, 1, seed + 3);
      m.data<int32_t>()[0] = 1;
      b.Input("mask", m);
    }
    if (c.attn_bias) {
      ins.push_back("");
      ins.push_back("ab");
      b.Input("ab", Rand({1, c.heads, c.s, c.s}, seed + 4));
    }
    seed += 5;
    ir::Node& n = MsNode(b, "Attention", ins, {"y"});
    SetInt(n, "num_heads", c.heads);
    if (c.causal) SetInt(n, "unidirectional", 1);
    if (c.qkv_sizes) SetInts(n, "qkv_hidden_sizes", {dq, dq, dv});
    b.Output("y");
    for (int threads : {1, 2}) {
      auto report = ExpectMatchesReference(b, 1e-4, 1e-5, threads);
      EXPECT_EQ(CpuProvider(report, "Attention"), "cpu") << c.b << "x" << c.s << "x" << c.d;
    }
  }
}

TEST(CpuContrib, LayerNormalizationAtOpset14RunsOnCpu) {
  GraphBuilder b;
  b.Opset(14);
  b.Input("x", Rand({2, 9, 129}, 5, -4, 4)).Const("g", Rand({129}, 6)).Const("b", Rand({129}, 7));
  SetFloat(b.Node("LayerNormalization", {"x", "g", "b"}, {"y"}), "epsilon", 1e-5f);
  b.Output("y");
  auto report = ExpectMatchesReference(b, 1e-4, 1e-5);
  EXPECT_EQ(CpuProvider(report, "LayerNormalization"), "cpu");
}

template <typename T>
void QLinearAddCase(DType dt, const Shape& shape, uint32_t seed) {
  const int lo = dt == DType::kUint8 ? 0 : -128, hi = dt == DType::kUint8 ? 255 : 127;
  GraphBuilder b;
  b.Input("a", RandInts<T>(dt, shape, lo, hi, seed))
      .Input("b", RandInts<T>(dt, shape, lo, hi, seed + 1));
  b.Const("sa", QScalar(DType::kFloat, 0.037)).Const("za", QScalar(dt, lo + 77));
  b.Const("sb", QScalar(DType::kFloat, 0.021)).Const("zb", QScalar(dt, lo + 130));
  b.Const("sc", QScalar(DType::kFloat, 0.05)).Const("zc", QScalar(dt, lo + 101));
  MsNode(b, "QLinearAdd", {"a", "sa", "za", "b", "sb", "zb", "sc", "zc"}, {"y"});
  b.Output("y");
  for (int threads : {1, 2}) {
    auto report = ExpectMatchesReference(b, 0, 0, threads);
    EXPECT_EQ(CpuProvider(report, "QLinearAdd"), "cpu");
  }
}

TEST(CpuContrib, QLinearAddMatchesReferenceBitForBit) {
  QLinearAddCase<uint8_t>(DType::kUint8, {2, 13, 7, 5}, 3);
  QLinearAddCase<int8_t>(DType::kInt8, {1, 127}, 9);
  QLinearAddCase<uint8_t>(DType::kUint8, {1, 64, 56, 56}, 11);
}

TEST(CpuContrib, QLinearAddOfAConvOutputAndAPlainInput) {
  // The conv writes channels-last (its reader takes it), the other operand arrives plain.
  // ExpectMatchesReference runs the graph with the reference kernels too.
  GraphBuilder b;
  b.Input("x", RandInts<uint8_t>(DType::kUint8, {1, 5, 11, 9}, 0, 255, 90));
  b.Input("r", RandInts<uint8_t>(DType::kUint8, {1, 16, 11, 9}, 0, 255, 91));
  b.Const("sx", QScalar(DType::kFloat, 0.02)).Const("zx", QScalar(DType::kUint8, 120));
  b.Const("w", RandInts<int8_t>(DType::kInt8, {16, 5, 3, 3}, -127, 127, 92));
  b.Const("sw", QScalar(DType::kFloat, 0.003)).Const("zw", QScalar(DType::kInt8, 0));
  b.Const("sy", QScalar(DType::kFloat, 0.04)).Const("zy", QScalar(DType::kUint8, 110));
  SetInts(b.Node("QLinearConv", {"x", "sx", "zx", "w", "sw", "zw", "sy", "zy"}, {"c"}), "pads",
          {1, 1, 1, 1});
  b.Const("sr", QScalar(DType::kFloat, 0.03)).Const("zr", QScalar(DType::kUint8, 128));
  b.Const("so", QScalar(DType::kFloat, 0.05)).Const("zo", QScalar(DType::kUint8, 100));
  MsNode(b, "QLinearAdd", {"c", "sy", "zy", "r", "sr", "zr", "so", "zo"}, {"y"});
  // A conv reads the sum: the add may write channels-last too.
  b.Const("w2", RandInts<int8_t>(DType::kInt8, {7, 16, 1, 1}, -127, 127, 93));
  b.Node("QLinearConv", {"y", "so", "zo", "w2", "sw", "zw", "sy", "zy"}, {"z"});
  b.Output("z");
  for (int threads : {1, 2}) {
    auto report = ExpectMatchesReference(b, 0, 0, threads);
    EXPECT_EQ(CpuProvider(report, "QLinearAdd"), "cpu");
  }
}

TEST(CpuContrib, Int8MaxPoolBetweenQLinearConvs) {
  // ResNet-18's QOperator stem: QLinearConv -> MaxPool (uint8, channels-last between them) ->
  // QLinearConv; and a plain int8 MaxPool with ceil_mode and asymmetric pads.
  GraphBuilder b;
  b.Input("x", RandInts<uint8_t>(DType::kUint8, {1, 3, 23, 21}, 0, 255, 95));
  b.Const("sx", QScalar(DType::kFloat, 0.02)).Const("zx", QScalar(DType::kUint8, 120));
  b.Const("w", RandInts<int8_t>(DType::kInt8, {16, 3, 3, 3}, -127, 127, 96));
  b.Const("w2", RandInts<int8_t>(DType::kInt8, {8, 16, 3, 3}, -127, 127, 97));
  b.Const("sw", QScalar(DType::kFloat, 0.003)).Const("zw", QScalar(DType::kInt8, 0));
  b.Const("sy", QScalar(DType::kFloat, 0.04)).Const("zy", QScalar(DType::kUint8, 0));
  SetInts(b.Node("QLinearConv", {"x", "sx", "zx", "w", "sw", "zw", "sy", "zy"}, {"c"}), "pads",
          {1, 1, 1, 1});
  ir::Node& mp = b.Node("MaxPool", {"c"}, {"p"});
  SetInts(mp, "kernel_shape", {3, 3});
  SetInts(mp, "strides", {2, 2});
  SetInts(mp, "pads", {1, 1, 1, 1});
  b.Node("QLinearConv", {"p", "sy", "zy", "w2", "sw", "zw", "sy", "zy"}, {"z"});
  b.Output("z");
  b.Input("q", RandInts<int8_t>(DType::kInt8, {2, 5, 9, 10}, -128, 127, 98));
  ir::Node& mq = b.Node("MaxPool", {"q"}, {"qp"});
  SetInts(mq, "kernel_shape", {2, 3});
  SetInts(mq, "strides", {2, 2});
  SetInts(mq, "pads", {0, 1, 1, 0});
  SetInt(mq, "ceil_mode", 1);
  b.Output("qp");
  for (int threads : {1, 2}) {
    auto report = ExpectMatchesReference(b, 0, 0, threads);
    EXPECT_EQ(CpuProvider(report, "MaxPool"), "cpu");
  }
}

TEST(CpuContrib, QLinearGlobalAveragePoolMatchesReference) {
  for (int last : {0, 1}) {
    GraphBuilder b;
    b.Input("x", RandInts<uint8_t>(DType::kUint8, {3, 13, 7, 9}, 0, 255, 21 + last));
    b.Const("sx", QScalar(DType::kFloat, 0.03)).Const("zx", QScalar(DType::kUint8, 17));
    b.Const("sy", QScalar(DType::kFloat, 0.011)).Const("zy", QScalar(DType::kUint8, 3));
    SetInt(MsNode(b, "QLinearGlobalAveragePool", {"x", "sx", "zx", "sy", "zy"}, {"y"}),
           "channels_last", last);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    EXPECT_EQ(CpuProvider(report, "QLinearGlobalAveragePool"), "cpu");
  }
}

TEST(CpuContrib, QGemmMatchesReferenceBitForBit) {
  struct Case {
    int64_t m, k, n;
    bool trans_b, quantized, per_column, c2d;
  };
  const Case cases[] = {{1, 512, 1000, true, true, false, false},
                        {13, 37, 19, true, true, true, false},
                        {7, 127, 33, false, false, true, true},
                        {1, 1, 1, true, true, false, false},
                        {30, 64, 17, false, true, true, true}};
  uint32_t seed = 40;
  for (const Case& c : cases) {
    GraphBuilder b;
    b.Input("a", RandInts<uint8_t>(DType::kUint8, {c.m, c.k}, 0, 255, seed++));
    b.Const("sa", QScalar(DType::kFloat, 0.02)).Const("za", QScalar(DType::kUint8, 119));
    b.Const("b", RandInts<int8_t>(DType::kInt8, c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n}, -127,
                                  127, seed++));
    if (c.per_column) {
      Tensor s = Rand({c.n}, seed++, 0.001f, 0.01f);
      b.Const("sb", s).Const("zb", RandInts<int8_t>(DType::kInt8, {c.n}, -3, 3, seed++));
    } else {
      b.Const("sb", QScalar(DType::kFloat, 0.004)).Const("zb", QScalar(DType::kInt8, 0));
    }
    b.Const("c", RandInts<int32_t>(DType::kInt32, c.c2d ? Shape{c.m, c.n} : Shape{c.n}, -5000, 5000,
                                   seed++));
    std::vector<std::string> ins = {"a", "sa", "za", "b", "sb", "zb", "c"};
    if (c.quantized) {
      b.Const("sy", QScalar(DType::kFloat, 0.07)).Const("zy", QScalar(DType::kUint8, 128));
      ins.push_back("sy");
      ins.push_back("zy");
    }
    ir::Node& n = MsNode(b, "QGemm", ins, {"y"});
    SetInt(n, "transB", c.trans_b ? 1 : 0);
    SetFloat(n, "alpha", 0.75f);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    EXPECT_EQ(CpuProvider(report, "QGemm"), "cpu") << c.m << "x" << c.k << "x" << c.n;
  }
}

TEST(CpuContrib, QLinearConvMatchesReferenceBitForBit) {
  // |w| <= 64: oneDNN's non-VNNI int8 kernels are exact there too (qconv.cc).
  struct Case {
    Shape x, w;
    std::vector<int64_t> strides, pads;
    int64_t group;
  };
  const Case cases[] = {{{1, 3, 17, 13}, {8, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, 1},
                        {{2, 16, 9, 9}, {16, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, 16},
                        {{1, 13, 7, 7}, {5, 13, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1}};
  uint32_t seed = 60;
  for (const Case& c : cases) {
    GraphBuilder b;
    b.Input("x", RandInts<uint8_t>(DType::kUint8, c.x, 0, 255, seed++));
    b.Const("sx", QScalar(DType::kFloat, 0.02)).Const("zx", QScalar(DType::kUint8, 121));
    b.Const("w", RandInts<int8_t>(DType::kInt8, c.w, -64, 64, seed++));
    b.Const("sw", Rand({c.w[0]}, seed++, 0.002f, 0.01f))
        .Const("zw", RandInts<int8_t>(DType::kInt8, {c.w[0]}, 0, 0, 1));
    b.Const("sy", QScalar(DType::kFloat, 0.05)).Const("zy", QScalar(DType::kUint8, 9));
    b.Const("bias", RandInts<int32_t>(DType::kInt32, {c.w[0]}, -2000, 2000, seed++));
    ir::Node& n =
        b.Node("QLinearConv", {"x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "bias"}, {"y"});
    SetInts(n, "strides", c.strides);
    SetInts(n, "pads", c.pads);
    SetInt(n, "group", c.group);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    EXPECT_EQ(CpuProvider(report, "QLinearConv"), "cpu") << ShapeToString(c.x);
  }
}

TEST(CpuContrib, QLinearConvFullRangeWeightsChainMatchesReference) {
  // Full-range int8 weights and non-zero weight zero points (the own kernel where oneDNN would
  // saturate), int8 and uint8 activations, a chain of convs (NHWC between them): group 1 3x3
  // stride 2 with pads, depthwise 3x3, 1x1 (read in place), 5x5 dilated.
  for (DType xt : {DType::kUint8, DType::kInt8}) {
    const int lo = xt == DType::kUint8 ? 0 : -128, hi = xt == DType::kUint8 ? 255 : 127;
    GraphBuilder b;
    b.Input("x", xt == DType::kUint8 ? RandInts<uint8_t>(xt, {2, 5, 19, 17}, lo, hi, 70)
                                     : RandInts<int8_t>(xt, {2, 5, 19, 17}, lo, hi, 70));
    struct Layer {
      int64_t m, c, k, stride, pad, group, dil;
    };
    const Layer layers[] = {{24, 5, 3, 2, 1, 1, 1},
                            {24, 24, 3, 1, 1, 24, 1},
                            {13, 24, 1, 1, 0, 1, 1},
                            {7, 13, 5, 1, 3, 1, 2}};
    std::string in = "x";
    uint32_t seed = 80;
    for (size_t i = 0; i < std::size(layers); ++i) {
      const Layer& l = layers[i];
      const std::string p = "l" + std::to_string(i) + "_";
      b.Const(p + "sx", QScalar(DType::kFloat, 0.02 + 0.01 * static_cast<double>(i)))
          .Const(p + "zx", QScalar(xt, lo + 100));
      b.Const(p + "w",
              RandInts<int8_t>(DType::kInt8, {l.m, l.c / l.group, l.k, l.k}, -127, 127, seed++));
      b.Const(p + "sw", Rand({l.m}, seed++, 0.001f, 0.004f));
      b.Const(p + "zw", RandInts<int8_t>(DType::kInt8, {l.m}, -2, 2, seed++));
      b.Const(p + "sy", QScalar(DType::kFloat, 0.03 + 0.01 * static_cast<double>(i)))
          .Const(p + "zy", QScalar(xt, lo + 100));
      b.Const(p + "b", RandInts<int32_t>(DType::kInt32, {l.m}, -3000, 3000, seed++));
      const std::string out = p + "y";
      ir::Node& n =
          b.Node("QLinearConv",
                 {in, p + "sx", p + "zx", p + "w", p + "sw", p + "zw", p + "sy", p + "zy", p + "b"},
                 {out});
      SetInts(n, "strides", {l.stride, l.stride});
      SetInts(n, "pads", {l.pad, l.pad, l.pad, l.pad});
      SetInts(n, "dilations", {l.dil, l.dil});
      SetInt(n, "group", l.group);
      in = out;
    }
    b.Output(in);
    for (int threads : {1, 2}) {
      auto report = ExpectMatchesReference(b, 0, 0, threads);
      EXPECT_EQ(CpuProvider(report, "QLinearConv"), "cpu");
    }
  }
}

}  // namespace
}  // namespace ferry::cpu_test
