// ferry artifact verify ARTIFACT [--key PUB.pem] [--signature model.sig] [--golden] [--json]
// ferry artifact inspect ARTIFACT [--json]
// ferry artifact diff OLD NEW [--allow-breaking] [--json]
// The work is artifact::VerifyArtifact, ReadArtifactInfo and DiffArtifacts (src/artifact/);
// this file parses, renders, exits: verify 0 when every check passed, 1 naming what failed;
// diff 0 when NEW can replace OLD (or --allow-breaking), 1 naming the first breaking change.
#include "artifact/diff.h"
#include "artifact/inspect.h"
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

struct DiffCmdOptions {
  std::string old_artifact, new_artifact;
  bool allow_breaking = false, json = false;
};

int RunInspect(const std::string& path, bool json) {
  auto r = artifact::ReadArtifactInfo(path);
  if (!r.ok()) return ReportError(r.status());
  PrintOut(json ? artifact::FormatJson(*r) : artifact::FormatText(*r));
  return 0;
}

int RunDiff(const DiffCmdOptions& o) {
  auto a = artifact::ReadArtifactInfo(o.old_artifact);
  if (!a.ok()) return ReportError(a.status());
  auto b = artifact::ReadArtifactInfo(o.new_artifact);
  if (!b.ok()) return ReportError(b.status());
  artifact::ArtifactDiff d = artifact::DiffArtifacts(*a, *b);
  PrintOut(o.json ? artifact::FormatJson(d) : artifact::FormatText(d));
  int breaking = d.breaking();
  if (breaking == 0 || o.allow_breaking) return 0;
  const artifact::ArtifactChange& first = d.changes.front();
  return ReportError(Status(
      StatusCode::kCheckFailed,
      fmt::format("'{}' cannot replace '{}': {} ({}){} (pass --allow-breaking to accept)",
                  o.new_artifact, o.old_artifact, first.what, first.why,
                  breaking > 1 ? fmt::format(", {} breaking changes in all", breaking) : "")));
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

  CLI::App* ins = sub.add_subcommand(
      "inspect", "What an artifact holds: interface, pre-processing, variants, verification");
  auto path = std::make_shared<std::string>();
  auto ins_json = std::make_shared<bool>(false);
  ins->add_option("artifact", *path, "Artifact folder or .ferry archive")->required();
  ins->add_flag("--json", *ins_json, "Print one JSON document");
  ins->callback([path, ins_json, action] {
    *action = [path, ins_json] { return RunInspect(*path, *ins_json); };
  });

  CLI::App* dif = sub.add_subcommand(
      "diff", "What changed between two artifacts; exit 1 when NEW breaks OLD's clients");
  auto d = std::make_shared<DiffCmdOptions>();
  dif->add_option("old", d->old_artifact, "The artifact deployed now (folder or .ferry)")
      ->required();
  dif->add_option("new", d->new_artifact, "The artifact to deploy (folder or .ferry)")->required();
  dif->add_flag("--allow-breaking", d->allow_breaking,
                "Exit 0 even when a change breaks clients (the changes are still listed)");
  dif->add_flag("--json", d->json, "Print one JSON document");
  dif->callback([d, action] { *action = [d] { return RunDiff(*d); }; });
}

}  // namespace ferry::cli
