// The renderings of OptimizeFileResult and ConvertFileResult (optimize_file.h).
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/markdown.h"
#include "passes/optimize_file.h"

namespace ferry::passes {

namespace {

// op -> (before, after), every op of either side.
std::map<std::string, std::pair<int64_t, int64_t>> OpRows(const OptimizeFileResult& r) {
  std::map<std::string, std::pair<int64_t, int64_t>> rows;
  for (const auto& [k, v] : r.ops_before) rows[k].first = v;
  for (const auto& [k, v] : r.ops_after) rows[k].second = v;
  return rows;
}

nlohmann::json CheckOutputsJson(const CheckResult& c) {
  nlohmann::json jo = nlohmann::json::array();
  for (const auto& s : c.outputs) {
    nlohmann::json e = {{"name", s.name},
                        {"max_abs", s.max_abs},
                        {"cosine", s.cosine},
                        {"nonfinite", s.candidate_nonfinite}};
    if (s.top1_total)
      e["top1_agreement"] = static_cast<double>(s.top1_agree) / static_cast<double>(s.top1_total);
    jo.push_back(e);
  }
  return jo;
}

// "3 seeded input set(s)" / "5 input set(s) from DIR".
std::string CheckInputs(const CheckResult& c) {
  return c.data.empty() ? fmt::format("{} seeded input set(s)", c.sets)
                        : fmt::format("{} input set(s) from {}", c.sets, c.data);
}

std::string CheckNotes(const CheckResult& c, const char* prefix) {
  std::string s;
  for (const auto& n : c.notes) s += fmt::format("{}seeded dims: {}\n", prefix, n);
  return s;
}

// The check's inputs in JSON: "data" (the folder or null) and the seeded dims.
void CheckInputsJson(const CheckResult& c, nlohmann::json* j) {
  (*j)["data"] = c.data.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.data);
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [name, dims] : c.seeded_shapes) shapes[name] = dims;
  (*j)["shapes"] = shapes;
  (*j)["notes"] = c.notes;
}

std::string Top1(const OutputStats& s) {
  return s.top1_total
             ? fmt::format(", top-1 agreement {:.1f}%", 100.0 * static_cast<double>(s.top1_agree) /
                                                            static_cast<double>(s.top1_total))
             : "";
}

}  // namespace

std::string FormatJson(const OptimizeFileResult& r) {
  nlohmann::json j;
  j["input"] = r.input;
  j["output"] = r.output;
  j["nodes_before"] = r.nodes_before;
  j["nodes_after"] = r.nodes_after;
  j["ops_before"] = r.ops_before;
  j["ops_after"] = r.ops_after;
  nlohmann::json jp = nlohmann::json::array();
  for (const auto& p : r.passes) jp.push_back({{"pass", p.name}, {"changes", p.changes}});
  j["passes"] = jp;
  j["check"] = nullptr;
  if (r.check.count > 0) {
    j["check"] = {{"inputs", r.check_result.sets},    {"rtol", r.check.rtol},
                  {"scale_rtol", r.check.scale_rtol}, {"atol", r.check.atol},
                  {"ok", r.check_result.ok},          {"max_abs", r.check_result.max_abs}};
    CheckInputsJson(r.check_result, &j["check"]);
  }
  return JsonText(j, 2) + "\n";
}

std::string FormatText(const OptimizeFileResult& r) {
  std::string s = fmt::format("{:<28} {:>8} {:>8}\n", "op", "before", "after");
  for (const auto& [k, v] : OpRows(r))
    s += fmt::format("{:<28} {:>8} {:>8}\n", k, v.first, v.second);
  s += fmt::format("{:<28} {:>8} {:>8}\n\n", "total nodes", r.nodes_before, r.nodes_after);
  for (const auto& p : r.passes)
    s += fmt::format("pass {:<24} {:>4} change(s)\n", p.name, p.changes);
  if (r.check.count > 0)
    s += fmt::format(
             "\ncheck: {}, every output within rtol {:g} / atol {:g} / scale-rtol {:g} (max abs "
             "{:.3g})\n",
             CheckInputs(r.check_result), r.check.rtol, r.check.atol, r.check.scale_rtol,
             r.check_result.max_abs) +
         CheckNotes(r.check_result, "");
  else
    s += "\ncheck: skipped (--check 0)\n";
  s += fmt::format("wrote {}\n", r.output);
  return s;
}

std::string FormatMarkdown(const OptimizeFileResult& r) {
  std::string s =
      fmt::format("# ferry optimize\n\n- input: `{}`\n- output: `{}`\n- nodes: {} -> {}\n", r.input,
                  r.output, r.nodes_before, r.nodes_after);
  if (r.check.count > 0)
    s += fmt::format(
             "- check: {}, every output within rtol {:g} / atol {:g} / scale-rtol {:g} (max abs "
             "{:.3g})\n",
             CheckInputs(r.check_result), r.check.rtol, r.check.atol, r.check.scale_rtol,
             r.check_result.max_abs) +
         CheckNotes(r.check_result, "- ");
  else
    s += "- check: skipped\n";
  s += "\n| op | before | after |\n|---|---:|---:|\n";
  for (const auto& [k, v] : OpRows(r))
    s += fmt::format("| {} | {} | {} |\n", MarkdownCell(k), v.first, v.second);
  s += "\n| pass | changes |\n|---|---:|\n";
  for (const auto& p : r.passes) s += fmt::format("| {} | {} |\n", p.name, p.changes);
  return s;
}

std::string FormatJson(const ConvertFileResult& r) {
  nlohmann::json j;
  j["input"] = r.input;
  j["output"] = r.output;
  if (!r.fp16) {
    j["opset_from"] = r.opset_from;
    j["opset_to"] = r.opset_to;
  } else {
    j["clamped_initializers"] = r.fp16_report.clamped;
    j["converted_initializers"] = r.fp16_report.converted_initializers;
    j["casts_inserted"] = r.fp16_report.casts_inserted;
    j["fp32_nodes"] = r.fp16_report.fp32_nodes;
  }
  if (r.checked) {
    j["check"] = {{"inputs", r.check_result.sets}, {"outputs", CheckOutputsJson(r.check_result)}};
    CheckInputsJson(r.check_result, &j["check"]);
  }
  j["bytes_in"] = r.bytes_in;
  j["bytes_out"] = r.bytes_out;
  return JsonText(j, 2) + "\n";
}

std::string FormatText(const ConvertFileResult& r) {
  std::string s;
  if (!r.fp16)
    s += fmt::format("opset {} -> {}\n", r.opset_from, r.opset_to);
  else
    s += fmt::format(
        "float16: {} initializers converted, {} casts inserted, {} nodes kept in float32\n",
        r.fp16_report.converted_initializers, r.fp16_report.casts_inserted,
        r.fp16_report.fp32_nodes);
  if (r.checked) {
    for (const auto& e : r.check_result.outputs)
      s += fmt::format("check {}: max abs {:.3g}, cosine {:.6f}{}\n", e.name, e.max_abs, e.cosine,
                       Top1(e));
    s += CheckNotes(r.check_result, "check ");
  }
  s += fmt::format("wrote {} ({} -> {} bytes)\n", r.output, r.bytes_in, r.bytes_out);
  return s;
}

std::string FormatMarkdown(const ConvertFileResult& r) {
  std::string s =
      fmt::format("# ferry convert\n\n- input: `{}` ({} bytes)\n- output: `{}` ({} bytes)\n",
                  r.input, r.bytes_in, r.output, r.bytes_out);
  if (!r.fp16) {
    s += fmt::format("- opset {} -> {}\n", r.opset_from, r.opset_to);
  } else {
    s += fmt::format(
        "- float16: {} initializers converted, {} casts inserted, {} nodes kept in float32\n",
        r.fp16_report.converted_initializers, r.fp16_report.casts_inserted,
        r.fp16_report.fp32_nodes);
    for (const auto& c : r.fp16_report.clamped)
      s +=
          fmt::format("- initializer `{}` clamped to +-65504 (values beyond float16's range)\n", c);
  }
  if (!r.checked) return s + "- check: skipped\n";
  s += fmt::format(
      "\n## Check ({})\n\n{}| output | max abs | cosine | NaN/Inf | top-1 agreement "
      "|\n|---|---:|---:|---:|---:|\n",
      CheckInputs(r.check_result), CheckNotes(r.check_result, "- "));
  for (const auto& e : r.check_result.outputs)
    s += fmt::format("| {} | {:.3g} | {:.6f} | {} | {} |\n", MarkdownCell(e.name), e.max_abs,
                     e.cosine, e.candidate_nonfinite,
                     e.top1_total
                         ? fmt::format("{:.1f}%", 100.0 * static_cast<double>(e.top1_agree) /
                                                      static_cast<double>(e.top1_total))
                         : "-");
  return s;
}

}  // namespace ferry::passes
