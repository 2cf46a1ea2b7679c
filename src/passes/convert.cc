#include "passes/convert.h"

#include <google/protobuf/io/coded_stream.h>
// onnx_pb.h defines ONNX_API and must precede the other onnx headers.
#include <onnx/onnx_pb.h>

#include <onnx/defs/schema.h>
#include <onnx/version_converter/convert.h>

#include <cmath>
#include <map>
#include <set>

#include "core/half.h"
#include "ir/onnx_io.h"
#include "passes/graph_util.h"
#include "passes/onnx_guard.h"
#include "passes/pass_manager.h"

namespace ferry::passes {

namespace {

ir::Attribute IntAttr(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  return a;
}

bool ParseProto(const std::string& bytes, onnx::ModelProto* m) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(INT32_MAX);
  return m->ParseFromCodedStream(&in);
}

// Schema changes that only widened the types or added an attribute with a default: libonnx
// 1.12 registers them as compatible going up (v-1 -> v) but not down; Ferry mirrors them.
// (op, opset where the schema changed)
const std::vector<std::pair<const char*, int>> kTypeOnlyChanges = {
    {"ArgMax", 12},
    {"ArgMin", 12},
    {"BatchNormalization", 12},
    {"Constant", 12},
    {"Clip", 12},
    {"GatherND", 12},
    {"Min", 12},
    {"Max", 12},
    {"MaxPool", 12},
    {"Pow", 12},
    {"ReduceMax", 12},
    {"ReduceMin", 12},
    {"Abs", 13},
    {"Add", 13},
    {"ArgMin", 13},
    {"ArgMax", 13},
    {"Cast", 13},
    {"Ceil", 13},
    {"Clip", 13},
    {"Concat", 13},
    {"DepthToSpace", 13},
    {"DequantizeLinear", 13},
    {"Div", 13},
    {"Dropout", 13},
    {"Equal", 13},
    {"Erf", 13},
    {"Exp", 13},
    {"Expand", 13},
    {"Flatten", 13},
    {"Floor", 13},
    {"Gather", 13},
    {"GatherElements", 13},
    {"GatherND", 13},
    {"Gemm", 13},
    {"Greater", 13},
    {"Identity", 13},
    {"If", 13},
    {"IsNaN", 13},
    {"Less", 13},
    {"Log", 13},
    {"Loop", 13},
    {"LRN", 13},
    {"MatMul", 13},
    {"Max", 13},
    {"Mean", 13},
    {"MeanVarianceNormalization", 13},
    {"Min", 13},
    {"Mod", 13},
    {"Mul", 13},
    {"Neg", 13},
    {"NonZero", 13},
    {"Pow", 13},
    {"Pad", 13},
    {"QuantizeLinear", 13},
    {"Reciprocal", 13},
    {"ReduceLogSum", 13},
    {"ReduceLogSumExp", 13},
    {"ReduceMean", 13},
    {"ReduceMax", 13},
    {"ReduceMin", 13},
    {"ReduceProd", 13},
    {"ReduceSumSquare", 13},
    {"Relu", 13},
    {"Reshape", 13},
    {"Resize", 13},
    {"ScatterElements", 13},
    {"ScatterND", 13},
    {"Shape", 13},
    {"Sigmoid", 13},
    {"Sign", 13},
    {"Size", 13},
    {"Slice", 13},
    {"SpaceToDepth", 13},
    {"Sqrt", 13},
    {"Sub", 13},
    {"Sum", 13},
    {"Tanh", 13},
    {"Tile", 13},
    {"Transpose", 13},
    {"Add", 14},
    {"CumSum", 14},
    {"Div", 14},
    {"Identity", 14},
    {"Mul", 14},
    {"Relu", 14},
    {"Reshape", 14},
    {"Sub", 14},
    {"BatchNormalization", 14},
    {"BatchNormalization", 15},
    {"Pow", 15},
    {"Shape", 15},
    {"ScatterElements", 16},
    {"ScatterND", 16},
    {"Identity", 16},
    {"Loop", 16},
    {"If", 16},
    {"Where", 16},
    {"Scan", 16},
    {"LessOrEqual", 16},
    {"GreaterOrEqual", 16},
    {"LeakyRelu", 16},
    {"PRelu", 16},
    // Softmax family from 13 to 12: equal when the axis is the last one (checked before
    // converting).
    {"Softmax", 13},
    {"LogSoftmax", 13},
    {"Hardmax", 13},
    // Axes/split inputs already turned into attributes by PrepareDownConversion.
    {"Squeeze", 13},
    {"Unsqueeze", 13},
    {"ReduceSum", 13},
    {"Split", 13}};

// Attributes added at opset `since`: going below it they must hold their default.
struct AddedAttr {
  const char* op;
  const char* attr;
  int since;
  int64_t def;
};
const AddedAttr kAddedAttrs[] = {
    {"Reshape", "allowzero", 14, 0},         {"Shape", "start", 15, 0},
    {"ArgMax", "select_last_index", 12, 0},  {"ArgMin", "select_last_index", 12, 0},
    {"GatherND", "batch_dims", 12, 0},       {"BatchNormalization", "training_mode", 14, 0},
    {"ScatterElements", "reduction", 16, 0}, {"ScatterND", "reduction", 16, 0}};

// Checks (and normalises) what the mirrored down-conversions rely on. Walks subgraphs.
Status PrepareDownConversion(ir::Graph& g, int64_t from, int64_t target) {
  // Axes given as an input since opset 13 (Squeeze, Unsqueeze, ReduceSum; Split's sizes) go
  // back into attributes here: libonnx 1.12's adapter misreads raw-data initializers and
  // erases them from the graph inputs they are not in.
  if (from >= 13 && target < 13) {
    for (auto& n : g.nodes) {
      bool axes_op = n.op_type == "Squeeze" || n.op_type == "Unsqueeze" || n.op_type == "ReduceSum";
      if (!n.domain.empty() || (!axes_op && n.op_type != "Split")) continue;
      if (n.op_type == "ReduceSum") {
        bool noop = n.attr_int("noop_with_empty_axes", 0) != 0;
        bool no_axes = n.inputs.size() < 2 || n.inputs[1].empty();
        if (noop && no_axes)
          return UnsupportedError(
              "{}: noop_with_empty_axes=1 without axes has no equivalent before opset 13",
              n.Describe());
        std::erase_if(n.attributes,
                      [](const ir::Attribute& a) { return a.name == "noop_with_empty_axes"; });
      }
      if (n.inputs.size() < 2 || n.inputs[1].empty()) {
        if (n.inputs.size() > 1) n.inputs.resize(1);
        continue;
      }
      const ir::Initializer* init = g.FindInitializer(n.inputs[1]);
      if (!init)
        return UnsupportedError(
            "{}: {} is computed at run time; before opset 13 it must be a constant attribute",
            n.Describe(), n.op_type == "Split" ? "split" : "axes");
      ir::Attribute a;
      a.name = n.op_type == "Split" ? "split" : "axes";
      a.type = ir::AttrType::kInts;
      a.ints = init->tensor.ToInt64Vector();
      n.attributes.push_back(std::move(a));
      n.inputs.resize(1);
    }
  }
  for (auto& n : g.nodes) {
    if (!n.domain.empty()) continue;
    for (const auto& a : kAddedAttrs) {
      if (n.op_type != a.op || target >= a.since || from < a.since) continue;
      const ir::Attribute* at = n.attr(a.attr);
      if (at && (at->type != ir::AttrType::kInt || at->i != a.def) &&
          !(std::string_view(a.attr) == "reduction"))
        return UnsupportedError(
            "{}: attribute {} (added in opset {}) has no equivalent in opset {}", n.Describe(),
            a.attr, a.since, target);
      if (at && std::string_view(a.attr) == "reduction" && at->s != "none")
        return UnsupportedError("{}: reduction='{}' has no equivalent in opset {}", n.Describe(),
                                at->s, target);
    }
    if (n.op_type == "Shape" && n.attr("end") && target < 15 && from >= 15)
      return UnsupportedError("{}: attribute end (added in opset 15) has no equivalent in opset {}",
                              n.Describe(), target);
    if ((n.op_type == "Softmax" || n.op_type == "LogSoftmax" || n.op_type == "Hardmax") &&
        from >= 13 && target < 13) {
      int64_t axis = n.attr_int("axis", -1);
      auto shape = n.inputs.empty() ? std::nullopt : StaticShape(g, n.inputs[0]);
      std::optional<int64_t> rank;
      if (shape) rank = static_cast<int64_t>(shape->size());
      for (const auto& v : g.value_info)
        if (!n.inputs.empty() && v.name == n.inputs[0] && v.type.shape)
          rank = static_cast<int64_t>(v.type.shape->size());
      bool last = axis == -1 || (rank && axis == *rank - 1);
      if (!last)
        return UnsupportedError(
            "{}: axis {} is not the last axis; before opset 13 {} flattens from the axis, which "
            "differs (rewrite with Transpose first)",
            n.Describe(), axis, n.op_type);
      bool set = false;
      for (auto& a : n.attributes)
        if (a.name == "axis") a.i = -1, set = true;
      if (!set) n.attributes.push_back(IntAttr("axis", -1));
    }
    for (auto& a : n.attributes) {
      if (a.g) FERRY_RETURN_IF_ERROR(PrepareDownConversion(*a.g, from, target));
      for (auto& sg : a.graphs) FERRY_RETURN_IF_ERROR(PrepareDownConversion(*sg, from, target));
    }
  }
  return Status::Ok();
}

}  // namespace

bool IsTypeOnlyChange(const std::string& op, int64_t opset_a, int64_t opset_b) {
  int64_t lo = std::min(opset_a, opset_b), hi = std::max(opset_a, opset_b);
  for (int64_t v = lo + 1; v <= hi; ++v) {
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(op, static_cast<int>(v));
    if (!s || s->since_version() != v) continue;  // no change at v
    bool listed = std::any_of(kTypeOnlyChanges.begin(), kTypeOnlyChanges.end(),
                              [&](const auto& c) { return op == c.first && c.second == v; });
    static const std::set<std::string, std::less<>> kStructural = {
        "Softmax", "LogSoftmax", "Hardmax", "Squeeze", "Unsqueeze", "ReduceSum", "Split"};
    if (!listed || kStructural.count(op)) return false;
  }
  return true;
}

Status ConvertOpset(ir::Model& model, int64_t target) {
  int64_t from = model.OpsetFor("").value_or(0);
  if (from == target) return Status::Ok();
  // libonnx's converter trusts its input: the model as given is checked first (after
  // PrepareDownConversion it is deliberately off-schema at `from`: axes back in attributes).
  std::string bytes = ir::SerializeModel(model);
  onnx::ModelProto proto;
  if (bytes.size() >= static_cast<size_t>(INT32_MAX) || !ParseProto(bytes, &proto))
    return UnsupportedError("opset conversion: models over 2 GB are not supported yet");
  FERRY_RETURN_IF_ERROR(CheckModelForLibOnnx(proto).With("opset conversion"));
  if (target < from) {
    OptimizeOptions so;
    so.only = {"shape_inference"};
    FERRY_RETURN_IF_ERROR(Optimize(model, so).status());
    FERRY_RETURN_IF_ERROR(PrepareDownConversion(model.graph, from, target));
    bytes = ir::SerializeModel(model);
    proto.Clear();
    if (!ParseProto(bytes, &proto))
      return UnsupportedError("opset conversion: models over 2 GB are not supported yet");
  }
  onnx::ModelProto out;
  try {
    onnx::version_conversion::DefaultVersionConverter converter;
    for (const auto& [op, v] : kTypeOnlyChanges)
      converter.registerAdapter(std::make_unique<onnx::version_conversion::CompatibleAdapter>(
          op, onnx::OpSetID(v), onnx::OpSetID(v - 1)));
    out = converter.convert_version(proto, onnx::OpSetID(from), onnx::OpSetID(target));
  } catch (const std::exception& e) {
    std::string what = e.what();
    // The converter names the op in its message ("... No Adapter For Upsample ...").
    return UnsupportedError("cannot convert opset {} -> {}: {}", from, target, what);
  }
  auto parsed = ir::ParseModel(out.SerializeAsString(), "", "converted model");
  if (!parsed.ok()) return parsed.status().With("opset conversion");
  // Keep what the converter does not carry over.
  parsed.value()->metadata = model.metadata;
  model = std::move(*parsed.value());
  return Status::Ok();
}

namespace {

constexpr float kFp16Max = 65504.f;

bool AllowsFloat16(const onnx::OpSchema* s, const std::string& type_str) {
  if (type_str == "tensor(float16)") return true;
  for (const auto& c : s->typeConstraintParams())
    if (c.type_param_str == type_str)
      return std::find(c.allowed_type_strs.begin(), c.allowed_type_strs.end(), "tensor(float16)") !=
             c.allowed_type_strs.end();
  return false;
}

// The formal parameter covering input/output index i (variadic last parameter repeats).
const onnx::OpSchema::FormalParameter* Formal(
    const std::vector<onnx::OpSchema::FormalParameter>& params, size_t i) {
  if (params.empty()) return nullptr;
  if (i < params.size()) return &params[i];
  const auto& last = params.back();
  return last.GetOption() == onnx::OpSchema::Variadic ? &last : nullptr;
}

Tensor ToHalf(const Tensor& t, const std::string& name, Fp16Report* report) {
  Tensor h(DType::kFloat16, t.shape());
  bool clamped = false;
  for (int64_t i = 0; i < t.size(); ++i) {
    float v = t.data<float>()[i];
    if (std::isfinite(v) && std::fabs(v) > kFp16Max) {
      v = std::copysign(kFp16Max, v);
      clamped = true;
    }
    h.data<Float16>()[i] = Float16(v);
  }
  if (clamped) report->clamped.push_back(name);
  return h;
}

}  // namespace

Result<Fp16Report> ConvertToFloat16(ir::Model& model, const Fp16Options& options) {
  Fp16Report report;
  {
    OptimizeOptions so;
    so.only = {"shape_inference"};
    FERRY_RETURN_IF_ERROR(Optimize(model, so).status());
  }
  ir::Graph& g = model.graph;
  const int opset = static_cast<int>(model.OpsetFor("").value_or(0));
  std::map<std::string, DType> type;
  for (const auto* list : {&g.inputs, &g.value_info, &g.outputs})
    for (const auto& v : *list)
      if (v.type.kind == ir::TypeInfo::Kind::kTensor) type[v.name] = v.type.elem_type;
  for (const auto& i : g.initializers) type[i.name] = i.tensor.dtype();
  auto is_f32 = [&](const std::string& v) {
    auto it = type.find(v);
    return !v.empty() && it != type.end() && it->second == DType::kFloat;
  };
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty() && !type.count(o) && n.domain.empty())
        return UnsupportedError(
            "--fp16: the type of '{}' ({}) could not be inferred; run ferry optimize first or "
            "check the model",
            o, n.Describe());

  // Per node: does it compute in fp16, and which float inputs/outputs are fp16 there.
  std::map<std::string, DType> produced;  // value -> dtype it will have after conversion
  std::set<std::string> real_inputs;
  for (const ir::ValueInfo* in : g.RealInputs()) {
    real_inputs.insert(in->name);
    if (is_f32(in->name))
      produced[in->name] = options.keep_io_types ? DType::kFloat : DType::kFloat16;
  }
  struct Want {
    size_t node, input;
    DType dtype;
  };
  std::vector<Want> wants;
  std::vector<bool> fp16_node(g.nodes.size(), false);
  static const std::set<std::string, std::less<>> kBlocked = {"If",
                                                              "Loop",
                                                              "Scan",
                                                              "RandomNormal",
                                                              "RandomUniform",
                                                              "RandomNormalLike",
                                                              "RandomUniformLike",
                                                              "Multinomial",
                                                              "EyeLike",
                                                              "NonMaxSuppression",
                                                              "RoiAlign",
                                                              "Range",
                                                              "CumSum",
                                                              "TopK"};
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    ir::Node& n = g.nodes[k];
    const onnx::OpSchema* s =
        n.domain.empty() ? onnx::OpSchemaRegistry::Schema(n.op_type, opset) : nullptr;
    bool keep = !s || kBlocked.count(n.op_type) || options.keep_fp32.count(n.op_type) ||
                options.keep_fp32.count(n.name);
    bool touches_float = false;
    for (const auto& in : n.inputs) touches_float = touches_float || is_f32(in);
    for (const auto& o : n.outputs) touches_float = touches_float || is_f32(o);
    if (!touches_float) continue;
    if (keep) ++report.fp32_nodes;
    fp16_node[k] = !keep;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!is_f32(n.inputs[i])) continue;
      const auto* f = keep ? nullptr : Formal(s->inputs(), i);
      bool half = f && AllowsFloat16(s, f->GetTypeStr());
      wants.push_back({k, i, half ? DType::kFloat16 : DType::kFloat});
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!is_f32(n.outputs[i])) continue;
      const auto* f = keep ? nullptr : Formal(s->outputs(), i);
      bool half = f && AllowsFloat16(s, f->GetTypeStr());
      produced[n.outputs[i]] = half ? DType::kFloat16 : DType::kFloat;
      if (half && n.op_type == "Cast")
        for (auto& a : n.attributes)
          if (a.name == "to") a.i = static_cast<int64_t>(DType::kFloat16);
    }
    // Attribute tensors that define an fp16 output's value.
    if (!keep && (n.op_type == "Constant" || n.op_type == "ConstantOfShape"))
      for (auto& a : n.attributes)
        if (a.name == "value" && a.t.dtype() == DType::kFloat)
          a.t = ToHalf(a.t, n.Describe(), &report);
    if (!keep && n.op_type == "Constant")
      for (auto& a : n.attributes)
        if (a.name == "value_float" || a.name == "value_floats")
          return UnsupportedError("--fp16: {} uses {}; keep it in float32 with --keep-fp32 {}",
                                  n.Describe(), a.name, n.name.empty() ? "Constant" : n.name);
  }
  // Initializers: fp16 when every reader wants fp16.
  std::map<std::string, std::set<DType>> wanted;
  for (const auto& w : wants) wanted[g.nodes[w.node].inputs[w.input]].insert(w.dtype);
  for (auto& init : g.initializers) {
    if (init.tensor.dtype() != DType::kFloat || real_inputs.count(init.name)) continue;
    const auto& ws = wanted[init.name];
    bool graph_out = std::any_of(g.outputs.begin(), g.outputs.end(),
                                 [&](const ir::ValueInfo& o) { return o.name == init.name; });
    if (ws.size() == 1 && *ws.begin() == DType::kFloat16 && !graph_out) {
      init.tensor = ToHalf(init.tensor, init.name, &report);
      produced[init.name] = DType::kFloat16;
      ++report.converted_initializers;
    } else {
      produced[init.name] = DType::kFloat;
    }
  }
  // Casts where a reader wants another type than the value has.
  std::map<std::pair<std::string, DType>, std::string> casts;
  std::vector<ir::Node> new_nodes;
  auto cast_of = [&](const std::string& v, DType to) {
    auto key = std::make_pair(v, to);
    auto it = casts.find(key);
    if (it != casts.end()) return it->second;
    std::string name = FreshName(g, v + (to == DType::kFloat16 ? "_fp16" : "_fp32"));
    ir::Node c;
    c.op_type = "Cast";
    c.name = name;
    c.inputs = {v};
    c.outputs = {name};
    c.attributes.push_back(IntAttr("to", static_cast<int64_t>(to)));
    new_nodes.push_back(std::move(c));
    // Reserve the name so FreshName does not hand it out again.
    g.value_info.push_back(ir::ValueInfo{name, {}, ""});
    ++report.casts_inserted;
    return casts[key] = name;
  };
  for (const auto& w : wants) {
    std::string& in = g.nodes[w.node].inputs[w.input];
    auto it = produced.find(in);
    DType has = it == produced.end() ? DType::kFloat : it->second;
    if (has != w.dtype) in = cast_of(in, w.dtype);
  }
  // Graph outputs: float32 when keeping io types, else whatever they became.
  for (auto& out : g.outputs) {
    if (out.type.kind != ir::TypeInfo::Kind::kTensor || out.type.elem_type != DType::kFloat)
      continue;
    DType has = produced.count(out.name) ? produced[out.name] : DType::kFloat;
    if (options.keep_io_types && has == DType::kFloat16) {
      // The producer writes an fp16 value; a Cast restores the output's name and type.
      std::string inner = FreshName(g, out.name + "_fp16");
      for (auto& n : g.nodes)
        for (auto& o : n.outputs)
          if (o == out.name) o = inner;
      RenameReads(g, out.name, inner);
      ir::Node c;
      c.op_type = "Cast";
      c.name = inner + "_to_fp32";
      c.inputs = {inner};
      c.outputs = {out.name};
      c.attributes.push_back(IntAttr("to", static_cast<int64_t>(DType::kFloat)));
      new_nodes.push_back(std::move(c));
      ++report.casts_inserted;
    } else if (has == DType::kFloat16) {
      out.type.elem_type = DType::kFloat16;
    }
  }
  if (!options.keep_io_types)
    for (auto& in : g.inputs)
      if (real_inputs.count(in.name) && in.type.kind == ir::TypeInfo::Kind::kTensor &&
          in.type.elem_type == DType::kFloat)
        in.type.elem_type = DType::kFloat16;
  for (auto& n : new_nodes) g.nodes.push_back(std::move(n));
  g.value_info.clear();  // types changed; readers re-infer
  TopoSort(g);
  return report;
}

}  // namespace ferry::passes
