// Declarative single-node test builder: build a one-node model, run it through a Session.
//
//   auto r = NodeTest("Add").Input("a", Tensor::FromVector<float>({1, 2}, {2}))
//                .Input("b", ...).Output("y").Opset(14).Run();
//   ASSERT_TRUE(r.ok()) << r.status().message();
//   EXPECT_EQ(r.value()[0].tensor().data<float>()[0], ...);
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "runtime/session.h"

namespace ferry::testing {

class NodeTest {
 public:
  explicit NodeTest(std::string op_type, std::string domain = "") {
    node_.op_type = std::move(op_type);
    node_.domain = std::move(domain);
    node_.name = "n0";
  }
  NodeTest& Opset(int64_t v) {
    opset_ = v;
    return *this;
  }
  // A graph input fed with `t` at run time.
  NodeTest& Input(const std::string& name, Tensor t) {
    node_.inputs.push_back(name);
    feeds_.emplace_back(name, Value(std::move(t)));
    return *this;
  }
  // An initializer (constant) input.
  NodeTest& Const(const std::string& name, Tensor t) {
    node_.inputs.push_back(name);
    consts_.push_back({name, std::move(t), ""});
    return *this;
  }
  NodeTest& Omitted() {
    node_.inputs.push_back("");
    return *this;
  }
  NodeTest& Output(const std::string& name) {
    node_.outputs.push_back(name);
    return *this;
  }
  NodeTest& Attr(const std::string& name, int64_t v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kInt;
    a.i = v;
    node_.attributes.push_back(std::move(a));
    return *this;
  }
  NodeTest& Attr(const std::string& name, float v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kFloat;
    a.f = v;
    node_.attributes.push_back(std::move(a));
    return *this;
  }
  NodeTest& Attr(const std::string& name, const std::string& v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kString;
    a.s = v;
    node_.attributes.push_back(std::move(a));
    return *this;
  }
  NodeTest& Attr(const std::string& name, std::vector<int64_t> v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kInts;
    a.ints = std::move(v);
    node_.attributes.push_back(std::move(a));
    return *this;
  }
  NodeTest& Attr(const std::string& name, std::vector<float> v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kFloats;
    a.floats = std::move(v);
    node_.attributes.push_back(std::move(a));
    return *this;
  }

  // Builds the model and runs it once; outputs in Output() order.
  Result<std::vector<Value>> Run(int threads = 1) {
    auto m = std::make_shared<ir::Model>();
    m->ir_version = 8;
    m->opset_imports.push_back({node_.domain, opset_});
    if (!node_.domain.empty()) m->opset_imports.push_back({"", 17});
    for (const auto& [name, v] : feeds_) m->graph.inputs.push_back({name, {}, ""});
    for (auto& c : consts_) m->graph.initializers.push_back(c);
    for (const auto& o : node_.outputs) m->graph.outputs.push_back({o, {}, ""});
    m->graph.nodes.push_back(std::move(node_));  // Run() is called once per builder
    runtime::SessionOptions so;
    so.threads = threads;
    FERRY_ASSIGN_OR_RETURN(auto s, runtime::Session::Create(m, so));
    return s->Run(feeds_);
  }

 private:
  ir::Node node_;
  int64_t opset_ = 17;
  std::vector<std::pair<std::string, Value>> feeds_;
  std::vector<ir::Initializer> consts_;
};

// Seeded uniform random float tensor in [lo, hi).
inline Tensor RandomTensor(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::kFloat, shape);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (auto& x : t.span<float>()) x = d(gen);
  return t;
}

}  // namespace ferry::testing
