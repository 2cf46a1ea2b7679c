#include <gtest/gtest.h>

#include "graph_builders.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace ferry::runtime {
namespace {

using testing::MakeNode;
ir::ValueInfo FloatInput(const std::string& name, std::vector<ir::Dim> dims) {
  return testing::FloatValue(name, std::move(dims));
}

// x -> Relu -> a -> Add(a, x) -> b -> Relu -> y, with nodes listed out of order.
std::shared_ptr<ir::Model> ChainModel() {
  auto m = std::make_shared<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", 17});
  ir::Dim batch;
  batch.symbol = "batch";
  ir::Dim four;
  four.value = 4;
  m->graph.inputs.push_back(FloatInput("x", {batch, four}));
  m->graph.outputs.push_back(FloatInput("y", {batch, four}));
  m->graph.nodes.push_back(MakeNode("Relu", {"b"}, {"y"}));
  m->graph.nodes.push_back(MakeNode("Add", {"a", "x"}, {"b"}));
  m->graph.nodes.push_back(MakeNode("Relu", {"x"}, {"a"}));
  return m;
}

Tensor Ramp(int64_t batch) {
  Tensor t(DType::kFloat, {batch, 4});
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  return t;
}

void ExpectChain(const Tensor& x, const Tensor& y) {
  ASSERT_EQ(x.shape(), y.shape());
  for (int64_t i = 0; i < x.size(); ++i) {
    float v = x.data<float>()[i];
    float want = std::max(0.0f, std::max(0.0f, v) + v);
    EXPECT_EQ(y.data<float>()[i], want) << "at " << i;
  }
}

TEST(Session, SortsNodesAndRunsDynamicBatchesInOneSession) {
  auto s = Session::Create(ChainModel(), {.threads = 2});
  ASSERT_TRUE(s.ok()) << s.status().message();
  for (int64_t batch : {1, 8, 1, 8, 3}) {
    Tensor x = Ramp(batch);
    auto out = s.value()->Run({{"x", Value(x)}});
    ASSERT_TRUE(out.ok()) << out.status().message();
    ExpectChain(x, out.value()[0].tensor());
    EXPECT_TRUE(out.value()[0].tensor().owned());
  }
  // One plan per signature; intermediates a and b share or reuse arena space.
  EXPECT_GT(s.value()->arena_bytes(), 0u);
}

TEST(Session, ObserverSeesEveryNodeOutput) {
  auto s = Session::Create(ChainModel());
  ASSERT_TRUE(s.ok());
  std::vector<std::string> seen;
  RunOptions ro;
  ro.observer = [&](const ir::Node&, const std::string& name, const Value&) {
    seen.push_back(name);
  };
  auto out = s.value()->Run({{"x", Value(Ramp(2))}}, ro);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "y"}));
}

TEST(Session, RejectsWrongShapeDtypeAndUnknownInput) {
  auto s = Session::Create(ChainModel());
  ASSERT_TRUE(s.ok());
  auto r1 = s.value()->Run({{"x", Value(Tensor(DType::kFloat, {2, 5}))}});
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), StatusCode::kInvalid);
  EXPECT_NE(r1.status().message().find("[2,5]"), std::string::npos) << r1.status().message();
  auto r2 = s.value()->Run({{"x", Value(Tensor(DType::kInt32, {2, 4}))}});
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("int32"), std::string::npos) << r2.status().message();
  auto r3 = s.value()->Run({{"z", Value(Ramp(1))}});
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("'z'"), std::string::npos);
  auto r4 = s.value()->Run({});
  ASSERT_FALSE(r4.ok());
  EXPECT_NE(r4.status().message().find("missing input 'x'"), std::string::npos)
      << r4.status().message();
}

TEST(Session, RejectsCyclesAndDanglingReads) {
  auto m = ChainModel();
  m->graph.nodes[2].inputs = {"y"};  // a = Relu(y): a cycle
  auto s = Session::Create(m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cycle"), std::string::npos) << s.status().message();
  auto m2 = ChainModel();
  m2->graph.nodes[1].inputs = {"a", "ghost"};
  auto s2 = Session::Create(m2);
  ASSERT_FALSE(s2.ok());
  EXPECT_EQ(s2.status().code(), StatusCode::kInvalid);
  EXPECT_NE(s2.status().message().find("'ghost'"), std::string::npos);
}

}  // namespace
}  // namespace ferry::runtime
