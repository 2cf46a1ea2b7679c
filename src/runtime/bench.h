// `ferry bench` as a library call: cold start (process start or `start` -> model loaded and
// session created), first run (which also packs weights), warm-up runs, then timed runs on one
// shared session by `concurrency` caller threads, each running back to back: per-request
// min/p50/p90/p99/max, throughput (all completed runs / wall time), CPU time per run, peak RSS,
// model and arena sizes, and with profiling the time per node. Inputs not given as files are
// seeded random data: floats uniform in [-1, 1), integer inputs that feed a Gather's indices in
// [0, rows of the gathered table), other integers in {0, 1}, bools random. The result renders
// as text, JSON or Markdown.
//
// Threads: Bench itself runs on the calling thread with concurrency 1; with concurrency C > 1 it
// starts C threads (joined before it returns), all calling Session::Run on one session at once,
// which needs a Session whose Run is safe to call concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "runtime/session.h"

namespace ferry::runtime {

struct BenchOptions {
  std::string model;                               // ONNX file
  SessionOptions session;                          // threads (per run), provider, profile
  int runs = 50;                                   // timed runs per caller
  int warmup = 5;                                  // untimed runs per caller after the first run
  int concurrency = 1;                             // caller threads sharing the session
  std::map<std::string, Shape> shapes;             // dims of generated inputs (symbolic dims)
  std::map<std::string, std::string> input_files;  // input -> .npy / .pb file instead of random
  // Cold start is measured from here (the CLI passes its process's static initialisation);
  // default: the moment Bench is called.
  std::optional<std::chrono::steady_clock::time_point> start;
};

struct BenchResult {
  std::string model, provider;
  double model_mb = 0;  // file size
  int threads = 0, runs = 0, warmup = 0, concurrency = 1;
  double load_ms = 0;                    // `start` -> session created
  double process_start_to_load_ms = -1;  // kernel's process start -> session created (/proc)
  double first_ms = 0;
  // Per request, over all callers' timed runs.
  double min_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0, mean_ms = 0;
  // Every timed run's latency in ms, in the order they ran (with concurrency > 1: caller 0's
  // runs, then caller 1's, ...); the quantiles above are over these.
  std::vector<double> run_ms;
  double cpu_ms = 0;      // process CPU time (all threads) per timed run
  double wall_ms = 0;     // of the timed phase
  double throughput = 0;  // completed timed runs per second of wall time
  double peak_rss_mb = 0, rss_before_load_mb = 0;
  double arena_mb = 0;    // Session::arena_bytes(): the arena one concurrent run adds
  double weights_mb = 0;  // Session::weights_bytes(): initializers, packed and folded copies
  int64_t contexts = 0;   // Session::contexts(): run contexts made (the most runs in flight)
  std::vector<std::pair<std::string, Shape>> inputs;  // what was fed (tensor inputs)
  std::vector<std::string> notes;  // symbolic dims chosen without --shape (tell the user)
  bool profile = false;
  std::vector<NodeReport> nodes;  // per top-level node (profile times with `profile`)
};

// Errors: kUsage for runs < 1, warmup < 0, concurrency < 1, threads < 0, an unknown provider,
// profile with concurrency > 1 (per-node times of one run at a time), a shape or file for an
// unknown input; kInvalid for a shape against the declared dims; the loader's and the engine's
// errors (a failed run in any caller).
Result<BenchResult> Bench(const BenchOptions& options);

// p-quantile (0 < q <= 1) of sorted values by the nearest-rank rule; 0 for none.
double Percentile(const std::vector<double>& sorted, double q);

std::string FormatText(const BenchResult& r);
std::string FormatJson(const BenchResult& r);
std::string FormatMarkdown(const BenchResult& r);

}  // namespace ferry::runtime
