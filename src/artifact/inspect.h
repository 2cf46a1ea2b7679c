// `ferry artifact inspect` as a library call: what an artifact holds, read from its manifest.json
// (a folder or a `.ferry` archive, read in memory): name and version, the interface (inputs and
// outputs with dtypes and dims, dynamic axes by name), the pre-processing spec and class names,
// opsets, variants (file, bytes, digests, steps, verification numbers), the golden set and the
// tolerances it was gated with. Nothing is checked here: `artifact verify` checks digests and the
// signature, `artifact diff` compares two artifacts (diff.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "artifact/files.h"
#include "core/status.h"

namespace ferry::artifact {

struct DimInfo {
  std::optional<int64_t> value;  // a fixed size
  std::string symbol;            // a named dynamic axis ("" with no value: unnamed dynamic)
  bool operator==(const DimInfo& o) const { return value == o.value && symbol == o.symbol; }
};

struct IoInfo {
  std::string name;
  std::string dtype;                          // "float32", or the type for non-tensors
  std::optional<std::vector<DimInfo>> shape;  // nullopt: rank unknown
};
// "float32[N, 1, 8, 8]" ("?" for an unnamed dynamic dim, "[*]" for an unknown rank).
std::string IoTypeText(const IoInfo& io);

struct OutputCheckInfo {
  std::string name;
  double atol = 0, rtol = 0, max_abs = 0;
  int64_t elements = 0, out_of_tolerance = 0;
  bool pass = true;
  std::string note;  // set when the output was not compared
};

struct TaskInfo {
  std::string output;
  int64_t rows = 0;
  double golden_accuracy = 0, variant_accuracy = 0, drop_pp = 0;
  std::optional<double> max_accuracy_drop_pp, max_class_drop_pp;
};

struct VariantInfo {
  std::string name, file, sha256, weights_sha256;
  uint64_t bytes = 0;
  int64_t parameters = 0;
  std::vector<IoInfo> inputs, outputs;
  std::vector<std::pair<std::string, int64_t>> opsets;     // domain ("" : ai.onnx), version
  std::vector<std::pair<std::string, std::string>> steps;  // kind, summary
  bool pass = false;
  int64_t sets = 0;
  std::vector<OutputCheckInfo> checks;  // against the golden set
  std::optional<TaskInfo> task;
};

struct ArtifactInfo {
  std::string path;  // as given
  bool archive = false;
  std::string format, name, version, ferry_version;
  std::string config_sha256, source_file, source_sha256, source_weights_sha256;
  int64_t source_parameters = 0;
  std::vector<IoInfo> inputs, outputs;  // the source model's interface
  std::vector<std::pair<std::string, int64_t>> opsets;
  // The pre-processing spec: its digest and the spec with every default filled in (JSON text,
  // prep::SpecToJson); both "" when the artifact has none.
  std::string prep_sha256, prep_json;
  std::vector<std::string> class_names;  // labels.txt, one per line (empty: none)
  std::string class_names_sha256;
  std::string default_variant, fallback;
  std::vector<VariantInfo> variants;
  int64_t golden_sets = 0, golden_rows = 0;
  std::vector<std::string> edge_kinds;
  std::vector<FileEntry> files;    // as listed in the manifest
  bool signature_present = false;  // model.sig is there (not checked: see VerifyArtifact)
  std::string manifest_sha256;

  const VariantInfo* FindVariant(const std::string& name) const;
  // The interface a deployment serves: the default variant's (the source's when absent).
  const std::vector<IoInfo>& ServedInputs() const;
  const std::vector<IoInfo>& ServedOutputs() const;
};

// Reads `path` (an artifact folder or a .ferry archive). Errors (kInvalid, naming the file and
// the field): no such artifact, a truncated archive, a manifest that is not JSON of format
// ferry.artifact/1 or lacks a required field, a listed prep.yaml or labels.txt that is missing.
Result<ArtifactInfo> ReadArtifactInfo(const std::string& path);

std::string FormatText(const ArtifactInfo& a);
std::string FormatJson(const ArtifactInfo& a);

}  // namespace ferry::artifact
