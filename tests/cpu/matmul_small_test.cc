// The cpu MatMul/Gemm kernels on problems small enough to run on one OpenMP thread (below 2^18
// multiply-adds; the GRU encoder's head is 8x64x5) and just above it, at two threads, against
// the reference kernels.
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

TEST(CpuMatMulSmall, SerialAndParallelSizesMatchReference) {
  struct Case {
    std::string op;
    int64_t m, k, n;
  };
  const Case cases[] = {{"Gemm", 8, 64, 5},     {"Gemm", 1, 1, 1},      {"Gemm", 3, 13, 127},
                        {"Gemm", 64, 64, 64},   {"Gemm", 65, 64, 64},   {"MatMul", 1, 3, 13},
                        {"MatMul", 13, 127, 3}, {"MatMul", 127, 64, 33}};
  uint32_t seed = 9000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                 std::to_string(c.n));
    std::mt19937 gen(seed++);
    auto m = std::make_shared<ir::Model>();
    m->ir_version = 8;
    m->opset_imports.push_back({"", 17});
    m->graph.inputs.push_back({"a", {}, ""});
    const bool gemm = c.op == "Gemm";
    // Gemm: B given transposed [n, k] with a bias [n]; MatMul: B [k, n].
    m->graph.initializers.push_back({"b", Rand(gemm ? Shape{c.n, c.k} : Shape{c.k, c.n}, gen), ""});
    std::vector<std::string> in = {"a", "b"};
    if (gemm) {
      m->graph.initializers.push_back({"c", Rand({c.n}, gen), ""});
      in.push_back("c");
    }
    ir::Node node = MakeNode(c.op, in, {"y"});
    if (gemm) {
      ir::Attribute a;
      a.name = "transB";
      a.type = ir::AttrType::kInt;
      a.i = 1;
      node.attributes.push_back(std::move(a));
    }
    m->graph.nodes.push_back(std::move(node));
    m->graph.outputs.push_back({"y", {}, ""});
    std::vector<std::pair<std::string, Value>> feeds;
    feeds.emplace_back("a", Value(Rand({c.m, c.k}, gen)));
    SessionOptions ro;
    ro.provider = "reference";
    ro.threads = 2;
    auto ref = Session::Create(m, ro);
    auto cpu = Session::Create(m, {.threads = 2});
    ASSERT_TRUE(ref.ok() && cpu.ok());
    auto want = (*ref)->Run(feeds);
    ASSERT_TRUE(want.ok());
    for (int round = 0; round < 2; ++round) {
      auto got = (*cpu)->Run(feeds);
      ASSERT_TRUE(got.ok()) << got.status().message();
      const Tensor& g = (*got)[0].tensor();
      const Tensor& w = (*want)[0].tensor();
      ASSERT_EQ(g.shape(), w.shape());
      for (int64_t i = 0; i < g.size(); ++i)
        ASSERT_NEAR(g.GetAsDouble(i), w.GetAsDouble(i), 1e-4 + 1e-4 * std::fabs(w.GetAsDouble(i)))
            << "element " << i << " round " << round;
    }
    EXPECT_EQ((*cpu)->node_report()[0].provider, "cpu");
  }
}

}  // namespace
}  // namespace ferry
