// The renderings of a BuildResult: terminal text, one JSON document, and the build report
// (report.md, written to OUT.report/ beside the artifact: it holds timings, so it stays out of
// the artifact).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "artifact/build.h"
#include "core/json_text.h"
#include "core/markdown.h"

namespace ferry::artifact {

namespace {

std::string Pct(double f) {
  return fmt::format("{:.2f}%", 100 * f);
}

std::string Bytes(uint64_t b) {
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

std::string Role(const BuildResult& r, size_t i) {
  if (i == 0) return "default";
  return r.variants[i].name == r.fallback ? "fallback" : "variant";
}

std::string OutputLine(const verify::OutputResult& o) {
  if (o.state != verify::OutputResult::State::kCompared)
    return fmt::format("{}: {} (FAIL)", o.name, o.note);
  return fmt::format(
      "{}: max abs {:.3g}, max rel {:.3g}, cosine {:.6f}, {} of {} out of tolerance "
      "(atol {:g}, rtol {:g}) {}",
      o.name, o.stats.max_abs, o.stats.max_rel, o.stats.cosine(), o.stats.out_of_tolerance,
      o.stats.elements, o.tol.atol, o.tol.rtol, o.failed() ? "FAIL" : "ok");
}

double WorstClassDrop(const TaskResult& t) {
  double w = 0;
  for (const auto& c : t.classes) w = std::max(w, c.drop_pp);
  return w;
}

std::string Verdict(const BuildResult& r) {
  if (r.written) {
    uint64_t total = 0;
    for (const auto& f : r.files) total += f.bytes;
    return fmt::format("PASS: wrote {} ({} files, {}){}; report {}/report.md", r.out,
                       r.files.size(), Bytes(total),
                       r.archive.empty() ? "" : fmt::format(" and {}", r.archive), r.report_dir);
  }
  return "FAIL: " + r.verdict().message();
}

nlohmann::json OutputJson(const verify::OutputResult& o) {
  nlohmann::json j = {
      {"name", o.name}, {"pass", !o.failed()}, {"atol", o.tol.atol}, {"rtol", o.tol.rtol}};
  if (o.state != verify::OutputResult::State::kCompared) {
    j["note"] = o.note;
    return j;
  }
  j["max_abs"] = o.stats.max_abs;
  j["max_rel"] = o.stats.max_rel;
  j["cosine"] = o.stats.cosine();
  j["elements"] = o.stats.elements;
  j["out_of_tolerance"] = o.stats.out_of_tolerance;
  return j;
}

}  // namespace

std::string FormatText(const BuildResult& r) {
  std::string s = fmt::format("ferry build: {} {} -> {}\n", r.name, r.version, r.out);
  s += fmt::format("golden set: {} set(s) from the source{}{}\n", r.golden_sets,
                   r.labels ? fmt::format(", {} labeled rows", r.golden_rows) : "",
                   r.edge_sets ? fmt::format(", {} edge case set(s)", r.edge_sets) : "");
  for (size_t i = 0; i < r.variants.size(); ++i) {
    const VariantResult& v = r.variants[i];
    s += fmt::format("variant {} ({}): {}", v.name, Role(r, i), v.file);
    if (!v.sha256.empty())
      s += fmt::format(", {}, sha256 {}", Bytes(v.bytes), v.sha256.substr(0, 16));
    s += "\n";
    for (const auto& st : v.steps) s += fmt::format("  {}: {}\n", st.kind, st.summary);
    for (const auto& o : v.golden.outputs) s += "  verify " + OutputLine(o) + "\n";
    if (v.edge)
      for (const auto& o : v.edge->outputs) s += "  edge cases " + OutputLine(o) + "\n";
    if (v.task)
      s += fmt::format(
          "  task: top-1 on '{}' {} -> {} (drop {:.2f} pp), worst class drop {:.2f} pp\n",
          v.task->output, Pct(v.task->golden_accuracy), Pct(v.task->variant_accuracy),
          v.task->drop_pp, WorstClassDrop(*v.task));
    if (v.audit)
      for (const auto& t : v.audit->targets)
        s += fmt::format("  audit {}: {} as is, {} to rewrite, {} to application code\n", t.name,
                         t.as_is, t.rewrite, t.application);
    if (v.bench)
      s += fmt::format("  bench: p50 {:.3f} ms, p90 {:.3f} ms, {:.1f} runs/s ({} threads)\n",
                       v.bench->p50_ms, v.bench->p90_ms, v.bench->throughput, v.bench->threads);
    for (const auto& f : v.failures) s += "  FAIL " + f + "\n";
  }
  s += Verdict(r) + "\n";
  return s;
}

std::string FormatJson(const BuildResult& r) {
  nlohmann::json j;
  j["name"] = r.name;
  j["version"] = r.version;
  j["out"] = r.out;
  j["archive"] = r.archive.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.archive);
  j["report"] = r.report_dir + "/report.md";
  j["written"] = r.written;
  j["failures"] = r.failures;
  j["source_sha256"] = r.source_sha256;
  j["config_sha256"] = r.config_sha256;
  j["manifest_sha256"] = r.manifest_sha256;
  j["golden"] = {{"sets", r.golden_sets}, {"rows", r.golden_rows}, {"edge_cases", r.edge_sets}};
  nlohmann::json vs = nlohmann::json::array();
  for (size_t i = 0; i < r.variants.size(); ++i) {
    const VariantResult& v = r.variants[i];
    nlohmann::json vj = {{"name", v.name},   {"role", Role(r, i)}, {"file", v.file},
                         {"bytes", v.bytes}, {"sha256", v.sha256}, {"failures", v.failures}};
    nlohmann::json outs = nlohmann::json::array();
    for (const auto& o : v.golden.outputs) outs.push_back(OutputJson(o));
    vj["outputs"] = outs;
    if (v.task) {
      vj["task"] = {{"output", v.task->output},
                    {"golden_accuracy", v.task->golden_accuracy},
                    {"variant_accuracy", v.task->variant_accuracy},
                    {"drop_pp", v.task->drop_pp},
                    {"worst_class_drop_pp", WorstClassDrop(*v.task)}};
    }
    if (v.layers && v.layers->first_failed_layer >= 0) {
      const auto& row = v.layers->layers[static_cast<size_t>(v.layers->first_failed_layer)];
      vj["first_failed_layer"] = {{"tensor", row.tensor},
                                  {"node", row.node},
                                  {"op_type", row.op_type},
                                  {"max_abs", row.stats.max_abs}};
    }
    if (v.bench)
      vj["bench"] = {{"p50_ms", v.bench->p50_ms},   {"p90_ms", v.bench->p90_ms},
                     {"p99_ms", v.bench->p99_ms},   {"throughput", v.bench->throughput},
                     {"threads", v.bench->threads}, {"peak_rss_mb", v.bench->peak_rss_mb}};
    vs.push_back(vj);
  }
  j["variants"] = vs;
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [k, sec] : r.timings) t[k] = sec;
  j["timings_s"] = t;
  return JsonText(j, 2) + "\n";
}

std::string FormatMarkdown(const BuildResult& r) {
  std::string s =
      fmt::format("# Build report: {} {}\n\n", MarkdownCell(r.name), MarkdownCell(r.version));
  s += fmt::format("- verdict: **{}**\n", r.written ? "PASS" : "FAIL");
  if (!r.command_line.empty()) s += fmt::format("- command: `{}`\n", r.command_line);
  s +=
      fmt::format("- config: `{}` (SHA-256 `{}`)\n- source: `{}` (SHA-256 `{}`)\n",
                  MarkdownCell(r.config), r.config_sha256, MarkdownCell(r.source), r.source_sha256);
  s += fmt::format(
      "- artifact: `{}`{}\n", MarkdownCell(r.out),
      r.written ? fmt::format(" (manifest SHA-256 `{}`)", r.manifest_sha256) : " (not written)");
  s += fmt::format("- golden set: {} set(s){}{}\n", r.golden_sets,
                   r.labels ? fmt::format(", {} labeled rows", r.golden_rows) : "",
                   r.edge_sets ? fmt::format(", {} edge case set(s)", r.edge_sets) : "");
  if (!r.failures.empty()) {
    s += "\n## Gate failures\n\n";
    for (const auto& f : r.failures) s += "- " + MarkdownCell(f) + "\n";
  }
  s += "\n## Variants\n\n| variant | role | file | bytes | SHA-256 | gate "
       "|\n|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < r.variants.size(); ++i) {
    const auto& v = r.variants[i];
    s += fmt::format("| {} | {} | `{}` | {} | `{}` | {} |\n", v.name, Role(r, i), v.file, v.bytes,
                     v.sha256.empty() ? "-" : v.sha256.substr(0, 16),
                     v.failures.empty() ? "pass" : "FAIL");
  }
  for (size_t i = 0; i < r.variants.size(); ++i) {
    const auto& v = r.variants[i];
    s += fmt::format("\n## Variant `{}`\n\n", v.name);
    if (!v.steps.empty()) {
      s += "| step | result | seconds |\n|---|---|---|\n";
      for (const auto& st : v.steps)
        s += fmt::format("| {} | {} | {:.2f} |\n", st.kind, MarkdownCell(st.summary), st.seconds);
      s += "\n";
    }
    auto outputs = [&](const verify::Report& rep, const char* title) {
      if (rep.outputs.empty()) return;
      s += fmt::format(
          "{} ({} sets):\n\n| output | atol | rtol | max abs | max rel | mean abs | "
          "cosine | out of tolerance | min passing atol |\n|---|---|---|---|---|---|---|---|---|\n",
          title, rep.sets);
      for (const auto& o : rep.outputs)
        s += fmt::format(
            "| {} | {:g} | {:g} | {:.3g} | {:.3g} | {:.3g} | {:.6f} | {} of {} | {:.3g} |\n",
            MarkdownCell(o.name), o.tol.atol, o.tol.rtol, o.stats.max_abs, o.stats.max_rel,
            o.stats.mean_abs(), o.stats.cosine(), o.stats.out_of_tolerance, o.stats.elements,
            o.stats.min_atol);
      s += "\n";
    };
    outputs(v.golden, "Against the golden set");
    if (v.edge) outputs(*v.edge, "Against the edge cases");
    if (v.task) {
      const TaskResult& t = *v.task;
      s += fmt::format(
          "Top-1 on `{}` over {} labeled rows: source {}, variant {} (drop {:.2f} pp, "
          "limit {}); top-1 agreement {}.\n\n| class | rows | source | variant | drop (pp) | limit "
          "|\n|---|---|---|---|---|---|\n",
          MarkdownCell(t.output), t.rows, Pct(t.golden_accuracy), Pct(t.variant_accuracy),
          t.drop_pp, t.max_accuracy_drop ? fmt::format("{:g} pp", *t.max_accuracy_drop) : "none",
          Pct(t.top1_agreement));
      for (const auto& c : t.classes)
        s += fmt::format("| {} | {} | {} | {} | {:.2f} | {}{} |\n", c.label, c.rows,
                         Pct(c.rows ? double(c.golden_correct) / c.rows : 0),
                         Pct(c.rows ? double(c.variant_correct) / c.rows : 0), c.drop_pp,
                         t.max_class_drop ? fmt::format("{:g}", *t.max_class_drop) : "none",
                         c.failed ? " **FAIL**" : "");
      s += "\n";
    }
    if (v.layers && !v.layers->layers.empty()) {
      const auto& rows = v.layers->layers;
      int64_t first = v.layers->first_failed_layer;
      s += fmt::format(
          "Per layer against the source (first out of tolerance: {}):\n\n"
          "| # | tensor | node | op | max abs | cosine | state |\n|---|---|---|---|---|---|---|\n",
          first >= 0 ? "`" + MarkdownCell(rows[static_cast<size_t>(first)].tensor) + "`" : "none");
      for (const auto& row : rows) {
        std::string state =
            row.state == verify::LayerRow::State::kCompared
                ? (row.stats.pass() ? "ok" : "out of tolerance")
                : (row.state == verify::LayerRow::State::kUnmatched ? "unmatched"
                                                                    : MarkdownCell(row.note));
        s += fmt::format("| {}{} | {} | {} | {} | {:.3g} | {:.6f} | {} |\n", row.index,
                         row.index == first ? " **first**" : "", MarkdownCell(row.tensor),
                         MarkdownCell(row.node), row.op_type, row.stats.max_abs, row.stats.cosine(),
                         state);
      }
      s += "\n";
    }
    if (v.audit) {
      s += "| audit target | as is | rewrite | application code |\n|---|---|---|---|\n";
      for (const auto& t : v.audit->targets)
        s += fmt::format("| {} | {} | {} | {} |\n", t.name, t.as_is, t.rewrite, t.application);
      for (const auto& t : v.audit->targets)
        for (const auto& g : t.unsupported)
          s += fmt::format("- {}: {} ({} nodes)\n", t.name, MarkdownCell(g.reason), g.nodes.size());
      s += "\n";
    }
    for (const auto& f : v.failures) s += "- **FAIL** " + MarkdownCell(f) + "\n";
  }
  bool bench = false;
  for (const auto& v : r.variants) bench = bench || v.bench.has_value();
  if (bench) {
    s +=
        "\n## Bench summary\n\nTimings vary from run to run; they are not part of the artifact.\n\n"
        "| variant | threads | load ms | first ms | p50 ms | p90 ms | p99 ms | runs/s | peak RSS "
        "MB | model MB |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& v : r.variants) {
      if (!v.bench) continue;
      const auto& b = *v.bench;
      s += fmt::format(
          "| {} | {} | {:.2f} | {:.2f} | {:.3f} | {:.3f} | {:.3f} | {:.1f} | {:.1f} | {:.2f} |\n",
          v.name, b.threads, b.load_ms, b.first_ms, b.p50_ms, b.p90_ms, b.p99_ms, b.throughput,
          b.peak_rss_mb, b.model_mb);
    }
  }
  s += "\n## Timings\n\n| stage | seconds |\n|---|---|\n";
  for (const auto& [k, sec] : r.timings)
    s += fmt::format("| {} | {:.2f} |\n", MarkdownCell(k), sec);
  if (r.written) {
    s += "\n## Files\n\n| path | bytes | SHA-256 |\n|---|---|---|\n";
    for (const auto& f : r.files)
      s += fmt::format("| `{}` | {} | `{}` |\n", f.path, f.bytes, f.sha256);
  }
  return s;
}

}  // namespace ferry::artifact
