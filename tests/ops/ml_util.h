// Shared by the ai.onnx.ml gtests (tests/ops/ml_test.cc, tests/cpu/ml_kernels_test.cc): a
// one-node ai.onnx.ml model builder with every attribute kind the domain uses, run on a chosen
// provider.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/session.h"

namespace ferry::testing {

class MlNode {
 public:
  explicit MlNode(std::string op, int64_t ml_opset = 3) : ml_opset_(ml_opset) {
    node_.op_type = std::move(op);
    node_.domain = "ai.onnx.ml";
    node_.name = "clf";
  }
  MlNode& In(const std::string& name, Value v) {
    node_.inputs.push_back(name);
    feeds_.emplace_back(name, std::move(v));
    return *this;
  }
  MlNode& Out(const std::string& name) {
    node_.outputs.push_back(name);
    return *this;
  }
  MlNode& Ints(const std::string& name, std::vector<int64_t> v) {
    auto& a = Add(name, ir::AttrType::kInts);
    a.ints = std::move(v);
    return *this;
  }
  MlNode& Floats(const std::string& name, std::vector<float> v) {
    auto& a = Add(name, ir::AttrType::kFloats);
    a.floats = std::move(v);
    return *this;
  }
  MlNode& Strings(const std::string& name, std::vector<std::string> v) {
    auto& a = Add(name, ir::AttrType::kStrings);
    a.strings = std::move(v);
    return *this;
  }
  MlNode& Int(const std::string& name, int64_t v) {
    Add(name, ir::AttrType::kInt).i = v;
    return *this;
  }
  MlNode& Float(const std::string& name, float v) {
    Add(name, ir::AttrType::kFloat).f = v;
    return *this;
  }
  MlNode& Str(const std::string& name, std::string v) {
    Add(name, ir::AttrType::kString).s = std::move(v);
    return *this;
  }
  MlNode& TensorAttr(const std::string& name, Tensor t) {
    Add(name, ir::AttrType::kTensor).t = std::move(t);
    return *this;
  }
  const ir::Node& node() const { return node_; }

  std::shared_ptr<const ir::Model> Model() const {
    auto m = std::make_shared<ir::Model>();
    m->ir_version = 8;
    m->opset_imports.push_back({"", 17});
    m->opset_imports.push_back({"ai.onnx.ml", ml_opset_});
    for (const auto& [name, v] : feeds_) m->graph.inputs.push_back({name, {}, ""});
    for (const auto& o : node_.outputs) m->graph.outputs.push_back({o, {}, ""});
    m->graph.nodes.push_back(CloneNode());
    return m;
  }
  // One run on `provider` ("reference" or "cpu"); `report` receives the node report.
  Result<std::vector<Value>> Run(const std::string& provider = "reference", int threads = 1,
                                 std::vector<runtime::NodeReport>* report = nullptr) const {
    runtime::SessionOptions so;
    so.provider = provider;
    so.threads = threads;
    FERRY_ASSIGN_OR_RETURN(auto s, runtime::Session::Create(Model(), so));
    FERRY_ASSIGN_OR_RETURN(auto out, s->Run(feeds_));
    if (report) *report = s->node_report();
    return out;
  }

 private:
  // A copy of the node (ir::Node is move-only; these nodes have no subgraphs).
  ir::Node CloneNode() const {
    ir::Node n;
    n.name = node_.name;
    n.op_type = node_.op_type;
    n.domain = node_.domain;
    n.inputs = node_.inputs;
    n.outputs = node_.outputs;
    for (const auto& a : node_.attributes) {
      ir::Attribute c;
      c.name = a.name;
      c.type = a.type;
      c.f = a.f;
      c.i = a.i;
      c.s = a.s;
      c.t = a.t;
      c.floats = a.floats;
      c.ints = a.ints;
      c.strings = a.strings;
      n.attributes.push_back(std::move(c));
    }
    return n;
  }
  ir::Attribute& Add(const std::string& name, ir::AttrType t) {
    ir::Attribute a;
    a.name = name;
    a.type = t;
    node_.attributes.push_back(std::move(a));
    return node_.attributes.back();
  }
  ir::Node node_;
  int64_t ml_opset_;
  std::vector<std::pair<std::string, Value>> feeds_;
};

inline Tensor Strs(const std::vector<std::string>& v, Shape shape) {
  Tensor t(DType::kString, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.data<std::string>()[i] = v[i];
  return t;
}

}  // namespace ferry::testing
