// ferry inspect MODEL [--json]
// The work is ops::InspectFile (src/ops/inspect.h); this file parses, renders, exits.
#include <cstdio>

#include "cli/command.h"
#include "ops/inspect.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string model;
  bool json = false;
};

int RunInspect(const Options& o) {
  auto r = ops::InspectFile(o.model);
  if (!r.ok()) return ReportError(r.status());
  std::string text = o.json ? ops::FormatJson(*r) : ops::FormatText(*r);
  PrintOut(text);
  return 0;
}

}  // namespace

void SetupInspect(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "ONNX model file")->required();
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunInspect(*o); }; });
}

}  // namespace ferry::cli
