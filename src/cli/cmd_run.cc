// ferry run MODEL [--input NAME=FILE]... [--output-dir DIR] [--threads N] [--json]
//           [--prep SPEC] [--labels FILE] [--top-k K]
// ferry run MODEL --test-data DIR [--rtol R] [--atol A]
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/map_json.h"
#include "cli/output_files.h"
#include "cli/tensor_files.h"
#include "core/json_text.h"
#include "core/lines.h"
#include "core/npy.h"
#include "ir/data_sets.h"
#include "ir/onnx_io.h"
#include "prep/decode.h"
#include "prep/pipeline.h"
#include "runtime/session.h"
#include "verify/compare.h"

namespace ferry::cli {

namespace fs = std::filesystem;

namespace {

struct Options {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string test_data;
  int threads = 0;
  std::string provider = "cpu";
  bool json = false;
  double rtol = 1e-3, atol = 1e-7;
  std::string prep;    // a preprocessing spec: its inputs take image files
  std::string labels;  // class names, one per line: classifier outputs decoded
  int top_k = 0;       // classes shown per row (0: 5 with --labels, else none)
};

// The top classes of each row of a classifier output, rendered: JSON rows, and a text line each.
nlohmann::json RenderTopClasses(const Tensor& t, int64_t k, const std::vector<std::string>& labels,
                                std::string* text) {
  nlohmann::json rows = nlohmann::json::array();
  const auto top = verify::TopClasses(t, k);
  for (size_t r = 0; r < top.size(); ++r) {
    nlohmann::json row = nlohmann::json::array();
    std::string line;
    for (const auto& [c, score] : top[r]) {
      std::string label = c < static_cast<int64_t>(labels.size()) ? labels[c] : "";
      row.push_back({{"index", c}, {"label", label}, {"score", score}});
      line += fmt::format("{}{} {:.4g}", line.empty() ? "" : ", ",
                          label.empty() ? std::to_string(c) : label, score);
    }
    *text += fmt::format("  row {}: {}\n", r, line);
    rows.push_back(row);
  }
  return rows;
}

struct Loaded {
  std::shared_ptr<const ir::Model> model;
  std::unique_ptr<runtime::Session> session;
};

Result<Loaded> Load(const Options& o) {
  FERRY_ASSIGN_OR_RETURN(auto model, ir::LoadModel(o.model));
  Loaded l;
  l.model = std::shared_ptr<const ir::Model>(std::move(model));
  runtime::SessionOptions so;
  so.threads = o.threads;
  so.provider = o.provider;
  FERRY_ASSIGN_OR_RETURN(l.session, runtime::Session::Create(l.model, so));
  return l;
}

int RunTestData(const Options& o, Loaded& l) {
  fs::path dir(o.test_data);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return ReportError(InvalidError("test data folder '{}' does not exist", o.test_data));
  std::vector<std::string> sets = ir::ListNumbered(dir.string(), "test_data_set_");
  if (sets.empty()) sets.push_back(dir.string());
  const ir::Graph& g = l.model->graph;
  std::vector<const ir::ValueInfo*> real = g.RealInputs();
  bool all_ok = true;
  nlohmann::json jsets = nlohmann::json::array();
  for (const auto& set : sets) {
    std::vector<std::string> in_files = ir::ListNumbered(set, "input_");
    std::vector<std::string> out_files = ir::ListNumbered(set, "output_");
    if (in_files.empty() && out_files.empty())
      return ReportError(InvalidError("'{}' holds no input_N.pb or output_N.pb files", set));
    std::vector<std::pair<std::string, Value>> feeds;
    for (size_t k = 0; k < in_files.size(); ++k) {
      // By the TensorProto's name when it names an input, else by position among real inputs.
      std::string name = ir::TensorPbName(in_files[k]);
      const ir::ValueInfo* vi = nullptr;
      for (const auto& in : g.inputs)
        if (!name.empty() && in.name == name) vi = &in;
      if (!vi) {
        if (k >= real.size())
          return ReportError(
              InvalidError("'{}': the model has only {} inputs", in_files[k], real.size()));
        vi = real[k];
      }
      auto v = ReadInputFile(in_files[k], vi->type);
      if (!v.ok()) return ReportError(v.status());
      feeds.emplace_back(vi->name, std::move(v).value());
    }
    auto outs = l.session->Run(feeds);
    if (!outs.ok()) return ReportError(outs.status().With(set));
    if (out_files.size() != outs->size())
      return ReportError(InvalidError("'{}' has {} expected outputs, the model produces {}", set,
                                      out_files.size(), outs->size()));
    nlohmann::json jouts = nlohmann::json::array();
    for (size_t k = 0; k < out_files.size(); ++k) {
      auto want = ir::ReadValuePb(out_files[k], g.outputs[k].type);
      if (!want.ok()) return ReportError(want.status());
      verify::ExpectedComparison c =
          verify::CompareExpected((*outs)[k], want.value(), o.rtol, o.atol);
      all_ok = all_ok && c.ok;
      std::string set_name = fs::path(set).filename().string();
      if (!o.json)
        fmt::print(
            "{} {:<20} {:<26} max_abs {:.3g} max_rel {:.3g} {}{}\n", set_name, g.outputs[k].name,
            verify::ValueSummary((*outs)[k]), c.max_abs, c.max_rel, c.ok ? "ok" : "MISMATCH",
            c.problem.empty() ? (c.mismatches ? fmt::format(" ({} elements)", c.mismatches) : "")
                              : " (" + c.problem + ")");
      jouts.push_back({{"name", g.outputs[k].name},
                       {"ok", c.ok},
                       {"max_abs", c.max_abs},
                       {"max_rel", c.max_rel},
                       {"mismatches", c.mismatches},
                       {"problem", c.problem}});
    }
    jsets.push_back({{"set", set}, {"outputs", jouts}});
  }
  if (o.json)
    std::printf("%s\n", JsonText(nlohmann::json({{"ok", all_ok}, {"sets", jsets}}), 2).c_str());
  else
    fmt::print("{}\n", all_ok ? "all outputs match" : "outputs differ");
  return all_ok ? 0 : 1;
}

int RunOnce(const Options& o, Loaded& l) {
  const ir::Graph& g = l.model->graph;
  std::optional<prep::Spec> prep_spec;
  if (!o.prep.empty()) {
    auto s = prep::LoadSpec(o.prep);
    if (!s.ok()) return ReportError(s.status());
    prep_spec = std::move(s).value();
  }
  std::vector<std::string> labels;  // class names, one per line
  if (!o.labels.empty()) {
    auto bytes = ReadFileBytes(o.labels);
    if (!bytes.ok()) return ReportError(bytes.status());
    labels = SplitLines(*bytes);
    if (labels.empty())
      return ReportError(InvalidError("--labels '{}' holds no class names", o.labels));
  }
  const int64_t top_k = o.top_k > 0 ? o.top_k : labels.empty() ? 0 : 5;
  std::vector<std::pair<std::string, Value>> feeds;
  std::map<std::string, prep::ImageInfo> originals;  // per image input: the decoded size
  std::set<std::string> seen;
  for (const auto& spec : o.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return ReportError(UsageError("--input expects NAME=FILE, got '{}'", spec));
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    auto it = std::find_if(g.inputs.begin(), g.inputs.end(),
                           [&](const ir::ValueInfo& v) { return v.name == name; });
    if (it == g.inputs.end()) {
      std::string names;
      for (const auto* vi : g.RealInputs()) names += (names.empty() ? "" : ", ") + vi->name;
      return ReportError(
          InvalidError("unknown input '{}' (the model's inputs are: {})", name, names));
    }
    if (!seen.insert(name).second)
      return ReportError(UsageError("input '{}' is given twice", name));
    if (const prep::InputSpec* steps = prep_spec ? prep::FindInput(*prep_spec, name) : nullptr) {
      // An image or CSV file through the spec's steps (the same code as `ferry prep run`).
      auto t = prep::PreprocessFile(*steps, file, &originals[name]);
      if (!t.ok()) return ReportError(t.status());
      feeds.emplace_back(name, Value(std::move(t).value()));
      continue;
    }
    const bool json = file.size() >= 5 && file.compare(file.size() - 5, 5, ".json") == 0;
    auto v = json ? ReadMapJson(file, it->type) : ReadInputFile(file, it->type);
    if (!v.ok()) return ReportError(v.status());
    feeds.emplace_back(name, std::move(v).value());
  }
  // Output file names are checked before running, so a collision writes nothing.
  std::map<std::string, std::string> files;
  for (const auto& out : g.outputs) {
    std::string f = SanitizeFileName(out.name) + ".npy";
    auto [it, inserted] = files.emplace(f, out.name);
    if (!inserted)
      return ReportError(InvalidError("outputs '{}' and '{}' would both be written to '{}'",
                                      it->second, out.name, f));
  }
  auto outs = l.session->Run(feeds);
  if (!outs.ok()) return ReportError(outs.status());
  nlohmann::json jouts = nlohmann::json::array();
  if (!o.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.output_dir, ec);
    if (!fs::is_directory(o.output_dir, ec))
      return ReportError(InvalidError("cannot create output folder '{}'", o.output_dir));
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const Value& v = (*outs)[k];
    nlohmann::json jo = {{"name", g.outputs[k].name}, {"value", verify::ValueSummary(v)}};
    if (v.is_tensor()) {
      jo["dtype"] = DTypeName(v.tensor().dtype());
      jo["shape"] = v.tensor().shape();
    }
    if (!o.output_dir.empty()) {
      auto file = WriteOutputValue(
          v, (fs::path(o.output_dir) / SanitizeFileName(g.outputs[k].name)).string());
      if (!file.ok()) return ReportError(file.status());
      if (!file->empty()) jo["file"] = *file;
    }
    std::string decoded;
    if (top_k > 0 && v.is_tensor() && verify::IsClassifierOutput(v.tensor()))
      jo["top"] = RenderTopClasses(v.tensor(), top_k, labels, &decoded);
    const prep::OutputSpec* post =
        prep_spec ? prep::FindOutput(*prep_spec, g.outputs[k].name) : nullptr;
    if (post && v.is_tensor()) {
      const prep::InputSpec* in = prep::BoxInput(*prep_spec, *post);
      auto original = in ? originals.find(in->name) : originals.end();
      auto d = prep::DecodeOutput(*prep_spec, *post, v.tensor(),
                                  original == originals.end() ? nullptr : &original->second);
      if (!d.ok()) return ReportError(d.status());
      decoded += prep::FormatDecoded(*d);
      jo.update(nlohmann::json::parse(prep::DecodedJson(*d)));  // the keys ferry serve returns
    }
    jouts.push_back(jo);
    if (!o.json)
      fmt::print("{:<24} {}{}\n{}", g.outputs[k].name, verify::ValueSummary(v),
                 jo.contains("file") ? "  -> " + jo["file"].get<std::string>() : "", decoded);
  }
  if (o.json) std::printf("%s\n", JsonText(nlohmann::json({{"outputs", jouts}}), 2).c_str());
  return 0;
}

int RunCommand(const Options& o) {
  if (o.threads < 0) return ReportError(UsageError("--threads must be >= 0, got {}", o.threads));
  if (o.provider != "cpu" && o.provider != "reference")
    return ReportError(UsageError("--provider must be cpu or reference, got '{}'", o.provider));
  auto l = Load(o);
  if (!l.ok()) return ReportError(l.status());
  if (!o.test_data.empty()) {
    if (!o.inputs.empty())
      return ReportError(UsageError("--test-data and --input cannot be combined"));
    if (!o.prep.empty() || !o.labels.empty() || o.top_k > 0)
      return ReportError(
          UsageError("--prep, --labels and --top-k go with --input, not --test-data"));
    return RunTestData(o, l.value());
  }
  return RunOnce(o, l.value());
}

}  // namespace

void SetupRun(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "ONNX model file")->required();
  sub.add_option("--input,-i", o->inputs, "NAME=FILE (.npy or TensorProto .pb); repeatable");
  sub.add_option("--output-dir,-o", o->output_dir, "Write each output as <name>.npy here");
  sub.add_option("--test-data", o->test_data,
                 "ONNX test case folder (test_data_set_*) or one test_data_set_N");
  sub.add_option("--rtol", o->rtol, "Relative tolerance for --test-data (default 1e-3)");
  sub.add_option("--atol", o->atol, "Absolute tolerance for --test-data (default 1e-7)");
  sub.add_option("--threads", o->threads, "Threads (default: one per core)");
  sub.add_option("--provider", o->provider,
                 "cpu (default: optimized kernels where they exist) or reference (every node on "
                 "its reference kernel)");
  sub.add_option("--prep", o->prep,
                 "Preprocessing spec (src/prep): the inputs it names take image files "
                 "(PNG, JPEG) through its steps");
  sub.add_option("--labels", o->labels,
                 "Class names, one per line: classifier outputs ([N, C] float) print their top "
                 "classes");
  sub.add_option("--top-k", o->top_k, "Classes shown per row (default 5 with --labels)")
      ->check(CLI::Range(1, 1000000));
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunCommand(*o); }; });
}

}  // namespace ferry::cli
