// `ferry build` as a library call: ferry.yaml in, a verified, byte-for-byte reproducible artifact
// folder out (and optionally a deterministic `.ferry` tar of it).
//
// Order: the config is validated and the source checked against its pinned SHA-256; the golden
// set is captured from the *source* model (reference inputs, optional seeded edge cases, the
// labels); each variant's steps run through the library calls (OptimizeFile, ConvertFile,
// QuantizeFile); each variant is verified against the golden set (per output, per class with
// labels; per layer against the source when it fails), audited and benchmarked. Any gate
// failure leaves nothing at OUT: the artifact is assembled in a temp folder beside OUT and
// renamed into place only when every gate passed. The build report (`report.md` and
// `report.html`, with the bench summary and timings) is written to `OUT.report/`, beside the
// artifact (also when the gate fails).
//
// Reproducibility: everything that lands in the artifact (golden outputs, calibration,
// quantization, verification numbers) runs with kArtifactThreads engine threads, whatever
// `threads` says; nothing in it holds a time, a path outside the artifact or a host name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "artifact/config.h"
#include "artifact/files.h"
#include "artifact/gate.h"
#include "core/progress.h"
#include "core/status.h"
#include "ops/inspect.h"
#include "passes/audit.h"
#include "runtime/bench.h"
#include "verify/report.h"

namespace ferry::artifact {

inline constexpr const char* kFerryVersion = "0.1.0";
inline constexpr const char* kManifestFormat = "ferry.artifact/1";
// The artifact's copies of the config's `prep` spec and `class_names`.
inline constexpr const char* kPrepFile = "prep.yaml";
inline constexpr const char* kClassNamesFile = "labels.txt";
// Engine threads for every computation whose result lands in the artifact.
inline constexpr int kArtifactThreads = 1;

struct BuildOptions {
  std::string config;        // ferry.yaml
  std::string out;           // the artifact folder to create
  bool archive = false;      // also write OUT.ferry (a deterministic tar of the folder)
  bool force = false;        // replace an existing OUT (and OUT.ferry)
  int threads = 0;           // engine threads for the bench and per-layer diagnostics (0: per core)
  int bench_runs = 20;       // timed bench runs per variant (0: no bench)
  std::string command_line;  // echoed in the report
  ProgressFn progress;       // stages "golden", "<variant>: <step>", "verify", "bench"
};

struct StepResult {
  std::string kind;     // optimize | convert | quantize
  std::string summary;  // deterministic one-liner ("level all: 14 -> 11 nodes")
  double seconds = 0;   // report only
};

struct VariantResult {
  std::string name;
  std::string file;  // "models/<name>.onnx", relative to the artifact
  std::vector<StepResult> steps;
  uint64_t bytes = 0;
  std::string sha256;
  ops::InspectResult inspect;  // I/O, opsets, weights digest
  ToleranceSpec tolerance;
  std::map<std::string, ToleranceSpec> tolerances;
  verify::Report golden;               // against golden/data
  std::optional<verify::Report> edge;  // against golden/edge_cases
  std::optional<TaskResult> task;
  std::optional<verify::Report> layers;  // per layer against the source, when a gate failed
  std::optional<passes::AuditResult> audit;
  std::optional<runtime::BenchResult> bench;
  std::vector<std::string> failures;  // gate failures, one line each
};

struct BuildResult {
  std::string config, out, archive, report_dir;
  std::string command_line;
  std::string name, version;
  std::string source, source_sha256, config_sha256;
  ops::InspectResult source_inspect;
  int64_t golden_sets = 0, golden_rows = 0, edge_sets = 0;
  std::vector<std::string> edge_kinds;
  bool labels = false;
  // The preprocessing spec (prep.yaml in the artifact) and the class names (labels.txt).
  std::string prep_sha256;  // "" : no spec
  std::string prep_json;    // prep::SpecToJson: every default filled in (what diff compares)
  std::vector<std::string> class_names;
  std::string class_names_sha256;
  std::vector<VariantResult> variants;
  std::string fallback;
  std::vector<FileEntry> files;  // the artifact's files, manifest.json last
  std::string manifest_sha256;
  std::vector<std::pair<std::string, double>> timings;  // stage -> seconds (report only)
  int threads = 0;                                      // as given
  bool written = false;
  std::vector<std::string> failures;  // every gate failure, by variant
  // Ok, or kCheckFailed "gate failed: <first failure> (N in all); nothing written at OUT".
  Status verdict() const;
};

// Errors (nothing written at OUT): the config's (kInvalid naming key and line), a source that
// does not match its pinned digest (kInvalid naming both), OUT existing without `force`
// (kInvalid), missing or unfitting data folders (naming the key), a preprocessing spec that does
// not parse or fit the source's inputs (an input it names is not one, its tensor's dims differ
// from the declared ones) or class names whose count differs from the task output's classes
// (naming the key), the steps' and the engine's
// errors (prefixed with the variant and step). A gate failure is not an error: the result has
// written == false and verdict() says why.
Result<BuildResult> Build(const BuildOptions& options);

// Text: one block per variant (steps, verification, task, audit, bench) and the verdict.
std::string FormatText(const BuildResult& r);
std::string FormatJson(const BuildResult& r);
// The build report (report.md): everything in the text plus timings, per-layer tables and
// the bench summary.
std::string FormatMarkdown(const BuildResult& r);
// The build report as one self-contained HTML page (report.html, build_report_html.cc): the
// tables of report.md and inline SVG figures with stable ids: fig-error-K per source output K
// (the share of its tolerance each element used, per variant), fig-classes (with a task:
// accuracy per class, source and variants), fig-layers-VARIANT per variant (error along the
// graph, the first layer out of tolerance marked; when the variant's gate passed or no
// per-layer run happened, a figure saying so), fig-latency (per-run bench latencies, or why
// there are none). No script and no reference outside the page; model and config strings are
// HTML-escaped.
std::string FormatHtml(const BuildResult& r);

// The artifact's manifest.json; its "files" are r.files (every file but manifest.json itself).
std::string ManifestJson(const BuildResult& r, const Config& config);
// The artifact's RUNBOOK.md: how to verify, rebuild, add a version and roll back, with the
// commands for this artifact.
std::string Runbook(const BuildResult& r, const Config& config);

}  // namespace ferry::artifact
