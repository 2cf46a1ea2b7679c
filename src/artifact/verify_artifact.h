// `ferry artifact verify` as a library call: an artifact folder (or its `.ferry` archive) checked
// before deployment — every file against manifest.json's size and SHA-256 (no file missing, none
// added), the signature (model.sig, sign.h) with a public key, and with `golden` the golden set
// rerun through each variant with the tolerances and task limits it was built with (gate.h).
// Every problem names the file, output or class that is wrong.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "artifact/gate.h"
#include "artifact/sign.h"
#include "core/progress.h"
#include "core/status.h"

namespace ferry::artifact {

struct ArtifactVerifyOptions {
  std::string artifact;                    // a folder, or a .ferry archive (unpacked to $TMPDIR)
  std::string key;                         // public key PEM ("": no signature check)
  std::string signature = kSignatureFile;  // relative to the folder
  bool golden = false;                     // rerun the golden set
  ProgressFn progress;
};

struct VariantGolden {
  std::string variant, file;
  GateResult gate;
};

struct ArtifactVerifyResult {
  std::string artifact;
  std::string name, version;
  int64_t files = 0;  // listed in the manifest
  std::optional<SignatureCheck> signature;
  std::vector<VariantGolden> golden;
  std::vector<std::string> problems;  // everything that failed, one line each
  bool pass() const { return problems.empty(); }
};

// How one variant of an unpacked artifact folder is gated on its golden set: the folders and
// the tolerances and task limits it was built with (golden/tolerances.json). `ferry artifact
// verify --golden` and `ferry serve`'s warmup both read them here.
struct GoldenPlan {
  std::string data_dir;  // golden/data
  std::string edge_dir;  // golden/edge_cases when the variant is gated on them, else ""
  std::string labels;    // golden/labels.npy when the manifest has labels, else ""
  GateSpec spec;
};
// Errors: kInvalid for an unreadable or non-JSON golden/tolerances.json.
Result<GoldenPlan> LoadGoldenPlan(const std::string& dir, const nlohmann::json& manifest,
                                  const std::string& variant);

// Errors: kInvalid for a missing artifact, a manifest that is not JSON of this format, a
// truncated or malformed archive, an unreadable key or a signature file that is not a bundle;
// the engine's errors with `golden`. A failed check is not an error: see problems.
Result<ArtifactVerifyResult> VerifyArtifact(const ArtifactVerifyOptions& options);

std::string FormatText(const ArtifactVerifyResult& r);
std::string FormatJson(const ArtifactVerifyResult& r);

}  // namespace ferry::artifact
