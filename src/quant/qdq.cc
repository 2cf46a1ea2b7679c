#include "quant/qdq.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "passes/graph_util.h"

namespace ferry::quant {

namespace {

// Fresh value and node names, from one scan of the graph.
class Namer {
 public:
  explicit Namer(const ir::Graph& g) {
    for (const auto& v : g.inputs) used_.insert(v.name);
    for (const auto& v : g.outputs) used_.insert(v.name);
    for (const auto& v : g.value_info) used_.insert(v.name);
    for (const auto& i : g.initializers) used_.insert(i.name);
    for (const auto& n : g.nodes) {
      for (const auto& o : n.outputs) used_.insert(o);
      for (const auto& i : n.inputs) used_.insert(i);
      nodes_.insert(n.name);
    }
  }
  std::string Value(const std::string& base) { return Take(used_, base); }
  std::string Node(const std::string& base) { return anonymous ? "" : Take(nodes_, base); }
  bool anonymous = false;  // inserted nodes get no name

 private:
  static std::string Take(std::set<std::string>& set, const std::string& base) {
    std::string s = base;
    for (int k = 1; set.count(s); ++k) s = base + "_" + std::to_string(k);
    set.insert(s);
    return s;
  }
  std::set<std::string> used_, nodes_;
};

ir::Attribute IntAttr(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  return a;
}

ir::Node MakeNode(Namer& names, const std::string& op, std::vector<std::string> inputs,
                  std::vector<std::string> outputs, const std::string& base) {
  ir::Node n;
  n.op_type = op;
  n.name = names.Node(base + "_" + op);
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

// An initializer a caller cannot override (not also a graph input).
const Tensor* ConstantOf(const ir::Graph& g, const std::string& name) {
  if (name.empty()) return nullptr;
  for (const auto& vi : g.inputs)
    if (vi.name == name) return nullptr;
  const ir::Initializer* init = g.FindInitializer(name);
  return init ? &init->tensor : nullptr;
}

bool IsFloatConstant(const ir::Graph& g, const std::string& name) {
  const Tensor* t = ConstantOf(g, name);
  return t && t->dtype() == DType::kFloat;
}

bool Excluded(const ir::Node& n, const QuantizeOptions& o) {
  return o.exclude.count(n.op_type) || (!n.name.empty() && o.exclude.count(n.name));
}

std::string NodeLabel(const ir::Node& n) {
  return n.Describe();
}

Status CheckOpset(const ir::Model& model, int64_t need, const std::string& why) {
  auto opset = model.OpsetFor("");
  if (!opset || *opset < need)
    return UnsupportedError(
        "{} needs opset >= {}, the model has {} (convert it first: ferry convert --opset {})", why,
        need, opset ? std::to_string(*opset) : "none", need);
  return Status::Ok();
}

// A weight quantized to int8, symmetric (zero point 0), per tensor or along `axis`.
struct QWeight {
  Tensor q, scale, zero_point;
  std::vector<double> scales;  // one per channel (or one)
  int64_t axis = -1;           // -1: per tensor
};

QWeight QuantizeWeight(const Tensor& w, int64_t axis, int qmax) {
  QWeight out;
  out.axis = axis;
  int64_t channels = axis >= 0 ? w.dim(axis) : 1, inner = 1;
  if (axis >= 0)
    for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  const float* x = w.data<float>();
  const int64_t n = w.size();
  auto channel_of = [&](int64_t i) { return axis >= 0 ? (i / inner) % channels : 0; };
  std::vector<double> amax(static_cast<size_t>(channels), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double a = std::fabs(static_cast<double>(x[i]));
    auto& m = amax[static_cast<size_t>(channel_of(i))];
    if (std::isfinite(a)) m = std::max(m, a);
  }
  Shape pshape = axis >= 0 ? Shape{channels} : Shape{};
  out.scale = Tensor(DType::kFloat, pshape);
  out.zero_point = Tensor(DType::kInt8, pshape);
  for (int64_t c = 0; c < channels; ++c) {
    double s = amax[static_cast<size_t>(c)] / qmax;
    float sf = s > 0 ? static_cast<float>(s) : 1.0f;
    out.scale.data<float>()[c] = sf;
    out.scales.push_back(sf);
  }
  out.q = Tensor(DType::kInt8, w.shape());
  int8_t* q = out.q.data<int8_t>();
  for (int64_t i = 0; i < n; ++i) {
    double v =
        std::nearbyint(static_cast<double>(x[i]) / out.scales[static_cast<size_t>(channel_of(i))]);
    q[i] = static_cast<int8_t>(std::clamp(std::isfinite(v) ? v : 0.0, -1.0 * qmax, 1.0 * qmax));
  }
  return out;
}

Tensor Transpose2D(const Tensor& w) {
  Tensor t(DType::kFloat, {w.dim(1), w.dim(0)});
  const float* s = w.data<float>();
  float* d = t.data<float>();
  for (int64_t i = 0; i < w.dim(0); ++i)
    for (int64_t j = 0; j < w.dim(1); ++j) d[j * w.dim(0) + i] = s[i * w.dim(1) + j];
  return t;
}

Tensor ScalarOf(DType type, double v) {
  Tensor t(type, {});
  if (type == DType::kFloat) t.data<float>()[0] = static_cast<float>(v);
  if (type == DType::kUint8) t.data<uint8_t>()[0] = static_cast<uint8_t>(v);
  if (type == DType::kInt8) t.data<int8_t>()[0] = static_cast<int8_t>(v);
  return t;
}

// The rewriting state shared by the static and dynamic modes.
struct Rewriter {
  ir::Graph& g;
  Namer names;
  std::vector<ir::Node> added;
  std::map<std::string, std::string> weight_dq;  // "name@axis" -> dequantized value
  bool short_names = false;                      // w0, b0, a0... (static mode)
  int qmax = 127;                                // 63 with reduce_range

  explicit Rewriter(ir::Graph& graph) : g(graph), names(graph) {}

  std::string AddInit(const std::string& base, Tensor t) {
    std::string name = names.Value(base);
    g.initializers.push_back({name, std::move(t), ""});
    return name;
  }

  // The int8 weight `name` behind a DequantizeLinear (per channel along `axis`, or per tensor
  // for axis -1); cached per weight and axis. `qw` receives the quantized weight.
  std::string DequantizedWeight(const std::string& name, int64_t axis, QWeight* qw) {
    const Tensor* w = ConstantOf(g, name);
    QWeight q = QuantizeWeight(*w, axis, qmax);
    std::string key = name + "@" + std::to_string(axis);
    auto it = weight_dq.find(key);
    if (it != weight_dq.end()) {
      *qw = std::move(q);
      return it->second;
    }
    // Short names keep small models small (names are a large share of their bytes).
    std::string base = short_names ? names.Value("w" + std::to_string(weight_dq.size())) : name;
    std::string qn = AddInit(base + (short_names ? "_q" : "_quantized"), q.q);
    std::string sn = AddInit(base + (short_names ? "_s" : "_scale"), q.scale);
    std::string zn = AddInit(base + (short_names ? "_z" : "_zero_point"), q.zero_point);
    std::string dq = short_names ? base : names.Value(name + "_dequantized");
    ir::Node n = MakeNode(names, "DequantizeLinear", {qn, sn, zn}, {dq}, base);
    if (axis >= 0) n.attributes.push_back(IntAttr("axis", axis));
    added.push_back(std::move(n));
    weight_dq[key] = dq;
    *qw = std::move(q);
    return dq;
  }

  // Appends the added nodes, restores topological order, drops unread initializers.
  void Finish() {
    for (auto& n : added) g.nodes.push_back(std::move(n));
    added.clear();
    passes::TopoSort(g);
    passes::UseIndex idx = passes::BuildUseIndex(g);
    std::set<std::string> keep;
    for (const auto& v : g.inputs) keep.insert(v.name);
    for (const auto& v : g.outputs) keep.insert(v.name);
    std::vector<ir::Initializer> inits;
    for (auto& i : g.initializers)
      if (keep.count(i.name) || idx.NumReaders(i.name) > 0) inits.push_back(std::move(i));
    g.initializers = std::move(inits);
  }
};

// Which inputs of a statically quantized op are activations (quantized when float with a
// range) and how its output is treated.
enum class OutputRule { kOwn, kShared, kNone };
struct StaticOp {
  OutputRule output;
  bool all_inputs;  // every non-constant input is an activation (else input 0, plus MatMul/Gemm B)
};
const std::map<std::string, StaticOp>& StaticOps() {
  static const std::map<std::string, StaticOp> ops = {
      {"Conv", {OutputRule::kOwn, false}},
      {"MatMul", {OutputRule::kOwn, false}},
      {"Gemm", {OutputRule::kOwn, false}},
      {"Add", {OutputRule::kOwn, true}},
      {"Mul", {OutputRule::kOwn, true}},
      {"AveragePool", {OutputRule::kOwn, false}},
      {"GlobalAveragePool", {OutputRule::kOwn, false}},
      {"Concat", {OutputRule::kOwn, true}},
      {"MaxPool", {OutputRule::kShared, false}},
      {"GlobalMaxPool", {OutputRule::kShared, false}},
      {"Resize", {OutputRule::kShared, false}},
  };
  return ops;
}
// Ops whose output takes the parameters of their (quantized) input 0.
const std::set<std::string>& ShareOps() {
  static const std::set<std::string> ops = {"MaxPool", "GlobalMaxPool", "Resize",  "Reshape",
                                            "Flatten", "Transpose",     "Squeeze", "Unsqueeze"};
  return ops;
}

}  // namespace

Result<QuantizeSummary> QuantizeStatic(ir::Model& model, const Table& table,
                                       const QuantizeOptions& o) {
  FERRY_RETURN_IF_ERROR(CheckOpset(model, 10, "static quantization (QuantizeLinear)"));
  if (o.per_channel)
    FERRY_RETURN_IF_ERROR(CheckOpset(model, 13, "--per-channel (DequantizeLinear axis)"));
  if (o.activation_type != DType::kUint8 && o.activation_type != DType::kInt8)
    return UsageError("--activation-type must be u8 or s8");
  if (o.weight_type != DType::kInt8) return UsageError("--weight-type must be s8");
  ir::Graph& g = model.graph;
  QuantizeSummary sum;
  passes::UseIndex idx = passes::BuildUseIndex(g);
  std::set<std::string> outputs;
  for (const auto& v : g.outputs) outputs.insert(v.name);

  // 1. The activations to quantize, the weights and biases.
  std::set<std::string> acts;
  std::set<std::string> missing;
  struct WeightUse {
    size_t node;
    size_t input;
    int64_t axis;
    int64_t bias_input;  // -1: none
  };
  std::vector<WeightUse> weights;
  std::vector<std::pair<size_t, size_t>>
      relus;  // (producer, Relu) with the Relu's output quantized
  bool any_range = false;
  auto want = [&](const std::string& t) {
    if (t.empty() || ConstantOf(g, t)) return;
    if (table.Find(t)) {
      acts.insert(t);
      any_range = true;
    } else if (passes::KnownType(g, t) == DType::kFloat) {
      missing.insert(t);
    }
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    auto it = StaticOps().find(n.op_type);
    if (!n.domain.empty() || it == StaticOps().end()) continue;
    if (Excluded(n, o)) {
      sum.excluded_nodes.push_back(NodeLabel(n));
      continue;
    }
    const StaticOp& op = it->second;
    sum.quantized_nodes.push_back(NodeLabel(n));
    sum.quantized_names.push_back(n.name);
    if (op.all_inputs) {
      for (const auto& in : n.inputs) want(in);
    } else {
      if (!n.inputs.empty()) want(n.inputs[0]);
      bool mm = n.op_type == "MatMul" || n.op_type == "Gemm";
      if (mm && n.inputs.size() > 1) want(n.inputs[1]);
    }
    // Weights.
    if (n.op_type == "Conv" && n.inputs.size() > 1 && IsFloatConstant(g, n.inputs[1]) &&
        ConstantOf(g, n.inputs[1])->rank() >= 3) {
      bool bias = n.inputs.size() > 2 && IsFloatConstant(g, n.inputs[2]) &&
                  ConstantOf(g, n.inputs[2])->rank() == 1;
      weights.push_back({i, 1, o.per_channel ? 0 : -1, bias ? 2 : -1});
    } else if (n.op_type == "Gemm" && n.inputs.size() > 1 && IsFloatConstant(g, n.inputs[1]) &&
               ConstantOf(g, n.inputs[1])->rank() == 2) {
      int64_t axis = n.attr_int("transB", 0) ? 0 : 1;
      const Tensor* w = ConstantOf(g, n.inputs[1]);
      int64_t channels = w->dim(axis);
      bool bias = n.inputs.size() > 2 && IsFloatConstant(g, n.inputs[2]) &&
                  ConstantOf(g, n.inputs[2])->rank() == 1 &&
                  ConstantOf(g, n.inputs[2])->dim(0) == channels &&
                  n.attr_float("beta", 1.0f) == 1.0f;
      weights.push_back({i, 1, o.per_channel ? axis : -1, bias ? 2 : -1});
    } else if (n.op_type == "MatMul" && n.inputs.size() > 1 && IsFloatConstant(g, n.inputs[1]) &&
               ConstantOf(g, n.inputs[1])->rank() >= 2) {
      weights.push_back({i, 1, o.per_channel ? ConstantOf(g, n.inputs[1])->rank() - 1 : -1, -1});
    }
    // Output.
    if (op.output == OutputRule::kNone || n.outputs.empty()) continue;
    std::string out = n.outputs[0];
    if (op.output == OutputRule::kOwn && idx.SingleUse(out)) {
      size_t ri = idx.readers.at(out)[0];
      const ir::Node& r = g.nodes[ri];
      if (r.domain.empty() && (r.op_type == "Relu" || r.op_type == "Clip") && !Excluded(r, o) &&
          !r.outputs.empty()) {
        out = r.outputs[0];
        if (r.op_type == "Relu") relus.push_back({i, ri});
      }
    }
    if (!outputs.count(out)) want(out);
  }
  if (!any_range && (!missing.empty() || !weights.empty()))
    return InvalidError(
        "the calibration table has no range for any activation of this model (was it "
        "calibrated on another model?)");
  sum.missing_ranges.assign(missing.begin(), missing.end());

  // 2. Parameters: share ops inherit their input's, others come from the table.
  std::map<std::string, QParams> params;
  auto table_params = [&](const std::string& t) {
    const TensorRange* r = table.Find(t);
    return ComputeQParams(r->lo, r->hi, o.activation_type, o.symmetric);
  };
  std::vector<std::string> order;  // graph inputs, then in node order
  for (const auto& v : g.inputs)
    if (acts.count(v.name)) {
      params[v.name] = table_params(v.name);
      order.push_back(v.name);
    }
  for (const auto& n : g.nodes)
    for (const auto& out : n.outputs) {
      if (!acts.count(out)) continue;
      order.push_back(out);
      if (n.domain.empty() && ShareOps().count(n.op_type) && !n.inputs.empty() &&
          params.count(n.inputs[0]))
        params[out] = params[n.inputs[0]];
      else
        params[out] = table_params(out);
    }

  // 3. Rewrite: weights and biases first (they read the activations' parameters by name).
  Rewriter rw(g);
  rw.short_names = true;
  rw.qmax = o.reduce_range ? 63 : 127;
  rw.names.anonymous = true;
  for (const auto& w : weights) {
    QWeight qw;
    std::string dq = rw.DequantizedWeight(g.nodes[w.node].inputs[w.input], w.axis, &qw);
    g.nodes[w.node].inputs[w.input] = dq;
    ++sum.weights;
    const std::string act = g.nodes[w.node].inputs[0];
    if (w.bias_input < 0 || !params.count(act)) continue;
    const std::string bname = g.nodes[w.node].inputs[static_cast<size_t>(w.bias_input)];
    const Tensor* b = ConstantOf(g, bname);
    const double s_act = params[act].scale;
    const int64_t c = b->dim(0);
    if (w.axis >= 0 && static_cast<int64_t>(qw.scales.size()) != c) continue;
    Shape pshape = w.axis >= 0 ? Shape{c} : Shape{};
    Tensor bs(DType::kFloat, pshape), bq(DType::kInt32, {c});
    for (int64_t k = 0; k < (w.axis >= 0 ? c : 1); ++k)
      bs.data<float>()[k] = static_cast<float>(s_act * qw.scales[static_cast<size_t>(k)]);
    for (int64_t k = 0; k < c; ++k) {
      double s = bs.data<float>()[w.axis >= 0 ? k : 0];
      double v = std::nearbyint(static_cast<double>(b->data<float>()[k]) / s);
      bq.data<int32_t>()[k] =
          static_cast<int32_t>(std::clamp(std::isfinite(v) ? v : 0.0, -2147483648.0, 2147483647.0));
    }
    // Zero point omitted: 0, which DequantizeLinear assumes.
    std::string base = rw.names.Value("b" + std::to_string(sum.biases));
    std::string qn = rw.AddInit(base + "_q", std::move(bq));
    std::string sn = rw.AddInit(base + "_s", std::move(bs));
    std::string dq_b = base;
    ir::Node dn = MakeNode(rw.names, "DequantizeLinear", {qn, sn}, {dq_b}, base);
    if (w.axis >= 0) dn.attributes.push_back(IntAttr("axis", 0));
    rw.added.push_back(std::move(dn));
    g.nodes[w.node].inputs[static_cast<size_t>(w.bias_input)] = dq_b;
    ++sum.biases;
  }
  // One scale/zero-point pair per distinct parameters (share ops reuse their input's).
  std::map<std::pair<float, int32_t>, std::pair<std::string, std::string>> shared;
  int64_t k = 0;
  for (const auto& t : order) {
    const QParams& p = params[t];
    std::string base = rw.names.Value("a" + std::to_string(k++));
    auto key = std::make_pair(p.scale, p.zero_point);
    if (!shared.count(key))
      shared[key] = {rw.AddInit(base + "_s", ScalarOf(DType::kFloat, p.scale)),
                     rw.AddInit(base + "_z", ScalarOf(o.activation_type, p.zero_point))};
    const auto& [sn, zn] = shared[key];
    std::string qn = rw.names.Value(base + "_q");
    std::string dqn = base;
    passes::RenameReads(g, t, dqn);
    for (auto& n : rw.added)
      for (auto& in : n.inputs)
        if (in == t) in = dqn;
    rw.added.push_back(MakeNode(rw.names, "QuantizeLinear", {t, sn, zn}, {qn}, base));
    rw.added.push_back(MakeNode(rw.names, "DequantizeLinear", {qn, sn, zn}, {dqn}, base));
    ++sum.activations;
  }
  // A Relu whose output is quantized with zero point at the type's minimum is done by the
  // QuantizeLinear's saturation: the producer writes the Relu's output directly (as ONNX
  // Runtime's quantizer does, so Conv -> Q fuses).
  const int32_t qmin = o.activation_type == DType::kUint8 ? 0 : -128;
  std::set<size_t> drop;
  for (const auto& [pi, ri] : relus) {
    const std::string& out = g.nodes[ri].outputs[0];
    auto it = params.find(out);
    if (it == params.end() || it->second.zero_point != qmin) continue;
    std::string gone = g.nodes[pi].outputs[0];
    g.nodes[pi].outputs[0] = out;
    drop.insert(ri);
    std::erase_if(g.value_info, [&](const ir::ValueInfo& v) { return v.name == gone; });
  }
  std::vector<ir::Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop.count(i)) nodes.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(nodes);
  rw.Finish();
  // Inserted nodes stay unnamed and value_info (shape inference's notes) is dropped: names and
  // notes are a large share of a small model's bytes, and tools do not need them.
  g.value_info.clear();
  return sum;
}

Result<QuantizeSummary> QuantizeDynamic(ir::Model& model, const QuantizeOptions& o) {
  FERRY_RETURN_IF_ERROR(CheckOpset(model, 11, "dynamic quantization (DynamicQuantizeLinear)"));
  if (o.weight_type != DType::kInt8) return UsageError("--weight-type must be s8");
  ir::Graph& g = model.graph;
  const bool conv_axis_ok = model.OpsetFor("").value_or(0) >= 13;
  QuantizeSummary sum;
  Rewriter rw(g);
  rw.qmax = o.reduce_range ? 63 : 127;
  struct Dql {
    std::string q, scale, zp;
  };
  std::map<std::string, Dql> dql;
  std::map<std::string, std::array<std::string, 3>> gather_tables;  // table -> int8, scale, zp
  std::vector<ir::Node> kept;
  std::vector<ir::Node> nodes = std::move(g.nodes);
  g.nodes.clear();
  for (auto& n : nodes) {
    bool mm = n.domain.empty() && (n.op_type == "MatMul" || n.op_type == "Gemm");
    bool conv = n.domain.empty() && n.op_type == "Conv";
    bool gather = n.domain.empty() && n.op_type == "Gather" && n.inputs.size() == 2 &&
                  n.outputs.size() == 1 && IsFloatConstant(g, n.inputs[0]) &&
                  ConstantOf(g, n.inputs[0])->size() >= 1024;
    if ((mm || conv || gather) && Excluded(n, o)) {
      sum.excluded_nodes.push_back(NodeLabel(n));
      kept.push_back(std::move(n));
      continue;
    }
    if (gather) {
      // Embedding tables: Gather the int8 rows, then DequantizeLinear (per tensor: the scale
      // must apply to whichever rows are gathered).
      const std::string table = n.inputs[0];
      if (!gather_tables.count(table)) {
        QWeight qw = QuantizeWeight(*ConstantOf(g, table), -1, 127);
        gather_tables[table] = {rw.AddInit(table + "_quantized", std::move(qw.q)),
                                rw.AddInit(table + "_scale", std::move(qw.scale)),
                                rw.AddInit(table + "_zero_point", std::move(qw.zero_point))};
        ++sum.weights;
      }
      const auto& [tq, ts, tz] = gather_tables[table];
      const std::string out = n.outputs[0];
      const std::string base = n.name.empty() ? out : n.name;
      std::string gq = rw.names.Value(out + "_quantized");
      n.inputs[0] = tq;
      n.outputs[0] = gq;
      sum.quantized_nodes.push_back(NodeLabel(n));
      sum.quantized_names.push_back(n.name);
      kept.push_back(std::move(n));
      kept.push_back(MakeNode(rw.names, "DequantizeLinear", {gq, ts, tz}, {out}, base));
      continue;
    }
    if (conv && n.inputs.size() > 1 && IsFloatConstant(g, n.inputs[1]) &&
        ConstantOf(g, n.inputs[1])->rank() >= 3) {
      QWeight qw;
      n.inputs[1] = rw.DequantizedWeight(n.inputs[1], o.per_channel && conv_axis_ok ? 0 : -1, &qw);
      sum.quantized_nodes.push_back(NodeLabel(n));
      sum.quantized_names.push_back(n.name);
      ++sum.weights;
      kept.push_back(std::move(n));
      continue;
    }
    bool ok = mm && n.inputs.size() >= 2 && IsFloatConstant(g, n.inputs[1]) &&
              ConstantOf(g, n.inputs[1])->rank() == 2 && !ConstantOf(g, n.inputs[0]) &&
              n.outputs.size() == 1;
    if (ok && n.op_type == "Gemm" && n.attr_int("transA", 0) != 0) ok = false;
    if (!ok) {
      kept.push_back(std::move(n));
      continue;
    }
    const bool gemm = n.op_type == "Gemm";
    const std::string base = n.name.empty() ? n.outputs[0] : n.name;
    Tensor w = *ConstantOf(g, n.inputs[1]);
    if (gemm && n.attr_int("transB", 0)) w = Transpose2D(w);
    QWeight qw = QuantizeWeight(w, o.per_channel ? 1 : -1, rw.qmax);
    const double alpha = gemm ? n.attr_float("alpha", 1.0f) : 1.0;
    Tensor wscale = qw.scale.Clone();
    for (int64_t k = 0; k < wscale.size(); ++k)
      wscale.data<float>()[k] = static_cast<float>(wscale.data<float>()[k] * alpha);
    std::string wq = rw.AddInit(n.inputs[1] + "_quantized", std::move(qw.q));
    std::string ws = rw.AddInit(n.inputs[1] + "_scale", std::move(wscale));
    const std::string a = n.inputs[0];
    if (!dql.count(a)) {
      Dql d{rw.names.Value(a + "_quantized"), rw.names.Value(a + "_scale"),
            rw.names.Value(a + "_zero_point")};
      kept.push_back(MakeNode(rw.names, "DynamicQuantizeLinear", {a}, {d.q, d.scale, d.zp}, a));
      dql[a] = d;
      ++sum.activations;
    }
    const Dql& d = dql[a];
    std::string mi = rw.names.Value(base + "_MatMulInteger_output");
    std::string mf = rw.names.Value(base + "_cast_output");
    std::string sc = rw.names.Value(base + "_output_scale");
    kept.push_back(MakeNode(rw.names, "MatMulInteger", {d.q, wq, d.zp}, {mi}, base));
    ir::Node cast = MakeNode(rw.names, "Cast", {mi}, {mf}, base);
    cast.attributes.push_back(IntAttr("to", static_cast<int64_t>(DType::kFloat)));
    kept.push_back(std::move(cast));
    kept.push_back(MakeNode(rw.names, "Mul", {d.scale, ws}, {sc}, base + "_scale"));
    bool bias = gemm && n.inputs.size() > 2 && !n.inputs[2].empty();
    std::string out = n.outputs[0];
    std::string prod = bias ? rw.names.Value(base + "_product") : out;
    kept.push_back(MakeNode(rw.names, "Mul", {mf, sc}, {prod}, base));
    if (bias) {
      std::string c = n.inputs[2];
      const double beta = n.attr_float("beta", 1.0f);
      if (beta != 1.0) {
        std::string bc = rw.AddInit(base + "_beta", ScalarOf(DType::kFloat, beta));
        std::string cb = rw.names.Value(base + "_bias");
        kept.push_back(MakeNode(rw.names, "Mul", {c, bc}, {cb}, base + "_beta"));
        c = cb;
      }
      kept.push_back(MakeNode(rw.names, "Add", {prod, c}, {out}, base));
    }
    sum.quantized_nodes.push_back(NodeLabel(n));
    sum.quantized_names.push_back(n.name);
    ++sum.weights;
  }
  g.nodes = std::move(kept);
  rw.Finish();
  return sum;
}

}  // namespace ferry::quant
