// The release gate: one model file against a golden set (verify's golden mode, per output), the
// edge cases, and with labels the task metric (top-1 accuracy overall and per class, against the
// golden outputs' accuracy). `ferry build` runs it on each variant before anything is written,
// `ferry artifact verify --golden` reruns it on a finished artifact.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "artifact/config.h"
#include "core/progress.h"
#include "core/status.h"
#include "verify/report.h"

namespace ferry::artifact {

struct GateSpec {
  ToleranceSpec tolerance;                          // every output
  std::map<std::string, ToleranceSpec> tolerances;  // per output
  std::string task_output;                          // "" : no task metric
  int64_t top_k = 5;
  std::optional<double> max_accuracy_drop, max_class_drop;  // percentage points
};

struct ClassResult {
  int64_t label = 0, rows = 0, golden_correct = 0, variant_correct = 0;
  double drop_pp = 0;  // (golden - variant) accuracy of the class, percentage points
  bool failed = false;
};

struct TaskResult {
  std::string output;
  int64_t rows = 0;
  double golden_accuracy = 0, variant_accuracy = 0;  // fractions
  double drop_pp = 0;
  double top1_agreement = 0;
  std::optional<double> max_accuracy_drop, max_class_drop;
  std::vector<ClassResult> classes;
  bool failed = false;
};

struct GateResult {
  verify::Report golden;               // against data_dir
  std::optional<verify::Report> edge;  // against edge_dir
  std::optional<TaskResult> task;      // with labels and a task output
  // One line per failure, naming the variant, the output or class and the numbers; the task
  // metric's failures first.
  std::vector<std::string> failures;
};

// Runs `model` (named `variant` in messages) on the golden sets of `data_dir` (and `edge_dir`
// unless "") with kArtifactThreads engine threads. `labels` ("" : none) is a .npy of class ids
// for the rows of spec.task_output. Errors: verify's (unreadable model or sets, labels that do
// not fit). A failed gate is not an error: see failures.
Result<GateResult> RunGate(const std::string& variant, const std::string& model,
                           const std::string& data_dir, const std::string& edge_dir,
                           const std::string& labels, const GateSpec& spec, ProgressFn progress);

}  // namespace ferry::artifact
