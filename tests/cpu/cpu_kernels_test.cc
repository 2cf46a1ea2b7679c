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

}  // namespace
}  // namespace ferry
