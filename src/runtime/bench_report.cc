// The renderings of runtime::BenchResult (bench.h): text, JSON and Markdown.
#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/markdown.h"
#include "runtime/bench.h"

namespace ferry::runtime {

namespace {

double NodeMs(const NodeReport& r) {
  return r.calls ? r.total_ms / static_cast<double>(r.calls) : 0;
}

std::map<std::string, int> ByProvider(const BenchResult& r) {
  std::map<std::string, int> by;
  for (const auto& n : r.nodes) ++by[n.provider];
  return by;
}

// Per op type (and provider when not cpu): ms per run summed over its nodes, node count.
std::map<std::string, std::pair<double, int>> ByOp(const BenchResult& r) {
  std::map<std::string, std::pair<double, int>> by;
  for (const auto& n : r.nodes) {
    auto& e = by[n.op_type + (n.provider == "cpu" ? "" : " [" + n.provider + "]")];
    e.first += NodeMs(n);
    e.second += 1;
  }
  return by;
}

// By time, largest first: (ms, "Op xN"), and the total.
std::vector<std::pair<double, std::string>> OpsByTime(const BenchResult& r, double* total) {
  std::vector<std::pair<double, std::string>> ops;
  *total = 0;
  for (const auto& [op, e] : ByOp(r)) {
    ops.emplace_back(e.first, fmt::format("{} x{}", op, e.second));
    *total += e.first;
  }
  std::sort(ops.rbegin(), ops.rend());
  return ops;
}

std::string Warm(const BenchResult& r) {
  return r.concurrency > 1 ? fmt::format("{} callers x {} runs", r.concurrency, r.runs)
                           : fmt::format("{} runs", r.runs);
}

}  // namespace

std::string FormatJson(const BenchResult& r) {
  nlohmann::json inputs = nlohmann::json::object();
  for (const auto& [name, shape] : r.inputs) inputs[name] = shape;
  nlohmann::json j = {{"model", r.model},
                      {"model_mb", r.model_mb},
                      {"provider", r.provider},
                      {"threads", r.threads},
                      {"runs", r.runs},
                      {"warmup", r.warmup},
                      {"concurrency", r.concurrency},
                      {"load_ms", r.load_ms},
                      {"process_start_to_load_ms", r.process_start_to_load_ms},
                      {"first_ms", r.first_ms},
                      {"min_ms", r.min_ms},
                      {"p50_ms", r.p50_ms},
                      {"p90_ms", r.p90_ms},
                      {"p99_ms", r.p99_ms},
                      {"max_ms", r.max_ms},
                      {"mean_ms", r.mean_ms},
                      {"cpu_ms", r.cpu_ms},
                      {"wall_ms", r.wall_ms},
                      {"throughput", r.throughput},
                      {"peak_rss_mb", r.peak_rss_mb},
                      {"rss_before_load_mb", r.rss_before_load_mb},
                      {"arena_mb", r.arena_mb},
                      {"weights_mb", r.weights_mb},
                      {"contexts", r.contexts},
                      {"inputs", inputs}};
  j["nodes_by_provider"] = ByProvider(r);
  if (r.profile) {
    nlohmann::json jnodes = nlohmann::json::array();
    for (const auto& n : r.nodes)
      jnodes.push_back({{"name", n.name},
                        {"op", n.op_type},
                        {"provider", n.provider},
                        {"fused_into", n.fused_into},
                        {"ms", NodeMs(n)}});
    j["nodes"] = jnodes;
    nlohmann::json jops = nlohmann::json::object();
    for (const auto& [op, e] : ByOp(r)) jops[op] = {{"ms", e.first}, {"count", e.second}};
    j["ops"] = jops;
  }
  return JsonText(j, 2) + "\n";
}

std::string FormatText(const BenchResult& r) {
  std::string s = fmt::format("model       {} ({:.1f} MB)\n", r.model, r.model_mb);
  s += fmt::format("provider    {}, {} threads", r.provider, r.threads);
  for (const auto& [p, n] : ByProvider(r)) s += fmt::format(", {} nodes {}", n, p);
  s += "\n";
  s += fmt::format("cold start  {:.1f} ms load + {:.1f} ms first run\n", r.load_ms, r.first_ms);
  s +=
      fmt::format("warm        {}: min {:.2f}  p50 {:.2f}  p90 {:.2f}  p99 {:.2f}  max {:.2f} ms\n",
                  Warm(r), r.min_ms, r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms);
  s += fmt::format("throughput  {:.1f} inferences/s, {:.2f} ms of CPU time per run (all threads)\n",
                   r.throughput, r.cpu_ms);
  s += fmt::format("memory      peak RSS {:.1f} MB ({:.1f} MB before load)\n", r.peak_rss_mb,
                   r.rss_before_load_mb);
  if (!r.profile) return s;
  s += "\nper node (ms per run):\n";
  for (const auto& n : r.nodes)
    s += fmt::format("  {:>8.3f}  {:<18} {:<40} {}{}\n", NodeMs(n), n.op_type, n.name, n.provider,
                     n.fused_into.empty() ? "" : " into " + n.fused_into);
  double total = 0;
  auto ops = OpsByTime(r, &total);
  s += fmt::format("\nper op type (ms per run, {:.2f} total):\n", total);
  for (const auto& [ms, op] : ops)
    s += fmt::format("  {:>8.3f}  {:5.1f}%  {}\n", ms, total > 0 ? 100 * ms / total : 0, op);
  return s;
}

std::string FormatMarkdown(const BenchResult& r) {
  std::string s = fmt::format("# ferry bench: `{}`\n\n", r.model);
  s += fmt::format(
      "- provider {}, {} threads per run, {} caller(s); {} warm-up and {} timed runs "
      "per caller\n",
      r.provider, r.threads, r.concurrency, r.warmup, r.runs);
  s += "- inputs:";
  for (const auto& [name, shape] : r.inputs)
    s += fmt::format(" `{}` {}", MarkdownCell(name), ShapeToString(shape));
  s += "\n\n| metric | value |\n|---|---:|\n";
  auto row = [&s](const char* what, double v, const char* unit) {
    s += fmt::format("| {} | {:.2f} {} |\n", what, v, unit);
  };
  row("load (cold start)", r.load_ms, "ms");
  row("first run", r.first_ms, "ms");
  row("min", r.min_ms, "ms");
  row("p50", r.p50_ms, "ms");
  row("p90", r.p90_ms, "ms");
  row("p99", r.p99_ms, "ms");
  row("max", r.max_ms, "ms");
  row("throughput", r.throughput, "runs/s");
  row("CPU time per run", r.cpu_ms, "ms");
  row("peak RSS", r.peak_rss_mb, "MB");
  row("RSS before load", r.rss_before_load_mb, "MB");
  row("weights (shared)", r.weights_mb, "MB");
  row("arena", r.arena_mb, "MB");
  row("model file", r.model_mb, "MB");
  if (!r.profile) return s;
  double total = 0;
  auto ops = OpsByTime(r, &total);
  s += fmt::format("\n## Per op type ({:.2f} ms per run)\n\n| op | ms | share |\n|---|---:|---:|\n",
                   total);
  for (const auto& [ms, op] : ops)
    s += fmt::format("| {} | {:.3f} | {:.1f}% |\n", MarkdownCell(op), ms,
                     total > 0 ? 100 * ms / total : 0);
  return s;
}

}  // namespace ferry::runtime
