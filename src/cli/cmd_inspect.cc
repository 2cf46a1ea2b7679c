// ferry inspect MODEL [--json]
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/weights_digest.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string model;
  bool json = false;
};

void WalkNodes(const ir::Graph& g, const std::function<void(const ir::Node&)>& fn) {
  for (const auto& n : g.nodes) {
    fn(n);
    for (const auto& a : n.attributes) {
      if (a.g) WalkNodes(*a.g, fn);
      for (const auto& sg : a.graphs) WalkNodes(*sg, fn);
    }
  }
}

nlohmann::json IoJson(const ir::ValueInfo& v) {
  nlohmann::json j;
  j["name"] = v.name;
  j["type"] = v.type.ToString();
  if (v.type.kind == ir::TypeInfo::Kind::kTensor) {
    j["dtype"] = v.type.elem_type == DType::kUndefined ? std::string("undefined")
                                                       : std::string(DTypeName(v.type.elem_type));
    if (v.type.shape) {
      nlohmann::json dims = nlohmann::json::array();
      for (const auto& d : *v.type.shape) {
        if (d.value)
          dims.push_back(*d.value);
        else
          dims.push_back(d.symbol.empty() ? std::string("?") : d.symbol);
      }
      j["shape"] = dims;
    } else {
      j["shape"] = nullptr;
    }
  }
  return j;
}

int RunInspect(const Options& o) {
  auto loaded = ir::LoadModel(o.model);
  if (!loaded.ok()) return ReportError(loaded.status());
  const ir::Model& m = *loaded.value();
  const ir::Graph& g = m.graph;

  std::map<std::string, int64_t> histogram;
  std::set<std::string> custom_domains;
  bool control_flow = false;
  std::vector<std::string> unsupported;
  const auto& reg = ops::Registry::Get();
  WalkNodes(g, [&](const ir::Node& n) {
    std::string key = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    if (histogram[key]++ == 0) {
      auto opset = m.OpsetFor(n.domain);
      if (!opset || !reg.Find(n.domain, n.op_type, *opset)) unsupported.push_back(key);
    }
    if (!n.domain.empty() && n.domain != "ai.onnx.ml") custom_domains.insert(n.domain);
    if (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan") control_flow = true;
  });
  WeightsDigest wd = DigestWeights(g);
  int64_t params = wd.parameters, bytes = wd.bytes;
  std::string digest = wd.sha256;

  nlohmann::json j;
  j["model"] = o.model;
  j["ir_version"] = m.ir_version;
  j["producer"] = {{"name", m.producer_name}, {"version", m.producer_version}};
  j["domain"] = m.domain;
  j["model_version"] = m.model_version;
  nlohmann::json opsets = nlohmann::json::object();
  for (const auto& op : m.opset_imports)
    opsets[op.domain.empty() ? "ai.onnx" : op.domain] = op.version;
  j["opset_imports"] = opsets;
  j["inputs"] = nlohmann::json::array();
  for (const auto* vi : g.RealInputs()) j["inputs"].push_back(IoJson(*vi));
  j["outputs"] = nlohmann::json::array();
  for (const auto& vi : g.outputs) j["outputs"].push_back(IoJson(vi));
  j["op_histogram"] = histogram;
  int64_t node_count = 0;
  for (const auto& [k, v] : histogram) node_count += v;
  j["node_count"] = node_count;
  j["initializer_count"] = g.initializers.size();
  j["parameter_count"] = params;
  j["parameter_bytes"] = bytes;
  j["weights_sha256"] = digest;
  j["control_flow"] = control_flow;
  j["custom_domains"] = custom_domains;
  j["unsupported_ops"] = unsupported;
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : m.metadata) meta[k] = v;
  j["metadata"] = meta;
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::string opset_s;
  for (const auto& op : m.opset_imports)
    opset_s += fmt::format("{}{}={}", opset_s.empty() ? "" : ", ",
                           op.domain.empty() ? "ai.onnx" : op.domain, op.version);
  fmt::print("model      {}\n", o.model);
  fmt::print("producer   {} {}   ir_version {}   opsets {}\n", m.producer_name, m.producer_version,
             m.ir_version, opset_s);
  fmt::print("inputs\n");
  for (const auto* vi : g.RealInputs()) fmt::print("  {:<24} {}\n", vi->name, vi->type.ToString());
  fmt::print("outputs\n");
  for (const auto& vi : g.outputs) fmt::print("  {:<24} {}\n", vi.name, vi.type.ToString());
  fmt::print("nodes      {} ({} op types)\n", node_count, histogram.size());
  std::vector<std::pair<int64_t, std::string>> sorted;
  for (const auto& [k, v] : histogram) sorted.emplace_back(-v, k);
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [v, k] : sorted) fmt::print("  {:<24} {}\n", k, -v);
  fmt::print("parameters {} in {} initializers, {} bytes\n", params, g.initializers.size(), bytes);
  fmt::print("weights    sha256 {}\n", digest);
  fmt::print("control    {}\n", control_flow ? "If/Loop/Scan present" : "none");
  if (!custom_domains.empty()) {
    std::string s;
    for (const auto& d : custom_domains) s += (s.empty() ? "" : ", ") + d;
    fmt::print("custom     {}\n", s);
  }
  if (!unsupported.empty()) {
    std::string s;
    for (const auto& d : unsupported) s += (s.empty() ? "" : ", ") + d;
    fmt::print("unsupported {}\n", s);
  }
  for (const auto& [k, v] : m.metadata) fmt::print("meta       {} = {}\n", k, v);
  return 0;
}

}  // namespace

void SetupInspect(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "ONNX model file")->required();
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunInspect(*o); }; });
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "ferry: error: %s\n", status.message().c_str());
  return status.exit_code();
}

}  // namespace ferry::cli
