// ferry build ferry.yaml -o OUT [--archive] [--force] [--threads N] [--bench-runs N] [--json]
// The work is artifact::Build (src/artifact/build.h); this file parses, renders, exits.
#include <cstdio>

#include "artifact/build.h"
#include "cli/command.h"
#include "cli/quant_common.h"
#include "core/npy.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string config, out;
  bool archive = false, force = false, json = false;
  int threads = 0, bench_runs = 20;
};

// The process's arguments joined by spaces (for the report).
std::string Arguments() {
  auto bytes = ReadFileBytes("/proc/self/cmdline");
  if (!bytes.ok()) return "ferry build ...";
  std::string out;
  for (char c : bytes.value()) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  size_t slash = out.find(' ');
  return slash == std::string::npos ? out : "ferry" + out.substr(slash);
}

int RunBuild(const Options& o) {
  artifact::BuildOptions bo;
  bo.config = o.config;
  bo.out = o.out;
  bo.archive = o.archive;
  bo.force = o.force;
  bo.threads = o.threads;
  bo.bench_runs = o.bench_runs;
  bo.command_line = Arguments();
  bo.progress = Progress;
  auto r = artifact::Build(bo);
  if (!r.ok()) return ReportError(r.status());
  PrintOut(o.json ? artifact::FormatJson(*r) : artifact::FormatText(*r));
  Status verdict = r->verdict();
  if (!verdict.ok()) return ReportError(verdict);
  return 0;
}

}  // namespace

void SetupBuild(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("config", o->config, "ferry.yaml (src/artifact/README.md)")->required();
  sub.add_option("-o,--output", o->out, "Artifact folder to create")->required();
  sub.add_flag("--archive", o->archive, "Also write OUT.ferry, a deterministic tar of the folder");
  sub.add_flag("--force", o->force, "Replace an existing OUT (only once the new one is complete)");
  sub.add_option("--threads", o->threads,
                 "Engine threads for the bench and per-layer diagnostics (default: one per "
                 "core); what lands in the artifact always runs on one thread");
  sub.add_option("--bench-runs", o->bench_runs, "Timed bench runs per variant (0: no bench)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunBuild(*o); }; });
}

}  // namespace ferry::cli
