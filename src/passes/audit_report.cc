// The renderings of passes::AuditResult (audit.h): text, JSON and Markdown.
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/markdown.h"
#include "passes/audit.h"

namespace ferry::passes {

namespace {

nlohmann::json TargetJson(const AuditTarget& t) {
  nlohmann::json jg = nlohmann::json::array();
  for (const auto& g : t.unsupported)
    jg.push_back({{"reason", g.reason},
                  {"scope", AuditScopeName(g.scope)},
                  {"count", g.nodes.size()},
                  {"rewrite", g.rewrite},
                  {"nodes", g.nodes}});
  nlohmann::json entry = {
      {"target", t.name},
      {"conversion_scope",
       {{"as_is", t.as_is}, {"rewrite", t.rewrite}, {"application", t.application}}},
      {"unsupported", jg}};
  if (t.has_providers) {
    entry["providers"] = t.providers;
    entry["reference_ops"] = t.reference_ops;
  }
  return entry;
}

nlohmann::json AxisJson(const AuditDynamicAxis& d) {
  if (!d.axis) return {{"input", d.input}, {"axis", nullptr}, {"symbol", d.symbol}};
  return {{"input", d.input},
          {"axis", *d.axis},
          {"symbol", d.symbol},
          {"values_carrying_it", d.values_carrying_it},
          {"outputs", d.outputs}};
}

nlohmann::json Strings(const std::vector<std::string>& v) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& s : v) j.push_back(s);
  return j;
}

}  // namespace

std::string FormatJson(const AuditResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["nodes"] = r.nodes;
  nlohmann::json jt = nlohmann::json::array();
  for (const auto& t : r.targets) jt.push_back(TargetJson(t));
  j["targets"] = jt;
  nlohmann::json jd = nlohmann::json::array();
  for (const auto& d : r.dynamic_axes) jd.push_back(AxisJson(d));
  j["dynamic_axes"] = jd;
  nlohmann::json jc = nlohmann::json::array();
  for (const auto& c : r.control_flow) jc.push_back({{"node", c.node}, {"kind", c.kind}});
  j["control_flow"] = jc;
  j["custom_domains"] = r.custom_domains;
  j["contrib_ops"] = r.contrib_ops;
  j["preprocessing"] = Strings(r.preprocessing);
  j["postprocessing"] = Strings(r.postprocessing);
  return JsonText(j, 2) + "\n";
}

std::string FormatText(const AuditResult& r) {
  std::string s = fmt::format("{}: {} nodes\n", r.model, r.nodes);
  for (const auto& t : r.targets) {
    s += fmt::format("\ntarget {}: {} as is, {} need a rewrite, {} must move to application code\n",
                     t.name, t.as_is, t.rewrite, t.application);
    if (t.has_providers) {
      s +=
          fmt::format("  providers (top-level nodes): {}\n", JsonText(nlohmann::json(t.providers)));
      for (const auto& [op, nodes] : t.reference_ops)
        s += fmt::format("    on the reference kernel: {} x{}\n", op, nodes.size());
    }
    for (const auto& g : t.unsupported) {
      s += fmt::format("  [{}] {} x{}", AuditScopeName(g.scope), g.reason, g.nodes.size());
      if (!g.rewrite.empty()) s += fmt::format("  -> {}", g.rewrite);
      s += "\n";
      for (size_t i = 0; i < g.nodes.size(); ++i) {
        if (i == 5) {
          s += fmt::format("      ... {} more\n", g.nodes.size() - 5);
          break;
        }
        s += fmt::format("      {}\n", g.nodes[i]);
      }
    }
  }
  s += fmt::format("\ndynamic axes:{}\n", r.dynamic_axes.empty() ? " none" : "");
  for (const auto& d : r.dynamic_axes)
    s += fmt::format("  {} axis {} '{}' -> carried by {} values, outputs {}\n", d.input,
                     d.axis ? std::to_string(*d.axis) : std::string("?"), d.symbol,
                     d.values_carrying_it, d.axis ? JsonText(nlohmann::json(d.outputs)) : "[]");
  s += fmt::format("control flow:{}\n", r.control_flow.empty() ? " none" : "");
  for (const auto& c : r.control_flow) s += fmt::format("  {} ({})\n", c.node, c.kind);
  s += fmt::format("custom domains:{}\n", r.custom_domains.empty() ? " none" : "");
  for (const auto& [d, c] : r.custom_domains) s += fmt::format("  {} x{}\n", d, c);
  s += fmt::format("ONNX Runtime contrib ops:{}\n", r.contrib_ops.empty() ? " none" : "");
  for (const auto& [op, c] : r.contrib_ops) s += fmt::format("  {} x{}\n", op, c);
  s += fmt::format("preprocessing at the head: {}\n",
                   r.preprocessing.empty() ? "none" : JsonText(Strings(r.preprocessing)));
  s += fmt::format("post-processing at the tail: {}\n",
                   r.postprocessing.empty() ? "none" : JsonText(Strings(r.postprocessing)));
  return s;
}

std::string FormatMarkdown(const AuditResult& r) {
  std::string s =
      fmt::format("# ferry audit: `{}`\n\n{} nodes (subgraphs included).\n", r.model, r.nodes);
  for (const auto& t : r.targets) {
    s += fmt::format(
        "\n## Target `{}`\n\n{} as is, {} need a rewrite, {} must move to application code.\n",
        t.name, t.as_is, t.rewrite, t.application);
    if (t.has_providers) {
      s += "\n| provider (top-level nodes) | nodes |\n|---|---:|\n";
      for (const auto& [p, n] : t.providers) s += fmt::format("| {} | {} |\n", p, n);
      for (const auto& [op, nodes] : t.reference_ops)
        s += fmt::format("\nOn the reference kernel: {} x{}.\n", MarkdownCell(op), nodes.size());
    }
    if (t.unsupported.empty()) continue;
    s += "\n| scope | reason | nodes | rewrite | first nodes |\n|---|---|---:|---|---|\n";
    for (const auto& g : t.unsupported) {
      std::string first;
      for (size_t i = 0; i < g.nodes.size() && i < 5; ++i) first += (i ? "; " : "") + g.nodes[i];
      if (g.nodes.size() > 5) first += fmt::format("; ... {} more", g.nodes.size() - 5);
      s += fmt::format("| {} | {} | {} | {} | {} |\n", AuditScopeName(g.scope),
                       MarkdownCell(g.reason), g.nodes.size(), MarkdownCell(g.rewrite),
                       MarkdownCell(first));
    }
  }
  s += "\n## Dynamic axes\n\n";
  if (r.dynamic_axes.empty())
    s += "None.\n";
  else
    s += "| input | axis | symbol | values carrying it | outputs |\n|---|---:|---|---:|---|\n";
  for (const auto& d : r.dynamic_axes) {
    std::string outs;
    for (const auto& o : d.outputs) outs += (outs.empty() ? "" : ", ") + o;
    s += fmt::format("| {} | {} | {} | {} | {} |\n", MarkdownCell(d.input),
                     d.axis ? std::to_string(*d.axis) : std::string("?"), MarkdownCell(d.symbol),
                     d.values_carrying_it, MarkdownCell(outs));
  }
  s += "\n## Control flow\n\n";
  if (r.control_flow.empty()) s += "None.\n";
  for (const auto& c : r.control_flow) s += fmt::format("- {} ({})\n", c.node, c.kind);
  s += "\n## Custom domains\n\n";
  if (r.custom_domains.empty()) s += "None.\n";
  for (const auto& [d, c] : r.custom_domains) s += fmt::format("- `{}` x{}\n", d, c);
  s += "\n## ONNX Runtime contrib ops\n\n";
  if (r.contrib_ops.empty()) s += "None.\n";
  for (const auto& [op, c] : r.contrib_ops) s += fmt::format("- `{}` x{}\n", op, c);
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
    return out.empty() ? std::string("none") : out;
  };
  s += fmt::format("\n## Pre- and post-processing\n\n- at the head: {}\n- at the tail: {}\n",
                   list(r.preprocessing), list(r.postprocessing));
  return s;
}

}  // namespace ferry::passes
