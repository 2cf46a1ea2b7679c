// ferry golden capture MODEL -o DIR [--count N] [--seed S] [--shape NAME=DIMS]...
//                                   [--range NAME=LO,HI]... [--force] [--threads N] [--json]
// The work is verify::CaptureGolden (src/verify/capture.h); this file parses, renders, exits.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli/args.h"
#include "cli/command.h"
#include "verify/capture.h"

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

Result<verify::GoldenCaptureOptions> ToOptions(const Options& o) {
  verify::GoldenCaptureOptions go;
  go.model = o.model;
  go.out = o.out;
  go.force = o.force;
  go.threads = o.threads;
  verify::CaptureOptions& co = go.capture;
  co.count = o.count;
  co.seed = o.seed;
  if (o.count < 0) return UsageError("--count must be >= 0, got {}", o.count);
  if (o.threads < 0) return UsageError("--threads must be >= 0, got {}", o.threads);
  FERRY_ASSIGN_OR_RETURN(co.shapes, ParseShapeSpecs("--shape", o.shapes));
  for (const auto& spec : o.ranges) {
    FERRY_ASSIGN_OR_RETURN(auto kv, SplitSpec(spec, "--range", "NAME=LO,HI"));
    FERRY_ASSIGN_OR_RETURN(auto lohi, ParseList(kv.second, "--range", spec));
    if (lohi.size() != 2 || kv.second.find('x') != std::string::npos)
      return UsageError("--range expects NAME=LO,HI, got '{}'", spec);
    if (!co.ranges.emplace(kv.first, std::make_pair(lohi[0], lohi[1])).second)
      return UsageError("--range is given twice for '{}'", kv.first);
  }
  return go;
}

int RunCapture(const Options& o) {
  auto go = ToOptions(o);
  if (!go.ok()) return ReportError(go.status());
  auto r = verify::CaptureGolden(*go);
  if (!r.ok()) return ReportError(r.status());
  std::string text = o.json ? verify::FormatJson(*r) : verify::FormatText(*r);
  PrintOut(text);
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
