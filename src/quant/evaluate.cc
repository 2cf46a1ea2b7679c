#include "quant/evaluate.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "ir/onnx_io.h"
#include "quant/data.h"
#include "runtime/session.h"

namespace ferry::quant {

namespace {

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

// Fills classes and average_class_drop_pp of a labeled classifier output.
void PerClass(OutputEval& oe) {
  double sum = 0;
  for (const auto& [label, pc] : oe.classifier->per_class) {
    ClassRow row{label, pc.rows, pc.ref_correct, pc.cand_correct, 0, false};
    row.drop_pp = pc.rows ? 100.0 * static_cast<double>(pc.ref_correct - pc.cand_correct) /
                                static_cast<double>(pc.rows)
                          : 0;
    sum += row.drop_pp;
    oe.classes.push_back(row);
  }
  oe.average_class_drop_pp = oe.classes.empty() ? 0 : sum / static_cast<double>(oe.classes.size());
  for (auto& row : oe.classes)
    row.flagged = row.drop_pp > 0 && row.drop_pp > 2 * std::max(oe.average_class_drop_pp, 0.0);
}

// Tolerance of a tensor in the per-layer table: 4 quantization steps of its calibrated range
// ((hi - lo) / 255, the range widened to 0) plus 2% relative; 1e-2 / 1e-2 without a range.
verify::Tolerance LayerTolerance(const Table* table, const std::string& tensor) {
  const TensorRange* r = table ? table->Find(tensor) : nullptr;
  if (!r) return {1e-2, 1e-2};
  double step = (std::max(r->hi, 0.0) - std::min(r->lo, 0.0)) / 255.0;
  return {4 * step, 0.02};
}

double P50(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

}  // namespace

Result<Evaluation> EvaluateQuantized(const EvalOptions& o) {
  FERRY_ASSIGN_OR_RETURN(auto ref, Open(o.float_model, "model", o.threads));
  FERRY_ASSIGN_OR_RETURN(auto cand, Open(o.quantized_model, "quantized model", o.threads));
  Evaluation ev;
  ev.data = o.data;
  FERRY_ASSIGN_OR_RETURN(auto sets,
                         LoadSamples(o.data, "--eval", ref->model().graph, 64, 0, &ev.samples));
  std::optional<std::vector<int64_t>> labels;
  if (!o.labels.empty()) {
    FERRY_ASSIGN_OR_RETURN(labels, LoadLabels(o.labels));
    ev.labeled = true;
  }
  ev.runs = static_cast<int64_t>(sets.size());
  const auto& outs = ref->outputs();
  for (const auto& vi : outs) ev.outputs.push_back({vi.name, {}, {}, {}, 0});
  std::vector<int64_t> offset(outs.size(), 0);
  verify::Tolerance tol{1e-2, 1e-2};
  for (size_t i = 0; i < sets.size(); ++i) {
    if (o.progress) o.progress("evaluate", i, sets.size());
    auto r = ref->Run(sets[i].inputs);
    if (!r.ok()) return r.status().With(fmt::format("model '{}', {}", o.float_model, sets[i].name));
    auto c = cand->Run(sets[i].inputs);
    if (!c.ok())
      return c.status().With(
          fmt::format("quantized model '{}', {}", o.quantized_model, sets[i].name));
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
    PerClass(oe);
  }
  if (labels && !used)
    return InvalidError("--labels '{}' given, but no output is a classifier ([N, C] float, C > 1)",
                        o.labels);
  return ev;
}

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

Result<LayerTable> CompareLayers(std::shared_ptr<const ir::Model> prepared,
                                 std::shared_ptr<const ir::Model> quantized, const Table* table,
                                 const std::string& data, int threads) {
  LayerTable lt;
  FERRY_ASSIGN_OR_RETURN(auto sets,
                         LoadSamples(data, "--eval", prepared->graph, 64, 64, &lt.samples));
  FERRY_ASSIGN_OR_RETURN(auto capture, verify::LayerCapture::Create([table](const std::string& t) {
                           return LayerTolerance(table, t);
                         }));
  runtime::SessionOptions so;
  so.threads = threads;
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

Result<Latency> MeasureLatency(const EvalOptions& o, int runs) {
  Latency lat;
  lat.runs = runs;
  double* slot[2] = {&lat.before_p50_ms, &lat.after_p50_ms};
  const std::string* paths[2] = {&o.float_model, &o.quantized_model};
  for (int m = 0; m < 2; ++m) {
    FERRY_ASSIGN_OR_RETURN(auto s, Open(*paths[m], m ? "quantized model" : "model", o.threads));
    int64_t n = 0;
    FERRY_ASSIGN_OR_RETURN(auto sets, LoadSamples(o.data, "--eval", s->model().graph, 1, 1, &n));
    if (sets.empty()) return InvalidError("--eval '{}': no sample for the latency runs", o.data);
    lat.input = fmt::format("{} (batch 1)", sets[0].name);
    std::vector<double> times;
    for (int i = 0; i < 3 + runs; ++i) {
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

}  // namespace ferry::quant
