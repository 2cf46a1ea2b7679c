// ferry optimize IN -o OUT [--level basic|all] [--passes a,b] [--skip x]... [--fix-shape
// NAME=DIMS]...
//                [--check N] [--json]
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "ir/onnx_io.h"
#include "passes/check.h"
#include "passes/pass_manager.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string input, output, level = "all";
  std::vector<std::string> passes, skip, fix_shapes;
  int check = 3;
  double rtol = 1e-5, atol = 1e-6;
  bool json = false;
};

void CountOps(const ir::Graph& g, std::map<std::string, int64_t>* h, int64_t* total) {
  for (const auto& n : g.nodes) {
    (*h)[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type]++;
    ++*total;
    for (const auto& a : n.attributes) {
      if (a.g) CountOps(*a.g, h, total);
      for (const auto& sg : a.graphs) CountOps(*sg, h, total);
    }
  }
}

int RunOptimize(const Options& o) {
  if (o.check < 0) return ReportError(UsageError("--check must be >= 0, got {}", o.check));
  if (std::filesystem::exists(o.output) && std::filesystem::equivalent(o.input, o.output))
    return ReportError(
        UsageError("-o {} is the input file; write the optimized model elsewhere", o.output));
  auto original = ir::LoadModel(o.input);
  if (!original.ok()) return ReportError(original.status());
  auto loaded = ir::LoadModel(o.input);
  if (!loaded.ok()) return ReportError(loaded.status());
  ir::Model& model = *loaded.value();

  passes::CheckOptions check;
  check.count = o.check;
  check.rtol = o.rtol;
  check.atol = o.atol;
  auto fixed = ParseShapeSpecs("--fix-shape", o.fix_shapes);
  if (!fixed.ok()) return ReportError(fixed.status());
  for (const auto& [name, dims] : fixed.value()) {
    Status st = passes::FixInputShape(model, name, dims);
    if (!st.ok()) return ReportError(st);
    check.shapes[name] = dims;
  }

  std::map<std::string, int64_t> before, after;
  int64_t nodes_before = 0, nodes_after = 0;
  CountOps(model.graph, &before, &nodes_before);

  passes::OptimizeOptions opts;
  opts.level = o.level;
  opts.only = SplitCommaList(o.passes);
  for (const auto& s : SplitCommaList(o.skip)) opts.skip.insert(s);
  auto reports = passes::Optimize(model, opts);
  if (!reports.ok()) return ReportError(reports.status());
  CountOps(model.graph, &after, &nodes_after);

  std::string sequence;
  for (const auto& r : reports.value())
    if (r.changes) sequence += (sequence.empty() ? "" : ",") + r.name;

  nlohmann::json jcheck = nullptr;
  if (o.check > 0) {
    auto res = passes::CheckEquivalent(*original.value(), model, check);
    if (!res.ok()) return ReportError(res.status());
    jcheck = {{"inputs", o.check},
              {"rtol", check.rtol},
              {"atol", check.atol},
              {"ok", res->ok},
              {"max_abs", res->max_abs}};
    if (!res->ok)
      return ReportError(
          Status(StatusCode::kCheckFailed,
                 fmt::format("the optimized model differs from {}: {} (passes that changed the "
                             "graph: {}); nothing written",
                             o.input, res->first_failure, sequence.empty() ? "none" : sequence)));
  }
  Status st = ir::SaveModel(model, o.output);
  if (!st.ok()) return ReportError(st);

  if (o.json) {
    nlohmann::json j;
    j["input"] = o.input;
    j["output"] = o.output;
    j["nodes_before"] = nodes_before;
    j["nodes_after"] = nodes_after;
    j["ops_before"] = before;
    j["ops_after"] = after;
    nlohmann::json jp = nlohmann::json::array();
    for (const auto& r : reports.value()) jp.push_back({{"pass", r.name}, {"changes", r.changes}});
    j["passes"] = jp;
    j["check"] = jcheck;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  fmt::print("{:<28} {:>8} {:>8}\n", "op", "before", "after");
  std::map<std::string, std::pair<int64_t, int64_t>> rows;
  for (const auto& [k, v] : before) rows[k].first = v;
  for (const auto& [k, v] : after) rows[k].second = v;
  for (const auto& [k, v] : rows) fmt::print("{:<28} {:>8} {:>8}\n", k, v.first, v.second);
  fmt::print("{:<28} {:>8} {:>8}\n\n", "total nodes", nodes_before, nodes_after);
  for (const auto& r : reports.value())
    fmt::print("pass {:<24} {:>4} change(s)\n", r.name, r.changes);
  if (o.check > 0)
    fmt::print(
        "\ncheck: {} seeded input set(s), every output within rtol {:g} / atol {:g} (max abs "
        "{:.3g})\n",
        o.check, check.rtol, check.atol, jcheck["max_abs"].get<double>());
  else
    fmt::print("\ncheck: skipped (--check 0)\n");
  fmt::print("wrote {}\n", o.output);
  return 0;
}

}  // namespace

void SetupOptimize(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->input, "ONNX model to optimize")->required();
  sub.add_option("-o,--output", o->output, "Where to write the optimized model")->required();
  sub.add_option("--level", o->level,
                 "basic (no-op/dead/constant passes) or all (default: all, adds fusions)");
  sub.add_option("--passes", o->passes, "Run exactly these passes (comma-separated)");
  sub.add_option("--skip", o->skip, "Skip these passes (comma-separated; repeatable)");
  sub.add_option("--fix-shape", o->fix_shapes, "NAME=DIMS, e.g. input=1x3x224x224; repeatable");
  sub.add_option("--check", o->check,
                 "Compare original and optimized outputs on N seeded inputs before writing "
                 "(default 3; 0 = off)");
  sub.add_option("--rtol", o->rtol, "Relative tolerance of --check (default 1e-5)");
  sub.add_option("--atol", o->atol, "Absolute tolerance of --check (default 1e-6)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunOptimize(*o); }; });
}

}  // namespace ferry::cli
