// Where `ferry serve` finds models: a ModelSource lists models and their versions. The
// directory source is the first; a registry source comes later (DESIGN.md), behind the same
// interface.
//
// Directory layout (DirectorySource), one folder per model, versions side by side:
//   DIR/<model>/serve.yaml          optional: batching, instances, queue, version policy
//   DIR/<model>/<version>/          an artifact folder (manifest.json: `ferry build`'s output)
//   DIR/<model>/<version>/model.onnx  plain ONNX, Triton's layout (served only with
//                                     --allow-unsigned, marked unverified)
// Model and version names: letters, digits, `.`, `_`, `-` (others are skipped, with a reason).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry::serve {

// serve.yaml: how one model is served (Triton's model config, the parts Ferry implements).
struct ServeConfig {
  int64_t max_batch_size = 0;  // 0: no dynamic batching
  uint64_t max_queue_delay_us = 0;
  std::vector<int64_t> preferred_batch_sizes;
  int instances = 0;                // executions at once; 0: ServiceOptions::default_instances
  int64_t max_queue_size = 1024;    // requests waiting; more are rejected (REJECTED)
  uint64_t priority_levels = 1;     // priorities 1 (highest) .. N
  uint64_t default_priority = 0;    // 0: the lowest level
  uint64_t default_timeout_us = 0;  // 0: none
  // Version policy: latest N (default 1), all, or specific versions.
  enum class Policy { kLatest, kAll, kSpecific } policy = Policy::kLatest;
  int64_t latest = 1;
  std::vector<std::string> specific;
  std::string variant;  // artifact variant to serve; "" : the artifact's default
  std::string labels;   // classification labels (one per line): a file in the version folder,
                        // else beside serve.yaml; "" : labels.txt when present
  std::string prep;     // a preprocessing spec (src/prep) beside serve.yaml: inputs it names may
                        // be sent as BYTES holding encoded images, texts or CSV; "" : prep.yaml
                        // when present
  // A new artifact version is compared with the one it supersedes (artifact::DiffArtifacts):
  // kAllow serves it and states the verdict; kRefuse leaves a breaking one unserved (the
  // previous version keeps serving) with the first breaking change as the reason.
  enum class BreakingChanges { kAllow, kRefuse } breaking_changes = BreakingChanges::kAllow;
};

// Errors: kInvalid as `FILE:LINE: KEY: problem`.
Result<ServeConfig> ParseServeConfig(const std::string& text, const std::string& what);

struct VersionEntry {
  std::string version;
  std::string path;         // the version folder
  bool artifact = false;    // manifest.json present (else model.onnx)
  std::string fingerprint;  // changes when the folder's files change (names, sizes, mtimes)
};

struct ModelEntry {
  std::string name;
  std::string path;
  ServeConfig config;
  std::vector<VersionEntry> versions;  // every version found, oldest first
  std::string problem;      // a model folder that cannot be served as a whole (bad serve.yaml)
  std::string fingerprint;  // changes when serve.yaml or any version's files change
};

class ModelSource {
 public:
  virtual ~ModelSource() = default;
  virtual std::string Describe() const = 0;
  // Every model. Errors: the repository itself cannot be read.
  virtual Result<std::vector<ModelEntry>> List() const = 0;
  // One model; nullopt when it is not there.
  virtual Result<std::optional<ModelEntry>> Find(const std::string& name) const = 0;
};

std::unique_ptr<ModelSource> MakeDirectorySource(const std::string& dir);

// Orders version names: all digits compare as numbers, dotted versions part by part, else
// as strings. True when a is older than b.
bool VersionLess(const std::string& a, const std::string& b);

}  // namespace ferry::serve
