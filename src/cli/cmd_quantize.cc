// ferry quantize IN -o OUT --mode static (--calibration DIR | --table TABLE.json) | --mode dynamic
//                [--per-channel] [--activation-type u8|s8] [--weight-type s8] [--symmetric]
//                [--exclude NODE|OPTYPE]... [--method M] [--max-samples N] [--batch B]
//                [--eval DIR [--labels FILE]] [--json] [--report FILE.md] [--threads N]
//                [--accuracy-budget PP | --max-error X] [--latency-runs N]
//                [--check N | --check-data DIR] [--shape NAME=DIMS]...
// The work is quant::QuantizeFile (src/quant/quantize_file.h); this file parses, renders,
// writes the --report and exits: 0, 1 when the budget cannot be met (nothing written), or
// 2/3/4 for usage, invalid input, unsupported.
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/quant_common.h"
#include "core/npy.h"
#include "core/utf8.h"
#include "quant/quantize_file.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string input, output, mode, calibration, table, method = "minmax";
  std::string activation_type = "u8", weight_type = "s8", eval, labels, report;
  std::vector<std::string> exclude, shapes;
  std::string check_data;
  int check = 0;
  int64_t max_samples = 0;
  std::string batch = "auto";
  int threads = 0;
  bool per_channel = false, symmetric = false, reduce_range = false, json = false;
  std::optional<double> accuracy_budget, max_error;  // layer selection (one of them)
  int latency_runs = 5;                              // with --eval; 0: no latency
};

// The flags as library options; kUsage naming the flag for a malformed value.
Result<quant::QuantizeFileOptions> ToOptions(const Options& o) {
  quant::QuantizeFileOptions q;
  FERRY_ASSIGN_OR_RETURN(q.mode, quant::ParseQuantMode(o.mode));
  q.input = o.input;
  q.output = o.output;
  q.calibration = o.calibration;
  q.table = o.table;
  q.eval = o.eval;
  q.labels = o.labels;
  q.accuracy_budget = o.accuracy_budget;
  q.max_error = o.max_error;
  q.latency_runs = o.latency_runs;
  q.threads = o.threads;
  FERRY_ASSIGN_OR_RETURN(q.calibrate.batch, ParseBatch(o.batch));
  q.calibrate.max_samples = o.max_samples;
  FERRY_ASSIGN_OR_RETURN(q.quantize.activation_type, quant::ParseActivationType(o.activation_type));
  if (o.weight_type != "s8" && o.weight_type != "int8")
    return UsageError("--weight-type must be s8, got '{}'", o.weight_type);
  q.quantize.per_channel = o.per_channel;
  q.quantize.symmetric = o.symmetric;
  q.quantize.reduce_range = o.reduce_range;
  for (const auto& e : SplitCommaList(o.exclude)) q.quantize.exclude.insert(e);
  FERRY_ASSIGN_OR_RETURN(q.calibrate.method, quant::ParseMethod(o.method));
  q.check.count = o.check;
  q.check.data = o.check_data;
  FERRY_ASSIGN_OR_RETURN(q.check.shapes, ParseShapeSpecs("--shape", o.shapes));
  q.progress = Progress;
  return q;
}

int RunQuantize(const Options& o) {
  auto q = ToOptions(o);
  if (!q.ok()) return ReportError(q.status());
  auto r = quant::QuantizeFile(*q);
  if (!r.ok()) return ReportError(r.status());
  if (r->written && !o.report.empty()) {
    Status st = WriteFileAtomic(o.report, ValidUtf8(quant::FormatMarkdown(*r)));
    if (!st.ok()) return ReportError(st.With("--report"));
  }
  std::string text = o.json ? quant::FormatJson(*r) : quant::FormatText(*r);
  PrintOut(text);
  return r->written ? 0 : ReportError(r->verdict());
}

}  // namespace

void SetupQuantize(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->input, "ONNX model to quantize")->required();
  sub.add_option("-o,--output", o->output, "Where to write the quantized model")->required();
  sub.add_option("--mode", o->mode, "static (QDQ, calibrated) or dynamic (weights only)")
      ->required();
  sub.add_option("--calibration", o->calibration,
                 "static: calibration data (test_data_set_N folders or one <input>.npy per "
                 "input, samples along the first axis)");
  sub.add_option("--table", o->table, "static: a table written by ferry calibrate");
  sub.add_option("--method", o->method,
                 "with --calibration: minmax (default), percentile[:P] or entropy");
  sub.add_option("--max-samples", o->max_samples, "with --calibration: at most N samples");
  sub.add_option("--batch", o->batch,
                 "with --calibration: samples per run, N or auto (default; see ferry calibrate)");
  sub.add_flag("--per-channel", o->per_channel, "One weight scale per output channel");
  sub.add_option("--activation-type", o->activation_type, "static: u8 (default) or s8");
  sub.add_option("--weight-type", o->weight_type, "s8 (the only one)");
  sub.add_flag("--symmetric", o->symmetric, "static: symmetric activation ranges");
  sub.add_flag("--reduce-range", o->reduce_range,
               "Weights in 7 bits [-63, 63]: no int16 saturation in uint8 x int8 kernels without "
               "VNNI (ONNX Runtime on AVX2)");
  sub.add_option("--exclude", o->exclude,
                 "Keep these nodes (by name) or op types in float (comma-separated; repeatable)");
  sub.add_option("--eval", o->eval,
                 "Compare the quantized model with the input on this data (same layouts)");
  sub.add_option("--labels", o->labels,
                 "with --eval: .npy of class ids, for accuracy overall and per class");
  sub.add_option("--accuracy-budget", o->accuracy_budget,
                 "with --eval and --labels: keep the most sensitive layers float until the "
                 "accuracy drop vs float is <= PP points (exit 1, nothing written, when it "
                 "cannot be met)");
  sub.add_option("--max-error", o->max_error,
                 "with --eval: the same selection with max |quantized - float| over every output "
                 "element as the metric (no labels needed)");
  sub.add_option("--latency-runs", o->latency_runs,
                 "with --eval: timed runs per model for the latency p50 (default 5; 0: none)");
  sub.add_option("--check", o->check,
                 "Before writing, run IN and OUT on N seeded input sets: refuse NaN/Inf where IN "
                 "is finite, report the error (default 0: off)");
  sub.add_option("--check-data", o->check_data,
                 "The same check on these input sets (test_data_set_N folders or one "
                 "<input>.npy per input)");
  sub.add_option("--shape", o->shapes,
                 "NAME=DIMS: dims of --check's seeded input NAME (default: what the graph "
                 "needs, else 1 per dynamic dim); repeatable");
  sub.add_option("--report", o->report, "Also write the report as Markdown to FILE.md");
  sub.add_option("--threads", o->threads, "Engine threads (default: one per core)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunQuantize(*o); }; });
}

}  // namespace ferry::cli
