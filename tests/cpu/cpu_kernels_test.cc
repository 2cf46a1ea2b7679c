// The cpu provider against the reference kernels (the spec): seeded awkward shapes, every kernel
// in ops/cpu/, fusion chains, channels-last chains that end in reference nodes, repeated runs
// (pre-packed weights reused, rebuilt when W is not constant).
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using runtime::Session;
using runtime::SessionOptions;
using namespace cpu_test;

struct ConvCase {
  int64_t n, c, h, w, m, kh, kw, group;
  std::vector<int64_t> strides, pads, dilations;
  bool bias;
  std::string auto_pad;
};

TEST(CpuConv, MatchesReferenceOnAwkwardShapes) {
  const ConvCase cases[] = {
      {1, 3, 13, 13, 5, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, ""},
      {2, 7, 17, 11, 13, 3, 3, 1, {2, 2}, {1, 0, 1, 0}, {1, 1}, false, ""},
      {1, 16, 9, 9, 16, 3, 3, 16, {1, 1}, {1, 1, 1, 1}, {1, 1}, true, ""},  // depthwise
      {1, 12, 10, 10, 6, 1, 3, 3, {1, 2}, {0, 1, 0, 1}, {1, 1}, true, ""},  // grouped, non-square
      {1, 5, 20, 20, 4, 3, 3, 1, {1, 1}, {2, 2, 2, 2}, {2, 2}, true, ""},   // dilated
      {1, 3, 31, 31, 8, 7, 7, 1, {2, 2}, {3, 3, 3, 3}, {1, 1}, true, ""},   // stem-like
      {1, 64, 7, 7, 127, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true, ""},  // 1x1
      {1, 4, 1, 1, 3, 1, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, false, ""},    // 1x1 spatial
      {1, 6, 13, 8, 9, 3, 2, 1, {2, 1}, {}, {1, 1}, true, "SAME_UPPER"},
      {1, 6, 12, 9, 9, 2, 3, 1, {1, 2}, {}, {1, 1}, true, "SAME_LOWER"},
      {3, 2, 5, 6, 3, 5, 6, 1, {1, 1}, {}, {1, 1}, true, "VALID"},
  };
  uint32_t seed = 1;
  for (const ConvCase& cc : cases) {
    for (bool const_w : {true, false}) {
      SCOPED_TRACE(testing::Message() << "case c=" << cc.c << " m=" << cc.m << " k=" << cc.kh << "x"
                                      << cc.kw << " group=" << cc.group << " const_w=" << const_w);
      GraphBuilder b;
      b.Input("x", Rand({cc.n, cc.c, cc.h, cc.w}, seed++));
      Tensor w = Rand({cc.m, cc.c / cc.group, cc.kh, cc.kw}, seed++);
      if (const_w)
        b.Const("w", w);
      else
        b.Input("w", w);
      std::vector<std::string> in = {"x", "w"};
      if (cc.bias) {
        b.Const("b", Rand({cc.m}, seed++));
        in.push_back("b");
      }
      ir::Node& n = b.Node("Conv", in, {"y"});
      SetInts(n, "kernel_shape", {cc.kh, cc.kw});
      SetInts(n, "strides", cc.strides);
      if (!cc.pads.empty()) SetInts(n, "pads", cc.pads);
      SetInts(n, "dilations", cc.dilations);
      SetInt(n, "group", cc.group);
      if (!cc.auto_pad.empty()) {
        ir::Attribute a;
        a.name = "auto_pad";
        a.type = ir::AttrType::kString;
        a.s = cc.auto_pad;
        n.attributes.push_back(std::move(a));
      }
      b.Output("y");
      auto report = ExpectMatchesReference(b);
      ASSERT_EQ(report.size(), 1u);
      EXPECT_EQ(report[0].planned, "cpu");
    }
  }
}

// A ResNet-like block: conv -> relu -> conv -> add(residual) -> relu -> maxpool -> conv ->
// clip -> global average pool, plus a reference-only op (Sigmoid) reading a channels-last value.
TEST(CpuConv, FusedChainsAndLayoutBoundariesMatchReference) {
  GraphBuilder b;
  b.Input("x", Rand({1, 8, 15, 15}, 7));
  b.Const("w1", Rand({8, 8, 3, 3}, 8, -0.3f, 0.3f)).Const("b1", Rand({8}, 9));
  b.Const("w2", Rand({8, 8, 3, 3}, 10, -0.3f, 0.3f)).Const("b2", Rand({8}, 11));
  b.Const("w3", Rand({13, 8, 3, 3}, 12, -0.3f, 0.3f));
  b.Const("lo", Tensor::FromVector<float>({0.f}, {}))
      .Const("hi", Tensor::FromVector<float>({0.5f}, {}));
  SetInts(b.Node("Conv", {"x", "w1", "b1"}, {"c1"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"r1"});
  SetInts(b.Node("Conv", {"r1", "w2", "b2"}, {"c2"}), "pads", {1, 1, 1, 1});
  b.Node("Add", {"c2", "x"}, {"s"});
  b.Node("Relu", {"s"}, {"r2"});
  ir::Node& mp = b.Node("MaxPool", {"r2"}, {"p"});
  SetInts(mp, "kernel_shape", {3, 3});
  SetInts(mp, "strides", {2, 2});
  SetInt(mp, "ceil_mode", 1);
  ir::Node& c3 = b.Node("Conv", {"p", "w3"}, {"c3"});
  SetInts(c3, "pads", {1, 1, 1, 1});
  b.Node("Clip", {"c3", "lo", "hi"}, {"k"});
  b.Node("Softsign", {"k"}, {"sig"});  // reference-only reader: sees a plain tensor
  b.Node("Add", {"k", "sig"}, {"sum"});
  b.Node("GlobalAveragePool", {"sum"}, {"g"});
  // A channels-last value whose cpu reader declines (AveragePool with ceil_mode).
  b.Const("w4", Rand({5, 8, 1, 1}, 13));
  b.Node("Conv", {"p", "w4"}, {"c4"});
  ir::Node& ap = b.Node("AveragePool", {"c4"}, {"ap"});
  SetInts(ap, "kernel_shape", {2, 2});
  SetInts(ap, "strides", {2, 2});
  SetInt(ap, "ceil_mode", 1);
  b.Output("g").Output("r2").Output("ap");
  auto report = ExpectMatchesReference(b);
  ASSERT_FALSE(report.empty());
  int fused = 0;
  for (const auto& r : report) fused += r.provider == "fused";
  EXPECT_EQ(fused, 4);  // r1, the Add + Relu into c2, and the Clip
  for (const auto& r : report) {
    if (r.op_type == "Softsign") {
      EXPECT_EQ(r.provider, "reference");
    }
    if (r.op_type == "AveragePool") {
      EXPECT_EQ(r.provider, "reference (cpu declined)");
    }
  }
}

TEST(CpuPool, MatchesReference) {
  struct PoolCase {
    std::string op;
    Shape x;
    std::vector<int64_t> k, strides, pads;
    int64_t ceil, include_pad;
  };
  const PoolCase cases[] = {
      {"MaxPool", {1, 3, 13, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0},
      {"MaxPool", {2, 5, 12, 7}, {2, 3}, {2, 1}, {0, 1, 0, 1}, 1, 0},
      {"AveragePool", {1, 3, 13, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0},
      {"AveragePool", {1, 4, 11, 9}, {3, 2}, {1, 2}, {1, 0, 1, 0}, 0, 1},
      {"AveragePool", {1, 4, 11, 9}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, 0},  // declines (ceil)
  };
  uint32_t seed = 100;
  for (const auto& pc : cases) {
    SCOPED_TRACE(pc.op + " " + ShapeToString(pc.x));
    GraphBuilder b;
    b.Input("x", Rand(pc.x, seed++));
    ir::Node& n = b.Node(pc.op, {"x"}, {"y"});
    SetInts(n, "kernel_shape", pc.k);
    SetInts(n, "strides", pc.strides);
    SetInts(n, "pads", pc.pads);
    SetInt(n, "ceil_mode", pc.ceil);
    if (pc.op == "AveragePool") SetInt(n, "count_include_pad", pc.include_pad);
    b.Output("y");
    ExpectMatchesReference(b);
  }
  GraphBuilder g;
  g.Input("x", Rand({3, 127, 5, 3}, 200));
  g.Node("GlobalAveragePool", {"x"}, {"y"});
  g.Output("y");
  ExpectMatchesReference(g);
}

TEST(CpuElementwise, MatchesReferenceWithBroadcasts) {
  for (const std::string op : {"Add", "Sub", "Mul"}) {
    const std::pair<Shape, Shape> shapes[] = {
        {{2, 3, 127}, {2, 3, 127}},
        {{2, 3, 127}, {127}},
        {{4, 13}, {1, 13}},
        {{3, 5}, {}},          // scalar
        {{127}, {2, 3, 127}},  // A is the broadcast one
        {{}, {4, 13}},
        {{3, 1, 5}, {3, 4, 5}},  // a middle-dim broadcast
    };
    uint32_t seed = 300;
    for (const auto& [sa, sb] : shapes) {
      SCOPED_TRACE(op + " " + ShapeToString(sa) + " " + ShapeToString(sb));
      GraphBuilder b;
      b.Input("a", Rand(sa, seed));
      b.Input("b", Rand(sb, seed + 1));
      seed += 2;
      b.Node(op, {"a", "b"}, {"y"});
      b.Output("y");
      ExpectMatchesReference(b, 0, 0);
    }
  }
  GraphBuilder b;
  b.Input("x", Rand({1, 1, 13}, 400, -2, 2));
  b.Node("Relu", {"x"}, {"r"});
  b.Node("Clip", {"x"}, {"c"});  // no bounds: identity
  b.Output("r").Output("c");
  ExpectMatchesReference(b, 0, 0);
}

TEST(CpuProvider, ObserverRunsUnfusedAndPlainAndReferenceProviderUsesNoCpuKernel) {
  GraphBuilder b;
  b.Input("x", Rand({1, 4, 6, 6}, 500));
  b.Const("w", Rand({4, 4, 3, 3}, 501));
  ir::Node& c = b.Node("Conv", {"x", "w"}, {"c"});
  SetInts(c, "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c"}, {"y"});
  b.Output("y");
  auto s = Session::Create(b.model(), {.threads = 1});
  ASSERT_TRUE(s.ok());
  int seen = 0;
  runtime::RunOptions ro;
  ro.observer = [&](const ir::Node&, const std::string&, const Value&) { ++seen; };
  auto with = (*s)->Run(b.feeds(), ro);
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_EQ(seen, 2);
  auto without = (*s)->Run(b.feeds());
  ASSERT_TRUE(without.ok());
  for (int64_t i = 0; i < (*with)[0].tensor().size(); ++i)
    EXPECT_NEAR((*with)[0].tensor().data<float>()[i], (*without)[0].tensor().data<float>()[i],
                1e-5);
  SessionOptions ro2;
  ro2.provider = "reference";
  auto r = Session::Create(b.model(), ro2);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->Run(b.feeds()).ok());
  for (const auto& n : (*r)->node_report()) EXPECT_EQ(n.provider, "reference");
  SessionOptions bad;
  bad.provider = "gpu";
  auto e = Session::Create(b.model(), bad);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnsupported);
}

// Concat: plain copies of several dtypes and axes (zero-size inputs too), and a CNN branch pair
// concatenated in the convolution library's layout, pooled and averaged without conversions.
TEST(CpuConcat, MatchesReferenceInEveryLayout) {
  struct Case {
    std::vector<Shape> xs;
    int64_t axis;
  };
  const Case cases[] = {
      {{{2, 3}, {2, 5}}, 1},        {{{3, 4, 5}, {1, 4, 5}, {2, 4, 5}}, 0},
      {{{2, 3, 7}, {2, 3, 1}}, -1}, {{{1, 13, 3, 3}, {1, 0, 3, 3}, {1, 2, 3, 3}}, 1},
      {{{127}, {1}, {3}}, 0},       {{{2, 1, 3}, {2, 4, 3}}, 1},
  };
  uint32_t seed = 300;
  for (const auto& c : cases) {
    SCOPED_TRACE("axis " + std::to_string(c.axis) + " first " + ShapeToString(c.xs[0]));
    GraphBuilder b;
    std::vector<std::string> names;
    for (size_t i = 0; i < c.xs.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      b.Input(names.back(), Rand(c.xs[i], seed++));
    }
    SetInt(b.Node("Concat", names, {"y"}), "axis", c.axis);
    b.Output("y");
    auto report = ExpectMatchesReference(b, 0, 0);
    ASSERT_FALSE(report.empty());
    EXPECT_EQ(report[0].provider, "cpu");
  }
  {  // int64, as shape computations concatenate
    GraphBuilder b;
    b.Input("a", Tensor::FromVector<int64_t>({1, 2, 3}, {3}));
    b.Input("b", Tensor::FromVector<int64_t>({-4}, {1}));
    SetInt(b.Node("Concat", {"a", "b"}, {"y"}), "axis", 0);
    b.Output("y");
    ExpectMatchesReference(b, 0, 0);
  }
  for (int64_t ch : {8, 16, 13}) {  // 13: blocked layouts impossible, plain path
    SCOPED_TRACE("branch channels " + std::to_string(ch));
    GraphBuilder b;
    b.Input("x", Rand({2, 8, 13, 13}, seed++));
    b.Const("wa", Rand({ch, 8, 1, 1}, seed++, -0.5f, 0.5f));
    b.Const("wb", Rand({ch, 8, 3, 3}, seed++, -0.3f, 0.3f));
    b.Node("Conv", {"x", "wa"}, {"a"});
    SetInts(b.Node("Conv", {"x", "wb"}, {"bb"}), "pads", {1, 1, 1, 1});
    SetInt(b.Node("Concat", {"a", "bb"}, {"cat"}), "axis", 1);
    ir::Node& mp = b.Node("MaxPool", {"cat"}, {"p"});
    SetInts(mp, "kernel_shape", {3, 3});
    SetInts(mp, "strides", {2, 2});
    SetInt(mp, "ceil_mode", 1);
    b.Node("GlobalAveragePool", {"p"}, {"g"});
    b.Output("g");
    auto report = ExpectMatchesReference(b);
    for (const auto& r : report)
      if (r.op_type == "Concat" || r.op_type == "GlobalAveragePool") {
        EXPECT_EQ(r.provider, "cpu") << r.op_type;
      }
  }
}

// Concat whose output must be plain (read by a reference Reshape as in ShuffleNetV2's channel
// shuffle, or a graph output) or whose axis is not C: the convolutions' non-plain outputs are
// reordered to plain by the cpu kernel (straight into the output with one row), not declined.
TEST(CpuConcat, NonPlainInputsIntoAPlainOutput) {
  uint32_t seed = 350;
  struct Case {
    int64_t n, ch, axis;
    bool reshape;
  };
  const Case cases[] = {{1, 16, 1, true},  {2, 16, 1, true},  {1, 8, 1, false}, {1, 13, 1, true},
                        {1, 16, 0, false}, {2, 16, 2, false}, {2, 8, -1, false}};
  for (const auto& c : cases) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " ch " + std::to_string(c.ch) + " axis " +
                 std::to_string(c.axis));
    GraphBuilder b;
    b.Input("x", Rand({c.n, 16, 9, 9}, seed++));
    b.Const("wa", Rand({c.ch, 16, 1, 1}, seed++, -0.5f, 0.5f));
    b.Const("wb", Rand({c.ch, 16, 3, 3}, seed++, -0.3f, 0.3f));
    b.Node("Conv", {"x", "wa"}, {"a"});
    SetInts(b.Node("Conv", {"x", "wb"}, {"bb"}), "pads", {1, 1, 1, 1});
    // A plain input among them when the shapes allow (x has 16 channels).
    std::vector<std::string> ins = {"a", "bb"};
    if (c.axis != 1 || c.ch == 16) ins = {"a", "x", "bb"};
    if (c.axis != 1 && c.ch != 16) ins = {"a", "bb"};
    SetInt(b.Node("Concat", ins, {"cat"}), "axis", c.axis);
    if (c.reshape) {
      b.Input("shape", Tensor::FromVector<int64_t>({c.n, 2, -1, 9, 9}, {5}));
      b.Node("Reshape", {"cat", "shape"}, {"y"});
    } else {
      b.Node("Identity", {"cat"}, {"y"});
    }
    b.Output("y");
    auto report = ExpectMatchesReference(b);
    for (const auto& r : report)
      if (r.op_type == "Concat") {
        EXPECT_EQ(r.provider, "cpu");
      }
  }
}

// BatchNormalization: plain tensors of several ranks, and DenseNet's pre-activation
// (Concat -> BN -> Relu -> Conv, the ConcatBn pattern) and a residual BN -> Add -> Relu in the
// convolution layout.
TEST(CpuBatchNorm, MatchesReferenceInEveryLayoutWithFusion) {
  uint32_t seed = 400;
  auto add_stats = [&](GraphBuilder& b, const std::string& p, int64_t c) {
    return AddBnStats(b, p, c, &seed);
  };
  for (const Shape& x : std::vector<Shape>{{3, 13}, {2, 5, 7}, {1, 3, 13, 13}, {2, 4, 3, 2, 5}}) {
    SCOPED_TRACE(ShapeToString(x));
    GraphBuilder b;
    b.Input("x", Rand(x, seed++));
    auto st = add_stats(b, "bn", x[1]);
    b.Node("BatchNormalization", {"x", st[0], st[1], st[2], st[3]}, {"y"});
    b.Output("y");
    auto report = ExpectMatchesReference(b);
    ASSERT_FALSE(report.empty());
    EXPECT_EQ(report[0].provider, "cpu");
  }
  for (int64_t ch : {8, 13}) {
    SCOPED_TRACE("channels " + std::to_string(ch));
    GraphBuilder b;
    b.Input("x", Rand({2, ch, 9, 9}, seed++));
    b.Const("w1", Rand({ch, ch, 3, 3}, seed++, -0.3f, 0.3f));
    SetInts(b.Node("Conv", {"x", "w1"}, {"c1"}), "pads", {1, 1, 1, 1});
    SetInt(b.Node("Concat", {"x", "c1"}, {"cat"}), "axis", 1);
    auto s1 = add_stats(b, "bn1", 2 * ch);
    b.Node("BatchNormalization", {"cat", s1[0], s1[1], s1[2], s1[3]}, {"n1"});
    b.Node("Relu", {"n1"}, {"r1"});
    b.Const("w2", Rand({ch, 2 * ch, 1, 1}, seed++, -0.3f, 0.3f));
    b.Node("Conv", {"r1", "w2"}, {"c2"});
    auto s2 = add_stats(b, "bn2", ch);
    b.Node("BatchNormalization", {"c2", s2[0], s2[1], s2[2], s2[3]}, {"n2"});
    b.Node("Add", {"n2", "c1"}, {"sum"});
    b.Node("Relu", {"sum"}, {"y"});
    b.Output("y");
    auto report = ExpectMatchesReference(b);
    int fused = 0;
    for (const auto& r : report) {
      if (r.op_type == "BatchNormalization") {  // the first inside the ConcatBn pattern
        EXPECT_TRUE(r.provider == "cpu" || r.provider == "fused") << r.provider;
      }
      if (r.op_type == "Concat") {  // plain x converted, c1 in the conv layout as it is
        EXPECT_EQ(r.provider, "cpu (ConcatBn)");
      }
      fused += r.provider == "fused";
    }
    // The first BN and Relu (ConcatBn); the second BN, the Add and the last Relu (into c2).
    EXPECT_EQ(fused, 5);
  }
}

// A cpu elementwise node whose input arrives channel-blocked but whose output is a graph output
// must not hand the blocked bytes out as the result (it declines; the runtime converts).
TEST(CpuElementwise, BlockedInputFeedingAGraphOutput) {
  GraphBuilder b;
  b.Input("x", Rand({1, 8, 9, 9}, 500));
  b.Const("w", Rand({16, 8, 3, 3}, 501, -0.3f, 0.3f));
  SetInts(b.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  SetInts(b.Node("MaxPool", {"c"}, {"p"}), "kernel_shape", {2, 2});
  b.Node("Relu", {"p"}, {"y"});
  b.Node("Add", {"p", "p"}, {"z"});
  b.Output("y").Output("z");
  ExpectMatchesReference(b);
}

}  // namespace
}  // namespace ferry
