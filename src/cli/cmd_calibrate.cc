// ferry calibrate MODEL --data DIR -o TABLE.json [--method minmax|percentile[:P]|entropy]
//                 [--max-samples N] [--batch B] [--activation-type u8|s8] [--symmetric]
//                 [--threads N] [--json]
// The work is quant::CalibrateFile (src/quant/calibrate_file.h); this file parses, renders,
// exits: 0, or 2/3/4 for usage, invalid input, unsupported.
#include <cstdio>

#include "cli/command.h"
#include "cli/quant_common.h"
#include "quant/calibrate_file.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string model, data, output, method = "minmax", activation_type = "u8";
  int64_t max_samples = 0;
  std::string batch = "auto";
  int threads = 0;
  bool symmetric = false, json = false;
};

int RunCalibrate(const Options& o) {
  quant::CalibrateFileOptions co;
  co.model = o.model;
  co.data = o.data;
  co.output = o.output;
  auto method = quant::ParseMethod(o.method);
  if (!method.ok()) return ReportError(method.status());
  co.calibrate.method = method.value();
  auto act = quant::ParseActivationType(o.activation_type);
  if (!act.ok()) return ReportError(act.status());
  co.calibrate.activation_type = act.value();
  if (o.max_samples < 0)
    return ReportError(UsageError("--max-samples must be >= 0, got {}", o.max_samples));
  auto batch = ParseBatch(o.batch);
  if (!batch.ok()) return ReportError(batch.status());
  co.calibrate.batch = batch.value();
  co.calibrate.max_samples = o.max_samples;
  co.calibrate.symmetric = o.symmetric;
  co.calibrate.threads = o.threads;
  co.progress = Progress;
  auto r = quant::CalibrateFile(co);
  if (!r.ok()) return ReportError(r.status());
  std::string text = o.json ? quant::FormatJson(*r) : quant::FormatText(*r);
  PrintOut(text);
  return 0;
}

}  // namespace

void SetupCalibrate(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "ONNX model to calibrate")->required();
  sub.add_option("--data", o->data,
                 "Calibration data: test_data_set_N/input_K.pb folders, or one <input>.npy per "
                 "input whose first axis enumerates samples")
      ->required();
  sub.add_option("-o,--output", o->output, "Where to write the calibration table (JSON)")
      ->required();
  sub.add_option("--method", o->method,
                 "minmax (default), percentile[:P] (P% of |x| kept, default 99.99) or entropy");
  sub.add_option("--max-samples", o->max_samples, "Use at most N samples (default: all)");
  sub.add_option("--batch", o->batch,
                 "Samples per run when a file holds many: N, or auto (default: after a one-sample "
                 "run, as many as keep one run's float tensors under 64 MiB, at most 16)");
  sub.add_option("--activation-type", o->activation_type,
                 "u8 (default) or s8: the type the table's scales and zero points are for");
  sub.add_flag("--symmetric", o->symmetric, "Symmetric ranges in the table's parameters");
  sub.add_option("--threads", o->threads, "Engine threads (default: one per core)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunCalibrate(*o); }; });
}

}  // namespace ferry::cli
