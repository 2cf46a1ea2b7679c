// shape_inference: ONNX's own shape inference (libonnx, with data propagation) fills the
// main graph's value_info, so later passes know static shapes and element types.
#include <google/protobuf/io/coded_stream.h>
// onnx_pb.h defines ONNX_API and must precede the other onnx headers.
#include <onnx/onnx_pb.h>

#include <onnx/shape_inference/implementation.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/onnx_io.h"
#include "passes/graph_util.h"
#include "passes/onnx_guard.h"
#include "passes/pass.h"

namespace ferry::passes {

namespace {

bool ParseProto(const std::string& bytes, onnx::ModelProto* m) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(INT32_MAX);
  return m->ParseFromCodedStream(&in);
}

// Declared rank and element type of every tensor value of a graph and its subgraphs.
void CollectTypes(const onnx::GraphProto& g, std::map<std::string, std::pair<int, int>>* out) {
  auto note = [&](const onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      (*out)[v.name()] = {v.type().tensor_type().shape().dim_size(),
                          v.type().tensor_type().elem_type()};
  };
  for (const auto& v : g.input()) note(v);
  for (const auto& v : g.value_info()) note(v);
  for (const auto& t : g.initializer()) (*out)[t.name()] = {t.dims_size(), t.data_type()};
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectTypes(a.g(), out);
      for (const auto& sg : a.graphs()) CollectTypes(sg, out);
    }
}

// Conv / ConvTranspose whose X and W disagree in rank or element type, or have fewer than 3
// dims: libonnx 1.12's inference indexes W's dims by X's rank without looking (a fuzzed
// ConvTranspose with X [4,4,4] and an int64 W [2,1]: SIGSEGV in convTransposeShapeInference).
bool ConvInputsSane(const onnx::GraphProto& g,
                    const std::map<std::string, std::pair<int, int>>& types) {
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_g() && !ConvInputsSane(a.g(), types)) return false;
      for (const auto& sg : a.graphs())
        if (!ConvInputsSane(sg, types)) return false;
    }
    if ((n.domain() != "" && n.domain() != "ai.onnx") ||
        (n.op_type() != "Conv" && n.op_type() != "ConvTranspose") || n.input_size() < 2)
      continue;
    auto x = types.find(n.input(0)), w = types.find(n.input(1));
    if (x == types.end() || w == types.end()) continue;
    if (x->second.first < 3 || x->second.first != w->second.first ||
        x->second.second != w->second.second)
      return false;
  }
  return true;
}

// libonnx 1.12's LayerNormalization inference sets the Mean / InvStdDev dims from int(axis) (+ rank
// when negative) on without checking that it is not negative: axis -372 or 2^31 with two or three
// outputs was SIGSEGV (issue 19's black-box campaign). Where the axis is past INT32_MAX, or
// negative and the input's declared rank does not show axis + rank >= 0, the copy given to
// inference loses those outputs (their types stay uninferred).
void DropUncheckedLayerNormOutputs(google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes,
                                   const std::map<std::string, std::pair<int, int>>& types) {
  for (auto& n : *nodes) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) DropUncheckedLayerNormOutputs(a.mutable_g()->mutable_node(), types);
      for (auto& sg : *a.mutable_graphs()) DropUncheckedLayerNormOutputs(sg.mutable_node(), types);
    }
    if (n.op_type() != "LayerNormalization" || (n.domain() != "" && n.domain() != "ai.onnx") ||
        n.output_size() < 2 || n.input_size() < 1)
      continue;
    int64_t axis = -1;
    for (const auto& a : n.attribute())
      if (a.name() == "axis") axis = a.i();
    if (axis >= 0 && axis <= INT32_MAX) continue;  // libonnx loops from int(axis): 2^31 wraps
    auto x = types.find(n.input(0));
    if (axis < 0 && x != types.end() && axis + x->second.first >= 0) continue;
    while (n.output_size() > 1) n.mutable_output()->RemoveLast();
  }
}

// libonnx 1.12's data propagation for Shape-15 (start/end) reads its input's type without
// looking: a Shape reading a value that no inference typed (a custom op's output, the output of
// a node whose inference failed) was SIGSEGV (issue 19's black-box campaign: Concat with axis
// 65536, then Shape, at opset 17). Every such input gets a placeholder value_info (a tensor of
// unknown element type, no shape) in the graph that produces it; inference refines it, and
// those it leaves untouched are dropped again by DropPlaceholders. Shape nodes inside model-local
// functions cannot be given one (functions have no value_info): false, no data propagation then.
using Scopes = std::vector<onnx::GraphProto*>;

bool AddShapePlaceholders(onnx::GraphProto* g, Scopes scopes, std::set<std::string>* added) {
  scopes.push_back(g);
  for (auto& n : *g->mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g() && !AddShapePlaceholders(a.mutable_g(), scopes, added)) return false;
      for (auto& sg : *a.mutable_graphs())
        if (!AddShapePlaceholders(&sg, scopes, added)) return false;
    }
  const auto declares = [](const onnx::GraphProto& s, const std::string& name) {
    for (const auto& v : s.input())
      if (v.name() == name) return true;
    for (const auto& v : s.value_info())
      if (v.name() == name) return true;
    for (const auto& v : s.output())
      if (v.name() == name && v.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) return true;
    for (const auto& t : s.initializer())
      if (t.name() == name) return true;
    return false;
  };
  const auto produces = [](const onnx::GraphProto& s, const std::string& name) {
    for (const auto& n : s.node())
      for (const auto& o : n.output())
        if (o == name) return true;
    return false;
  };
  for (const auto& n : g->node()) {
    if (n.op_type() != "Shape" || (n.domain() != "" && n.domain() != "ai.onnx") ||
        n.input_size() < 1 || n.input(0).empty())
      continue;
    const std::string& name = n.input(0);
    for (auto s = scopes.rbegin(); s != scopes.rend(); ++s) {
      if (declares(**s, name)) break;
      if (produces(**s, name)) {
        onnx::ValueInfoProto* v = (*s)->add_value_info();
        v->set_name(name);
        v->mutable_type()->mutable_tensor_type();
        added->insert(name);
        break;
      }
    }
  }
  return true;
}

// A Conv / ConvTranspose inside a model-local function: ConvInputsSane cannot see the types its
// inputs get at the call (a function body has no value_info), and libonnx 1.12 indexes W's dims
// by X's rank there too (x [1, 7, 256] with W [1, 1, 3, 3] through a function: SIGSEGV in
// convPoolShapeInference; make fuzz-smoke's passes run, fuzz/corpus/passes/
// function-conv-rank-mismatch.onnx). True: no inference for such a model.
bool FunctionsHaveConv(const onnx::ModelProto& proto) {
  for (const auto& f : proto.functions())
    for (const auto& n : f.node())
      if (n.op_type() == "Conv" || n.op_type() == "ConvTranspose") return true;
  return false;
}

bool FunctionsHaveShape(const onnx::ModelProto& proto) {
  for (const auto& f : proto.functions())
    for (const auto& n : f.node())
      if (n.op_type() == "Shape") return true;
  return false;
}

// Removes from the main graph's value_info the placeholders inference left without an element
// type.
void DropPlaceholders(onnx::GraphProto* g, const std::set<std::string>& added) {
  auto* vi = g->mutable_value_info();
  for (int i = vi->size() - 1; i >= 0; --i) {
    const onnx::ValueInfoProto& v = vi->Get(i);
    if (added.count(v.name()) && v.type().has_tensor_type() &&
        v.type().tensor_type().elem_type() == 0)
      vi->DeleteSubrange(i, 1);
  }
}

// DepthToSpace / SpaceToDepth with a blocksize of 2^31 or more: libonnx 1.12 divides by
// blocksize * blocksize, which wraps to 0 for a multiple of 2^32 (SIGFPE in audit, optimize and
// convert on fuzz/corpus/session/depthtospace-blocksize-2p32-ubsan.onnx; issue 19's black-box
// campaign). False: no inference for such a model (the engine refuses the node).
bool BlocksizesSane(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
  for (const auto& n : nodes) {
    for (const auto& a : n.attribute()) {
      if (a.has_g() && !BlocksizesSane(a.g().node())) return false;
      for (const auto& sg : a.graphs())
        if (!BlocksizesSane(sg.node())) return false;
    }
    if (n.op_type() != "DepthToSpace" && n.op_type() != "SpaceToDepth") continue;
    for (const auto& a : n.attribute())
      if (a.name() == "blocksize" && (a.i() > INT32_MAX || a.i() < INT32_MIN)) return false;
  }
  return true;
}

class ShapeInference final : public Pass {
 public:
  std::string_view name() const override { return "shape_inference"; }
  Result<int> RunOnGraph(GraphCtx& ctx) override {
    if (!ctx.is_main) return 0;
    TopoSort(ctx.graph);  // libonnx infers node by node in the listed order
    onnx::ModelProto proto;
    std::string bytes = ir::SerializeModel(ctx.model);
    if (bytes.size() >= static_cast<size_t>(INT32_MAX) || !ParseProto(bytes, &proto)) return 0;
    // A node libonnx would crash on: no inference (it is advisory); the engine reports the node.
    if (!VerifyNodesForLibOnnx(proto).ok()) return 0;
    std::map<std::string, std::pair<int, int>> types;
    CollectTypes(proto.graph(), &types);
    if (!ConvInputsSane(proto.graph(), types) || !BlocksizesSane(proto.graph().node()) ||
        FunctionsHaveConv(proto))
      return 0;
    for (const auto& f : proto.functions())
      if (!BlocksizesSane(f.node())) return 0;
    std::set<std::string> placeholders;
    const bool propagate = !FunctionsHaveShape(proto) &&
                           AddShapePlaceholders(proto.mutable_graph(), {}, &placeholders);
    // After the placeholders: a Shape reading a dropped output still has one.
    DropUncheckedLayerNormOutputs(proto.mutable_graph()->mutable_node(), types);
    for (auto& f : *proto.mutable_functions())
      DropUncheckedLayerNormOutputs(f.mutable_node(), types);
    try {
      // check_type: a node whose inputs are not of the types its schema takes (an optional or a
      // sequence where a tensor is expected) is skipped, not inferred (MaxUnpool's inference
      // read a tensor type from an optional one: SIGSEGV).
      onnx::ShapeInferenceOptions options{/*check_type=*/true, /*error_mode=*/0,
                                          /*enable_data_propagation=*/propagate};
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception&) {
      return 0;  // inference is advisory: passes that need shapes simply do not apply
    }
    DropPlaceholders(proto.mutable_graph(), placeholders);
    // Convert the inferred ValueInfoProtos through the importer: a model whose inputs they are.
    onnx::ModelProto carrier;
    carrier.set_ir_version(proto.ir_version());
    *carrier.mutable_opset_import() = proto.opset_import();
    std::set<std::string> interface;
    for (const auto& v : ctx.graph.inputs) interface.insert(v.name);
    for (const auto& v : ctx.graph.outputs) interface.insert(v.name);
    for (const auto& vi : proto.graph().value_info())
      if (!interface.count(vi.name())) *carrier.mutable_graph()->add_input() = vi;
    carrier.mutable_graph()->set_name("shape_inference");
    auto parsed = ir::ParseModel(carrier.SerializeAsString(), "", "shape inference result");
    if (!parsed.ok()) return 0;
    std::set<std::string> had;
    for (const auto& v : ctx.graph.value_info) had.insert(v.name);
    int added = 0;
    std::vector<ir::ValueInfo> merged;
    for (auto& v : parsed.value()->graph.inputs) {
      if (!had.count(v.name)) ++added;
      merged.push_back(std::move(v));
    }
    // Keep annotations the inference did not reproduce.
    std::set<std::string> now;
    for (const auto& v : merged) now.insert(v.name);
    for (auto& v : ctx.graph.value_info)
      if (!now.count(v.name)) merged.push_back(std::move(v));
    ctx.graph.value_info = std::move(merged);
    return added;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeShapeInference() {
  return std::make_unique<ShapeInference>();
}

}  // namespace ferry::passes
