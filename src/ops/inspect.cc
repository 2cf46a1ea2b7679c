#include "ops/inspect.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/markdown.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"

namespace ferry::ops {

namespace {

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

std::string DomainName(const std::string& d) {
  return d.empty() ? "ai.onnx" : d;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// Op types by count, most frequent first (ties by name).
std::vector<std::pair<int64_t, std::string>> ByCount(const std::map<std::string, int64_t>& h) {
  std::vector<std::pair<int64_t, std::string>> sorted;
  for (const auto& [k, v] : h) sorted.emplace_back(-v, k);
  std::sort(sorted.begin(), sorted.end());
  for (auto& [v, k] : sorted) v = -v;
  return sorted;
}

}  // namespace

InspectResult Inspect(const ir::Model& m, const std::string& path) {
  InspectResult r;
  r.model = path;
  r.ir_version = m.ir_version;
  r.producer_name = m.producer_name;
  r.producer_version = m.producer_version;
  r.domain = m.domain;
  r.model_version = m.model_version;
  r.opset_imports = m.opset_imports;
  const ir::Graph& g = m.graph;
  for (const auto* vi : g.RealInputs()) r.inputs.push_back(*vi);
  r.outputs = g.outputs;
  const auto& reg = Registry::Get();
  WalkNodes(g, [&](const ir::Node& n) {
    std::string key = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    if (r.op_histogram[key]++ == 0) {
      auto opset = m.OpsetFor(n.domain);
      if (!opset || !reg.Find(n.domain, n.op_type, *opset)) r.unsupported_ops.push_back(key);
    }
    if (!n.domain.empty() && n.domain != "ai.onnx.ml") r.custom_domains.insert(n.domain);
    if (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan") r.control_flow = true;
    ++r.node_count;
  });
  r.initializer_count = static_cast<int64_t>(g.initializers.size());
  r.weights = ir::DigestWeights(g);
  r.metadata = m.metadata;
  return r;
}

Result<InspectResult> InspectFile(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(auto model, ir::LoadModel(path));
  return Inspect(*model, path);
}

std::string FormatJson(const InspectResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["ir_version"] = r.ir_version;
  j["producer"] = {{"name", r.producer_name}, {"version", r.producer_version}};
  j["domain"] = r.domain;
  j["model_version"] = r.model_version;
  nlohmann::json opsets = nlohmann::json::object();
  for (const auto& op : r.opset_imports) opsets[DomainName(op.domain)] = op.version;
  j["opset_imports"] = opsets;
  j["inputs"] = nlohmann::json::array();
  for (const auto& vi : r.inputs) j["inputs"].push_back(IoJson(vi));
  j["outputs"] = nlohmann::json::array();
  for (const auto& vi : r.outputs) j["outputs"].push_back(IoJson(vi));
  j["op_histogram"] = r.op_histogram;
  j["node_count"] = r.node_count;
  j["initializer_count"] = r.initializer_count;
  j["parameter_count"] = r.weights.parameters;
  j["parameter_bytes"] = r.weights.bytes;
  j["weights_sha256"] = r.weights.sha256;
  j["control_flow"] = r.control_flow;
  j["custom_domains"] = r.custom_domains;
  j["unsupported_ops"] = r.unsupported_ops;
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : r.metadata) meta[k] = v;
  j["metadata"] = meta;
  return JsonText(j, 2) + "\n";
}

std::string FormatText(const InspectResult& r) {
  std::string opset_s;
  for (const auto& op : r.opset_imports)
    opset_s +=
        fmt::format("{}{}={}", opset_s.empty() ? "" : ", ", DomainName(op.domain), op.version);
  std::string s;
  s += fmt::format("model      {}\n", r.model);
  s += fmt::format("producer   {} {}   ir_version {}   opsets {}\n", r.producer_name,
                   r.producer_version, r.ir_version, opset_s);
  s += "inputs\n";
  for (const auto& vi : r.inputs) s += fmt::format("  {:<24} {}\n", vi.name, vi.type.ToString());
  s += "outputs\n";
  for (const auto& vi : r.outputs) s += fmt::format("  {:<24} {}\n", vi.name, vi.type.ToString());
  s += fmt::format("nodes      {} ({} op types)\n", r.node_count, r.op_histogram.size());
  for (const auto& [v, k] : ByCount(r.op_histogram)) s += fmt::format("  {:<24} {}\n", k, v);
  s += fmt::format("parameters {} in {} initializers, {} bytes\n", r.weights.parameters,
                   r.initializer_count, r.weights.bytes);
  s += fmt::format("weights    sha256 {}\n", r.weights.sha256);
  s += fmt::format("control    {}\n", r.control_flow ? "If/Loop/Scan present" : "none");
  if (!r.custom_domains.empty())
    s += fmt::format("custom     {}\n", Joined({r.custom_domains.begin(), r.custom_domains.end()}));
  if (!r.unsupported_ops.empty()) s += fmt::format("unsupported {}\n", Joined(r.unsupported_ops));
  for (const auto& [k, v] : r.metadata) s += fmt::format("meta       {} = {}\n", k, v);
  return s;
}

std::string FormatMarkdown(const InspectResult& r) {
  std::string opsets;
  for (const auto& op : r.opset_imports)
    opsets += fmt::format("{}{} {}", opsets.empty() ? "" : ", ", DomainName(op.domain), op.version);
  std::string s = fmt::format("# ferry inspect: `{}`\n\n", r.model);
  s += fmt::format("- producer: {} {}\n- ir_version {}, opsets: {}\n", r.producer_name,
                   r.producer_version, r.ir_version, opsets);
  s += fmt::format("- nodes: {} ({} op types), control flow: {}\n", r.node_count,
                   r.op_histogram.size(), r.control_flow ? "If/Loop/Scan present" : "none");
  s += fmt::format("- parameters: {} in {} initializers, {} bytes\n- weights SHA-256: `{}`\n",
                   r.weights.parameters, r.initializer_count, r.weights.bytes, r.weights.sha256);
  if (!r.custom_domains.empty())
    s += fmt::format("- custom domains: {}\n",
                     Joined({r.custom_domains.begin(), r.custom_domains.end()}));
  s += fmt::format("- not implemented by Ferry at the model's opset: {}\n",
                   r.unsupported_ops.empty() ? "none" : Joined(r.unsupported_ops));
  s += "\n## Inputs and outputs\n\n| | name | type |\n|---|---|---|\n";
  for (const auto& vi : r.inputs)
    s += fmt::format("| input | {} | {} |\n", MarkdownCell(vi.name),
                     MarkdownCell(vi.type.ToString()));
  for (const auto& vi : r.outputs)
    s += fmt::format("| output | {} | {} |\n", MarkdownCell(vi.name),
                     MarkdownCell(vi.type.ToString()));
  s += "\n## Operators\n\n| op | count |\n|---|---:|\n";
  for (const auto& [v, k] : ByCount(r.op_histogram))
    s += fmt::format("| {} | {} |\n", MarkdownCell(k), v);
  if (!r.metadata.empty()) {
    s += "\n## Metadata\n\n| key | value |\n|---|---|\n";
    for (const auto& [k, v] : r.metadata)
      s += fmt::format("| {} | {} |\n", MarkdownCell(k), MarkdownCell(v));
  }
  return s;
}

}  // namespace ferry::ops
