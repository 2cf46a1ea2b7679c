// ferry calibrate MODEL --data DIR -o TABLE.json [--method minmax|percentile[:P]|entropy]
//                 [--max-samples N] [--batch B] [--activation-type u8|s8] [--symmetric]
//                 [--threads N] [--json]
// Streams the calibration set through the engine (bounded memory: a histogram per tensor) and
// writes the calibration table (temp file + rename). Exit 0, or 2/3/4 for usage, invalid input,
// unsupported.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/quant_common.h"
#include "cli/tensor_files.h"
#include "core/npy.h"
#include "ir/onnx_io.h"
#include "quant/calibrate.h"
#include "quant/data.h"

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
  auto method = quant::ParseMethod(o.method);
  if (!method.ok()) return ReportError(method.status());
  auto act = ParseActivationType(o.activation_type);
  if (!act.ok()) return ReportError(act.status());
  if (o.max_samples < 0)
    return ReportError(UsageError("--max-samples must be >= 0, got {}", o.max_samples));
  auto batch = ParseBatch(o.batch);
  if (!batch.ok()) return ReportError(batch.status());
  if (std::filesystem::exists(o.output) && std::filesystem::exists(o.model) &&
      std::filesystem::equivalent(o.model, o.output))
    return ReportError(UsageError("-o {} is the model file; write the table elsewhere", o.output));
  auto loaded = ir::LoadModel(o.model);
  if (!loaded.ok()) return ReportError(loaded.status());
  Status st = quant::PrepareForQuantization(*loaded.value());
  if (!st.ok()) return ReportError(st);
  std::shared_ptr<const ir::Model> model(std::move(loaded).value());
  auto sets = LoadSets(o.data, "--data", model->graph);
  if (!sets.ok()) return ReportError(sets.status());
  quant::CalibrateOptions co;
  co.method = method.value();
  co.activation_type = act.value();
  co.symmetric = o.symmetric;
  co.threads = o.threads;
  co.batch = batch.value();
  co.max_samples = o.max_samples;
  co.progress = [](size_t i, size_t n) { Progress("calibrate", i, n); };
  auto table = quant::RunCalibration(model, std::move(sets).value(), co);
  if (!table.ok()) return ReportError(table.status().With(fmt::format("model '{}'", o.model)));
  table->model = o.model;
  table->data = o.data;
  const int64_t samples = table->samples;
  const int64_t nsets = table->runs;
  st = WriteFileAtomic(o.output, quant::TableToJson(table.value()));
  if (!st.ok()) return ReportError(st.With("-o"));
  if (o.json) {
    nlohmann::ordered_json j;
    j["model"] = o.model;
    j["data"] = o.data;
    j["samples"] = samples;
    j["runs"] = nsets;
    j["batch"] = table->batch;
    j["method"] = table->method.ToString();
    j["tensors"] = table->tensors.size();
    j["output"] = o.output;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  fmt::print("calibrated {} on {} sample(s) in {} run(s), method {}\n", o.model, samples, nsets,
             table->method.ToString());
  fmt::print("{:<40} {:>12} {:>12} {:>12} {:>12} {:>11} {:>4}\n", "tensor", "min", "max",
             "range lo", "range hi", "scale", "zp");
  size_t shown = 0;
  for (const auto& t : table->tensors) {
    if (++shown > 20) {
      fmt::print("... {} more in the table\n", table->tensors.size() - 20);
      break;
    }
    std::string name = t.name.size() > 40 ? "..." + t.name.substr(t.name.size() - 37) : t.name;
    fmt::print("{:<40} {:>12.5g} {:>12.5g} {:>12.5g} {:>12.5g} {:>11.4g} {:>4}\n", name, t.min,
               t.max, t.lo, t.hi, t.q.scale, t.q.zero_point);
  }
  fmt::print("wrote {} ({} tensors)\n", o.output, table->tensors.size());
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
