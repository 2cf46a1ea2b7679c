// ferry.yaml: the one config `ferry build` turns into an artifact. Parsed with yaml-cpp and
// validated key by key: an unknown, missing or mistyped key is one error naming the key's path,
// its line and what was expected ("ferry.yaml:12: variants[1].steps[0].quantize.mode: expected
// static or dynamic, got 'int4'"). The schema, with a worked example, is src/artifact/README.md.
// Paths in the file resolve against the folder holding it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ferry::artifact {

// |variant - golden| <= atol + rtol * |golden|, per element (verify::Tolerance's rule).
struct ToleranceSpec {
  double atol = 1e-4;
  double rtol = 1e-3;
};

struct OptimizeStep {
  std::string level = "all";               // basic | all
  std::vector<std::string> passes, skip;   // passes: run exactly these; skip: leave these out
  std::map<std::string, Shape> fix_shape;  // inputs fixed to these dims in the output
  int check = 3;                           // seeded equivalence-check sets (0: none)
};

struct ConvertStep {
  int64_t opset = 0;  // > 0: convert the default-domain opset (exactly one of opset and fp16)
  bool fp16 = false;
  std::vector<std::string> keep_fp32;  // op types or node names kept in float32 (fp16)
  bool keep_io_types = false;          // fp16: graph inputs and outputs stay float32
  int check = 3;
};

struct QuantizeStep {
  std::string mode = "static";         // static | dynamic
  std::string calibration;             // static: calibration folder (resolved path)
  std::string method = "minmax";       // minmax | percentile[:P] | entropy
  std::string activation_type = "u8";  // u8 | s8
  bool per_channel = false, symmetric = false, reduce_range = false;
  std::vector<std::string> exclude;  // node names or op types kept float
  int64_t max_samples = 0;           // calibration samples used (0: all)
  // Keep the most sensitive layers float until the accuracy drop (percentage points, on the
  // golden data with the task's labels) is within this budget. Needs `task`.
  std::optional<double> accuracy_budget;
};

struct Step {
  enum class Kind { kOptimize, kConvert, kQuantize };
  Kind kind = Kind::kOptimize;
  int line = 0;  // 1-based line in the config, for messages
  OptimizeStep optimize;
  ConvertStep convert;
  QuantizeStep quantize;
};
const char* StepKindName(Step::Kind kind);  // "optimize", "convert", "quantize"

struct Variant {
  std::string name;  // [A-Za-z0-9_-]{1,64}: the model file is models/<name>.onnx
  int line = 0;
  std::vector<Step> steps;                                  // in order; none: the source as is
  std::optional<ToleranceSpec> tolerance;                   // overrides the top-level default
  std::map<std::string, ToleranceSpec> tolerances;          // per output, over the top-level ones
  std::optional<double> max_accuracy_drop, max_class_drop;  // override the task's limits
  // Gate this variant on the edge cases too (an int8 variant's calibrated ranges do not cover
  // `large` inputs: false leaves them to the float variants).
  bool edge_cases = true;
};

struct TaskSpec {
  std::string output;  // the classifier output ([N, C] float)
  std::string labels;  // .npy of integer class ids, one per row of the reference data (resolved)
  int64_t top_k = 5;
  std::optional<double> max_accuracy_drop;  // percentage points, overall
  std::optional<double> max_class_drop;     // percentage points, for every class
};

struct Config {
  std::string path;    // the yaml file as given
  std::string dir;     // its folder (paths resolve against it)
  std::string text;    // the file's bytes
  std::string sha256;  // of `text` (the manifest's config digest)
  std::string name, version;
  std::string source;         // resolved path of the source model
  std::string source_name;    // as written in the file (relative), for the manifest
  std::string source_sha256;  // pinned, lower-case hex
  int source_sha256_line = 0;
  // Reference inputs: a test-data folder (test_data_set_N) or a folder of one .npy per input.
  std::string reference_data;
  // Or raw files through the `prep` spec (resolved): a folder of images (.png, .jpg, .jpeg,
  // sorted) or one file (an image, or a CSV for a table spec); one golden set per file.
  std::string reference_files;
  int64_t samples = 0;                  // input sets taken into the golden set (0: all)
  std::vector<std::string> edge_cases;  // generated extra sets: "zeros", "large"
  int64_t random_sets = 0;              // seeded random extra sets
  uint64_t seed = 0;
  ToleranceSpec tolerance;                          // default for every output
  std::map<std::string, ToleranceSpec> tolerances;  // per output
  std::optional<TaskSpec> task;
  // The preprocessing spec (src/prep; resolved path, "" : none): copied into the artifact as
  // prep.yaml, so a server accepts raw inputs (encoded images) for the inputs it names.
  std::string prep;
  // Class names, one per line (resolved path, "" : none): copied into the artifact as
  // labels.txt (the serving classification extension's labels).
  std::string class_names;
  std::vector<std::string> audit_targets;  // ferry audit targets (empty: no audit)
  bool audit_strict = false;               // anything not supported as is fails the build
  std::vector<Variant> variants;           // at least one; the first is the default variant
  std::string fallback;                    // a variant name, or ""
  // Every key path seen ("source.sha256", "variants[1].steps[0].quantize.calibration") -> its
  // 1-based line, for messages about values checked later.
  std::map<std::string, int> lines;

  const Variant* FindVariant(const std::string& name) const;
  int Line(const std::string& key) const;  // 0 when unknown
};

// Parses and validates `text` as the file `path` (only used for messages and to resolve
// relative paths). Errors are kInvalid, one line: "<path>:<line>: <key path>: <problem>".
// Checks shape only: files are not opened (see CheckInputs).
Result<Config> ParseConfig(const std::string& text, const std::string& path);
// Reads `path` and parses it.
Result<Config> LoadConfig(const std::string& path);

// The inputs a build reads exist: the source (and its SHA-256 matches the pinned one:
// kInvalid naming both digests), the reference data, the labels and every calibration
// folder. Errors name the key and its line.
Status CheckInputs(const Config& config);

}  // namespace ferry::artifact
