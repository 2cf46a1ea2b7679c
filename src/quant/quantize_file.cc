#include "quant/quantize_file.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "ir/onnx_io.h"
#include "quant/data.h"
#include "runtime/session.h"

namespace ferry::quant {

namespace {

Status CheckExcludes(const ir::Graph& g, const std::set<std::string>& exclude) {
  for (const auto& e : exclude) {
    bool found = false;
    for (const auto& n : g.nodes) found = found || n.name == e || n.op_type == e;
    if (!found) return UsageError("--exclude '{}' names no node and no op type of the model", e);
  }
  return Status::Ok();
}

Status CheckUsage(const QuantizeFileOptions& o) {
  const bool is_static = o.mode == QuantMode::kStatic;
  if (is_static && o.calibration.empty() == o.table.empty())
    return UsageError("--mode static needs exactly one of --calibration DIR or --table FILE");
  if (!is_static && (!o.calibration.empty() || !o.table.empty()))
    return UsageError(
        "--mode dynamic takes no --calibration or --table (ranges are computed at run time)");
  if (!o.labels.empty() && o.eval.empty()) return UsageError("--labels needs --eval DIR");
  if (o.accuracy_budget && o.max_error)
    return UsageError("give --accuracy-budget or --max-error, not both");
  if ((o.accuracy_budget || o.max_error) && o.eval.empty())
    return UsageError("{} needs --eval DIR",
                      o.accuracy_budget ? "--accuracy-budget" : "--max-error");
  if (o.accuracy_budget && o.labels.empty())
    return UsageError(
        "--accuracy-budget needs --labels FILE (without labels use --max-error on the outputs)");
  for (const auto& [flag, v] :
       {std::pair{"--accuracy-budget", o.accuracy_budget}, std::pair{"--max-error", o.max_error}})
    if (v && !(*v >= 0)) return UsageError("{} must be >= 0, got {}", flag, *v);
  if (o.latency_runs < 0) return UsageError("--latency-runs must be >= 0, got {}", o.latency_runs);
  if (o.calibrate.batch < 0)
    return UsageError("--batch must be 'auto' or a number >= 1, got '{}'", o.calibrate.batch);
  if (o.calibrate.max_samples < 0)
    return UsageError("--max-samples must be >= 0, got {}", o.calibrate.max_samples);
  std::error_code ec;
  if (std::filesystem::exists(o.output, ec) && std::filesystem::exists(o.input, ec) &&
      std::filesystem::equivalent(o.input, o.output, ec))
    return UsageError("-o {} is the input file; write the quantized model elsewhere", o.output);
  if (o.check.count < 0) return UsageError("--check must be >= 0, got {}", o.check.count);
  if (!o.check.shapes.empty() && o.check.count == 0)
    return UsageError("--shape sets the dims of the check's seeded inputs: give --check N");
  if (!o.check.data.empty() && o.check.count > 0)
    return UsageError("give --check N (seeded inputs) or --check-data DIR, not both");
  if (o.quantize.weight_type != DType::kInt8)
    return UsageError("--weight-type must be s8, got '{}'", DTypeName(o.quantize.weight_type));
  return Status::Ok();
}

// A copy of `prepared` (serialized) quantized with `qo` (static: ranges from `table`).
Result<std::pair<std::shared_ptr<ir::Model>, QuantizeSummary>> QuantizeCopy(
    const std::string& prepared, QuantMode mode, const Table& table, const QuantizeOptions& qo) {
  FERRY_ASSIGN_OR_RETURN(auto parsed, ir::ParseModel(prepared, "", "prepared model"));
  std::shared_ptr<ir::Model> m(std::move(parsed));
  Result<QuantizeSummary> sum =
      mode == QuantMode::kStatic ? QuantizeStatic(*m, table, qo) : QuantizeDynamic(*m, qo);
  if (!sum.ok()) return sum.status();
  return std::make_pair(std::move(m), std::move(sum).value());
}

double Pp(int64_t num, int64_t den) {
  return den ? 100.0 * static_cast<double>(num) / static_cast<double>(den) : 0;
}

// The evaluation set and the float model's outputs on it, kept for the selection's runs.
struct SelectData {
  std::vector<verify::DataSet> sets;
  std::vector<std::vector<Value>> ref;
  std::vector<int64_t> labels;
  bool accuracy = false;
  size_t classifier = 0;  // output index (accuracy)
  std::string classifier_name;
  int threads = 0;
};

Result<SelectData> PrepareSelectData(const QuantizeFileOptions& o,
                                     std::shared_ptr<const ir::Model> prepared) {
  SelectData d;
  d.threads = o.threads;
  int64_t samples = 0;
  FERRY_ASSIGN_OR_RETURN(d.sets, LoadSamples(o.eval, "--eval", prepared->graph, 64, 0, &samples));
  runtime::SessionOptions so;
  so.threads = o.threads;
  auto s = runtime::Session::Create(prepared, so);
  if (!s.ok()) return s.status().With("model");
  for (size_t i = 0; i < d.sets.size(); ++i) {
    auto r = (*s)->Run(d.sets[i].inputs);
    if (!r.ok()) return r.status().With(fmt::format("model '{}', {}", o.input, d.sets[i].name));
    d.ref.push_back(std::move(r).value());
  }
  if (o.accuracy_budget) {
    d.accuracy = true;
    FERRY_ASSIGN_OR_RETURN(d.labels, LoadLabels(o.labels));
    bool found = false;
    for (size_t k = 0; !found && k < d.ref.front().size(); ++k)
      if (d.ref.front()[k].is_tensor() && verify::IsClassifierOutput(d.ref.front()[k].tensor())) {
        d.classifier = k;
        d.classifier_name = (*s)->outputs()[k].name;
        found = true;
      }
    if (!found)
      return InvalidError(
          "--accuracy-budget needs a classifier output ([N, C] float, C > 1); use --max-error");
    int64_t rows = 0;
    for (const auto& r : d.ref) rows += r[d.classifier].tensor().dim(0);
    if (rows != static_cast<int64_t>(d.labels.size()))
      return InvalidError("--labels '{}' holds {} labels, output '{}' has {} rows", o.labels,
                          d.labels.size(), d.classifier_name, rows);
  }
  return d;
}

// The selection metric of `model` on the evaluation set: accuracy drop in points against the
// float model (labels), or the largest |quantized - float| over every output element (+inf
// when the quantized model makes NaN/Inf the float one does not).
Result<double> MeasureMetric(std::shared_ptr<const ir::Model> model, const SelectData& d) {
  runtime::SessionOptions so;
  so.threads = d.threads;
  FERRY_ASSIGN_OR_RETURN(auto s, runtime::Session::Create(std::move(model), so));
  verify::ClassifierStats cs(1);
  double max_abs = 0;
  int64_t offset = 0;
  for (size_t i = 0; i < d.sets.size(); ++i) {
    auto r = s->Run(d.sets[i].inputs);
    if (!r.ok()) return r.status().With(fmt::format("quantized candidate, {}", d.sets[i].name));
    for (size_t k = 0; k < d.ref[i].size(); ++k) {
      const Value& rv = d.ref[i][k];
      const Value& cv = (*r)[k];
      if (!rv.is_tensor() || !cv.is_tensor() ||
          !verify::Incompatibility(rv.tensor(), cv.tensor()).empty())
        return InvalidError("output {} of a quantized candidate cannot be compared", k);
      if (d.accuracy) {
        if (k != d.classifier) continue;
        cs.Add(rv.tensor(), cv.tensor(), d.labels.data() + offset);
        offset += rv.tensor().dim(0);
      } else {
        verify::Stats st;
        st.Add(rv.tensor(), cv.tensor(), verify::Tolerance{0, 0});
        if (st.nan_cand + st.inf_cand > st.nan_ref + st.inf_ref)
          return std::numeric_limits<double>::infinity();
        max_abs = std::max(max_abs, st.max_abs);
      }
    }
  }
  if (d.accuracy) return Pp(cs.ref_correct - cs.cand_correct, cs.labeled);
  return max_abs;
}

// Gives every unnamed node a unique name (OpType_index), so that selection can keep it float
// through --exclude's by-name matching.
void NameNodes(ir::Graph& g) {
  std::set<std::string> names;
  for (const auto& n : g.nodes) names.insert(n.name);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!g.nodes[i].name.empty()) continue;
    std::string base = fmt::format("{}_{}", g.nodes[i].op_type, i), name = base;
    for (int k = 1; names.count(name); ++k) name = fmt::format("{}_{}", base, k);
    g.nodes[i].name = name;
    names.insert(name);
  }
}

Result<SelectionInfo> RunSelection(const QuantizeFileOptions& o,
                                   std::shared_ptr<const ir::Model> shared, const Table& table,
                                   const QuantizeOptions& qo) {
  const std::string prepared = ir::SerializeModel(*shared);
  FERRY_ASSIGN_OR_RETURN(auto full, QuantizeCopy(prepared, o.mode, table, qo));
  const std::vector<std::string> layers = full.second.quantized_names;
  if (layers.empty())
    return UnsupportedError("nothing to quantize in '{}': no layer to select", o.input);
  FERRY_ASSIGN_OR_RETURN(SelectData d, PrepareSelectData(o, shared));
  SelectionInfo info;
  info.metric = d.accuracy ? "accuracy_drop_pp" : "max_abs_error";
  info.output = d.classifier_name;
  MeasureFn measure = [&](const std::set<std::string>& floated) -> Result<double> {
    QuantizeOptions q = qo;
    q.exclude.insert(floated.begin(), floated.end());
    FERRY_ASSIGN_OR_RETURN(auto m, QuantizeCopy(prepared, o.mode, table, q));
    return MeasureMetric(std::move(m.first), d);
  };
  const double budget = d.accuracy ? *o.accuracy_budget : *o.max_error;
  FERRY_ASSIGN_OR_RETURN(info.sel, SelectLayers(layers, budget, measure, [&o](size_t i, size_t n) {
                           if (o.progress) o.progress("select (solo runs)", i, n);
                         }));
  return info;
}

// The static ranges: read from --table, or calibrated on --calibration (the model prepared
// like the one quantized).
Result<Table> StaticRanges(const QuantizeFileOptions& o, std::string* ranges) {
  if (!o.table.empty()) {
    FERRY_ASSIGN_OR_RETURN(Table t, ReadTable(o.table));
    *ranges = fmt::format("table {} ({})", o.table, t.method.ToString());
    return t;
  }
  FERRY_ASSIGN_OR_RETURN(auto cal, ir::LoadModel(o.input));
  FERRY_RETURN_IF_ERROR(PrepareForQuantization(*cal));
  std::shared_ptr<const ir::Model> cm(std::move(cal));
  FERRY_ASSIGN_OR_RETURN(auto sets, LoadSets(o.calibration, "--calibration", cm->graph));
  CalibrateOptions co = o.calibrate;
  co.activation_type = o.quantize.activation_type;
  co.symmetric = o.quantize.symmetric;
  co.threads = o.threads;
  co.progress = nullptr;
  if (o.progress) co.progress = [&o](size_t i, size_t n) { o.progress("calibrate", i, n); };
  auto t = RunCalibration(cm, std::move(sets), co);
  if (!t.ok()) return t.status().With("calibration");
  *ranges = fmt::format("calibrated on {} ({} samples, {})", o.calibration, t->samples,
                        t->method.ToString());
  return std::move(t).value();
}

// The evaluation of the written file: outputs, per-layer table, latency.
Status Evaluate(const QuantizeFileOptions& o, std::shared_ptr<const ir::Model> prepared,
                const Table* table, QuantizeFileResult* res) {
  EvalOptions eo;
  eo.float_model = o.input;
  eo.quantized_model = o.output;
  eo.data = o.eval;
  eo.labels = o.labels;
  eo.threads = o.threads;
  eo.progress = o.progress;
  FERRY_ASSIGN_OR_RETURN(res->eval, EvaluateQuantized(eo));
  FERRY_ASSIGN_OR_RETURN(auto written, ir::LoadModel(o.output));
  AlignFoldedRelus(written->graph, prepared->graph);
  FERRY_ASSIGN_OR_RETURN(
      res->layers, CompareLayers(prepared, std::shared_ptr<const ir::Model>(std::move(written)),
                                 table, o.eval, o.threads));
  if (o.latency_runs > 0) {
    FERRY_ASSIGN_OR_RETURN(res->latency, MeasureLatency(eo, o.latency_runs));
  }
  return Status::Ok();
}

}  // namespace

Result<QuantMode> ParseQuantMode(const std::string& text) {
  if (text == "static") return QuantMode::kStatic;
  if (text == "dynamic") return QuantMode::kDynamic;
  return UsageError("--mode must be static or dynamic, got '{}'", text);
}

const char* QuantModeName(QuantMode mode) {
  return mode == QuantMode::kStatic ? "static" : "dynamic";
}

Status QuantizeFileResult::verdict() const {
  if (written || !selection) return Status::Ok();
  return Status(
      StatusCode::kCheckFailed,
      fmt::format("the budget {} cannot be met with any layer quantized (best: {} with {} of {} "
                  "layers float); nothing written",
                  MetricText(selection->metric, selection->sel.budget),
                  MetricText(selection->metric, selection->sel.metric),
                  selection->sel.kept_float.size(), selection->sel.ranking.size()));
}

Result<QuantizeFileResult> QuantizeFile(const QuantizeFileOptions& o) {
  FERRY_RETURN_IF_ERROR(CheckUsage(o));
  QuantizeFileResult res;
  res.options = o;
  res.options.progress = nullptr;
  QuantizeOptions qo = o.quantize;
  FERRY_ASSIGN_OR_RETURN(auto loaded, ir::LoadModel(o.input));
  ir::Model& model = *loaded;
  FERRY_RETURN_IF_ERROR(PrepareForQuantization(model));
  FERRY_RETURN_IF_ERROR(CheckExcludes(model.graph, qo.exclude));
  Table table;
  if (o.mode == QuantMode::kStatic) {
    FERRY_ASSIGN_OR_RETURN(table, StaticRanges(o, &res.ranges));
  }
  const bool selecting = o.accuracy_budget || o.max_error;
  if (selecting) NameNodes(model.graph);
  std::shared_ptr<const ir::Model> prepared;
  if (!o.eval.empty()) {
    FERRY_ASSIGN_OR_RETURN(prepared,
                           ir::ParseModel(ir::SerializeModel(model), "", "prepared model"));
  }
  if (selecting) {
    FERRY_ASSIGN_OR_RETURN(res.selection, RunSelection(o, prepared, table, qo));
    for (const auto& l : res.selection->sel.kept_float) qo.exclude.insert(l);
    if (!res.selection->sel.met) {
      res.written = false;
      return res;
    }
  }
  FERRY_ASSIGN_OR_RETURN(res.summary, o.mode == QuantMode::kStatic
                                          ? QuantizeStatic(model, table, qo)
                                          : QuantizeDynamic(model, qo));
  if (res.summary.quantized_nodes.empty())
    return UnsupportedError(
        "nothing to quantize in '{}' (no {} node outside --exclude); nothing written", o.input,
        o.mode == QuantMode::kStatic ? "Conv/MatMul/Gemm/Add/Mul/pooling/Concat/Resize"
                                     : "MatMul/Gemm/Conv with constant weights");
  if (o.check.count > 0 || !o.check.data.empty()) {
    FERRY_ASSIGN_OR_RETURN(auto original, ir::LoadModel(o.input));
    auto check = passes::CheckEquivalent(*original, model, o.check);
    if (!check.ok()) return check.status().With("checking the quantized model");
    for (const auto& s : check->outputs)
      if (s.candidate_nonfinite > 0)
        return Status(StatusCode::kCheckFailed,
                      fmt::format("the quantized model produces {} NaN/Inf value(s) in output '{}' "
                                  "where the original is finite; nothing written",
                                  s.candidate_nonfinite, s.name));
    res.check = std::move(check).value();
  }
  FERRY_RETURN_IF_ERROR(ir::SaveModel(model, o.output));
  std::error_code ec;
  res.size_before = std::filesystem::file_size(o.input, ec);
  res.size_after = std::filesystem::file_size(o.output, ec);
  if (!o.eval.empty())
    FERRY_RETURN_IF_ERROR(
        Evaluate(o, prepared, o.mode == QuantMode::kStatic ? &table : nullptr, &res));
  return res;
}

}  // namespace ferry::quant
