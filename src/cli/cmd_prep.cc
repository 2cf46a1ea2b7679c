// ferry prep run SPEC IMAGE... -o DIR | ferry prep check SPEC --images DIR|FILE...
// ferry prep embed MODEL SPEC -o OUT [--check --images DIR|FILE...]
// ferry prep bench SPEC IMAGE [--runs N] [--warmup W] [--json]
// The work is in src/prep (Preprocess, Check); this file parses, renders, exits.
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/npy.h"
#include "ir/onnx_io.h"
#include "prep/check.h"
#include "prep/embed.h"
#include "prep/pipeline.h"

#ifndef FERRY_SOURCE_DIR
#define FERRY_SOURCE_DIR "."
#endif

namespace ferry::cli {

namespace {

struct RunOptions {
  std::string spec;
  std::vector<std::string> images;
  std::string out;
  bool json = false;
};

struct BenchOpts {
  std::string spec, image;
  int runs = 50, warmup = 3;
  bool json = false;
};

int RunPrepBench(const BenchOpts& o) {
  auto spec = prep::LoadSpec(o.spec);
  if (!spec.ok()) return ReportError(spec.status());
  auto bytes = ReadFileBytes(o.image);
  if (!bytes.ok()) return ReportError(bytes.status());
  nlohmann::json j = nlohmann::json::array();
  std::string text;
  for (const auto& in : spec->inputs) {
    if (in.is_table() || in.is_text())
      return ReportError(InvalidError("prep bench times image inputs; '{}' is a {}", in.name,
                                      in.is_table() ? "table" : "text input"));
    auto t = prep::TimePreprocess(in.image, *bytes, o.image, o.runs, o.warmup);
    if (!t.ok()) return ReportError(t.status());
    nlohmann::json e;
    e["input"] = in.name;
    e["image"] = o.image;
    e["bytes"] = bytes->size();
    e["shape"] = t->shape;
    e["runs"] = t->runs;
    e["decode_p50_ms"] = t->decode_p50_ms;
    e["total_p50_ms"] = t->total_p50_ms;
    e["total_p90_ms"] = t->total_p90_ms;
    e["total_min_ms"] = t->total_min_ms;
    j.push_back(e);
    text += fmt::format(
        "{}: {} -> {}: p50 {:.3f} ms (decode {:.3f} ms), p90 {:.3f} ms, min {:.3f} ms, {} runs, "
        "1 thread\n",
        in.name, o.image, ShapeToString(t->shape), t->total_p50_ms, t->decode_p50_ms,
        t->total_p90_ms, t->total_min_ms, t->runs);
  }
  PrintOut(o.json ? j.dump(2) + "\n" : text);
  return 0;
}

struct CheckOpts {
  std::string spec;
  std::vector<std::string> images;
  std::string python;
  std::string script;
  bool json = false;
};

int RunPrepRun(const RunOptions& o) {
  auto spec = prep::LoadSpec(o.spec);
  if (!spec.ok()) return ReportError(spec.status());
  auto images = prep::ExpandImages(o.images);
  if (!images.ok()) return ReportError(images.status());
  auto tensors = prep::PreprocessFiles(*spec, *images);
  if (!tensors.ok()) return ReportError(tensors.status());
  std::vector<std::string> written;
  Status st = prep::WriteTensors(*tensors, o.out, &written);
  if (!st.ok()) return ReportError(st);
  std::string text;
  if (o.json) {
    nlohmann::json j;
    j["tensors"] = nlohmann::json::array();
    for (size_t i = 0; i < tensors->size(); ++i) {
      const auto& t = (*tensors)[i];
      j["tensors"].push_back({{"name", t.name},
                              {"file", written[i]},
                              {"dtype", std::string(DTypeName(t.tensor.dtype()))},
                              {"shape", t.tensor.shape()}});
    }
    text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    for (size_t i = 0; i < tensors->size(); ++i) {
      const auto& t = (*tensors)[i];
      text += fmt::format("{} {} {} -> {}\n", t.name, DTypeName(t.tensor.dtype()),
                          ShapeToString(t.tensor.shape()), written[i]);
    }
  }
  PrintOut(text);
  return 0;
}

// The venv's python: $FERRY_PYTHON, else .venv/bin/python in the current folder or the source tree.
std::string DefaultPython() {
  if (const char* p = std::getenv("FERRY_PYTHON")) return p;
  std::error_code ec;
  if (std::filesystem::exists(".venv/bin/python", ec)) return ".venv/bin/python";
  return std::string(FERRY_SOURCE_DIR) + "/.venv/bin/python";
}

int RunPrepCheck(const CheckOpts& o) {
  prep::CheckOptions c;
  c.spec_path = o.spec;
  c.images = o.images;
  c.python = o.python.empty() ? DefaultPython() : o.python;
  c.script =
      o.script.empty() ? std::string(FERRY_SOURCE_DIR) + "/tools/prep_reference.py" : o.script;
  c.text_script =
      o.script.empty() ? std::string(FERRY_SOURCE_DIR) + "/tools/prep_reference_text.py" : o.script;
  auto r = prep::Check(c);
  if (!r.ok()) return ReportError(r.status());
  PrintOut(o.json ? prep::FormatCheckJson(*r) : prep::FormatCheckText(*r));
  return r->ok ? 0 : 1;
}

struct EmbedOpts {
  std::string model, spec, out, python, script;
  std::vector<std::string> images;
  bool check = false, json = false;
  double atol = 1e-5, rtol = 1e-5;
};

// ferry prep embed MODEL SPEC -o OUT [--check --images ...]: exit 4 when a step cannot be
// embedded (named), 1 when --check fails (nothing written), 3 for bad input.
int RunPrepEmbed(const EmbedOpts& o) {
  if (o.check && o.images.empty()) return ReportError(UsageError("--check needs --images"));
  auto spec = prep::LoadSpec(o.spec);
  if (!spec.ok()) return ReportError(spec.status());
  auto model = ir::LoadModel(o.model);
  if (!model.ok()) return ReportError(model.status());
  prep::EmbedOptions eo;
  eo.keep_prep_outputs = o.check;
  auto r = prep::EmbedSpec(**model, *spec, eo);
  if (!r.ok()) return ReportError(r.status());
  std::optional<prep::EmbedCheckResult> check;
  if (o.check) {
    auto original = ir::LoadModel(o.model);
    if (!original.ok()) return ReportError(original.status());
    auto images = prep::ExpandImages(o.images);
    if (!images.ok()) return ReportError(images.status());
    prep::EmbedCheckOptions co;
    co.images = *images;
    co.python = o.python.empty() ? DefaultPython() : o.python;
    co.script =
        o.script.empty() ? std::string(FERRY_SOURCE_DIR) + "/tools/prep_embed_ort.py" : o.script;
    co.atol = o.atol;
    co.rtol = o.rtol;
    auto c = prep::CheckEmbedded(**original, **model, *spec, co);
    if (!c.ok()) return ReportError(c.status());
    check = std::move(*c);
    prep::DropPrepOutputs(**model, *r);
  }
  const prep::EmbedCheckResult* cp = check ? &*check : nullptr;
  if (!cp || cp->ok) {
    Status st = ir::SaveModel(**model, o.out);
    if (!st.ok()) return ReportError(st);
  }
  PrintOut(o.json ? prep::FormatEmbedJson(*r, cp, o.out) : prep::FormatEmbedText(*r, cp, o.out));
  return cp && !cp->ok ? 1 : 0;
}

}  // namespace

void SetupPrep(CLI::App& sub, Action* action) {
  sub.require_subcommand(1);
  auto ro = std::make_shared<RunOptions>();
  CLI::App* run = sub.add_subcommand(
      "run", "Images through the spec: one .npy per model input, the images stacked as a batch");
  run->add_option("spec", ro->spec, "Preprocessing spec (YAML or JSON)")->required();
  run->add_option("images", ro->images,
                  "Image files (PNG, JPEG) or folders of them; CSV for tables; text (.txt, one "
                  "example a line, or .jsonl) for text inputs")
      ->required();
  run->add_option("-o,--out", ro->out, "Output folder (<input>.npy per input)")->required();
  run->add_flag("--json", ro->json, "Print one JSON document");
  run->callback([ro, action] { *action = [ro] { return RunPrepRun(*ro); }; });

  auto bo = std::make_shared<BenchOpts>();
  CLI::App* bench = sub.add_subcommand(
      "bench", "Time one image through the spec in-process (decode and the whole pipeline)");
  bench->add_option("spec", bo->spec, "Preprocessing spec (YAML or JSON)")->required();
  bench->add_option("image", bo->image, "One image file (PNG, JPEG)")->required();
  bench->add_option("--runs", bo->runs, "Timed repetitions")->check(CLI::Range(1, 100000));
  bench->add_option("--warmup", bo->warmup, "Untimed repetitions first")
      ->check(CLI::Range(0, 10000));
  bench->add_flag("--json", bo->json, "Print one JSON document");
  bench->callback([bo, action] { *action = [bo] { return RunPrepBench(*bo); }; });

  auto co = std::make_shared<CheckOpts>();
  CLI::App* check = sub.add_subcommand(
      "check",
      "Compare the spec's tensors with the library its filter names (Pillow or OpenCV); exit 1 "
      "beyond tolerance");
  check->add_option("spec", co->spec, "Preprocessing spec (YAML or JSON)")->required();
  check
      ->add_option("--images,--data", co->images,
                   "Image files or folders; text files (.txt, .jsonl) for text inputs")
      ->required();
  check->add_option("--python", co->python,
                    "Python with Pillow and OpenCV (default: $FERRY_PYTHON, else the project "
                    ".venv)");
  check->add_option("--reference-script", co->script,
                    "The reference pipeline (default: tools/prep_reference.py of the source tree)");
  check->add_flag("--json", co->json, "Print one JSON document");
  check->callback([co, action] { *action = [co] { return RunPrepCheck(*co); }; });

  auto eo = std::make_shared<EmbedOpts>();
  CLI::App* embed = sub.add_subcommand(
      "embed",
      "Prepend the spec's image steps ONNX reproduces exactly to the model (it then takes "
      "decoded uint8 HWC images); exit 4 naming a step it cannot embed");
  embed->add_option("model", eo->model, "ONNX model")->required();
  embed->add_option("spec", eo->spec, "Preprocessing spec (YAML or JSON)")->required();
  embed->add_option("-o,--out", eo->out, "The embedded model (.onnx)")->required();
  embed->add_flag("--check", eo->check,
                  "Before writing: the embedded model under Ferry and ONNX Runtime against "
                  "spec-then-model on --images; exit 1 beyond tolerance, nothing written");
  embed->add_option("--images", eo->images, "Image files or folders for --check");
  embed->add_option("--python", eo->python,
                    "Python with onnxruntime (default: $FERRY_PYTHON, else the project .venv)");
  embed->add_option("--ort-script", eo->script,
                    "The ONNX Runtime side of --check (default: tools/prep_embed_ort.py)");
  embed->add_option("--atol", eo->atol, "--check: absolute tolerance on model outputs")
      ->check(CLI::NonNegativeNumber);
  embed
      ->add_option("--rtol", eo->rtol,
                   "--check: tolerance relative to the output's largest magnitude")
      ->check(CLI::NonNegativeNumber);
  embed->add_flag("--json", eo->json, "Print one JSON document");
  embed->callback([eo, action] { *action = [eo] { return RunPrepEmbed(*eo); }; });
}

}  // namespace ferry::cli
