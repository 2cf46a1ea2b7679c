// ferry optimize IN -o OUT [--level basic|all] [--passes a,b] [--skip x]...
//                [--fix-shape NAME=DIMS]... [--check N] [--check-data DIR] [--shape NAME=DIMS]...
//                [--rtol R] [--atol A] [--json]
// The work is passes::OptimizeFile (src/passes/optimize_file.h); this file parses, renders,
// exits: 0, 1 when the check finds a difference (nothing written), 2/3/4 for usage, invalid
// input, unsupported.
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "passes/optimize_file.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string input, output, level = "all";
  std::vector<std::string> passes, skip, fix_shapes, shapes;
  std::string check_data;
  int check = 3;
  double rtol = 1e-5, atol = 1e-6, scale_rtol = 1e-4;  // passes::CheckOptions' defaults
  bool json = false;
};

int RunOptimize(const Options& o) {
  passes::OptimizeFileOptions oo;
  oo.input = o.input;
  oo.output = o.output;
  oo.passes.level = o.level;
  oo.passes.only = SplitCommaList(o.passes);
  for (const auto& s : SplitCommaList(o.skip)) oo.passes.skip.insert(s);
  oo.check.count = o.check;
  oo.check.rtol = o.rtol;
  oo.check.atol = o.atol;
  oo.check.scale_rtol = o.scale_rtol;
  auto fixed = ParseShapeSpecs("--fix-shape", o.fix_shapes);
  if (!fixed.ok()) return ReportError(fixed.status());
  oo.fix_shapes = std::move(fixed).value();
  auto shapes = ParseShapeSpecs("--shape", o.shapes);
  if (!shapes.ok()) return ReportError(shapes.status());
  oo.check.shapes = std::move(shapes).value();
  oo.check.data = o.check_data;
  auto r = passes::OptimizeFile(oo);
  if (!r.ok()) return ReportError(r.status());
  std::string text = o.json ? passes::FormatJson(*r) : passes::FormatText(*r);
  PrintOut(text);
  return 0;
}

}  // namespace

void SetupOptimize(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->input, "ONNX model to optimize")->required();
  sub.add_option("-o,--output", o->output, "Where to write the optimized model")->required();
  sub.add_option("--level", o->level,
                 "basic (no-op/dead/constant passes) or all (default: all, adds fusions)");
  sub.add_option("--passes", o->passes, "Run exactly these passes (comma-separated)");
  sub.add_option("--skip", o->skip, "Skip these passes (comma-separated; repeatable)");
  sub.add_option("--fix-shape", o->fix_shapes, "NAME=DIMS, e.g. input=1x3x224x224; repeatable");
  sub.add_option("--check", o->check,
                 "Compare original and optimized outputs on N seeded inputs before writing "
                 "(default 3; 0 = off)");
  sub.add_option("--check-data", o->check_data,
                 "Run the check on these input sets instead of seeded ones (test_data_set_N "
                 "folders or one <input>.npy per input)");
  sub.add_option("--shape", o->shapes,
                 "NAME=DIMS: dims of the check's seeded input NAME (default: what the graph "
                 "needs, else 1 per dynamic dim); repeatable");
  sub.add_option("--rtol", o->rtol, "Relative tolerance of --check (default 1e-5)");
  sub.add_option("--atol", o->atol, "Absolute tolerance of --check (default 1e-6)");
  sub.add_option("--scale-rtol", o->scale_rtol,
                 "Tolerance of --check relative to each output's largest |value| (default 1e-4; "
                 "0: element-wise rtol/atol only)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunOptimize(*o); }; });
}

}  // namespace ferry::cli
