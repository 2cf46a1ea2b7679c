#include "passes/onnx_guard.h"

#include <onnx/checker.h>
#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>

#include <algorithm>

#include <map>
#include <set>
#include <string>

namespace ferry::passes {

namespace {

constexpr int kMaxDepth = 32;

using Opsets = std::map<std::string, int>;

Opsets ReadOpsets(const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& ids) {
  Opsets o;
  for (const auto& id : ids) {
    const std::string d = id.domain() == "ai.onnx" ? std::string() : id.domain();
    o[d] = static_cast<int>(id.version());
  }
  return o;
}

// The types of the values a graph's nodes read that are not plain tensors (graph inputs,
// value_info, outputs; outer scopes included): an optional, a sequence or a map, or no type.
using Types = std::map<std::string, const onnx::TypeProto*>;

Status VerifyGraph(const onnx::GraphProto& g, const Opsets& opsets, int depth, Types types);

// An input whose type the schema does not take where it takes tensors only (libonnx's inference
// functions then read a tensor type that is not there).
Status CheckInputTypes(const onnx::NodeProto& n, const onnx::OpSchema& schema, const Types& types) {
  const auto& formals = schema.inputs();
  for (int i = 0; i < n.input_size(); ++i) {
    auto it = types.find(n.input(i));
    if (n.input(i).empty() || it == types.end()) continue;
    const size_t k = std::min<size_t>(static_cast<size_t>(i), formals.size() - 1);
    if (formals.empty()) break;
    const onnx::TypeProto& tp = *it->second;
    bool taken = false;
    if (tp.value_case() != onnx::TypeProto::VALUE_NOT_SET) {
      try {
        taken = formals[k].GetTypes().count(onnx::Utils::DataTypeUtils::ToType(tp)) > 0;
      } catch (const std::exception&) {
        taken = false;
      }
    }
    if (!taken)
      return InvalidError("{} '{}': input {} '{}' has a type the operator does not take",
                          n.op_type(), n.name(), i, n.input(i));
  }
  return Status::Ok();
}

Status VerifyNode(const onnx::NodeProto& n, const Opsets& opsets, int depth, const Types& types) {
  const std::string domain = n.domain() == "ai.onnx" ? std::string() : n.domain();
  auto it = opsets.find(domain);
  if (it != opsets.end()) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), it->second, domain);
    if (schema) {
      try {
        // Attributes the schema does not know (an exporter's leftovers, e.g. Dropout's `ratio`
        // after opset 12) are ignored: inference functions read attributes by name. The
        // checker (CheckModelForLibOnnx) still refuses them.
        const auto& known = schema->attributes();
        const bool extra = std::any_of(n.attribute().begin(), n.attribute().end(),
                                       [&](const auto& a) { return !known.count(a.name()); });
        if (extra) {
          onnx::NodeProto copy = n;
          copy.clear_attribute();
          for (const auto& a : n.attribute())
            if (known.count(a.name())) *copy.add_attribute() = a;
          schema->Verify(copy);
        } else {
          schema->Verify(n);
        }
      } catch (const std::exception& e) {
        return InvalidError("{} '{}' does not match its ONNX schema at opset {}: {}", n.op_type(),
                            n.name(), it->second, e.what());
      }
      FERRY_RETURN_IF_ERROR(CheckInputTypes(n, *schema, types));
    }
  }
  for (const auto& a : n.attribute()) {
    if (a.has_g()) FERRY_RETURN_IF_ERROR(VerifyGraph(a.g(), opsets, depth + 1, types));
    for (const auto& sg : a.graphs())
      FERRY_RETURN_IF_ERROR(VerifyGraph(sg, opsets, depth + 1, types));
  }
  return Status::Ok();
}

Status VerifyGraph(const onnx::GraphProto& g, const Opsets& opsets, int depth, Types types) {
  if (depth > kMaxDepth)
    return InvalidError("graph '{}' is nested deeper than {} subgraphs", g.name(), kMaxDepth);
  const auto note = [&](const onnx::ValueInfoProto& v) {
    if (v.type().value_case() == onnx::TypeProto::kTensorType)
      types.erase(v.name());  // shadows an outer value of that name
    else
      types[v.name()] = &v.type();
  };
  for (const auto& v : g.input()) note(v);
  for (const auto& v : g.value_info()) note(v);
  for (const auto& v : g.output()) note(v);
  for (const auto& t : g.initializer()) types.erase(t.name());
  for (const auto& n : g.node()) FERRY_RETURN_IF_ERROR(VerifyNode(n, opsets, depth, types));
  return Status::Ok();
}

// Every value a node or the graph's outputs read is produced before (graph inputs,
// initializers, earlier nodes, the enclosing graphs'): libonnx's IR import (the version
// converter) dereferences the producer of each read without looking.
Status CheckDefinedBeforeUse(const onnx::GraphProto& g, std::set<std::string> defined, int depth) {
  if (depth > kMaxDepth)
    return InvalidError("graph '{}' is nested deeper than {} subgraphs", g.name(), kMaxDepth);
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty() && !defined.count(i))
        return InvalidError("{} '{}' reads '{}', which is not produced before it", n.op_type(),
                            n.name(), i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) FERRY_RETURN_IF_ERROR(CheckDefinedBeforeUse(a.g(), defined, depth + 1));
      for (const auto& sg : a.graphs())
        FERRY_RETURN_IF_ERROR(CheckDefinedBeforeUse(sg, defined, depth + 1));
    }
    for (const auto& o : n.output())
      if (!o.empty()) defined.insert(o);
  }
  for (const auto& o : g.output())
    if (!defined.count(o.name()))
      return InvalidError("graph output '{}' is not produced by any node, input or initializer",
                          o.name());
  return Status::Ok();
}

}  // namespace

Status VerifyNodesForLibOnnx(const onnx::ModelProto& proto) {
  FERRY_RETURN_IF_ERROR(CheckDefinedBeforeUse(proto.graph(), {}, 0));
  const Opsets opsets = ReadOpsets(proto.opset_import());
  FERRY_RETURN_IF_ERROR(VerifyGraph(proto.graph(), opsets, 0, {}));
  for (const auto& f : proto.functions()) {
    Opsets fo = opsets;
    for (const auto& [d, v] : ReadOpsets(f.opset_import())) fo[d] = v;
    for (const auto& n : f.node()) FERRY_RETURN_IF_ERROR(VerifyNode(n, fo, 0, {}));
  }
  return Status::Ok();
}

Status CheckModelForLibOnnx(const onnx::ModelProto& proto) {
  FERRY_RETURN_IF_ERROR(VerifyNodesForLibOnnx(proto));
  onnx::ModelProto copy = proto;
  if (copy.ir_version() > onnx::IR_VERSION) copy.set_ir_version(onnx::IR_VERSION);
  // The checker insists on a graph name, which nothing downstream needs (Ferry writes models
  // without one): the copy gets a placeholder so only real defects are refused.
  if (copy.graph().name().empty()) copy.mutable_graph()->set_name("graph");
  try {
    onnx::checker::check_model(copy);
  } catch (const std::exception& e) {
    return InvalidError("the model does not pass ONNX's checker: {}", e.what());
  }
  return Status::Ok();
}

}  // namespace ferry::passes
