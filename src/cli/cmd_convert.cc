// ferry convert IN -o OUT (--opset N | --fp16 [--keep-fp32 OPTYPES_OR_NODES] [--keep-io-types])
//               [--check N] [--check-data DIR] [--shape NAME=DIMS]... [--json]
// The work is passes::ConvertFile (src/passes/optimize_file.h); this file parses, renders,
// warns about clamped float16 initializers, exits: 0, 1 when the check fails (nothing
// written), 2/3/4 for usage, invalid input, unsupported.
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "passes/optimize_file.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string input, output;
  int64_t opset = 0;
  bool fp16 = false, keep_io = false, json = false;
  std::vector<std::string> keep_fp32, shapes;
  std::string check_data;
  int check = 3;
};

int RunConvert(const Options& o) {
  passes::ConvertFileOptions co;
  co.input = o.input;
  co.output = o.output;
  co.opset = o.opset;
  co.fp16 = o.fp16;
  co.fp16_options.keep_io_types = o.keep_io;
  for (const auto& k : SplitCommaList(o.keep_fp32)) co.fp16_options.keep_fp32.insert(k);
  co.check.count = o.check;
  auto shapes = ParseShapeSpecs("--shape", o.shapes);
  if (!shapes.ok()) return ReportError(shapes.status());
  co.check.shapes = std::move(shapes).value();
  co.check.data = o.check_data;
  auto r = passes::ConvertFile(co);
  if (!r.ok()) return ReportError(r.status());
  for (const auto& c : r->fp16_report.clamped)
    std::fprintf(stderr,
                 "ferry: warning: initializer '%s' has values beyond float16's range; clamped to "
                 "+-65504\n",
                 c.c_str());
  std::string text = o.json ? passes::FormatJson(*r) : passes::FormatText(*r);
  PrintOut(text);
  return 0;
}

}  // namespace

void SetupConvert(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->input, "ONNX model to convert")->required();
  sub.add_option("-o,--output", o->output, "Where to write the converted model")->required();
  sub.add_option("--opset", o->opset,
                 "Target opset of the default domain (libonnx's version converter)");
  sub.add_flag("--fp16", o->fp16, "Weights and compute in float16, Casts at the boundaries");
  sub.add_option("--keep-fp32", o->keep_fp32,
                 "With --fp16: op types or node names kept in float32 (comma-separated)");
  sub.add_flag("--keep-io-types", o->keep_io, "With --fp16: graph inputs and outputs stay float32");
  sub.add_option(
      "--check", o->check,
      "Run original and converted on N seeded inputs before writing (default 3; 0 = "
      "off): --opset must "
      "match within rtol 1e-5 / atol 1e-6 / scale-rtol 1e-4 (ferry optimize --help), --fp16 "
      "must not produce NaN/Inf");
  sub.add_option("--check-data", o->check_data,
                 "Run the check on these input sets instead of seeded ones (test_data_set_N "
                 "folders or one <input>.npy per input)");
  sub.add_option("--shape", o->shapes,
                 "NAME=DIMS: dims of the check's seeded input NAME (default: what the graph "
                 "needs, else 1 per dynamic dim); repeatable");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunConvert(*o); }; });
}

}  // namespace ferry::cli
