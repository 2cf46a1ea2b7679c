// The cpu Conv kernel on small convolutions (an SE block's 1x1 convs on a 1x1 map, a depthwise
// 3x3 on 7x7; around 2^18 multiply-adds, where matmul switches to one thread) and larger ones,
// chained: at two threads against the reference kernels, and bit for bit against the cpu
// provider at one thread (results must not depend on the thread count).
#include <cmath>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "graph_builders.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace ferry {
namespace {

using runtime::Session;
using runtime::SessionOptions;
using testing::MakeNode;

Tensor Rand(const Shape& shape, std::mt19937& gen) {
  Tensor t(DType::kFloat, shape);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& x : t.span<float>()) x = d(gen);
  return t;
}

ir::Attribute Ints(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}

ir::Attribute Int(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  return a;
}

struct ConvSpec {
  int64_t c_out, k, group, stride;
};

TEST(CpuConvSmall, SerialAndParallelSizesMatchReferenceAndOneThread) {
  struct Case {
    Shape x;                      // N, C, H, W
    std::vector<ConvSpec> convs;  // applied in a chain, each with bias and Relu
  };
  const Case cases[] = {
      // SE block: 1x1 map, 96 -> 24 -> 96 (2.3 K multiply-adds each), then a parallel 1x1.
      {{1, 96, 1, 1}, {{24, 1, 1, 1}, {96, 1, 1, 1}}},
      // Depthwise 3x3 on 7x7 (serial), a 1x1 7x7 72 -> 576 (2 M, parallel), depthwise again.
      {{1, 72, 7, 7}, {{72, 3, 72, 1}, {576, 1, 1, 1}, {576, 3, 576, 1}}},
      // Just below and above 2^18: 1x1 on 8x8, 64 -> 63 (258048) and 64 -> 65 (266240).
      {{1, 64, 8, 8}, {{63, 1, 1, 1}, {65, 1, 1, 1}}},
      // Odd sizes, stride 2, two images.
      {{2, 13, 9, 11}, {{17, 3, 1, 2}, {17, 3, 17, 1}, {5, 1, 1, 1}}},
  };
  uint32_t seed = 9100;
  int case_index = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(case_index++));
    std::mt19937 gen(seed++);
    auto m = std::make_shared<ir::Model>();
    m->ir_version = 8;
    m->opset_imports.push_back({"", 17});
    m->graph.inputs.push_back({"x", {}, ""});
    std::string prev = "x";
    int64_t c_in = c.x[1];
    for (size_t i = 0; i < c.convs.size(); ++i) {
      const ConvSpec& s = c.convs[i];
      const std::string id = std::to_string(i);
      m->graph.initializers.push_back(
          {"w" + id, Rand({s.c_out, c_in / s.group, s.k, s.k}, gen), ""});
      m->graph.initializers.push_back({"b" + id, Rand({s.c_out}, gen), ""});
      ir::Node conv = MakeNode("Conv", {prev, "w" + id, "b" + id}, {"conv" + id});
      const int64_t p = s.k / 2;
      conv.attributes.push_back(Ints("pads", {p, p, p, p}));
      conv.attributes.push_back(Ints("strides", {s.stride, s.stride}));
      conv.attributes.push_back(Int("group", s.group));
      m->graph.nodes.push_back(std::move(conv));
      m->graph.nodes.push_back(MakeNode("Relu", {"conv" + id}, {"relu" + id}));
      prev = "relu" + id;
      c_in = s.c_out;
    }
    m->graph.outputs.push_back({prev, {}, ""});
    std::vector<std::pair<std::string, Value>> feeds;
    feeds.emplace_back("x", Value(Rand(c.x, gen)));
    SessionOptions ro;
    ro.provider = "reference";
    ro.threads = 2;
    auto ref = Session::Create(m, ro);
    auto one = Session::Create(m, {.threads = 1});
    auto two = Session::Create(m, {.threads = 2});
    ASSERT_TRUE(ref.ok() && one.ok() && two.ok());
    auto want = (*ref)->Run(feeds);
    auto single = (*one)->Run(feeds);
    ASSERT_TRUE(want.ok() && single.ok());
    const Tensor& w = (*want)[0].tensor();
    const Tensor& s1 = (*single)[0].tensor();
    for (int round = 0; round < 2; ++round) {
      auto got = (*two)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.status().message();
      const Tensor& g = (*got)[0].tensor();
      ASSERT_EQ(g.shape(), w.shape());
      ASSERT_EQ(g.shape(), s1.shape());
      for (int64_t i = 0; i < g.size(); ++i) {
        ASSERT_NEAR(g.GetAsDouble(i), w.GetAsDouble(i), 1e-4 + 1e-4 * std::fabs(w.GetAsDouble(i)))
            << "element " << i << " round " << round;
        ASSERT_EQ(g.GetAsDouble(i), s1.GetAsDouble(i)) << "element " << i << " round " << round;
      }
    }
    for (const auto& r : (*two)->node_report()) {
      if (r.op_type == "Conv") {
        EXPECT_EQ(r.provider, "cpu") << r.name;
      }
    }
  }
}

}  // namespace
}  // namespace ferry
