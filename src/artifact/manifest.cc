// manifest.json and RUNBOOK.md of an artifact: both made only from what is the same on every
// rebuild (no times, no paths outside the artifact, no host names, no thread counts).
#include <nlohmann/json.hpp>

#include "artifact/build.h"
#include "core/json_text.h"

namespace ferry::artifact {

namespace {

nlohmann::json DimsJson(const ir::TypeInfo& t) {
  if (t.kind != ir::TypeInfo::Kind::kTensor || !t.shape) return nullptr;
  nlohmann::json dims = nlohmann::json::array();
  for (const auto& d : *t.shape) {
    if (d.value)
      dims.push_back(*d.value);
    else
      dims.push_back(d.symbol.empty() ? nlohmann::json(nullptr) : nlohmann::json(d.symbol));
  }
  return dims;
}

nlohmann::json IoJson(const std::vector<ir::ValueInfo>& vals) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& v : vals) {
    nlohmann::json e = {{"name", v.name}, {"shape", DimsJson(v.type)}};
    e["dtype"] = v.type.kind == ir::TypeInfo::Kind::kTensor
                     ? std::string(DTypeName(v.type.elem_type))
                     : v.type.ToString();
    j.push_back(e);
  }
  return j;
}

nlohmann::json OpsetsJson(const std::vector<ir::OpsetImport>& ops) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& o : ops) j.push_back({{"domain", o.domain}, {"version", o.version}});
  return j;
}

nlohmann::json StatsJson(const verify::OutputResult& o) {
  nlohmann::json j = {
      {"name", o.name}, {"atol", o.tol.atol}, {"rtol", o.tol.rtol}, {"pass", !o.failed()}};
  if (o.state != verify::OutputResult::State::kCompared) {
    j["note"] = o.note;
    return j;
  }
  const verify::Stats& s = o.stats;
  j["elements"] = s.elements;
  j["out_of_tolerance"] = s.out_of_tolerance;
  j["max_abs"] = s.max_abs;
  j["max_rel"] = s.max_rel;
  j["mean_abs"] = s.mean_abs();
  j["rmse"] = s.rmse();
  j["cosine"] = s.cosine();
  j["min_atol"] = s.min_atol;
  if (o.classifier) {
    j["top1_agreement"] = o.classifier->top1();
    j["topk_agreement"] = o.classifier->topk();
    j["k"] = o.classifier->k();
  }
  return j;
}

nlohmann::json ReportJson(const verify::Report& r) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& o : r.outputs) j.push_back(StatsJson(o));
  return j;
}

std::string Pct(double f) {
  return fmt::format("{:.2f}%", 100 * f);
}

}  // namespace

std::string ManifestJson(const BuildResult& r, const Config& c) {
  nlohmann::json m;
  m["format"] = kManifestFormat;
  m["name"] = r.name;
  m["version"] = r.version;
  m["ferry_version"] = kFerryVersion;
  m["config"] = {{"file", "ferry.yaml"}, {"sha256", r.config_sha256}};
  const ops::InspectResult& s = r.source_inspect;
  m["source"] = {{"file", c.source_name},
                 {"sha256", r.source_sha256},
                 {"weights_sha256", s.weights.sha256},
                 {"parameters", s.weights.parameters}};
  m["inputs"] = IoJson(s.inputs);
  m["outputs"] = IoJson(s.outputs);
  m["opsets"] = OpsetsJson(s.opset_imports);
  // Pre-processing and class names: the spec with every default filled in (what `artifact
  // diff` compares), the class names' count and digest.
  m["prep"] = nullptr;
  if (!r.prep_sha256.empty())
    m["prep"] = {{"file", kPrepFile},
                 {"sha256", r.prep_sha256},
                 {"spec", nlohmann::json::parse(r.prep_json)}};
  m["class_names"] = nullptr;
  if (!r.class_names.empty())
    m["class_names"] = {{"file", kClassNamesFile},
                        {"sha256", r.class_names_sha256},
                        {"count", r.class_names.size()}};
  m["default_variant"] = r.variants.empty() ? "" : r.variants.front().name;
  m["fallback"] = r.fallback.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.fallback);
  nlohmann::json golden = {
      {"data", "golden/data"}, {"sets", r.golden_sets}, {"tolerances", "golden/tolerances.json"}};
  if (r.labels) {
    golden["labels"] = "golden/labels.npy";
    golden["rows"] = r.golden_rows;
  }
  if (r.edge_sets > 0)
    golden["edge_cases"] = {{"data", "golden/edge_cases"}, {"kinds", r.edge_kinds}};
  m["golden"] = golden;
  nlohmann::json variants = nlohmann::json::array();
  for (const auto& v : r.variants) {
    nlohmann::json vj;
    vj["name"] = v.name;
    vj["file"] = v.file;
    vj["bytes"] = v.bytes;
    vj["sha256"] = v.sha256;
    vj["weights_sha256"] = v.inspect.weights.sha256;
    vj["parameters"] = v.inspect.weights.parameters;
    vj["inputs"] = IoJson(v.inspect.inputs);
    vj["outputs"] = IoJson(v.inspect.outputs);
    vj["opsets"] = OpsetsJson(v.inspect.opset_imports);
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& st : v.steps) steps.push_back({{"step", st.kind}, {"summary", st.summary}});
    vj["steps"] = steps;
    nlohmann::json ver;
    ver["pass"] = v.failures.empty();
    ver["sets"] = v.golden.sets;
    ver["outputs"] = ReportJson(v.golden);
    if (v.edge) ver["edge_cases"] = ReportJson(*v.edge);
    if (v.task) {
      const TaskResult& t = *v.task;
      nlohmann::json tj = {{"output", t.output},
                           {"metric", "top1"},
                           {"rows", t.rows},
                           {"golden_accuracy", t.golden_accuracy},
                           {"variant_accuracy", t.variant_accuracy},
                           {"drop_pp", t.drop_pp},
                           {"top1_agreement", t.top1_agreement}};
      tj["max_accuracy_drop_pp"] =
          t.max_accuracy_drop ? nlohmann::json(*t.max_accuracy_drop) : nlohmann::json(nullptr);
      tj["max_class_drop_pp"] =
          t.max_class_drop ? nlohmann::json(*t.max_class_drop) : nlohmann::json(nullptr);
      nlohmann::json cls = nlohmann::json::array();
      for (const auto& cr : t.classes)
        cls.push_back({{"label", cr.label},
                       {"rows", cr.rows},
                       {"golden_correct", cr.golden_correct},
                       {"variant_correct", cr.variant_correct},
                       {"drop_pp", cr.drop_pp}});
      tj["classes"] = cls;
      ver["task"] = tj;
    }
    vj["verification"] = ver;
    variants.push_back(vj);
  }
  m["variants"] = variants;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : r.files)
    files.push_back({{"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  m["files"] = files;
  return JsonText(m, 2) + "\n";
}

std::string Runbook(const BuildResult& r, const Config& c) {
  const std::string& name = r.name;
  std::string s = fmt::format("# Runbook: {} {}\n\n", name, r.version);
  s += fmt::format(
      "This artifact was built by `ferry build` (Ferry {}) from `ferry.yaml` (a copy is in this "
      "folder; SHA-256 `{}`) and the source model `{}` (SHA-256 `{}`). Every file is listed "
      "with its size and SHA-256 in `manifest.json`. Below, `ARTIFACT` is this folder.\n\n",
      kFerryVersion, r.config_sha256, c.source_name, r.source_sha256);
  s += "## What is in it\n\n| variant | file | bytes | role |\n|---|---|---|---|\n";
  for (size_t i = 0; i < r.variants.size(); ++i) {
    const auto& v = r.variants[i];
    std::string role = i == 0 ? "default" : v.name == r.fallback ? "fallback" : "variant";
    s += fmt::format("| {} | `{}` | {} | {} |\n", v.name, v.file, v.bytes, role);
  }
  s += fmt::format(
      "\nThe golden set (`golden/`) holds {} reference input set(s) with the source model's "
      "outputs{}{}; `golden/tolerances.json` holds the tolerances each variant was gated "
      "with.\n\n",
      r.golden_sets, r.edge_sets ? fmt::format(", {} edge case set(s)", r.edge_sets) : "",
      r.labels ? fmt::format(" and {} labels (`golden/labels.npy`)", r.golden_rows) : "");
  if (!r.prep_sha256.empty())
    s += fmt::format(
        "`{}` is the pre-processing spec (the steps from an encoded image to the model's input "
        "tensor; `ferry prep run {} IMAGE -o DIR` applies it); `ferry serve` applies it to raw "
        "inputs.\n\n",
        kPrepFile, kPrepFile);
  if (!r.class_names.empty())
    s += fmt::format("`{}` holds the {} class names, one per line.\n\n", kClassNamesFile,
                     r.class_names.size());
  s += "## Verify before deploying\n\n```sh\n";
  s += "ferry artifact verify ARTIFACT --key PUBLIC_KEY.pem            # digests and signature\n";
  s += "ferry artifact verify ARTIFACT --key PUBLIC_KEY.pem --golden   # and the golden set, "
       "rerun\n";
  s += "```\n\nOne file that differs is named; do not deploy it. Per variant, by hand:\n\n```sh\n";
  for (const auto& v : r.variants)
    s += fmt::format("ferry verify ARTIFACT/{} --golden ARTIFACT/golden/data{}\n", v.file,
                     r.labels ? " --labels ARTIFACT/golden/labels.npy" : "");
  s += "```\n\n## Rebuild (the same bytes)\n\nFrom the folder holding `ferry.yaml` and the "
       "source model:\n\n```sh\n";
  s += fmt::format(
      "ferry build ferry.yaml -o {0}-rebuild\ncmp {0}-rebuild/manifest.json "
      "ARTIFACT/manifest.json\n",
      name);
  s += "```\n\nThe manifests are identical when every file is (it lists every file's SHA-256). "
       "Verification numbers are computed with one engine thread, so `--threads` does not "
       "change them.\n\n";
  s += "## Add a new version\n\n1. Put the new model in place and pin its digest in "
       "`ferry.yaml`: `sha256sum MODEL` into `source.sha256`; raise `version`.\n"
       "2. Build into a new folder and sign it:\n\n```sh\n";
  s += fmt::format(
      "ferry build ferry.yaml -o {0}-NEW_VERSION\n"
      "ferry sign {0}-NEW_VERSION --key PRIVATE_KEY.pem\n"
      "ferry artifact verify {0}-NEW_VERSION --key PUBLIC_KEY.pem --golden\n"
      "ferry artifact diff ARTIFACT {0}-NEW_VERSION   # exit 1: it would break this one's "
      "clients\n",
      name);
  s += "```\n\n3. A failing gate (exit 1) names the output, class and layer out of tolerance; "
       "nothing is written. Loosen a tolerance only with a reason recorded in `ferry.yaml`.\n\n";
  s += "## Roll back\n\nKeep the previous artifact folder (or its `.ferry` archive) untouched. "
       "To roll back, verify it and point the deployment back at it:\n\n```sh\n"
       "ferry artifact verify PREVIOUS_ARTIFACT --key PUBLIC_KEY.pem --golden\n```\n\n";
  if (!r.fallback.empty())
    s += fmt::format(
        "Within this artifact, variant `{}` is the declared fallback: serve `{}` "
        "when the default variant `{}` misbehaves.\n\n",
        r.fallback, "models/" + r.fallback + ".onnx",
        r.variants.empty() ? "" : r.variants.front().name);
  s += "## Gate results\n\n| variant | output | atol | rtol | max abs | out of tolerance |\n"
       "|---|---|---|---|---|---|\n";
  for (const auto& v : r.variants)
    for (const auto& o : v.golden.outputs)
      s +=
          fmt::format("| {} | {} | {:g} | {:g} | {:.6g} | {} of {} |\n", v.name, o.name, o.tol.atol,
                      o.tol.rtol, o.stats.max_abs, o.stats.out_of_tolerance, o.stats.elements);
  bool any_task = false;
  for (const auto& v : r.variants) any_task = any_task || v.task.has_value();
  if (any_task) {
    s += "\n| variant | top-1 (source) | top-1 (variant) | drop | limit | worst class drop |\n"
         "|---|---|---|---|---|---|\n";
    for (const auto& v : r.variants) {
      if (!v.task) continue;
      const TaskResult& t = *v.task;
      double worst = 0;
      for (const auto& cr : t.classes) worst = std::max(worst, cr.drop_pp);
      s += fmt::format("| {} | {} | {} | {:.2f} pp | {} | {:.2f} pp |\n", v.name,
                       Pct(t.golden_accuracy), Pct(t.variant_accuracy), t.drop_pp,
                       t.max_accuracy_drop ? fmt::format("{:g} pp", *t.max_accuracy_drop) : "none",
                       worst);
    }
  }
  return s;
}

}  // namespace ferry::artifact
