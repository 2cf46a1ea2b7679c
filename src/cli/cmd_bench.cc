// ferry bench MODEL [--threads N] [--runs N] [--warmup N] [--concurrency C] [--shape NAME=DIMS]...
//                   [--input NAME=FILE]... [--provider cpu|reference] [--profile] [--json]
// The work is runtime::Bench (src/runtime/bench.h); this file parses, renders, prints the
// symbolic dims it chose on stderr (so --json stays one document) and exits.
#include <chrono>
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "runtime/bench.h"

namespace ferry::cli {

namespace {

// The earliest instant this process can see itself: static initialisation of this file (shared
// libraries are loaded by then). Cold start is measured from here.
const auto kStaticInit = std::chrono::steady_clock::now();

struct Options {
  std::string model;
  int threads = 0, runs = 50, warmup = 5, concurrency = 1;
  std::vector<std::string> shapes, inputs;
  std::string provider = "cpu";
  bool profile = false, json = false;
};

int BenchCommand(const Options& o) {
  runtime::BenchOptions bo;
  bo.start = kStaticInit;
  bo.model = o.model;
  bo.session.threads = o.threads;
  bo.session.provider = o.provider;
  bo.session.profile = o.profile;
  bo.runs = o.runs;
  bo.warmup = o.warmup;
  bo.concurrency = o.concurrency;
  auto shapes = ParseShapeSpecs("--shape", o.shapes);
  if (!shapes.ok()) return ReportError(shapes.status());
  bo.shapes = std::move(shapes).value();
  for (const auto& spec : o.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return ReportError(UsageError("--input expects NAME=FILE, got '{}'", spec));
    bo.input_files[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  auto r = runtime::Bench(bo);
  if (!r.ok()) return ReportError(r.status());
  for (const auto& n : r->notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  std::string text = o.json ? runtime::FormatJson(*r) : runtime::FormatText(*r);
  PrintOut(text);
  return 0;
}

}  // namespace

void SetupBench(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "ONNX model file")->required();
  sub.add_option("--threads", o->threads, "Threads per run (default: one per core)");
  sub.add_option("--runs", o->runs, "Timed runs per caller (default 50)");
  sub.add_option("--warmup", o->warmup, "Untimed runs per caller after the first (default 5)");
  sub.add_option("--concurrency", o->concurrency,
                 "Caller threads running back to back on one shared session (default 1)");
  sub.add_option("--shape", o->shapes,
                 "NAME=DIMS (e.g. input=1x3x224x224) for symbolic dims (default 1); repeatable");
  sub.add_option("--input,-i", o->inputs,
                 "NAME=FILE (.npy or .pb) instead of random data; repeatable");
  sub.add_option("--provider", o->provider, "cpu (default) or reference");
  sub.add_flag("--profile", o->profile, "Time every node; print per node and per op type");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return BenchCommand(*o); }; });
}

}  // namespace ferry::cli
