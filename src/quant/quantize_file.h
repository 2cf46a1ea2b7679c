// `ferry quantize` as a library call: prepare the model (ferry optimize's passes), take ranges
// from a calibration folder or table (static) or none (dynamic), optionally keep the most
// sensitive layers float until an accuracy or error budget is met (select.h), rewrite
// (qdq.h), write the file atomically, and with an evaluation set compare it with the input:
// per-output statistics, accuracy overall and per class, the per-layer error table and the
// latency p50 (evaluate.h). The result renders as text, JSON or Markdown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/progress.h"
#include "core/status.h"
#include "passes/check.h"
#include "quant/calibrate.h"
#include "quant/evaluate.h"
#include "quant/qdq.h"
#include "quant/select.h"

namespace ferry::quant {

enum class QuantMode { kStatic, kDynamic };
// "static" / "dynamic"; kUsage ("--mode must be static or dynamic, got 'x'") otherwise.
Result<QuantMode> ParseQuantMode(const std::string& text);
const char* QuantModeName(QuantMode mode);

struct QuantizeFileOptions {
  std::string input, output;
  QuantMode mode = QuantMode::kStatic;
  std::string calibration;  // static: a calibration folder (exactly one of this and `table`)
  std::string table;        // static: a table written by ferry calibrate
  // With `calibration`: method, batch (0 auto), max_samples; activation type and symmetric are
  // taken from `quantize`.
  CalibrateOptions calibrate;
  QuantizeOptions quantize;  // types, per-channel, symmetric, reduce-range, exclude
  std::string eval;          // evaluation folder ("": no evaluation)
  std::string labels;        // with eval: .npy of class ids (accuracy overall and per class)
  // Layer selection (with eval; at most one): accuracy drop in points (needs labels), or the
  // largest |quantized - float| over every output element.
  std::optional<double> accuracy_budget, max_error;
  int latency_runs = 5;  // with eval: timed runs per model for the latency p50 (0: none)
  int threads = 0;       // engine threads (0: one per core)
  // Before writing, the quantized model against the input on `check.count` seeded sets (dims:
  // check.shapes, else what the graph needs) or the sets of `check.data`: refused (nothing
  // written) when it makes NaN/Inf where the input is finite; its error statistics are
  // reported. count 0 and no data: no check (the default).
  passes::CheckOptions check = [] {
    passes::CheckOptions c;
    c.count = 0;
    return c;
  }();
  ProgressFn progress;  // stages "calibrate", "select (solo runs)", "evaluate"
};

struct SelectionInfo {
  std::string metric;  // "accuracy_drop_pp" or "max_abs_error"
  std::string output;  // the classifier output (accuracy) or "" (every output)
  Selection sel;
};

struct QuantizeFileResult {
  QuantizeFileOptions options;  // as given (progress cleared): what the report echoes
  QuantizeSummary summary;
  uintmax_t size_before = 0, size_after = 0;
  std::string ranges;  // static: "table X (method)" or "calibrated on DIR (N samples, method)"
  std::optional<Evaluation> eval;
  std::optional<SelectionInfo> selection;
  std::optional<LayerTable> layers;
  std::optional<Latency> latency;
  std::optional<passes::CheckResult> check;  // with options.check
  // False when the selection's budget cannot be met with any layer quantized: nothing was
  // written, and verdict() says why.
  bool written = true;
  // Ok, or kCheckFailed "the budget ... cannot be met with any layer quantized (...); nothing
  // written" when !written.
  Status verdict() const;
};

// Errors: kUsage for inconsistent options (the messages name the CLI flags: "--labels needs
// --eval DIR", ...); the loader's, calibration's ("calibration: ..."), the data folders'
// ("--eval: ...") and the engine's errors; kUnsupported when nothing would be quantized
// (nothing written). A budget that cannot be met is not an error: see
// QuantizeFileResult::written.
Result<QuantizeFileResult> QuantizeFile(const QuantizeFileOptions& options);

// A selection metric's value as reports write it: "1.25 pp", "0.0123", "inf (NaN/Inf in
// outputs)".
std::string MetricText(const std::string& metric, double value);

// Text: the summary, selection, evaluation, per-layer and latency tables, "wrote OUT" (only the
// selection table when nothing was written). Markdown: the same as a report.
std::string FormatText(const QuantizeFileResult& r);
std::string FormatJson(const QuantizeFileResult& r);
std::string FormatMarkdown(const QuantizeFileResult& r);

}  // namespace ferry::quant
