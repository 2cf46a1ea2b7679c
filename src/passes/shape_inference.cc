// shape_inference: ONNX's own shape inference (libonnx, with data propagation) fills the
// main graph's value_info, so later passes know static shapes and element types.
#include <google/protobuf/io/coded_stream.h>
// onnx_pb.h defines ONNX_API and must precede the other onnx headers.
#include <onnx/onnx_pb.h>

#include <onnx/shape_inference/implementation.h>

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
