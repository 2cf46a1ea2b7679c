// The result of one `ferry verify` run and its three renderings: a human table (stdout), one
// JSON document, and a Markdown report (command line, models and weights SHA-256, per-output
// statistics, per-layer table, NaN/Inf validation, verdict).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "verify/compare.h"
#include "verify/layers.h"

namespace ferry::verify {

struct ModelRef {
  std::string role;  // "reference", "candidate", "model", "golden"
  std::string path;
  std::string weights_sha256;  // empty for golden data
};

struct OutputResult {
  enum class State {
    kCompared,      // see stats
    kIncomparable,  // shape/dtype/kind differ (note)
    kUnmatched,     // the reference output has no candidate output of that name (note)
  };
  std::string name;
  State state = State::kCompared;
  std::string note;
  std::string type;  // reference dtype and shape of the first set, "float32[1,1000]"
  Tolerance tol;
  Stats stats;
  std::optional<ClassifierStats> classifier;
  bool failed() const { return state != State::kCompared || !stats.pass(); }
};

struct NanResult {
  std::string role;
  NanWatch::Finding finding;
};

struct Report {
  std::string mode;  // "compare", "golden" or "validate"
  std::string command_line;
  std::vector<ModelRef> models;
  std::string data;
  int64_t sets = 0;
  Tolerance tol;
  std::vector<OutputResult> outputs;
  std::vector<std::string> candidate_only_outputs;
  bool per_layer = false;
  std::vector<LayerRow> layers;
  int64_t first_failed_layer = -1;
  int64_t candidate_only_tensors = 0;
  bool validate = false;
  std::vector<NanResult> nan;

  // Every output compared and within tolerance, and (with validate) no NaN/Inf in any layer.
  // The per-layer table is diagnostic: it does not change the verdict.
  bool pass() const;
  // "PASS" or "FAIL: <why>".
  std::string verdict() const;
};

std::string FormatText(const Report& r);
std::string FormatJson(const Report& r);
std::string FormatMarkdown(const Report& r);

}  // namespace ferry::verify
