// ferry audit MODEL [--target ferry|ferry-cpu|opset:N|ops:FILE]... [--json] [--strict]
// The work is passes::AuditFile (src/passes/audit.h); this file parses, renders, exits:
// 0, or 4 with --strict when any node is not supported as is by a target.
#include <cstdio>

#include "cli/command.h"
#include "passes/audit.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string model;
  std::vector<std::string> targets;
  bool json = false, strict = false;
};

int RunAudit(const Options& o) {
  passes::AuditOptions ao;
  ao.targets = o.targets;
  auto r = passes::AuditFile(o.model, ao);
  if (!r.ok()) return ReportError(r.status());
  std::string text = o.json ? passes::FormatJson(*r) : passes::FormatText(*r);
  PrintOut(text);
  if (o.strict && r->anything_unsupported())
    return ReportError(
        UnsupportedError("--strict: some nodes are not supported as is by the target(s)"));
  return 0;
}

}  // namespace

void SetupAudit(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "ONNX model")->required();
  sub.add_option(
      "--target", o->targets,
      "ferry | ferry-cpu | opset:N | ops:FILE (domain:Op:since_version per line); repeatable");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.add_flag("--strict", o->strict, "Exit 4 when any node is not supported as is");
  sub.callback([o, action] { *action = [o] { return RunAudit(*o); }; });
}

}  // namespace ferry::cli
