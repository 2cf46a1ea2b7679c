#include "quant/calibrate_file.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/markdown.h"
#include "core/npy.h"
#include "ir/onnx_io.h"
#include "quant/data.h"

namespace ferry::quant {

Result<CalibrateFileResult> CalibrateFile(const CalibrateFileOptions& o) {
  if (o.calibrate.max_samples < 0)
    return UsageError("--max-samples must be >= 0, got {}", o.calibrate.max_samples);
  std::error_code ec;
  if (std::filesystem::exists(o.output, ec) && std::filesystem::exists(o.model, ec) &&
      std::filesystem::equivalent(o.model, o.output, ec))
    return UsageError("-o {} is the model file; write the table elsewhere", o.output);
  FERRY_ASSIGN_OR_RETURN(auto loaded, ir::LoadModel(o.model));
  FERRY_RETURN_IF_ERROR(PrepareForQuantization(*loaded));
  std::shared_ptr<const ir::Model> model(std::move(loaded));
  FERRY_ASSIGN_OR_RETURN(auto sets, LoadSets(o.data, "--data", model->graph));
  CalibrateOptions co = o.calibrate;
  if (o.progress) co.progress = [&o](size_t i, size_t n) { o.progress("calibrate", i, n); };
  auto table = RunCalibration(model, std::move(sets), co);
  if (!table.ok()) return table.status().With(fmt::format("model '{}'", o.model));
  CalibrateFileResult r;
  r.output = o.output;
  r.table = std::move(table).value();
  r.table.model = o.model;
  r.table.data = o.data;
  Status st = WriteFileAtomic(o.output, TableToJson(r.table));
  if (!st.ok()) return st.With("-o");
  return r;
}

std::string FormatJson(const CalibrateFileResult& r) {
  const Table& t = r.table;
  nlohmann::ordered_json j;
  j["model"] = t.model;
  j["data"] = t.data;
  j["samples"] = t.samples;
  j["runs"] = t.runs;
  j["batch"] = t.batch;
  j["method"] = t.method.ToString();
  j["tensors"] = t.tensors.size();
  j["output"] = r.output;
  return JsonText(j, 2) + "\n";
}

std::string FormatText(const CalibrateFileResult& r) {
  const Table& t = r.table;
  std::string s = fmt::format("calibrated {} on {} sample(s) in {} run(s), method {}\n", t.model,
                              t.samples, t.runs, t.method.ToString());
  s += fmt::format("{:<40} {:>12} {:>12} {:>12} {:>12} {:>11} {:>4}\n", "tensor", "min", "max",
                   "range lo", "range hi", "scale", "zp");
  size_t shown = 0;
  for (const auto& x : t.tensors) {
    if (++shown > 20) {
      s += fmt::format("... {} more in the table\n", t.tensors.size() - 20);
      break;
    }
    std::string name = x.name.size() > 40 ? "..." + x.name.substr(x.name.size() - 37) : x.name;
    s += fmt::format("{:<40} {:>12.5g} {:>12.5g} {:>12.5g} {:>12.5g} {:>11.4g} {:>4}\n", name,
                     x.min, x.max, x.lo, x.hi, x.q.scale, x.q.zero_point);
  }
  s += fmt::format("wrote {} ({} tensors)\n", r.output, t.tensors.size());
  return s;
}

std::string FormatMarkdown(const CalibrateFileResult& r) {
  const Table& t = r.table;
  std::string s = fmt::format(
      "# ferry calibrate\n\n- model: `{}`\n- data: `{}` ({} samples in {} runs of up to {})\n"
      "- method: {}, activations {}{}\n- table: `{}` ({} tensors)\n\n",
      t.model, t.data, t.samples, t.runs, t.batch, t.method.ToString(),
      t.activation_type == DType::kInt8 ? "s8" : "u8", t.symmetric ? ", symmetric" : "", r.output,
      t.tensors.size());
  s += "| tensor | min | max | range lo | range hi | scale | zero point |\n"
       "|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& x : t.tensors)
    s += fmt::format("| {} | {:.5g} | {:.5g} | {:.5g} | {:.5g} | {:.4g} | {} |\n",
                     MarkdownCell(x.name), x.min, x.max, x.lo, x.hi, x.q.scale, x.q.zero_point);
  return s;
}

}  // namespace ferry::quant
