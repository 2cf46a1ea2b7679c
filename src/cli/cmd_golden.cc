// ferry golden capture MODEL -o DIR [--count N] [--seed S] [--shape NAME=DIMS]...
//                                   [--range NAME=LO,HI]... [--force] [--threads N] [--json]
// Generates seeded input sets (plus edge cases), runs the model and stores inputs and outputs in
// the ONNX test-data layout, for `ferry verify MODEL --golden DIR` and `ferry run --test-data`.
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/weights_digest.h"
#include "ir/onnx_io.h"
#include "runtime/session.h"
#include "verify/golden.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string model, out;
  int count = 4;
  uint64_t seed = 0;
  std::vector<std::string> shapes, ranges;
  bool force = false, json = false;
  int threads = 0;
};

Result<std::vector<double>> ParseList(const std::string& s, const std::string& flag,
                                      const std::string& spec) {
  std::vector<double> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find_first_of(",x", pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    char* e = nullptr;
    double v = std::strtod(item.c_str(), &e);
    if (item.empty() || *e != '\0' || !std::isfinite(v))
      return UsageError("{} {}: '{}' is not a number", flag, spec, item);
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

Result<verify::CaptureOptions> ParseOptions(const Options& o) {
  verify::CaptureOptions co;
  if (o.count < 0) return UsageError("--count must be >= 0, got {}", o.count);
  if (o.threads < 0) return UsageError("--threads must be >= 0, got {}", o.threads);
  co.count = o.count;
  co.seed = o.seed;
  FERRY_ASSIGN_OR_RETURN(co.shapes, ParseShapeSpecs("--shape", o.shapes));
  for (const auto& spec : o.ranges) {
    FERRY_ASSIGN_OR_RETURN(auto kv, SplitSpec(spec, "--range", "NAME=LO,HI"));
    FERRY_ASSIGN_OR_RETURN(auto lohi, ParseList(kv.second, "--range", spec));
    if (lohi.size() != 2 || kv.second.find('x') != std::string::npos)
      return UsageError("--range expects NAME=LO,HI, got '{}'", spec);
    if (!co.ranges.emplace(kv.first, std::make_pair(lohi[0], lohi[1])).second)
      return UsageError("--range is given twice for '{}'", kv.first);
  }
  return co;
}

std::string Describe(const verify::NamedValues& vals) {
  std::string s;
  for (const auto& [n, v] : vals)
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n,
                     v.is_tensor() ? fmt::format("{}{}", DTypeName(v.tensor().dtype()),
                                                 ShapeToString(v.tensor().shape()))
                                   : std::string(v.is_sequence() ? "sequence" : "none"));
  return s;
}

int RunCapture(const Options& o) {
  auto co = ParseOptions(o);
  if (!co.ok()) return ReportError(co.status());
  std::error_code ec;
  if (std::filesystem::exists(o.out, ec) && !o.force)
    return ReportError(InvalidError("'{}' already exists (pass --force to replace it)", o.out));
  auto loaded = ir::LoadModel(o.model);
  if (!loaded.ok()) return ReportError(loaded.status());
  std::shared_ptr<const ir::Model> model(std::move(loaded).value());
  runtime::SessionOptions so;
  so.threads = o.threads;
  auto session = runtime::Session::Create(model, so);
  if (!session.ok()) return ReportError(session.status());
  const ir::Graph& g = model->graph;
  auto plan = verify::PlanCapture(g, co.value());
  if (!plan.ok()) return ReportError(plan.status().With(o.model));
  std::vector<std::string> notes = plan->notes;

  std::vector<verify::CapturedSet> sets;
  auto run = [&](verify::GeneratedSet gs) -> Status {
    auto outs = (*session)->Run(gs.inputs);
    if (!outs.ok()) return outs.status();
    verify::CapturedSet cs{gs.kind, std::move(gs.inputs), {}};
    for (size_t k = 0; k < g.outputs.size(); ++k)
      cs.outputs.emplace_back(g.outputs[k].name, std::move((*outs)[k]));
    sets.push_back(std::move(cs));
    return Status::Ok();
  };
  int index = 0;
  for (; index < o.count; ++index) {
    Status st = run(verify::GenerateSet(*plan, *co, index, "random", 0));
    if (!st.ok()) return ReportError(st.With(fmt::format("{}: random set {}", o.model, index)));
  }
  for (const char* kind : {"zeros", "large"}) {
    Status st = run(verify::GenerateSet(*plan, *co, index++, kind, 0));
    if (!st.ok()) return ReportError(st.With(fmt::format("{}: {} set", o.model, kind)));
  }
  if (!plan->seq_symbols.empty()) {
    Status st = run(verify::GenerateSet(*plan, *co, index++, "shortest", 1));
    if (!st.ok()) return ReportError(st.With(fmt::format("{}: shortest set (length 1)", o.model)));
    // The longest length the model accepts, from 4x the default down to the default (position
    // tables bound it; a failed run is the model saying so).
    int64_t len = 4 * co->default_dim;
    for (;; len /= 2) {
      Status s2 = run(verify::GenerateSet(*plan, *co, index, "longest", len));
      if (s2.ok()) break;
      if (len <= co->default_dim)
        return ReportError(s2.With(fmt::format("{}: longest set (length {})", o.model, len)));
    }
    ++index;
    notes.push_back(fmt::format("longest set: sequence dims set to {}", len));
  }

  nlohmann::json manifest;
  manifest["model"] = o.model;
  manifest["weights_sha256"] = DigestWeights(g).sha256;
  manifest["seed"] = o.seed;
  manifest["count"] = o.count;
  manifest["notes"] = notes;
  manifest["sets"] = nlohmann::json::array();
  for (size_t s = 0; s < sets.size(); ++s) {
    nlohmann::json shapes = nlohmann::json::object();
    for (const auto& [n, v] : sets[s].inputs)
      if (v.is_tensor()) shapes[n] = v.tensor().shape();
    manifest["sets"].push_back(
        {{"set", fmt::format("test_data_set_{}", s)}, {"kind", sets[s].kind}, {"inputs", shapes}});
  }
  Status w = verify::WriteGoldenDir(o.out, sets, manifest.dump(2) + "\n", o.force);
  if (!w.ok()) return ReportError(w);
  if (o.json) {
    manifest["out"] = o.out;
    std::printf("%s\n", manifest.dump(2).c_str());
    return 0;
  }
  for (const auto& n : notes) fmt::print("note: {}\n", n);
  for (size_t s = 0; s < sets.size(); ++s)
    fmt::print("test_data_set_{:<3} {:<9} {} -> {}\n", s, sets[s].kind, Describe(sets[s].inputs),
               Describe(sets[s].outputs));
  fmt::print("wrote {} sets to {}\n", sets.size(), o.out);
  return 0;
}

}  // namespace

void SetupGolden(CLI::App& sub, Action* action) {
  sub.require_subcommand(1);
  CLI::App* cap = sub.add_subcommand(
      "capture", "Generate seeded inputs (plus edge cases), run MODEL, store inputs and outputs");
  auto o = std::make_shared<Options>();
  cap->add_option("model", o->model, "ONNX model file")->required();
  cap->add_option("-o,--output", o->out,
                  "Folder to create (test_data_set_N/input_K.pb, output_K.pb)")
      ->required();
  cap->add_option("--count", o->count, "Random input sets before the edge cases (default 4)");
  cap->add_option("--seed", o->seed, "Seed (default 0)");
  cap->add_option("--shape", o->shapes, "NAME=DIMS, e.g. input=8,3,224,224; repeatable");
  cap->add_option("--range", o->ranges, "NAME=LO,HI: values of an input drawn from [LO, HI]");
  cap->add_flag("--force", o->force, "Replace an existing output folder");
  cap->add_option("--threads", o->threads, "Threads (default: one per core)");
  cap->add_flag("--json", o->json, "Print one JSON document (the golden.json manifest)");
  cap->callback([o, action] { *action = [o] { return RunCapture(*o); }; });
}

}  // namespace ferry::cli
