// Shared by the 3x3 convolution kernel tests (winograd_test.cc, conv_gemm_test.cc): seeded
// tensors, a small model builder and the ResNet-like residual block both kernels are checked on.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "graph_builders.h"
#include "ir/graph.h"

namespace ferry::conv3x3_test {

inline Tensor Rand(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::kFloat, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (auto& x : t.span<float>()) x = d(gen);
  return t;
}

inline ir::Attribute Ints(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}

struct Model {
  std::shared_ptr<ir::Model> m = std::make_shared<ir::Model>();
  std::vector<std::pair<std::string, Value>> feeds;
  Model() {
    m->ir_version = 8;
    m->opset_imports.push_back({"", 17});
  }
  void Input(const std::string& name, Tensor t) {
    m->graph.inputs.push_back({name, {}, ""});
    feeds.emplace_back(name, Value(std::move(t)));
  }
  void Const(const std::string& name, Tensor t) {
    m->graph.initializers.push_back({name, std::move(t), ""});
  }
  ir::Node& Node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    m->graph.nodes.push_back(testing::MakeNode(op, std::move(in), std::move(out)));
    return m->graph.nodes.back();
  }
  void Conv3x3(const std::string& x, const std::string& w, const std::string& b,
               const std::string& y, std::vector<int64_t> pads) {
    std::vector<std::string> in = {x, w};
    if (!b.empty()) in.push_back(b);
    ir::Node& n = Node("Conv", in, {y});
    n.attributes.push_back(Ints("kernel_shape", {3, 3}));
    n.attributes.push_back(Ints("pads", std::move(pads)));
  }
};

// conv1 (3x3, bias) + Relu -> conv2 (3x3, bias) + Add(residual) + Relu or Clip -> 1x1 conv, the
// residual being conv1's output or (plain_residual) the graph input itself.
struct BlockCase {
  int64_t n, c, hw;
  bool clip, plain_residual;
};
inline void BuildResidualBlock(Model& md, const BlockCase& bc, uint32_t& seed) {
  md.Input("x", Rand({bc.n, bc.c, bc.hw, bc.hw}, seed++));
  md.Const("w1", Rand({bc.c, bc.c, 3, 3}, seed++, -0.3f, 0.3f));
  md.Const("b1", Rand({bc.c}, seed++));
  md.Const("w2", Rand({bc.c, bc.c, 3, 3}, seed++, -0.3f, 0.3f));
  md.Const("b2", Rand({bc.c}, seed++));
  md.Const("w3", Rand({bc.c, bc.c, 1, 1}, seed++));
  md.Conv3x3("x", "w1", "b1", "c1", {1, 1, 1, 1});
  md.Node("Relu", {"c1"}, {"r1"});
  md.Conv3x3("r1", "w2", "b2", "c2", {1, 1, 1, 1});
  md.Node("Add", {"c2", bc.plain_residual ? "x" : "r1"}, {"s"});
  if (bc.clip) {
    md.Const("lo", Tensor::FromVector<float>({-0.5f}, {}));
    md.Const("hi", Tensor::FromVector<float>({1.5f}, {}));
    md.Node("Clip", {"s", "lo", "hi"}, {"r2"});
  } else {
    md.Node("Relu", {"s"}, {"r2"});
  }
  md.Node("Conv", {"r2", "w3"}, {"y"});
  md.m->graph.outputs.push_back({"y", {}, ""});
}

}  // namespace ferry::conv3x3_test
