// shape_inference: ONNX's own shape inference (libonnx, with data propagation) fills the
// main graph's value_info, so later passes know static shapes and element types.
#include <google/protobuf/io/coded_stream.h>
// onnx_pb.h defines ONNX_API and must precede the other onnx headers.
#include <onnx/onnx_pb.h>

#include <onnx/shape_inference/implementation.h>

#include <map>
#include <set>

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
    if (!ConvInputsSane(proto.graph(), types)) return 0;
    try {
      // check_type: a node whose inputs are not of the types its schema takes (an optional or a
      // sequence where a tensor is expected) is skipped, not inferred (MaxUnpool's inference
      // read a tensor type from an optional one: SIGSEGV).
      onnx::ShapeInferenceOptions options{/*check_type=*/true, /*error_mode=*/0,
                                          /*enable_data_propagation=*/true};
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception&) {
      return 0;  // inference is advisory: passes that need shapes simply do not apply
    }
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
