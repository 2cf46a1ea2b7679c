#include "verify/capture.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/markdown.h"
#include "ir/onnx_io.h"
#include "ir/weights_digest.h"
#include "runtime/session.h"

namespace ferry::verify {

namespace {

std::string TypeOf(const Value& v) {
  return v.is_tensor()
             ? fmt::format("{}{}", DTypeName(v.tensor().dtype()), ShapeToString(v.tensor().shape()))
             : std::string(v.is_sequence() ? "sequence" : "none");
}

GoldenSetInfo Summarize(const CapturedSet& cs) {
  GoldenSetInfo info;
  info.kind = cs.kind;
  for (const auto& [n, v] : cs.inputs) {
    info.inputs.emplace_back(n, TypeOf(v));
    if (v.is_tensor()) info.input_shapes.emplace_back(n, v.tensor().shape());
  }
  for (const auto& [n, v] : cs.outputs) info.outputs.emplace_back(n, TypeOf(v));
  return info;
}

nlohmann::json Manifest(const GoldenCaptureResult& r) {
  nlohmann::json manifest;
  manifest["model"] = r.model;
  manifest["weights_sha256"] = r.weights_sha256;
  manifest["seed"] = r.seed;
  manifest["count"] = r.count;
  manifest["notes"] = r.notes;
  manifest["sets"] = nlohmann::json::array();
  for (size_t s = 0; s < r.sets.size(); ++s) {
    nlohmann::json shapes = nlohmann::json::object();
    for (const auto& [n, shape] : r.sets[s].input_shapes) shapes[n] = shape;
    manifest["sets"].push_back({{"set", fmt::format("test_data_set_{}", s)},
                                {"kind", r.sets[s].kind},
                                {"inputs", shapes}});
  }
  return manifest;
}

std::string Describe(const std::vector<std::pair<std::string, std::string>>& vals) {
  std::string s;
  for (const auto& [n, t] : vals) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, t);
  return s;
}

}  // namespace

Result<GoldenCaptureResult> CaptureGolden(const GoldenCaptureOptions& o) {
  const CaptureOptions& co = o.capture;
  if (co.count < 0) return UsageError("--count must be >= 0, got {}", co.count);
  if (o.threads < 0) return UsageError("--threads must be >= 0, got {}", o.threads);
  std::error_code ec;
  if (std::filesystem::exists(o.out, ec) && !o.force)
    return InvalidError("'{}' already exists (pass --force to replace it)", o.out);
  FERRY_ASSIGN_OR_RETURN(auto loaded, ir::LoadModel(o.model));
  std::shared_ptr<const ir::Model> model(std::move(loaded));
  runtime::SessionOptions so;
  so.threads = o.threads;
  FERRY_ASSIGN_OR_RETURN(auto session, runtime::Session::Create(model, so));
  const ir::Graph& g = model->graph;
  auto plan = PlanCapture(g, co);
  if (!plan.ok()) return plan.status().With(o.model);
  GoldenCaptureResult r;
  r.model = o.model;
  r.out = o.out;
  r.seed = co.seed;
  r.count = co.count;
  r.weights_sha256 = ir::DigestWeights(g).sha256;
  r.notes = plan->notes;

  std::vector<CapturedSet> sets;
  auto run = [&](GeneratedSet gs) -> Status {
    FERRY_ASSIGN_OR_RETURN(auto outs, session->Run(gs.inputs));
    CapturedSet cs{gs.kind, std::move(gs.inputs), {}};
    for (size_t k = 0; k < g.outputs.size(); ++k)
      cs.outputs.emplace_back(g.outputs[k].name, std::move(outs[k]));
    sets.push_back(std::move(cs));
    return Status::Ok();
  };
  int index = 0;
  for (; index < co.count; ++index) {
    Status st = run(GenerateSet(*plan, co, index, "random", 0));
    if (!st.ok()) return st.With(fmt::format("{}: random set {}", o.model, index));
  }
  for (const char* kind : {"zeros", "large"}) {
    Status st = run(GenerateSet(*plan, co, index++, kind, 0));
    if (!st.ok()) return st.With(fmt::format("{}: {} set", o.model, kind));
  }
  if (!plan->seq_symbols.empty()) {
    Status st = run(GenerateSet(*plan, co, index++, "shortest", 1));
    if (!st.ok()) return st.With(fmt::format("{}: shortest set (length 1)", o.model));
    // The longest length the model accepts, from 4x the default down to the default (position
    // tables bound it; a failed run is the model saying so).
    int64_t len = 4 * co.default_dim;
    for (;; len /= 2) {
      Status s2 = run(GenerateSet(*plan, co, index, "longest", len));
      if (s2.ok()) break;
      if (len <= co.default_dim)
        return s2.With(fmt::format("{}: longest set (length {})", o.model, len));
    }
    ++index;
    r.notes.push_back(fmt::format("longest set: sequence dims set to {}", len));
  }
  for (const auto& cs : sets) r.sets.push_back(Summarize(cs));
  FERRY_RETURN_IF_ERROR(WriteGoldenDir(o.out, sets, JsonText(Manifest(r), 2) + "\n", o.force));
  return r;
}

std::string FormatJson(const GoldenCaptureResult& r) {
  nlohmann::json manifest = Manifest(r);
  manifest["out"] = r.out;
  return JsonText(manifest, 2) + "\n";
}

std::string FormatText(const GoldenCaptureResult& r) {
  std::string s;
  for (const auto& n : r.notes) s += fmt::format("note: {}\n", n);
  for (size_t i = 0; i < r.sets.size(); ++i)
    s += fmt::format("test_data_set_{:<3} {:<9} {} -> {}\n", i, r.sets[i].kind,
                     Describe(r.sets[i].inputs), Describe(r.sets[i].outputs));
  s += fmt::format("wrote {} sets to {}\n", r.sets.size(), r.out);
  return s;
}

std::string FormatMarkdown(const GoldenCaptureResult& r) {
  std::string s = fmt::format(
      "# ferry golden capture\n\n- model: `{}` (weights SHA-256 `{}`)\n- folder: `{}`\n- seed {}, "
      "{} random set(s) before the edge cases\n",
      r.model, r.weights_sha256, r.out, r.seed, r.count);
  for (const auto& n : r.notes) s += fmt::format("- note: {}\n", n);
  s += "\n| set | kind | inputs | outputs |\n|---|---|---|---|\n";
  for (size_t i = 0; i < r.sets.size(); ++i)
    s += fmt::format("| test_data_set_{} | {} | {} | {} |\n", i, r.sets[i].kind,
                     MarkdownCell(Describe(r.sets[i].inputs)),
                     MarkdownCell(Describe(r.sets[i].outputs)));
  return s;
}

}  // namespace ferry::verify
