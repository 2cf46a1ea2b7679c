// ferry artifact verify ARTIFACT [--key PUB.pem] [--signature model.sig] [--golden] [--json]
// The work is artifact::VerifyArtifact (src/artifact/verify_artifact.h); this file parses,
// renders, exits: 0 when every check passed, 1 naming what failed.
#include "artifact/verify_artifact.h"
#include "cli/command.h"
#include "cli/quant_common.h"

namespace ferry::cli {

namespace {

struct VerifyCmdOptions {
  std::string artifact, key, signature = artifact::kSignatureFile;
  bool golden = false, json = false;
};

int RunVerify(const VerifyCmdOptions& o) {
  artifact::ArtifactVerifyOptions vo;
  vo.artifact = o.artifact;
  vo.key = o.key;
  vo.signature = o.signature;
  vo.golden = o.golden;
  vo.progress = Progress;
  auto r = artifact::VerifyArtifact(vo);
  if (!r.ok()) return ReportError(r.status());
  PrintOut(o.json ? artifact::FormatJson(*r) : artifact::FormatText(*r));
  if (r->pass()) return 0;
  return ReportError(Status(
      StatusCode::kCheckFailed,
      fmt::format(
          "artifact '{}': {}{}", o.artifact, r->problems.front(),
          r->problems.size() > 1 ? fmt::format(" ({} problems in all)", r->problems.size()) : "")));
}

}  // namespace

void SetupArtifact(CLI::App& sub, Action* action) {
  sub.require_subcommand(1);
  CLI::App* ver = sub.add_subcommand(
      "verify", "Check an artifact's files against its manifest and signature; --golden reruns it");
  auto o = std::make_shared<VerifyCmdOptions>();
  ver->add_option("artifact", o->artifact, "Artifact folder or .ferry archive")->required();
  ver->add_option("--key", o->key, "Public key PEM the artifact was signed with");
  ver->add_option("--signature", o->signature,
                  "Signature file, relative to the folder (default model.sig)");
  ver->add_flag("--golden", o->golden,
                "Rerun the golden set through every variant with its build tolerances");
  ver->add_flag("--json", o->json, "Print one JSON document");
  ver->callback([o, action] { *action = [o] { return RunVerify(*o); }; });
}

}  // namespace ferry::cli
