// The renderings of QuantizeFileResult (quantize_file.h): the human text, the Markdown report
// (`ferry quantize --report`) and one JSON document.
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "quant/quantize_file.h"

namespace ferry::quant {

namespace {

double Pp(int64_t num, int64_t den) {
  return den ? 100.0 * static_cast<double>(num) / static_cast<double>(den) : 0;
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

// The --check result: its inputs and, per output, the error of the quantized model.
nlohmann::ordered_json CheckJson(const passes::CheckResult& c) {
  nlohmann::ordered_json j;
  j["inputs"] = c.sets;
  j["data"] = c.data.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.data);
  nlohmann::ordered_json shapes = nlohmann::ordered_json::object();
  for (const auto& [name, dims] : c.seeded_shapes) shapes[name] = dims;
  j["shapes"] = shapes;
  j["notes"] = c.notes;
  nlohmann::ordered_json outs = nlohmann::ordered_json::array();
  for (const auto& o : c.outputs) {
    nlohmann::ordered_json e = {{"name", o.name},
                                {"max_abs", o.max_abs},
                                {"cosine", o.cosine},
                                {"nonfinite", o.candidate_nonfinite}};
    if (o.top1_total)
      e["top1_agreement"] = static_cast<double>(o.top1_agree) / static_cast<double>(o.top1_total);
    outs.push_back(e);
  }
  j["outputs"] = outs;
  return j;
}

std::string CheckText(const passes::CheckResult& c, bool md) {
  std::string s =
      fmt::format("{}check on {}: every output finite where the input model's is\n", md ? "- " : "",
                  c.data.empty() ? fmt::format("{} seeded input set(s)", c.sets)
                                 : fmt::format("{} input set(s) from {}", c.sets, c.data));
  for (const auto& n : c.notes) s += fmt::format("{}  seeded dims: {}\n", md ? "  -" : "", n);
  for (const auto& o : c.outputs)
    s += fmt::format(
        "{}  {}: max abs {:.3g}, cosine {:.6f}{}\n", md ? "  -" : "", o.name, o.max_abs, o.cosine,
        o.top1_total
            ? fmt::format(", top-1 agreement {:.1f}%", 100.0 * static_cast<double>(o.top1_agree) /
                                                           static_cast<double>(o.top1_total))
            : "");
  return s;
}

void AddExtras(nlohmann::ordered_json& j, const QuantizeFileResult& r) {
  j["written"] = r.written;
  j["check"] = r.check ? CheckJson(*r.check) : nlohmann::ordered_json(nullptr);
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

nlohmann::ordered_json ToJson(const QuantizeFileResult& r) {
  nlohmann::ordered_json j;
  const QuantizeFileOptions& o = r.options;
  j["input"] = o.input;
  j["output"] = o.output;
  j["mode"] = QuantModeName(o.mode);
  j["per_channel"] = o.quantize.per_channel;
  j["activation_type"] = Int8TypeName(o.quantize.activation_type);
  j["weight_type"] = Int8TypeName(o.quantize.weight_type);
  j["symmetric"] = o.quantize.symmetric;
  j["reduce_range"] = o.quantize.reduce_range;
  if (o.mode == QuantMode::kStatic) j["ranges"] = r.ranges;
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
  e["data"] = r.eval->data;
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

std::string RenderSelection(const SelectionInfo& info, bool md) {
  const Selection& sel = info.sel;
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
std::string Render(const QuantizeFileResult& r, bool md) {
  const QuantizeFileOptions& o = r.options;
  const std::string mode = QuantModeName(o.mode);
  const char* act = Int8TypeName(o.quantize.activation_type);
  const char* wt = Int8TypeName(o.quantize.weight_type);
  std::string s;
  const auto& sm = r.summary;
  double ratio = r.size_before ? static_cast<double>(r.size_after) / r.size_before : 0;
  if (md) {
    s += fmt::format("# ferry quantize report\n\n- input: `{}`\n- output: `{}`\n", o.input,
                     o.output);
    s += fmt::format("- mode: {}{}, activations {}, weights {}{}\n", mode,
                     o.quantize.per_channel ? " per-channel" : "", act, wt,
                     o.quantize.symmetric ? ", symmetric" : "");
    if (o.mode == QuantMode::kStatic) s += fmt::format("- ranges: {}\n", r.ranges);
    s += fmt::format("- file size: {} -> {} ({:.3f}x)\n", Bytes(r.size_before), Bytes(r.size_after),
                     ratio);
    s +=
        fmt::format("- quantized: {} node(s), {} activation tensor(s), {} weight(s), {} bias(es)\n",
                    sm.quantized_nodes.size(), sm.activations, sm.weights, sm.biases);
  } else {
    s += fmt::format("quantized {} -> {} ({}{}, activations {}, weights {}{})\n", o.input, o.output,
                     mode, o.quantize.per_channel ? ", per-channel" : "", act, wt,
                     o.quantize.symmetric ? ", symmetric" : "");
    if (o.mode == QuantMode::kStatic) s += fmt::format("ranges: {}\n", r.ranges);
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
  if (r.check) s += CheckText(*r.check, md);
  if (r.selection) s += RenderSelection(*r.selection, md);
  if (!r.eval) return s;
  const Evaluation& ev = *r.eval;
  s += md ? fmt::format("\n## Evaluation on `{}` ({} samples)\n\n", ev.data, ev.samples)
          : fmt::format("\nevaluation on {} ({} samples, {} runs), {} vs {}:\n", ev.data,
                        ev.samples, ev.runs, o.input, o.output);
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

}  // namespace

std::string MetricText(const std::string& metric, double v) {
  if (std::isinf(v)) return "inf (NaN/Inf in outputs)";
  if (metric == "accuracy_drop_pp") return fmt::format("{:.2f} pp", v);
  return fmt::format("{:.4g}", v);
}

std::string FormatJson(const QuantizeFileResult& r) {
  return JsonText(ToJson(r), 2) + "\n";
}

std::string FormatText(const QuantizeFileResult& r) {
  if (!r.written) return r.selection ? RenderSelection(*r.selection, false) : "";
  return Render(r, false) + fmt::format("wrote {}\n", r.options.output);
}

std::string FormatMarkdown(const QuantizeFileResult& r) {
  if (!r.written)
    return "# ferry quantize report\n" + (r.selection ? RenderSelection(*r.selection, true) : "");
  return Render(r, true);
}

}  // namespace ferry::quant
