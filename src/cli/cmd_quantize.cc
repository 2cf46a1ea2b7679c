// ferry quantize IN -o OUT --mode static (--calibration DIR | --table TABLE.json) | --mode dynamic
//                [--per-channel] [--activation-type u8|s8] [--weight-type s8] [--symmetric]
//                [--exclude NODE|OPTYPE]... [--method M] [--max-samples N] [--batch B]
//                [--eval DIR [--labels FILE]] [--json] [--report FILE.md] [--threads N]
//                [--accuracy-budget PP | --max-error X] [--latency-runs N]
// Runs ferry optimize's passes (BatchNormalization folded), rewrites the graph (quant/qdq.h),
// writes OUT atomically, and with --eval compares OUT against IN on the evaluation set
// (verify's statistics; accuracy overall and per class with --labels; the per-layer table;
// latency p50). With a budget, first keeps the most sensitive layers float (quant/select.h).
// Exit 0, 1 when the budget cannot be met (nothing written), or 2/3/4 for usage, invalid
// input, unsupported.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/quant_common.h"
#include "core/npy.h"
#include "ir/onnx_io.h"
#include "quant/calibrate.h"
#include "quant/qdq.h"
#include "quant/select.h"
#include "runtime/session.h"
#include "verify/compare.h"
#include "verify/layers.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string input, output, mode, calibration, table, method = "minmax";
  std::string activation_type = "u8", weight_type = "s8", eval, labels, report;
  std::vector<std::string> exclude;
  int64_t max_samples = 0;
  std::string batch = "auto";
  int threads = 0;
  bool per_channel = false, symmetric = false, reduce_range = false, json = false;
  std::optional<double> accuracy_budget, max_error;  // layer selection (one of them)
  int latency_runs = 5;                              // with --eval; 0: no latency
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

constexpr const char* kLatencyNote =
    "engine defaults (cpu provider); static QDQ Conv, Add and MaxPool and the dynamic "
    "MatMulInteger chain run as int8 kernels, other quantized ops as DequantizeLinear -> float op "
    "-> QuantizeLinear (cpu or reference kernels)";

struct Latency {
  std::string input;  // what was fed
  int runs = 0;
  double before_p50_ms = 0, after_p50_ms = 0;
};

struct LayerTable {
  int64_t samples = 0;
  std::vector<verify::LayerRow> rows;
  int64_t first_failed = -1;
  int64_t candidate_only = 0;
};

struct SelectionInfo {
  std::string metric;  // "accuracy_drop_pp" or "max_abs_error"
  std::string output;  // the classifier output (accuracy) or "" (every output)
  quant::Selection sel;
};

struct QuantizeRun {
  quant::QuantizeSummary summary;
  uintmax_t size_before = 0, size_after = 0;
  std::string ranges;  // "table X" or "calibrated on DIR (N samples, method)"
  std::optional<Eval> eval;
  std::optional<SelectionInfo> selection;
  std::optional<LayerTable> layers;
  std::optional<Latency> latency;
  bool written = true;
};

Result<std::vector<int64_t>> LoadLabels(const std::string& path) {
  auto t = ReadNpy(path);
  if (!t.ok()) return t.status().With("--labels");
  if (!IsInteger(t->dtype()))
    return InvalidError("--labels '{}': expected integer class ids, got dtype {}", path,
                        DTypeName(t->dtype()));
  return t->ToInt64Vector();
}

// A copy of `prepared` (serialized) quantized with `qo` (static: ranges from `table`).
Result<std::pair<std::shared_ptr<ir::Model>, quant::QuantizeSummary>> QuantizeCopy(
    const std::string& prepared, const std::string& mode, const quant::Table& table,
    const quant::QuantizeOptions& qo) {
  auto parsed = ir::ParseModel(prepared, "", "prepared model");
  if (!parsed.ok()) return parsed.status();
  std::shared_ptr<ir::Model> m(std::move(parsed).value());
  Result<quant::QuantizeSummary> sum =
      mode == "static" ? quant::QuantizeStatic(*m, table, qo) : quant::QuantizeDynamic(*m, qo);
  if (!sum.ok()) return sum.status();
  return std::make_pair(std::move(m), std::move(sum).value());
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

Result<SelectData> PrepareSelectData(const Options& o, std::shared_ptr<const ir::Model> prepared) {
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

Result<SelectionInfo> RunSelection(const Options& o, std::shared_ptr<const ir::Model> shared,
                                   const quant::Table& table, const quant::QuantizeOptions& qo) {
  const std::string prepared = ir::SerializeModel(*shared);
  FERRY_ASSIGN_OR_RETURN(auto full, QuantizeCopy(prepared, o.mode, table, qo));
  const std::vector<std::string> layers = full.second.quantized_names;
  if (layers.empty())
    return UnsupportedError("nothing to quantize in '{}': no layer to select", o.input);
  FERRY_ASSIGN_OR_RETURN(SelectData d, PrepareSelectData(o, shared));
  SelectionInfo info;
  info.metric = d.accuracy ? "accuracy_drop_pp" : "max_abs_error";
  info.output = d.classifier_name;
  quant::MeasureFn measure = [&](const std::set<std::string>& floated) -> Result<double> {
    quant::QuantizeOptions q = qo;
    q.exclude.insert(floated.begin(), floated.end());
    FERRY_ASSIGN_OR_RETURN(auto m, QuantizeCopy(prepared, o.mode, table, q));
    return MeasureMetric(std::move(m.first), d);
  };
  const double budget = d.accuracy ? *o.accuracy_budget : *o.max_error;
  FERRY_ASSIGN_OR_RETURN(info.sel,
                         quant::SelectLayers(layers, budget, measure, [](size_t i, size_t n) {
                           Progress("select (solo runs)", i, n);
                         }));
  return info;
}

// Tolerance of a tensor in the per-layer table: 4 quantization steps of its calibrated range
// ((hi - lo) / 255, the range widened to 0) plus 2% relative; 1e-2 / 1e-2 without a range.
verify::Tolerance LayerTolerance(const quant::Table* table, const std::string& tensor) {
  const quant::TensorRange* r = table ? table->Find(tensor) : nullptr;
  if (!r) return {1e-2, 1e-2};
  double step = (std::max(r->hi, 0.0) - std::min(r->lo, 0.0)) / 255.0;
  return {4 * step, 0.02};
}

// The QDQ writer folds a Relu/Clip whose range starts at 0 into the QuantizeLinear after its
// producer, and the producer then writes the Relu's output name with pre-Relu values. For the
// per-layer table the comparable (post-Relu) values are the DequantizeLinear's output after that
// QuantizeLinear: in `cand` (a copy used only for the table) the producer's output is renamed
// "<name>/pre_relu" and the DequantizeLinear writes <name>. Returns the number of renames.
int AlignFoldedRelus(ir::Graph& cand, const ir::Graph& ref) {
  std::map<std::string, std::string> ref_op;
  for (const auto& n : ref.nodes)
    for (const auto& t : n.outputs) ref_op[t] = n.op_type;
  auto rename_inputs = [&](const std::string& from, const std::string& to) {
    for (auto& n : cand.nodes)
      for (auto& in : n.inputs)
        if (in == from) in = to;
  };
  int renamed = 0;
  for (size_t i = 0; i < cand.nodes.size(); ++i) {
    if (cand.nodes[i].outputs.empty()) continue;
    const std::string x = cand.nodes[i].outputs[0];
    auto it = ref_op.find(x);
    if (x.empty() || it == ref_op.end() || it->second == cand.nodes[i].op_type ||
        (it->second != "Relu" && it->second != "Clip"))
      continue;
    ir::Node* q = nullptr;
    for (auto& n : cand.nodes)
      if (n.op_type == "QuantizeLinear" && !n.inputs.empty() && n.inputs[0] == x) q = &n;
    if (!q || q->outputs.empty()) continue;
    ir::Node* dq = nullptr;
    for (auto& n : cand.nodes)
      if (n.op_type == "DequantizeLinear" && !n.inputs.empty() && n.inputs[0] == q->outputs[0])
        dq = &n;
    if (!dq || dq->outputs.empty()) continue;
    const std::string pre = x + "/pre_relu", d = dq->outputs[0];
    rename_inputs(x, pre);
    cand.nodes[i].outputs[0] = pre;
    rename_inputs(d, x);
    dq->outputs[0] = x;
    ++renamed;
  }
  return renamed;
}

// Float (prepared) vs quantized per layer on the first 64 evaluation samples.
Result<LayerTable> LayerErrors(const Options& o, std::shared_ptr<const ir::Model> prepared,
                               std::shared_ptr<const ir::Model> quantized,
                               const quant::Table* table) {
  LayerTable lt;
  FERRY_ASSIGN_OR_RETURN(auto sets,
                         LoadSamples(o.eval, "--eval", prepared->graph, 64, 64, &lt.samples));
  FERRY_ASSIGN_OR_RETURN(auto capture, verify::LayerCapture::Create([table](const std::string& t) {
                           return LayerTolerance(table, t);
                         }));
  runtime::SessionOptions so;
  so.threads = o.threads;
  {
    FERRY_ASSIGN_OR_RETURN(auto ref, runtime::Session::Create(prepared, so));
    for (size_t i = 0; i < sets.size(); ++i) {
      runtime::RunOptions ro;
      ro.observer = capture->ReferenceObserver(static_cast<int>(i));
      auto r = ref->Run(sets[i].inputs, ro);
      if (!r.ok()) return r.status().With("per-layer table, float model");
      FERRY_RETURN_IF_ERROR(capture->status());
    }
  }
  FERRY_ASSIGN_OR_RETURN(auto cand, runtime::Session::Create(quantized, so));
  for (size_t i = 0; i < sets.size(); ++i) {
    runtime::RunOptions ro;
    ro.observer = capture->CandidateObserver(static_cast<int>(i));
    auto r = cand->Run(sets[i].inputs, ro);
    if (!r.ok()) return r.status().With("per-layer table, quantized model");
    FERRY_RETURN_IF_ERROR(capture->status());
  }
  lt.rows = capture->Finish();
  lt.first_failed = verify::FirstFailedLayer(lt.rows);
  lt.candidate_only = capture->candidate_only();
  return lt;
}

double P50(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

// p50 of `runs` timed runs (after one first run and 2 warm-up runs) of IN and OUT on the first
// evaluation sample (batch 1), engine defaults (provider cpu, see kLatencyNote).
Result<Latency> MeasureLatency(const Options& o) {
  Latency lat;
  lat.runs = o.latency_runs;
  double* slot[2] = {&lat.before_p50_ms, &lat.after_p50_ms};
  const std::string* paths[2] = {&o.input, &o.output};
  for (int m = 0; m < 2; ++m) {
    FERRY_ASSIGN_OR_RETURN(auto s, Open(*paths[m], m ? "quantized model" : "model", o.threads));
    int64_t n = 0;
    FERRY_ASSIGN_OR_RETURN(auto sets, LoadSamples(o.eval, "--eval", s->model().graph, 1, 1, &n));
    if (sets.empty()) return InvalidError("--eval '{}': no sample for the latency runs", o.eval);
    lat.input = fmt::format("{} (batch 1)", sets[0].name);
    std::vector<double> times;
    for (int i = 0; i < 3 + o.latency_runs; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = s->Run(sets[0].inputs);
      if (!r.ok()) return r.status().With("latency run");
      if (i >= 3)
        times.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
    }
    *slot[m] = P50(times);
  }
  return lat;
}

const char* StateName(verify::LayerRow::State st) {
  switch (st) {
    case verify::LayerRow::State::kCompared:
      return "compared";
    case verify::LayerRow::State::kIncomparable:
      return "incomparable";
    case verify::LayerRow::State::kUnmatched:
      return "unmatched";
    case verify::LayerRow::State::kNotCompared:
      return "not compared";
  }
  return "?";
}

void AddExtras(nlohmann::ordered_json& j, const QuantizeRun& r) {
  j["written"] = r.written;
  if (r.selection) {
    const auto& s = r.selection->sel;
    nlohmann::ordered_json js;
    js["metric"] = r.selection->metric;
    if (!r.selection->output.empty()) js["output"] = r.selection->output;
    js["budget"] = s.budget;
    js["metric_all_quantized"] = s.metric_all;
    js["metric_final"] = s.metric;
    js["met"] = s.met;
    js["measurements"] = s.measurements;
    nlohmann::ordered_json rank = nlohmann::ordered_json::array();
    for (const auto& c : s.ranking) rank.push_back({{"layer", c.layer}, {"solo", c.solo}});
    js["sensitivity"] = rank;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& st : s.steps)
      steps.push_back({{"layer", st.layer}, {"solo", st.solo}, {"metric_after", st.metric}});
    js["steps"] = steps;
    js["kept_float"] = s.kept_float;
    j["selection"] = js;
  }
  if (r.layers) {
    nlohmann::ordered_json jl;
    jl["samples"] = r.layers->samples;
    jl["tolerance"] = "4 quantization steps of the tensor's calibrated range + 2% relative";
    jl["first_failed"] =
        r.layers->first_failed >= 0
            ? nlohmann::ordered_json(
                  r.layers->rows[static_cast<size_t>(r.layers->first_failed)].tensor)
            : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& row : r.layers->rows) {
      nlohmann::ordered_json jr = {{"index", row.index},
                                   {"tensor", row.tensor},
                                   {"node", row.node},
                                   {"op_type", row.op_type},
                                   {"state", StateName(row.state)}};
      if (row.state == verify::LayerRow::State::kCompared) {
        jr["max_abs"] = row.stats.max_abs;
        jr["mean_abs"] = row.stats.mean_abs();
        jr["cosine"] = row.stats.cosine();
        jr["atol"] = row.tol.atol;
        jr["out_of_tolerance"] = row.stats.out_of_tolerance;
        jr["pass"] = row.stats.pass();
      } else if (!row.note.empty()) {
        jr["note"] = row.note;
      }
      rows.push_back(jr);
    }
    jl["rows"] = rows;
    j["layers"] = jl;
  }
  if (r.latency) {
    j["latency"] = {{"input", r.latency->input},
                    {"runs", r.latency->runs},
                    {"before_p50_ms", r.latency->before_p50_ms},
                    {"after_p50_ms", r.latency->after_p50_ms},
                    {"note", kLatencyNote}};
  }
}

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
    AddExtras(j, r);
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
  AddExtras(j, r);
  return j;
}

std::string Bytes(uintmax_t b) {
  if (b >= (1u << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1 << 20));
  if (b >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(b) / 1024);
  return fmt::format("{} B", b);
}

std::string MetricText(const std::string& metric, double v) {
  if (std::isinf(v)) return "inf (NaN/Inf in outputs)";
  if (metric == "accuracy_drop_pp") return fmt::format("{:.2f} pp", v);
  return fmt::format("{:.4g}", v);
}

std::string RenderSelection(const SelectionInfo& info, bool md) {
  const quant::Selection& sel = info.sel;
  std::string what = info.metric == "accuracy_drop_pp"
                         ? fmt::format("accuracy drop of '{}' vs float (points)", info.output)
                         : std::string("max |quantized - float| over every output element");
  std::string s;
  s += md ? fmt::format(
                "\n## Layer selection\n\nmetric: {}; budget {}; every layer quantized: "
                "{}; {} measurement(s)\n\n",
                what, MetricText(info.metric, sel.budget), MetricText(info.metric, sel.metric_all),
                sel.measurements)
          : fmt::format(
                "\nlayer selection: metric {}; budget {}; every layer quantized: {} "
                "({} measurements)\n",
                what, MetricText(info.metric, sel.budget), MetricText(info.metric, sel.metric_all),
                sel.measurements);
  std::set<std::string> floated(sel.kept_float.begin(), sel.kept_float.end());
  std::map<std::string, double> after;
  for (const auto& st : sel.steps) after[st.layer] = st.metric;
  if (md)
    s += "| rank | layer | quantized alone | kept float | model after this step |\n"
         "|---:|---|---:|---|---:|\n";
  else
    s += fmt::format("{:>5} {:<28} {:>16} {:>6} {:>16}\n", "rank", "layer", "alone", "float",
                     "after step");
  for (size_t i = 0; i < sel.ranking.size(); ++i) {
    const auto& c = sel.ranking[i];
    bool f = floated.count(c.layer) > 0;
    std::string a = f ? MetricText(info.metric, after[c.layer]) : "";
    if (md)
      s += fmt::format("| {} | {} | {} | {} | {} |\n", i + 1, c.layer,
                       MetricText(info.metric, c.solo), f ? "yes" : "", a);
    else
      s += fmt::format("{:>5} {:<28} {:>16} {:>6} {:>16}\n", i + 1, c.layer,
                       MetricText(info.metric, c.solo), f ? "yes" : "", a);
  }
  std::string kept;
  for (size_t i = 0; i < sel.kept_float.size(); ++i) kept += (i ? ", " : "") + sel.kept_float[i];
  s += fmt::format("{}kept float: {}; final {}: {} ({})\n", md ? "\n" : "",
                   kept.empty() ? "none" : kept, info.metric, MetricText(info.metric, sel.metric),
                   sel.met ? "within budget" : "BUDGET NOT MET with any layer still quantized");
  return s;
}

std::string RenderLayers(const LayerTable& lt, bool md) {
  std::string s;
  int64_t compared = 0, unmatched = 0;
  for (const auto& row : lt.rows) {
    if (row.state == verify::LayerRow::State::kCompared) ++compared;
    if (row.state == verify::LayerRow::State::kUnmatched) ++unmatched;
  }
  std::string first = lt.first_failed >= 0
                          ? fmt::format("first out of tolerance: '{}'",
                                        lt.rows[static_cast<size_t>(lt.first_failed)].tensor)
                          : "every compared layer within tolerance";
  s += md ? fmt::format(
                "\n## Per-layer error (float vs quantized, {} samples)\n\n{} tensors "
                "compared, {} of the float model not in the quantized one (fused "
                "away); tolerance: 4 quantization steps of the tensor's range + 2% "
                "relative; {}\n\n| # | tensor | op | max abs | mean abs | cosine | atol | "
                "out of tol. | |\n|---:|---|---|---:|---:|---:|---:|---:|---|\n",
                lt.samples, compared, unmatched, first)
          : fmt::format(
                "\nper-layer error, float vs quantized ({} samples, {} tensors compared, "
                "{} fused away; tolerance 4 quantization steps + 2%): {}\n{:>4} {:<24} "
                "{:<18} {:>10} {:>10} {:>9} {:>9} {:>7}\n",
                lt.samples, compared, unmatched, first, "#", "tensor", "op", "max abs", "mean abs",
                "cosine", "atol", "out");
  for (size_t i = 0; i < lt.rows.size(); ++i) {
    const auto& row = lt.rows[i];
    if (row.state == verify::LayerRow::State::kUnmatched ||
        row.state == verify::LayerRow::State::kNotCompared)
      continue;
    const bool mark = static_cast<int64_t>(i) == lt.first_failed;
    if (row.state == verify::LayerRow::State::kIncomparable) {
      s += md ? fmt::format("| {} | {} | {} | | | | | | incomparable: {} |\n", row.index,
                            row.tensor, row.op_type, row.note)
              : fmt::format("{:>4} {:<24} {:<18} incomparable: {}\n", row.index, row.tensor,
                            row.op_type, row.note);
      continue;
    }
    const auto& st = row.stats;
    if (md)
      s += fmt::format("| {} | {} | {} | {:.4g} | {:.4g} | {:.6f} | {:.3g} | {} | {} |\n",
                       row.index, row.tensor, row.op_type, st.max_abs, st.mean_abs(), st.cosine(),
                       row.tol.atol, st.out_of_tolerance, mark ? "**first out of tolerance**" : "");
    else
      s +=
          fmt::format("{:>4} {:<24} {:<18} {:>10.4g} {:>10.4g} {:>9.6f} {:>9.3g} {:>7}{}\n",
                      row.index, row.tensor, row.op_type, st.max_abs, st.mean_abs(), st.cosine(),
                      row.tol.atol, st.out_of_tolerance, mark ? "  <- first out of tolerance" : "");
  }
  return s;
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
  if (r.selection) s += RenderSelection(*r.selection, md);
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
  if (r.layers) s += RenderLayers(*r.layers, md);
  if (r.latency) {
    const Latency& l = *r.latency;
    double ratio_l = l.before_p50_ms > 0 ? l.after_p50_ms / l.before_p50_ms : 0;
    if (md)
      s += fmt::format(
          "\n## Latency\n\np50 of {} runs on {}: {:.3f} ms -> {:.3f} ms ({:.2f}x). Measured on "
          "{}.\n",
          l.runs, l.input, l.before_p50_ms, l.after_p50_ms, ratio_l, kLatencyNote);
    else
      s += fmt::format("\nlatency p50 ({} runs, {}): {:.3f} ms -> {:.3f} ms ({:.2f}x)\n  ({})\n",
                       l.runs, l.input, l.before_p50_ms, l.after_p50_ms, ratio_l, kLatencyNote);
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
  if (o.accuracy_budget && o.max_error)
    return ReportError(UsageError("give --accuracy-budget or --max-error, not both"));
  if ((o.accuracy_budget || o.max_error) && o.eval.empty())
    return ReportError(
        UsageError("{} needs --eval DIR", o.accuracy_budget ? "--accuracy-budget" : "--max-error"));
  if (o.accuracy_budget && o.labels.empty())
    return ReportError(UsageError(
        "--accuracy-budget needs --labels FILE (without labels use --max-error on the outputs)"));
  for (const auto& [flag, v] :
       {std::pair{"--accuracy-budget", o.accuracy_budget}, std::pair{"--max-error", o.max_error}})
    if (v && !(*v >= 0)) return ReportError(UsageError("{} must be >= 0, got {}", flag, *v));
  if (o.latency_runs < 0)
    return ReportError(UsageError("--latency-runs must be >= 0, got {}", o.latency_runs));
  auto batch = ParseBatch(o.batch);
  if (!batch.ok()) return ReportError(batch.status());
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
  quant::Table table;
  if (o.mode == "static") {
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
      auto sets = LoadSets(o.calibration, "--calibration", cm->graph);
      if (!sets.ok()) return ReportError(sets.status());
      quant::CalibrateOptions co;
      co.method = method.value();
      co.activation_type = qo.activation_type;
      co.symmetric = qo.symmetric;
      co.threads = o.threads;
      co.batch = batch.value();
      co.max_samples = o.max_samples;
      co.progress = [](size_t i, size_t n) { Progress("calibrate", i, n); };
      auto t = quant::RunCalibration(cm, std::move(sets).value(), co);
      if (!t.ok()) return ReportError(t.status().With("calibration"));
      table = std::move(t).value();
      res.ranges = fmt::format("calibrated on {} ({} samples, {})", o.calibration, table.samples,
                               table.method.ToString());
    }
  }
  const bool selecting = o.accuracy_budget || o.max_error;
  if (selecting) NameNodes(model.graph);
  std::shared_ptr<const ir::Model> prepared;
  if (!o.eval.empty()) {
    auto copy = ir::ParseModel(ir::SerializeModel(model), "", "prepared model");
    if (!copy.ok()) return ReportError(copy.status());
    prepared = std::move(copy).value();
  }
  if (selecting) {
    auto sel = RunSelection(o, prepared, table, qo);
    if (!sel.ok()) return ReportError(sel.status());
    res.selection = std::move(sel).value();
    for (const auto& l : res.selection->sel.kept_float) qo.exclude.insert(l);
    if (!res.selection->sel.met) {
      res.written = false;
      if (o.json)
        std::printf("%s\n", ToJson(o, res).dump(2).c_str());
      else
        fmt::print("{}", RenderSelection(*res.selection, false));
      return ReportError(Status(
          StatusCode::kCheckFailed,
          fmt::format(
              "the budget {} cannot be met with any layer quantized (best: {} with {} of {} layers "
              "float); nothing written",
              MetricText(res.selection->metric, res.selection->sel.budget),
              MetricText(res.selection->metric, res.selection->sel.metric),
              res.selection->sel.kept_float.size(), res.selection->sel.ranking.size())));
    }
  }
  sum = o.mode == "static" ? quant::QuantizeStatic(model, table, qo)
                           : quant::QuantizeDynamic(model, qo);
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
    auto written = ir::LoadModel(o.output);
    if (!written.ok()) return ReportError(written.status());
    AlignFoldedRelus((*written)->graph, prepared->graph);
    auto lt = LayerErrors(o, prepared, std::shared_ptr<const ir::Model>(std::move(written).value()),
                          o.mode == "static" ? &table : nullptr);
    if (!lt.ok()) return ReportError(lt.status());
    res.layers = std::move(lt).value();
    if (o.latency_runs > 0) {
      auto lat = MeasureLatency(o);
      if (!lat.ok()) return ReportError(lat.status());
      res.latency = std::move(lat).value();
    }
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
  sub.add_option("--report", o->report, "Also write the report as Markdown to FILE.md");
  sub.add_option("--threads", o->threads, "Engine threads (default: one per core)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunQuantize(*o); }; });
}

}  // namespace ferry::cli
