// ferry quantize IN -o OUT --mode static (--calibration DIR | --table TABLE.json) | --mode dynamic
//                [--per-channel] [--activation-type u8|s8] [--weight-type s8] [--symmetric]
//                [--exclude NODE|OPTYPE]... [--method M] [--max-samples N] [--batch B]
//                [--eval DIR [--labels FILE]] [--json] [--report FILE.md] [--threads N]
// Runs ferry optimize's passes (BatchNormalization folded), rewrites the graph (quant/qdq.h),
// writes OUT atomically, and with --eval compares OUT against IN on the evaluation set
// (verify's statistics; accuracy overall and per class with --labels). Exit 0, or 2/3/4 for
// usage, invalid input, unsupported.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/quant_common.h"
#include "core/npy.h"
#include "ir/onnx_io.h"
#include "quant/calibrate.h"
#include "quant/qdq.h"
#include "runtime/session.h"
#include "verify/compare.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string input, output, mode, calibration, table, method = "minmax";
  std::string activation_type = "u8", weight_type = "s8", eval, labels, report;
  std::vector<std::string> exclude;
  int64_t max_samples = 0, batch = 16;
  int threads = 0;
  bool per_channel = false, symmetric = false, reduce_range = false, json = false;
};

struct ClassRow {
  int64_t label = 0, rows = 0, before = 0, after = 0;
  double drop_pp = 0;
  bool flagged = false;
};

struct OutputEval {
  std::string name;
  verify::Stats stats;
  std::optional<verify::ClassifierStats> classifier;
  std::vector<ClassRow> classes;
  double average_class_drop_pp = 0;
};

struct Eval {
  int64_t samples = 0, runs = 0;
  bool labeled = false;
  std::vector<OutputEval> outputs;
};

Status CheckExcludes(const ir::Graph& g, const std::set<std::string>& exclude) {
  for (const auto& e : exclude) {
    bool found = false;
    for (const auto& n : g.nodes) found = found || n.name == e || n.op_type == e;
    if (!found) return UsageError("--exclude '{}' names no node and no op type of the model", e);
  }
  return Status::Ok();
}

Result<std::unique_ptr<runtime::Session>> Open(const std::string& path, const std::string& role,
                                               int threads) {
  auto m = ir::LoadModel(path);
  if (!m.ok()) return m.status().With(role);
  runtime::SessionOptions so;
  so.threads = threads;
  auto s = runtime::Session::Create(std::shared_ptr<const ir::Model>(std::move(m).value()), so);
  if (!s.ok()) return s.status().With(fmt::format("{} '{}'", role, path));
  return std::move(s).value();
}

// Runs IN and OUT on every evaluation run, comparing each output (verify's statistics).
Result<Eval> Evaluate(const Options& o) {
  FERRY_ASSIGN_OR_RETURN(auto ref, Open(o.input, "model", o.threads));
  FERRY_ASSIGN_OR_RETURN(auto cand, Open(o.output, "quantized model", o.threads));
  Eval ev;
  FERRY_ASSIGN_OR_RETURN(auto sets,
                         LoadSamples(o.eval, "--eval", ref->model().graph, 64, 0, &ev.samples));
  std::optional<std::vector<int64_t>> labels;
  if (!o.labels.empty()) {
    auto t = ReadNpy(o.labels);
    if (!t.ok()) return t.status().With("--labels");
    if (!IsInteger(t->dtype()))
      return InvalidError("--labels '{}': expected integer class ids, got dtype {}", o.labels,
                          DTypeName(t->dtype()));
    labels = t->ToInt64Vector();
    ev.labeled = true;
  }
  ev.runs = static_cast<int64_t>(sets.size());
  const auto& outs = ref->outputs();
  for (const auto& vi : outs) ev.outputs.push_back({vi.name, {}, {}, {}, 0});
  std::vector<int64_t> offset(outs.size(), 0);
  verify::Tolerance tol{1e-2, 1e-2};
  for (size_t i = 0; i < sets.size(); ++i) {
    Progress("evaluate", i, sets.size());
    auto r = ref->Run(sets[i].inputs);
    if (!r.ok()) return r.status().With(fmt::format("model '{}', {}", o.input, sets[i].name));
    auto c = cand->Run(sets[i].inputs);
    if (!c.ok())
      return c.status().With(fmt::format("quantized model '{}', {}", o.output, sets[i].name));
    for (size_t k = 0; k < outs.size(); ++k) {
      const Value& rv = (*r)[k];
      const Value& cv = (*c)[k];
      if (!rv.is_tensor() || !cv.is_tensor() ||
          !verify::Incompatibility(rv.tensor(), cv.tensor()).empty())
        return InvalidError(
            "output '{}' of the quantized model cannot be compared ({})", outs[k].name,
            rv.is_tensor() && cv.is_tensor() ? verify::Incompatibility(rv.tensor(), cv.tensor())
                                             : "not a tensor");
      OutputEval& oe = ev.outputs[k];
      oe.stats.Add(rv.tensor(), cv.tensor(), tol);
      if (verify::IsClassifierOutput(rv.tensor())) {
        if (!oe.classifier) oe.classifier.emplace(5);
        const int64_t* lab = nullptr;
        if (labels) {
          int64_t rows = rv.tensor().dim(0);
          if (offset[k] + rows > static_cast<int64_t>(labels->size()))
            return InvalidError("--labels '{}' holds {} labels, output '{}' has more rows",
                                o.labels, labels->size(), outs[k].name);
          lab = labels->data() + offset[k];
          offset[k] += rows;
        }
        oe.classifier->Add(rv.tensor(), cv.tensor(), lab);
      }
    }
    sets[i].inputs.clear();
  }
  bool used = false;
  for (size_t k = 0; k < outs.size(); ++k) {
    OutputEval& oe = ev.outputs[k];
    if (!oe.classifier || !labels) continue;
    used = true;
    if (offset[k] != static_cast<int64_t>(labels->size()))
      return InvalidError("--labels '{}' holds {} labels, output '{}' has {} rows", o.labels,
                          labels->size(), oe.name, offset[k]);
    double sum = 0;
    for (const auto& [label, pc] : oe.classifier->per_class) {
      ClassRow row{label, pc.rows, pc.ref_correct, pc.cand_correct, 0, false};
      row.drop_pp = pc.rows ? 100.0 * static_cast<double>(pc.ref_correct - pc.cand_correct) /
                                  static_cast<double>(pc.rows)
                            : 0;
      sum += row.drop_pp;
      oe.classes.push_back(row);
    }
    oe.average_class_drop_pp =
        oe.classes.empty() ? 0 : sum / static_cast<double>(oe.classes.size());
    for (auto& row : oe.classes)
      row.flagged = row.drop_pp > 0 && row.drop_pp > 2 * std::max(oe.average_class_drop_pp, 0.0);
  }
  if (labels && !used)
    return InvalidError("--labels '{}' given, but no output is a classifier ([N, C] float, C > 1)",
                        o.labels);
  return ev;
}

double Pp(int64_t num, int64_t den) {
  return den ? 100.0 * static_cast<double>(num) / static_cast<double>(den) : 0;
}

struct QuantizeRun {
  quant::QuantizeSummary summary;
  uintmax_t size_before = 0, size_after = 0;
  std::string ranges;  // "table X" or "calibrated on DIR (N samples, method)"
  std::optional<Eval> eval;
};

nlohmann::ordered_json ToJson(const Options& o, const QuantizeRun& r) {
  nlohmann::ordered_json j;
  j["input"] = o.input;
  j["output"] = o.output;
  j["mode"] = o.mode;
  j["per_channel"] = o.per_channel;
  j["activation_type"] = o.activation_type;
  j["weight_type"] = o.weight_type;
  j["symmetric"] = o.symmetric;
  j["reduce_range"] = o.reduce_range;
  if (o.mode == "static") j["ranges"] = r.ranges;
  j["size_before"] = r.size_before;
  j["size_after"] = r.size_after;
  j["size_ratio"] = r.size_before ? static_cast<double>(r.size_after) / r.size_before : 0.0;
  j["quantized_nodes"] = r.summary.quantized_nodes;
  j["excluded_nodes"] = r.summary.excluded_nodes;
  j["missing_ranges"] = r.summary.missing_ranges;
  j["quantized_activations"] = r.summary.activations;
  j["quantized_weights"] = r.summary.weights;
  j["quantized_biases"] = r.summary.biases;
  if (!r.eval) {
    j["eval"] = nullptr;
    return j;
  }
  nlohmann::ordered_json e;
  e["data"] = o.eval;
  e["samples"] = r.eval->samples;
  e["runs"] = r.eval->runs;
  nlohmann::ordered_json outs = nlohmann::ordered_json::array();
  for (const auto& oe : r.eval->outputs) {
    nlohmann::ordered_json jo;
    jo["name"] = oe.name;
    jo["elements"] = oe.stats.elements;
    jo["max_abs"] = oe.stats.max_abs;
    jo["mean_abs"] = oe.stats.mean_abs();
    jo["rmse"] = oe.stats.rmse();
    jo["cosine"] = oe.stats.cosine();
    if (oe.classifier) {
      jo["top1_agreement"] = oe.classifier->top1();
      if (oe.classifier->labeled) {
        const auto& c = *oe.classifier;
        jo["labeled"] = c.labeled;
        jo["accuracy_before"] = c.ref_accuracy();
        jo["accuracy_after"] = c.cand_accuracy();
        jo["drop_pp"] = Pp(c.ref_correct - c.cand_correct, c.labeled);
        jo["average_class_drop_pp"] = oe.average_class_drop_pp;
        nlohmann::ordered_json pcs = nlohmann::ordered_json::array();
        std::vector<int64_t> flagged;
        for (const auto& row : oe.classes) {
          pcs.push_back({{"class", row.label},
                         {"rows", row.rows},
                         {"correct_before", row.before},
                         {"correct_after", row.after},
                         {"accuracy_before", Pp(row.before, row.rows) / 100},
                         {"accuracy_after", Pp(row.after, row.rows) / 100},
                         {"drop_pp", row.drop_pp},
                         {"flagged", row.flagged}});
          if (row.flagged) flagged.push_back(row.label);
        }
        jo["per_class"] = pcs;
        jo["flagged_classes"] = flagged;
      }
    }
    outs.push_back(jo);
  }
  e["outputs"] = outs;
  j["eval"] = e;
  return j;
}

std::string Bytes(uintmax_t b) {
  if (b >= (1u << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  return fmt::format("{} B", b);
}

// The human text (md = false) or the Markdown report (md = true).
std::string Render(const Options& o, const QuantizeRun& r, bool md) {
  std::string s;
  const auto& sm = r.summary;
  double ratio = r.size_before ? static_cast<double>(r.size_after) / r.size_before : 0;
  if (md) {
    s += fmt::format("# ferry quantize report\n\n- input: `{}`\n- output: `{}`\n", o.input,
                     o.output);
    s += fmt::format("- mode: {}{}, activations {}, weights {}{}\n", o.mode,
                     o.per_channel ? " per-channel" : "", o.activation_type, o.weight_type,
                     o.symmetric ? ", symmetric" : "");
    if (o.mode == "static") s += fmt::format("- ranges: {}\n", r.ranges);
    s += fmt::format("- file size: {} -> {} ({:.3f}x)\n", Bytes(r.size_before), Bytes(r.size_after),
                     ratio);
    s +=
        fmt::format("- quantized: {} node(s), {} activation tensor(s), {} weight(s), {} bias(es)\n",
                    sm.quantized_nodes.size(), sm.activations, sm.weights, sm.biases);
  } else {
    s += fmt::format("quantized {} -> {} ({}{}, activations {}, weights {}{})\n", o.input, o.output,
                     o.mode, o.per_channel ? ", per-channel" : "", o.activation_type, o.weight_type,
                     o.symmetric ? ", symmetric" : "");
    if (o.mode == "static") s += fmt::format("ranges: {}\n", r.ranges);
    s += fmt::format("file size: {} -> {} ({:.3f}x)\n", Bytes(r.size_before), Bytes(r.size_after),
                     ratio);
    s += fmt::format("quantized: {} node(s), {} activation tensor(s), {} weight(s), {} bias(es)\n",
                     sm.quantized_nodes.size(), sm.activations, sm.weights, sm.biases);
  }
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    std::string items;
    for (size_t i = 0; i < v.size() && i < 12; ++i) items += (i ? ", " : "") + v[i];
    if (v.size() > 12) items += fmt::format(", ... ({} in all)", v.size());
    s += fmt::format("{}{}: {}\n", md ? "- " : "", what, items);
  };
  list("excluded (float)", sm.excluded_nodes);
  list("no calibrated range (float)", sm.missing_ranges);
  if (!r.eval) return s;
  const Eval& ev = *r.eval;
  s += md ? fmt::format("\n## Evaluation on `{}` ({} samples)\n\n", o.eval, ev.samples)
          : fmt::format("\nevaluation on {} ({} samples, {} runs), {} vs {}:\n", o.eval, ev.samples,
                        ev.runs, o.input, o.output);
  if (md)
    s += "| output | max abs | mean abs | RMSE | cosine | top-1 agreement "
         "|\n|---|---:|---:|---:|---:|---:|\n";
  else
    s += fmt::format("{:<24} {:>11} {:>11} {:>11} {:>9} {:>9}\n", "output", "max abs", "mean abs",
                     "rmse", "cosine", "top-1");
  for (const auto& oe : ev.outputs) {
    std::string top1 = oe.classifier ? fmt::format("{:.2f}%", 100 * oe.classifier->top1()) : "-";
    if (md)
      s += fmt::format("| {} | {:.4g} | {:.4g} | {:.4g} | {:.6f} | {} |\n", oe.name,
                       oe.stats.max_abs, oe.stats.mean_abs(), oe.stats.rmse(), oe.stats.cosine(),
                       top1);
    else
      s += fmt::format("{:<24} {:>11.4g} {:>11.4g} {:>11.4g} {:>9.6f} {:>9}\n", oe.name,
                       oe.stats.max_abs, oe.stats.mean_abs(), oe.stats.rmse(), oe.stats.cosine(),
                       top1);
  }
  for (const auto& oe : ev.outputs) {
    if (!oe.classifier || !oe.classifier->labeled) continue;
    const auto& c = *oe.classifier;
    s += fmt::format(
        "{}accuracy of '{}': {:.2f}% -> {:.2f}% ({:+.2f} points, n={}); average class drop "
        "{:.2f} points\n",
        md ? "\n" : "\n", oe.name, 100 * c.ref_accuracy(), 100 * c.cand_accuracy(),
        -Pp(c.ref_correct - c.cand_correct, c.labeled), c.labeled, oe.average_class_drop_pp);
    if (md)
      s += "\n| class | images | correct before | correct after | drop (points) | flag |\n"
           "|---:|---:|---:|---:|---:|---|\n";
    else
      s += fmt::format("{:>7} {:>7} {:>8} {:>8} {:>8}\n", "class", "images", "before", "after",
                       "drop");
    for (const auto& row : oe.classes) {
      const char* flag = row.flagged ? "drop > 2x average" : "";
      if (md)
        s += fmt::format("| {} | {} | {} | {} | {:.2f} | {} |\n", row.label, row.rows, row.before,
                         row.after, row.drop_pp, flag);
      else
        s += fmt::format("{:>7} {:>7} {:>8} {:>8} {:>7.2f}  {}\n", row.label, row.rows, row.before,
                         row.after, row.drop_pp, row.flagged ? "<- " + std::string(flag) : "");
    }
  }
  return s;
}

int RunQuantize(const Options& o) {
  if (o.mode != "static" && o.mode != "dynamic")
    return ReportError(UsageError("--mode must be static or dynamic, got '{}'", o.mode));
  if (o.mode == "static" && o.calibration.empty() == o.table.empty())
    return ReportError(
        UsageError("--mode static needs exactly one of --calibration DIR or --table FILE"));
  if (o.mode == "dynamic" && (!o.calibration.empty() || !o.table.empty()))
    return ReportError(
        UsageError("--mode dynamic takes no --calibration or --table (ranges are computed at "
                   "run time)"));
  if (!o.labels.empty() && o.eval.empty())
    return ReportError(UsageError("--labels needs --eval DIR"));
  if (o.batch < 1) return ReportError(UsageError("--batch must be >= 1, got {}", o.batch));
  if (o.max_samples < 0)
    return ReportError(UsageError("--max-samples must be >= 0, got {}", o.max_samples));
  if (std::filesystem::exists(o.output) && std::filesystem::exists(o.input) &&
      std::filesystem::equivalent(o.input, o.output))
    return ReportError(
        UsageError("-o {} is the input file; write the quantized model elsewhere", o.output));
  quant::QuantizeOptions qo;
  auto act = ParseActivationType(o.activation_type);
  if (!act.ok()) return ReportError(act.status());
  qo.activation_type = act.value();
  if (o.weight_type != "s8" && o.weight_type != "int8")
    return ReportError(UsageError("--weight-type must be s8, got '{}'", o.weight_type));
  qo.per_channel = o.per_channel;
  qo.symmetric = o.symmetric;
  qo.reduce_range = o.reduce_range;
  for (const auto& e : SplitCommaList(o.exclude)) qo.exclude.insert(e);
  auto method = quant::ParseMethod(o.method);
  if (!method.ok()) return ReportError(method.status());

  auto loaded = ir::LoadModel(o.input);
  if (!loaded.ok()) return ReportError(loaded.status());
  ir::Model& model = *loaded.value();
  Status st = quant::PrepareForQuantization(model);
  if (!st.ok()) return ReportError(st);
  st = CheckExcludes(model.graph, qo.exclude);
  if (!st.ok()) return ReportError(st);

  QuantizeRun res;
  Result<quant::QuantizeSummary> sum = quant::QuantizeSummary{};
  if (o.mode == "static") {
    quant::Table table;
    if (!o.table.empty()) {
      auto t = quant::ReadTable(o.table);
      if (!t.ok()) return ReportError(t.status());
      table = std::move(t).value();
      res.ranges = fmt::format("table {} ({})", o.table, table.method.ToString());
    } else {
      auto cal = ir::LoadModel(o.input);
      if (!cal.ok()) return ReportError(cal.status());
      st = quant::PrepareForQuantization(*cal.value());
      if (!st.ok()) return ReportError(st);
      std::shared_ptr<const ir::Model> cm(std::move(cal).value());
      int64_t samples = 0;
      auto sets =
          LoadSamples(o.calibration, "--calibration", cm->graph, o.batch, o.max_samples, &samples);
      if (!sets.ok()) return ReportError(sets.status());
      quant::CalibrateOptions co;
      co.method = method.value();
      co.activation_type = qo.activation_type;
      co.symmetric = qo.symmetric;
      co.threads = o.threads;
      co.progress = [](size_t i, size_t n) { Progress("calibrate", i, n); };
      auto t = quant::RunCalibration(cm, std::move(sets).value(), co);
      if (!t.ok()) return ReportError(t.status().With("calibration"));
      table = std::move(t).value();
      res.ranges = fmt::format("calibrated on {} ({} samples, {})", o.calibration, samples,
                               table.method.ToString());
    }
    sum = quant::QuantizeStatic(model, table, qo);
  } else {
    sum = quant::QuantizeDynamic(model, qo);
  }
  if (!sum.ok()) return ReportError(sum.status());
  res.summary = std::move(sum).value();
  if (res.summary.quantized_nodes.empty())
    return ReportError(UnsupportedError(
        "nothing to quantize in '{}' (no {} node outside --exclude); nothing written", o.input,
        o.mode == "static" ? "Conv/MatMul/Gemm/Add/Mul/pooling/Concat/Resize"
                           : "MatMul/Gemm/Conv with constant weights"));
  st = ir::SaveModel(model, o.output);
  if (!st.ok()) return ReportError(st);
  std::error_code ec;
  res.size_before = std::filesystem::file_size(o.input, ec);
  res.size_after = std::filesystem::file_size(o.output, ec);
  if (!o.eval.empty()) {
    auto ev = Evaluate(o);
    if (!ev.ok()) return ReportError(ev.status());
    res.eval = std::move(ev).value();
  }
  if (!o.report.empty()) {
    st = WriteFileAtomic(o.report, Render(o, res, true));
    if (!st.ok()) return ReportError(st.With("--report"));
  }
  if (o.json) {
    std::printf("%s\n", ToJson(o, res).dump(2).c_str());
    return 0;
  }
  fmt::print("{}", Render(o, res, false));
  fmt::print("wrote {}\n", o.output);
  return 0;
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
  sub.add_option("--batch", o->batch, "with --calibration: samples per run (default 16)");
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
  sub.add_option("--report", o->report, "Also write the report as Markdown to FILE.md");
  sub.add_option("--threads", o->threads, "Engine threads (default: one per core)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunQuantize(*o); }; });
}

}  // namespace ferry::cli
