#include "verify/report.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace ferry::verify {

namespace {

std::string G(double v) {
  return fmt::format("{:.3g}", v);
}
std::string Pct(double v) {
  return fmt::format("{:.1f}%", 100 * v);
}

nlohmann::json J(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

const char* StateName(OutputResult::State s) {
  switch (s) {
    case OutputResult::State::kCompared:
      return "compared";
    case OutputResult::State::kIncomparable:
      return "incomparable";
    case OutputResult::State::kUnmatched:
      return "unmatched";
  }
  return "?";
}

const char* LayerStateName(LayerRow::State s) {
  switch (s) {
    case LayerRow::State::kCompared:
      return "compared";
    case LayerRow::State::kIncomparable:
      return "incomparable";
    case LayerRow::State::kUnmatched:
      return "unmatched";
    case LayerRow::State::kNotCompared:
      return "not compared";
  }
  return "?";
}

std::string OutputStatus(const OutputResult& o) {
  if (o.state == OutputResult::State::kCompared) return o.stats.pass() ? "ok" : "OUT OF TOLERANCE";
  return fmt::format(
      "{} ({})", o.state == OutputResult::State::kUnmatched ? "UNMATCHED" : "INCOMPARABLE", o.note);
}

std::string LayerStatus(const LayerRow& l, int64_t first) {
  std::string s;
  switch (l.state) {
    case LayerRow::State::kCompared:
      s = l.stats.pass() ? "ok" : "OUT OF TOLERANCE";
      break;
    case LayerRow::State::kIncomparable:
      s = "INCOMPARABLE (" + l.note + ")";
      break;
    case LayerRow::State::kUnmatched:
      s = "unmatched (fused or renamed away)";
      break;
    case LayerRow::State::kNotCompared:
      s = "not compared (" + l.note + ")";
      break;
  }
  if (l.index == first) s += "  <-- first out of tolerance";
  return s;
}

std::string NanLine(const NanResult& n) {
  const auto& f = n.finding;
  if (!f.found) return fmt::format("{}: no layer produces NaN or Inf", n.role);
  return fmt::format("{}: first NaN/Inf at {} '{}' (tensor '{}', set {}): {} NaN, {} Inf", n.role,
                     f.op_type, f.node, f.tensor, f.set, f.counts.nan, f.counts.inf);
}

std::string ClassifierLines(const OutputResult& o, const std::string& indent) {
  if (!o.classifier) return "";
  const ClassifierStats& c = *o.classifier;
  std::string s = fmt::format("{}classifier: top-1 agreement {} ({}/{}), top-{} agreement {}\n",
                              indent, Pct(c.top1()), c.top1_agree, c.rows, c.k(), Pct(c.topk()));
  if (c.labeled) {
    s += fmt::format("{}labels: accuracy reference {}, candidate {} ({:+.1f} points, n={})\n",
                     indent, Pct(c.ref_accuracy()), Pct(c.cand_accuracy()),
                     100 * (c.cand_accuracy() - c.ref_accuracy()), c.labeled);
    for (const auto& [label, pc] : c.per_class) {
      if (pc.ref_correct == pc.cand_correct) continue;
      double ra = static_cast<double>(pc.ref_correct) / pc.rows;
      double ca = static_cast<double>(pc.cand_correct) / pc.rows;
      s += fmt::format("{}  class {}: {} -> {} ({:+.1f} points, n={})\n", indent, label, Pct(ra),
                       Pct(ca), 100 * (ca - ra), pc.rows);
    }
  }
  return s;
}

std::string FirstLayerLine(const Report& r) {
  if (r.first_failed_layer < 0) return "no layer out of tolerance";
  const LayerRow& l = r.layers[static_cast<size_t>(r.first_failed_layer)];
  return fmt::format(
      "first layer out of tolerance: #{} {} '{}' (tensor '{}', max_abs {}, cosine {})", l.index,
      l.op_type, l.node, l.tensor, G(l.stats.max_abs), fmt::format("{:.6f}", l.stats.cosine()));
}

int64_t Count(const std::vector<LayerRow>& rows, LayerRow::State s) {
  int64_t n = 0;
  for (const auto& l : rows) n += l.state == s;
  return n;
}

}  // namespace

bool Report::pass() const {
  for (const auto& o : outputs)
    if (o.failed()) return false;
  for (const auto& n : nan)
    if (n.finding.found) return false;
  return true;
}

std::string Report::verdict() const {
  if (pass()) return "PASS";
  int64_t bad = 0;
  for (const auto& o : outputs) bad += o.failed();
  std::string why;
  if (bad) why = fmt::format("{} of {} outputs out of tolerance or unmatched", bad, outputs.size());
  for (const auto& n : nan)
    if (n.finding.found)
      why += fmt::format("{}NaN/Inf in the {} at {} '{}'", why.empty() ? "" : "; ", n.role,
                         n.finding.op_type, n.finding.node);
  return "FAIL: " + why;
}

std::string FormatText(const Report& r) {
  std::string s;
  for (const auto& m : r.models)
    s += fmt::format("{:<10} {}{}\n", m.role, m.path,
                     m.weights_sha256.empty() ? "" : "  (weights sha256 " + m.weights_sha256 + ")");
  s += fmt::format("data       {} ({} input sets)   atol {}  rtol {}\n", r.data, r.sets,
                   G(r.tol.atol), G(r.tol.rtol));
  if (!r.outputs.empty()) {
    size_t name_w = 6, type_w = 4;
    for (const auto& o : r.outputs) {
      name_w = std::max(name_w, o.name.size());
      type_w = std::max(type_w, o.type.size());
    }
    name_w = std::min<size_t>(name_w, 40);
    type_w = std::min<size_t>(type_w, 32);
    s += fmt::format(
        "{:<{}} {:<{}} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8} {:>9} {:>9} {:>9} {:>9}  {}\n",
        "output", name_w, "type", type_w, "max_abs", "max_rel", "mean_abs", "rmse", "cosine",
        "out_tol", "min_atol", "min_rtol", "nan r/c", "inf r/c", "status");
    for (const auto& o : r.outputs) {
      const Stats& st = o.stats;
      if (o.state != OutputResult::State::kCompared) {
        s += fmt::format("{:<{}} {:<{}} {}\n", o.name, name_w, o.type, type_w, OutputStatus(o));
        continue;
      }
      s += fmt::format(
          "{:<{}} {:<{}} {:>9} {:>9} {:>9} {:>9} {:>10.6f} {:>8} {:>9} {:>9} {:>9} {:>9}  {}\n",
          o.name, name_w, o.type, type_w, G(st.max_abs), G(st.max_rel), G(st.mean_abs()),
          G(st.rmse()), st.cosine(), Pct(st.out_share()), G(st.min_atol), G(st.min_rtol),
          fmt::format("{}/{}", st.nan_ref, st.nan_cand),
          fmt::format("{}/{}", st.inf_ref, st.inf_cand), OutputStatus(o));
      s += ClassifierLines(o, "  ");
    }
    for (const auto& n : r.candidate_only_outputs)
      s += fmt::format("{:<{}} (candidate only, not compared)\n", n, name_w);
  }
  if (r.per_layer) {
    s += fmt::format(
        "per-layer: {} tensors in reference order, {} compared, {} unmatched, {} only "
        "in the candidate; {}\n",
        r.layers.size(), Count(r.layers, LayerRow::State::kCompared),
        Count(r.layers, LayerRow::State::kUnmatched), r.candidate_only_tensors, FirstLayerLine(r));
    size_t op_w = 2, node_w = 4, tensor_w = 6;
    for (const auto& l : r.layers) {
      op_w = std::max(op_w, l.op_type.size());
      node_w = std::max(node_w, l.node.size());
      tensor_w = std::max(tensor_w, l.tensor.size());
    }
    op_w = std::min<size_t>(op_w, 24);
    node_w = std::min<size_t>(node_w, 48);
    tensor_w = std::min<size_t>(tensor_w, 48);
    s += fmt::format("{:>5} {:<{}} {:<{}} {:<{}} {:>9} {:>10}  {}\n", "#", "op", op_w, "node",
                     node_w, "tensor", tensor_w, "max_abs", "cosine", "status");
    for (const auto& l : r.layers) {
      bool cmp = l.state == LayerRow::State::kCompared;
      s += fmt::format("{:>5} {:<{}} {:<{}} {:<{}} {:>9} {:>10}  {}\n", l.index, l.op_type, op_w,
                       l.node, node_w, l.tensor, tensor_w, cmp ? G(l.stats.max_abs) : "-",
                       cmp ? fmt::format("{:.6f}", l.stats.cosine()) : "-",
                       LayerStatus(l, r.first_failed_layer));
    }
  }
  for (const auto& n : r.nan) s += "validate: " + NanLine(n) + "\n";
  s += "verdict: " + r.verdict() + "\n";
  return s;
}

std::string FormatJson(const Report& r) {
  nlohmann::json j;
  j["mode"] = r.mode;
  j["command_line"] = r.command_line;
  j["pass"] = r.pass();
  j["verdict"] = r.verdict();
  j["models"] = nlohmann::json::array();
  for (const auto& m : r.models)
    j["models"].push_back(
        {{"role", m.role}, {"path", m.path}, {"weights_sha256", m.weights_sha256}});
  j["data"] = r.data;
  j["sets"] = r.sets;
  j["atol"] = r.tol.atol;
  j["rtol"] = r.tol.rtol;
  j["outputs"] = nlohmann::json::array();
  for (const auto& o : r.outputs) {
    const Stats& st = o.stats;
    nlohmann::json jo = {{"name", o.name},
                         {"state", StateName(o.state)},
                         {"note", o.note},
                         {"type", o.type},
                         {"pass", !o.failed()},
                         {"atol", o.tol.atol},
                         {"rtol", o.tol.rtol},
                         {"elements", st.elements},
                         {"max_abs", J(st.max_abs)},
                         {"max_rel", J(st.max_rel)},
                         {"mean_abs", J(st.mean_abs())},
                         {"rmse", J(st.rmse())},
                         {"cosine", J(st.cosine())},
                         {"out_of_tolerance", st.out_of_tolerance},
                         {"out_of_tolerance_share", J(st.out_share())},
                         {"min_passing_atol", J(st.min_atol)},
                         {"min_passing_rtol", J(st.min_rtol)},
                         {"nan", {{"reference", st.nan_ref}, {"candidate", st.nan_cand}}},
                         {"inf", {{"reference", st.inf_ref}, {"candidate", st.inf_cand}}}};
    if (o.classifier) {
      const ClassifierStats& c = *o.classifier;
      nlohmann::json jc = {{"rows", c.rows},
                           {"top1_agreement", c.top1()},
                           {"k", c.k()},
                           {"topk_agreement", c.topk()},
                           {"labeled", c.labeled}};
      if (c.labeled) {
        jc["reference_accuracy"] = c.ref_accuracy();
        jc["candidate_accuracy"] = c.cand_accuracy();
        nlohmann::json pcs = nlohmann::json::array();
        for (const auto& [label, pc] : c.per_class)
          pcs.push_back({{"class", label},
                         {"rows", pc.rows},
                         {"reference_accuracy", static_cast<double>(pc.ref_correct) / pc.rows},
                         {"candidate_accuracy", static_cast<double>(pc.cand_correct) / pc.rows}});
        jc["per_class"] = pcs;
      }
      jo["classifier"] = jc;
    }
    j["outputs"].push_back(jo);
  }
  j["candidate_only_outputs"] = r.candidate_only_outputs;
  if (r.per_layer) {
    nlohmann::json jl = nlohmann::json::array();
    for (const auto& l : r.layers)
      jl.push_back({{"index", l.index},
                    {"op_type", l.op_type},
                    {"node", l.node},
                    {"tensor", l.tensor},
                    {"state", LayerStateName(l.state)},
                    {"note", l.note},
                    {"pass", !l.failed()},
                    {"max_abs", J(l.stats.max_abs)},
                    {"cosine", J(l.stats.cosine())},
                    {"out_of_tolerance", l.stats.out_of_tolerance},
                    {"nan", {{"reference", l.stats.nan_ref}, {"candidate", l.stats.nan_cand}}}});
    nlohmann::json first = nullptr;
    if (r.first_failed_layer >= 0) {
      const LayerRow& l = r.layers[static_cast<size_t>(r.first_failed_layer)];
      first = {{"index", l.index}, {"op_type", l.op_type}, {"node", l.node}, {"tensor", l.tensor}};
    }
    j["per_layer"] = {{"layers", jl},
                      {"first_out_of_tolerance", first},
                      {"unmatched", Count(r.layers, LayerRow::State::kUnmatched)},
                      {"candidate_only_tensors", r.candidate_only_tensors}};
  }
  if (r.validate) {
    nlohmann::json jv = nlohmann::json::array();
    for (const auto& n : r.nan) {
      nlohmann::json f = nullptr;
      if (n.finding.found)
        f = {{"index", n.finding.index},   {"op_type", n.finding.op_type},
             {"node", n.finding.node},     {"tensor", n.finding.tensor},
             {"set", n.finding.set},       {"nan", n.finding.counts.nan},
             {"inf", n.finding.counts.inf}};
      jv.push_back({{"role", n.role}, {"first_non_finite", f}});
    }
    j["validate"] = jv;
  }
  return JsonText(j, 2) + "\n";
}

std::string FormatMarkdown(const Report& r) {
  auto esc = [](const std::string& x) {
    std::string s;
    for (char c : x) {
      if (c == '|')
        s += "\\|";
      else if (c == '\n')
        s += ' ';
      else
        s += c;
    }
    return s;
  };
  std::string s = "# ferry verify report\n\n";
  s += fmt::format("**Verdict: {}**\n\n", esc(r.verdict()));
  s += "Command line:\n\n```\n" + r.command_line + "\n```\n\n";
  s += "| role | model | weights SHA-256 |\n|---|---|---|\n";
  for (const auto& m : r.models)
    s += fmt::format("| {} | `{}` | `{}` |\n", m.role, esc(m.path),
                     m.weights_sha256.empty() ? "-" : m.weights_sha256);
  s += fmt::format(
      "\nData: `{}` ({} input sets). Tolerance: atol {}, rtol {} (an element passes "
      "when \\|cand - ref\\| <= atol + rtol * \\|ref\\|).\n\n",
      esc(r.data), r.sets, G(r.tol.atol), G(r.tol.rtol));
  if (!r.outputs.empty()) {
    s += "## Outputs\n\n";
    s += "| output | type | atol | rtol | max abs | max rel | mean abs | RMSE | cosine | out of "
         "tol. | min atol | min rtol | NaN ref/cand | Inf ref/cand | status |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& o : r.outputs) {
      const Stats& st = o.stats;
      if (o.state != OutputResult::State::kCompared) {
        s += fmt::format("| {} | {} | | | | | | | | | | | | | {} |\n", esc(o.name), o.type,
                         esc(OutputStatus(o)));
        continue;
      }
      s += fmt::format(
          "| {} | {} | {} | {} | {} | {} | {} | {} | {:.6f} | {} | {} | {} | {}/{} | "
          "{}/{} | {} |\n",
          esc(o.name), o.type, G(o.tol.atol), G(o.tol.rtol), G(st.max_abs), G(st.max_rel),
          G(st.mean_abs()), G(st.rmse()), st.cosine(), Pct(st.out_share()), G(st.min_atol),
          G(st.min_rtol), st.nan_ref, st.nan_cand, st.inf_ref, st.inf_cand, esc(OutputStatus(o)));
    }
    for (const auto& o : r.outputs) {
      std::string c = ClassifierLines(o, "- ");
      if (!c.empty()) s += fmt::format("\n`{}`:\n\n{}", esc(o.name), c);
    }
    s += "\n";
  }
  if (r.per_layer) {
    s += "## Per layer\n\n" + esc(FirstLayerLine(r)) + ".\n\n";
    s += "| # | op | node | tensor | max abs | cosine | status |\n|---|---|---|---|---|---|---|\n";
    for (const auto& l : r.layers) {
      bool cmp = l.state == LayerRow::State::kCompared;
      s += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", l.index, esc(l.op_type),
                       esc(l.node), esc(l.tensor), cmp ? G(l.stats.max_abs) : "-",
                       cmp ? fmt::format("{:.6f}", l.stats.cosine()) : "-",
                       esc(LayerStatus(l, r.first_failed_layer)));
    }
    s += "\n";
  }
  if (r.validate) {
    s += "## NaN/Inf validation\n\n";
    for (const auto& n : r.nan) s += "- " + esc(NanLine(n)) + "\n";
    s += "\n";
  }
  return s;
}

}  // namespace ferry::verify
