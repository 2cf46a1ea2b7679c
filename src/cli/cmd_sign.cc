// ferry keys generate --out KEY.pem [--force] [--json]
// ferry keys hash-api-key < KEY   (the sha256 line of a ferry serve keys file)
// ferry sign ARTIFACT --key KEY.pem [--signature model.sig] [--json]
// The work is artifact::GenerateKeyFiles / artifact::Sign (src/artifact/sign.h); this file
// parses, renders, exits.
#include <nlohmann/json.hpp>

#include <iostream>

#include "artifact/sign.h"
#include "cli/command.h"
#include "core/json_text.h"
#include "serve/auth.h"

namespace ferry::cli {

namespace {

struct KeyOptions {
  std::string out;
  bool force = false, json = false;
};

int RunGenerate(const KeyOptions& o) {
  auto r = artifact::GenerateKeyFiles(o.out, o.force);
  if (!r.ok()) return ReportError(r.status());
  if (o.json) {
    PrintOut(JsonText({{"private_key", r->private_key},
                       {"public_key", r->public_key},
                       {"public_key_sha256", r->public_sha256}},
                      2) +
             "\n");
  } else {
    PrintOut(fmt::format(
        "wrote {} (ECDSA P-256 private key, mode 0600) and {} (public key, SHA-256 {})\n",
        r->private_key, r->public_key, r->public_sha256));
  }
  return 0;
}

struct SignCmdOptions {
  std::string artifact, key, signature = artifact::kSignatureFile;
  bool json = false;
};

int RunSign(const SignCmdOptions& o) {
  artifact::SignOptions so;
  so.folder = o.artifact;
  so.key = o.key;
  so.signature = o.signature;
  auto r = artifact::Sign(so);
  if (!r.ok()) return ReportError(r.status());
  if (o.json) {
    PrintOut(JsonText({{"signature", r->signature},
                       {"files", r->files.size()},
                       {"subject_sha256", r->subject_digest},
                       {"key_hint", r->key_hint}},
                      2) +
             "\n");
  } else {
    PrintOut(fmt::format("signed {} files of {} (subject SHA-256 {}); wrote {}\n", r->files.size(),
                         r->folder, r->subject_digest, r->signature));
  }
  return 0;
}

}  // namespace

void SetupKeys(CLI::App& sub, Action* action) {
  sub.require_subcommand(1);
  CLI::App* gen = sub.add_subcommand(
      "generate", "Make an ECDSA P-256 key pair for ferry sign (KEY.pem and KEY.pub.pem)");
  auto o = std::make_shared<KeyOptions>();
  gen->add_option("--out", o->out, "Private key file to write (the public key: KEY.pub.pem)")
      ->required();
  gen->add_flag("--force", o->force, "Replace existing key files");
  gen->add_flag("--json", o->json, "Print one JSON document");
  gen->callback([o, action] { *action = [o] { return RunGenerate(*o); }; });
  CLI::App* hash = sub.add_subcommand(
      "hash-api-key",
      "Print the SHA-256 of an API key read from stdin (the sha256 of a ferry serve keys file)");
  hash->callback([action] {
    *action = [] {
      std::string key;
      std::getline(std::cin, key);
      if (key.empty()) return ReportError(UsageError("no API key on stdin"));
      PrintOut(serve::HashKey(key) + "\n");
      return 0;
    };
  });
}

void SetupSign(CLI::App& sub, Action* action) {
  auto o = std::make_shared<SignCmdOptions>();
  sub.add_option("artifact", o->artifact, "Artifact folder (any model folder)")->required();
  sub.add_option("--key", o->key, "Private key PEM (ECDSA P-256; ferry keys generate)")->required();
  sub.add_option("--signature", o->signature,
                 "Signature file, relative to the folder (default model.sig)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunSign(*o); }; });
}

}  // namespace ferry::cli
