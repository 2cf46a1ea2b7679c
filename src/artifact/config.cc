#include "artifact/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <yaml-cpp/yaml.h>

#include "core/npy.h"
#include "core/sha256.h"
#include "core/yaml_keys.h"

namespace ferry::artifact {

namespace fs = std::filesystem;

const char* StepKindName(Step::Kind kind) {
  switch (kind) {
    case Step::Kind::kOptimize:
      return "optimize";
    case Step::Kind::kConvert:
      return "convert";
    case Step::Kind::kQuantize:
      return "quantize";
  }
  return "?";
}

const Variant* Config::FindVariant(const std::string& n) const {
  for (const auto& v : variants)
    if (v.name == n) return &v;
  return nullptr;
}

int Config::Line(const std::string& key) const {
  auto it = lines.find(key);
  return it == lines.end() ? 0 : it->second;
}

namespace {

using yaml_keys::Describe;
using yaml_keys::Join;
using yaml_keys::LineOf;

bool ValidName(const std::string& s, size_t max_len) {
  if (s.empty() || s.size() > max_len) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return false;
  return s != "." && s != "..";
}

// One validated mapping: its entries by key with their lines. Unknown keys and duplicates are
// refused when it is opened.
struct Entry {
  YAML::Node node;
  int line = 0;
};

class Parser {
 public:
  Parser(std::string file, Config* cfg) : file_(std::move(file)), cfg_(cfg) {}

  Status Error(int line, const std::string& key, const std::string& what) const {
    if (key.empty()) return InvalidError("{}:{}: {}", file_, line, what);
    return InvalidError("{}:{}: {}: {}", file_, line, key, what);
  }
  Status Expected(const Entry& e, const std::string& key, const std::string& what) const {
    return Error(e.line, key, fmt::format("expected {}, got {}", what, Describe(e.node)));
  }

  // `node` (at `path`, `line`) as a mapping whose keys are all in `allowed`. A null node (the
  // key with nothing after it) is an empty mapping when `null_ok`.
  Result<std::map<std::string, Entry>> Open(const Entry& e, const std::string& path,
                                            const std::vector<std::string>& allowed,
                                            bool null_ok = false) {
    std::map<std::string, Entry> out;
    if (null_ok && e.node.IsNull()) return out;
    if (!e.node.IsMap()) return Expected(e, path.empty() ? "ferry.yaml" : path, "a mapping");
    for (auto it = e.node.begin(); it != e.node.end(); ++it) {
      int line = LineOf(it->first, e.line);
      if (!it->first.IsScalar()) return Error(line, path, "keys must be plain names");
      std::string key = it->first.Scalar();
      std::string full = Join(path, key);
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        return Error(line, full, fmt::format("unknown key (expected one of: {})", list));
      }
      if (out.count(key)) return Error(line, full, "given twice");
      cfg_->lines[full] = line;
      out[key] = Entry{it->second, line};
    }
    return out;
  }

  Result<Entry> Required(const std::map<std::string, Entry>& m, const std::string& key,
                         const std::string& path, int line) const {
    auto it = m.find(key);
    if (it == m.end()) return Error(line, Join(path, key), "missing (required)");
    return it->second;
  }

  Result<std::string> String(const Entry& e, const std::string& key) const {
    if (!e.node.IsScalar() || e.node.Scalar().empty()) return Expected(e, key, "a string");
    return e.node.Scalar();
  }
  Result<double> Number(const Entry& e, const std::string& key, double min) const {
    if (!e.node.IsScalar()) return Expected(e, key, "a number");
    const std::string& s = e.node.Scalar();
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v)) return Expected(e, key, "a number");
    if (v < min) return Expected(e, key, fmt::format("a number >= {}", min));
    return v;
  }
  Result<int64_t> Int(const Entry& e, const std::string& key, int64_t min) const {
    if (!e.node.IsScalar()) return Expected(e, key, "an integer");
    const std::string& s = e.node.Scalar();
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE) return Expected(e, key, "an integer");
    if (v < min) return Expected(e, key, fmt::format("an integer >= {}", min));
    return static_cast<int64_t>(v);
  }
  Result<bool> Bool(const Entry& e, const std::string& key) const {
    if (e.node.IsScalar()) {
      const std::string& s = e.node.Scalar();
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
    }
    return Expected(e, key, "true or false");
  }
  Result<std::string> OneOf(const Entry& e, const std::string& key,
                            const std::vector<std::string>& choices) const {
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i)
      list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
    if (e.node.IsScalar())
      for (const auto& c : choices)
        if (e.node.Scalar() == c) return c;
    return Expected(e, key, list);
  }
  Result<std::vector<std::string>> StringList(const Entry& e, const std::string& key) const {
    if (!e.node.IsSequence()) return Expected(e, key, "a list of strings");
    std::vector<std::string> out;
    size_t i = 0;
    for (const auto& item : e.node) {
      Entry ie{item, LineOf(item, e.line)};
      FERRY_ASSIGN_OR_RETURN(std::string s, String(ie, fmt::format("{}[{}]", key, i++)));
      out.push_back(std::move(s));
    }
    return out;
  }
  // A list of dims ([1, 3, 224, 224]) or a string "1x3x224x224".
  Result<Shape> Dims(const Entry& e, const std::string& key) const {
    Shape dims;
    if (e.node.IsSequence()) {
      size_t i = 0;
      for (const auto& item : e.node) {
        Entry ie{item, LineOf(item, e.line)};
        FERRY_ASSIGN_OR_RETURN(int64_t d, Int(ie, fmt::format("{}[{}]", key, i++), 0));
        dims.push_back(d);
      }
      return dims;
    }
    if (e.node.IsScalar()) {
      std::string s = e.node.Scalar();
      size_t pos = 0;
      while (pos <= s.size()) {
        size_t end = s.find_first_of("x,", pos);
        if (end == std::string::npos) end = s.size();
        std::string item = s.substr(pos, end - pos);
        char* stop = nullptr;
        long long v = std::strtoll(item.c_str(), &stop, 10);
        if (item.empty() || *stop != '\0' || v < 0)
          return Expected(e, key, "dims like [1, 3, 8, 8]");
        dims.push_back(v);
        pos = end + 1;
      }
      return dims;
    }
    return Expected(e, key, "dims like [1, 3, 8, 8]");
  }
  Result<ToleranceSpec> Tolerance(const Entry& e, const std::string& key) {
    FERRY_ASSIGN_OR_RETURN(auto m, Open(e, key, {"atol", "rtol"}));
    if (m.empty()) return Error(e.line, key, "expected atol and/or rtol");
    ToleranceSpec t;
    if (m.count("atol")) {
      FERRY_ASSIGN_OR_RETURN(t.atol, Number(m["atol"], Join(key, "atol"), 0));
    }
    if (m.count("rtol")) {
      FERRY_ASSIGN_OR_RETURN(t.rtol, Number(m["rtol"], Join(key, "rtol"), 0));
    }
    return t;
  }
  Result<std::map<std::string, ToleranceSpec>> Tolerances(const Entry& e, const std::string& key) {
    if (!e.node.IsMap()) return Expected(e, key, "a mapping OUTPUT: {atol: X, rtol: Y}");
    std::map<std::string, ToleranceSpec> out;
    for (auto it = e.node.begin(); it != e.node.end(); ++it) {
      int line = LineOf(it->first, e.line);
      if (!it->first.IsScalar()) return Error(line, key, "keys must be output names");
      std::string name = it->first.Scalar();
      std::string full = fmt::format("{}.{}", key, name);
      if (out.count(name)) return Error(line, full, "given twice");
      cfg_->lines[full] = line;
      FERRY_ASSIGN_OR_RETURN(out[name], Tolerance(Entry{it->second, line}, full));
    }
    return out;
  }
  // A path relative to the config's folder (absolute paths stay as they are).
  Result<std::string> Path(const Entry& e, const std::string& key) const {
    FERRY_ASSIGN_OR_RETURN(std::string s, String(e, key));
    fs::path p(s);
    return (p.is_absolute() ? p : fs::path(cfg_->dir) / p).lexically_normal().string();
  }

  Status Top(const YAML::Node& root);

 private:
  Status Source(const Entry& e);
  Status Reference(const Entry& e);
  Status Task(const Entry& e);
  Status Audit(const Entry& e);
  Result<Variant> ParseVariant(const Entry& e, const std::string& key);
  Result<Step> ParseStep(const Entry& e, const std::string& key);
  Status Optimize(const Entry& e, const std::string& key, OptimizeStep* s);
  Status Convert(const Entry& e, const std::string& key, ConvertStep* s);
  Status Quantize(const Entry& e, const std::string& key, QuantizeStep* s);

  std::string file_;
  Config* cfg_;
};

Status Parser::Top(const YAML::Node& root) {
  Entry top{root, 1};
  if (root.IsNull())
    return Error(
        1, "",
        "the file is empty (expected a mapping with name, version, source, reference, variants)");
  FERRY_ASSIGN_OR_RETURN(
      auto m, Open(top, "",
                   {"name", "version", "source", "reference", "tolerance", "tolerances", "task",
                    "audit", "variants", "fallback", "prep", "class_names"}));
  int last = 1;
  for (const auto& [k, e] : m) last = std::max(last, e.line);
  FERRY_ASSIGN_OR_RETURN(Entry name, Required(m, "name", "", 1));
  FERRY_ASSIGN_OR_RETURN(cfg_->name, String(name, "name"));
  if (!ValidName(cfg_->name, 128))
    return Expected(name, "name", "a name of letters, digits, '.', '_' and '-'");
  FERRY_ASSIGN_OR_RETURN(Entry version, Required(m, "version", "", 1));
  FERRY_ASSIGN_OR_RETURN(cfg_->version, String(version, "version"));
  if (!ValidName(cfg_->version, 64))
    return Expected(version, "version", "a version of letters, digits, '.', '_' and '-'");
  FERRY_ASSIGN_OR_RETURN(Entry source, Required(m, "source", "", 1));
  FERRY_RETURN_IF_ERROR(Source(source));
  FERRY_ASSIGN_OR_RETURN(Entry reference, Required(m, "reference", "", 1));
  FERRY_RETURN_IF_ERROR(Reference(reference));
  if (m.count("tolerance")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->tolerance, Tolerance(m["tolerance"], "tolerance"));
  }
  if (m.count("tolerances")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->tolerances, Tolerances(m["tolerances"], "tolerances"));
  }
  if (m.count("prep")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->prep, Path(m["prep"], "prep"));
  }
  if (m.count("class_names")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->class_names, Path(m["class_names"], "class_names"));
  }
  if (m.count("task")) FERRY_RETURN_IF_ERROR(Task(m["task"]));
  if (m.count("audit")) FERRY_RETURN_IF_ERROR(Audit(m["audit"]));
  FERRY_ASSIGN_OR_RETURN(Entry variants, Required(m, "variants", "", 1));
  if (!variants.node.IsSequence() || variants.node.size() == 0)
    return Expected(variants, "variants", "a list of at least one variant ({name: fp32})");
  size_t i = 0;
  for (const auto& item : variants.node) {
    std::string key = fmt::format("variants[{}]", i++);
    Entry ve{item, LineOf(item, variants.line)};
    FERRY_ASSIGN_OR_RETURN(Variant v, ParseVariant(ve, key));
    if (cfg_->FindVariant(v.name))
      return Error(ve.line, key + ".name", fmt::format("variant '{}' is given twice", v.name));
    cfg_->variants.push_back(std::move(v));
  }
  if (m.count("fallback")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->fallback, String(m["fallback"], "fallback"));
    if (!cfg_->FindVariant(cfg_->fallback)) {
      std::string names;
      for (const auto& v : cfg_->variants) names += (names.empty() ? "" : ", ") + v.name;
      return Expected(m["fallback"], "fallback", "the name of a variant (" + names + ")");
    }
    if (cfg_->fallback == cfg_->variants.front().name)
      return Error(m["fallback"].line, "fallback",
                   fmt::format("'{}' is the default variant (the first); the fallback is another "
                               "variant",
                               cfg_->fallback));
  }
  // Cross-key checks.
  for (size_t vi = 0; vi < cfg_->variants.size(); ++vi) {
    const Variant& v = cfg_->variants[vi];
    for (size_t si = 0; si < v.steps.size(); ++si)
      if (v.steps[si].kind == Step::Kind::kQuantize && v.steps[si].quantize.accuracy_budget &&
          !cfg_->task)
        return Error(v.steps[si].line,
                     fmt::format("variants[{}].steps[{}].quantize.accuracy_budget", vi, si),
                     "needs a task (output and labels) to measure accuracy on");
    if ((v.max_accuracy_drop || v.max_class_drop) && !cfg_->task)
      return Error(v.line, fmt::format("variants[{}]", vi),
                   "max_accuracy_drop / max_class_drop need a task (output and labels)");
  }
  return Status::Ok();
}

Status Parser::Source(const Entry& e) {
  FERRY_ASSIGN_OR_RETURN(auto m, Open(e, "source", {"path", "sha256"}));
  FERRY_ASSIGN_OR_RETURN(Entry path, Required(m, "path", "source", e.line));
  FERRY_ASSIGN_OR_RETURN(cfg_->source_name, String(path, "source.path"));
  FERRY_ASSIGN_OR_RETURN(cfg_->source, Path(path, "source.path"));
  FERRY_ASSIGN_OR_RETURN(Entry sha, Required(m, "sha256", "source", e.line));
  FERRY_ASSIGN_OR_RETURN(std::string digest, String(sha, "source.sha256"));
  bool hex = digest.size() == 64;
  for (char c : digest) hex = hex && std::isxdigit(static_cast<unsigned char>(c));
  if (!hex) return Expected(sha, "source.sha256", "64 hex digits (sha256sum of the source file)");
  for (char& c : digest) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  cfg_->source_sha256 = digest;
  cfg_->source_sha256_line = sha.line;
  return Status::Ok();
}

Status Parser::Reference(const Entry& e) {
  FERRY_ASSIGN_OR_RETURN(
      auto m, Open(e, "reference", {"data", "files", "samples", "edge_cases", "random", "seed"}));
  if (m.count("data") == m.count("files"))
    return Error(e.line, "reference",
                 "expected exactly one of data (tensors) and files (raw inputs through `prep`)");
  if (m.count("data")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->reference_data, Path(m["data"], "reference.data"));
  } else {
    FERRY_ASSIGN_OR_RETURN(cfg_->reference_files, Path(m["files"], "reference.files"));
  }
  if (m.count("samples")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->samples, Int(m["samples"], "reference.samples", 1));
  }
  if (m.count("edge_cases")) {
    const Entry& ec = m["edge_cases"];
    if (!ec.node.IsSequence())
      return Expected(ec, "reference.edge_cases", "a list of zeros, large");
    size_t i = 0;
    for (const auto& item : ec.node) {
      std::string key = fmt::format("reference.edge_cases[{}]", i++);
      FERRY_ASSIGN_OR_RETURN(std::string kind,
                             OneOf(Entry{item, LineOf(item, ec.line)}, key, {"zeros", "large"}));
      if (std::find(cfg_->edge_cases.begin(), cfg_->edge_cases.end(), kind) !=
          cfg_->edge_cases.end())
        return Error(LineOf(item, ec.line), key, fmt::format("'{}' is given twice", kind));
      cfg_->edge_cases.push_back(kind);
    }
  }
  if (m.count("random")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->random_sets, Int(m["random"], "reference.random", 0));
    if (cfg_->random_sets > 64) return Expected(m["random"], "reference.random", "at most 64");
  }
  if (m.count("seed")) {
    FERRY_ASSIGN_OR_RETURN(int64_t seed, Int(m["seed"], "reference.seed", 0));
    cfg_->seed = static_cast<uint64_t>(seed);
  }
  return Status::Ok();
}

Status Parser::Task(const Entry& e) {
  FERRY_ASSIGN_OR_RETURN(
      auto m, Open(e, "task",
                   {"metric", "output", "labels", "top_k", "max_accuracy_drop", "max_class_drop"}));
  TaskSpec t;
  if (m.count("metric")) {
    FERRY_RETURN_IF_ERROR(OneOf(m["metric"], "task.metric", {"top1"}).status());
  }
  FERRY_ASSIGN_OR_RETURN(Entry out, Required(m, "output", "task", e.line));
  FERRY_ASSIGN_OR_RETURN(t.output, String(out, "task.output"));
  FERRY_ASSIGN_OR_RETURN(Entry labels, Required(m, "labels", "task", e.line));
  FERRY_ASSIGN_OR_RETURN(t.labels, Path(labels, "task.labels"));
  if (m.count("top_k")) {
    FERRY_ASSIGN_OR_RETURN(t.top_k, Int(m["top_k"], "task.top_k", 1));
  }
  if (m.count("max_accuracy_drop")) {
    FERRY_ASSIGN_OR_RETURN(t.max_accuracy_drop,
                           Number(m["max_accuracy_drop"], "task.max_accuracy_drop", 0));
  }
  if (m.count("max_class_drop")) {
    FERRY_ASSIGN_OR_RETURN(t.max_class_drop, Number(m["max_class_drop"], "task.max_class_drop", 0));
  }
  cfg_->task = std::move(t);
  return Status::Ok();
}

Status Parser::Audit(const Entry& e) {
  FERRY_ASSIGN_OR_RETURN(auto m, Open(e, "audit", {"targets", "strict"}));
  FERRY_ASSIGN_OR_RETURN(Entry targets, Required(m, "targets", "audit", e.line));
  FERRY_ASSIGN_OR_RETURN(cfg_->audit_targets, StringList(targets, "audit.targets"));
  for (size_t i = 0; i < cfg_->audit_targets.size(); ++i) {
    const std::string& t = cfg_->audit_targets[i];
    bool ok = t == "ferry" || t == "ferry-cpu" || t.rfind("opset:", 0) == 0;
    if (!ok)
      return Error(targets.line, fmt::format("audit.targets[{}]", i),
                   fmt::format("expected ferry, ferry-cpu or opset:N, got '{}'", t));
  }
  if (m.count("strict")) {
    FERRY_ASSIGN_OR_RETURN(cfg_->audit_strict, Bool(m["strict"], "audit.strict"));
  }
  return Status::Ok();
}

Result<Variant> Parser::ParseVariant(const Entry& e, const std::string& key) {
  FERRY_ASSIGN_OR_RETURN(auto m, Open(e, key,
                                      {"name", "steps", "tolerance", "tolerances",
                                       "max_accuracy_drop", "max_class_drop", "edge_cases"}));
  Variant v;
  v.line = e.line;
  FERRY_ASSIGN_OR_RETURN(Entry name, Required(m, "name", key, e.line));
  FERRY_ASSIGN_OR_RETURN(v.name, String(name, key + ".name"));
  if (!ValidName(v.name, 64) || v.name.find('.') != std::string::npos)
    return Expected(name, key + ".name", "a name of letters, digits, '_' and '-' (fp32, int8)");
  if (m.count("steps")) {
    const Entry& steps = m["steps"];
    if (!steps.node.IsSequence())
      return Expected(steps, key + ".steps", "a list of steps (- optimize: {...})");
    size_t i = 0;
    for (const auto& item : steps.node) {
      std::string sk = fmt::format("{}.steps[{}]", key, i++);
      FERRY_ASSIGN_OR_RETURN(Step s, ParseStep(Entry{item, LineOf(item, steps.line)}, sk));
      v.steps.push_back(std::move(s));
    }
  }
  if (m.count("tolerance")) {
    FERRY_ASSIGN_OR_RETURN(v.tolerance, Tolerance(m["tolerance"], key + ".tolerance"));
  }
  if (m.count("tolerances")) {
    FERRY_ASSIGN_OR_RETURN(v.tolerances, Tolerances(m["tolerances"], key + ".tolerances"));
  }
  if (m.count("max_accuracy_drop")) {
    FERRY_ASSIGN_OR_RETURN(v.max_accuracy_drop,
                           Number(m["max_accuracy_drop"], key + ".max_accuracy_drop", 0));
  }
  if (m.count("edge_cases")) {
    FERRY_ASSIGN_OR_RETURN(v.edge_cases, Bool(m["edge_cases"], key + ".edge_cases"));
  }
  if (m.count("max_class_drop")) {
    FERRY_ASSIGN_OR_RETURN(v.max_class_drop,
                           Number(m["max_class_drop"], key + ".max_class_drop", 0));
  }
  return v;
}

Result<Step> Parser::ParseStep(const Entry& e, const std::string& key) {
  if (!e.node.IsMap() || e.node.size() != 1)
    return Expected(e, key, "one of optimize, convert, quantize (- quantize: {mode: static, ...})");
  FERRY_ASSIGN_OR_RETURN(auto m, Open(e, key, {"optimize", "convert", "quantize"}));
  Step s;
  s.line = e.line;
  const auto& [kind, body] = *m.begin();
  std::string bk = Join(key, kind);
  if (kind == "optimize") {
    s.kind = Step::Kind::kOptimize;
    FERRY_RETURN_IF_ERROR(Optimize(body, bk, &s.optimize));
  } else if (kind == "convert") {
    s.kind = Step::Kind::kConvert;
    FERRY_RETURN_IF_ERROR(Convert(body, bk, &s.convert));
  } else {
    s.kind = Step::Kind::kQuantize;
    FERRY_RETURN_IF_ERROR(Quantize(body, bk, &s.quantize));
  }
  return s;
}

Status Parser::Optimize(const Entry& e, const std::string& key, OptimizeStep* s) {
  FERRY_ASSIGN_OR_RETURN(auto m,
                         Open(e, key, {"level", "passes", "skip", "fix_shape", "check"}, true));
  if (m.count("level")) {
    FERRY_ASSIGN_OR_RETURN(s->level, OneOf(m["level"], key + ".level", {"basic", "all"}));
  }
  if (m.count("passes")) {
    FERRY_ASSIGN_OR_RETURN(s->passes, StringList(m["passes"], key + ".passes"));
  }
  if (m.count("skip")) {
    FERRY_ASSIGN_OR_RETURN(s->skip, StringList(m["skip"], key + ".skip"));
  }
  if (m.count("fix_shape")) {
    const Entry& fe = m["fix_shape"];
    if (!fe.node.IsMap()) return Expected(fe, key + ".fix_shape", "a mapping INPUT: [dims]");
    for (auto it = fe.node.begin(); it != fe.node.end(); ++it) {
      int line = LineOf(it->first, fe.line);
      std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
      std::string full = fmt::format("{}.fix_shape.{}", key, name);
      if (name.empty()) return Error(line, key + ".fix_shape", "keys must be input names");
      if (s->fix_shape.count(name)) return Error(line, full, "given twice");
      cfg_->lines[full] = line;
      FERRY_ASSIGN_OR_RETURN(s->fix_shape[name], Dims(Entry{it->second, line}, full));
    }
  }
  if (m.count("check")) {
    FERRY_ASSIGN_OR_RETURN(int64_t c, Int(m["check"], key + ".check", 0));
    s->check = static_cast<int>(std::min<int64_t>(c, 1000));
  }
  return Status::Ok();
}

Status Parser::Convert(const Entry& e, const std::string& key, ConvertStep* s) {
  FERRY_ASSIGN_OR_RETURN(auto m,
                         Open(e, key, {"opset", "fp16", "keep_fp32", "keep_io_types", "check"}));
  if (m.count("opset")) {
    FERRY_ASSIGN_OR_RETURN(s->opset, Int(m["opset"], key + ".opset", 1));
  }
  if (m.count("fp16")) {
    FERRY_ASSIGN_OR_RETURN(s->fp16, Bool(m["fp16"], key + ".fp16"));
  }
  if ((s->opset > 0) == s->fp16)
    return Error(e.line, key, "give exactly one of opset: N and fp16: true");
  if (m.count("keep_fp32")) {
    FERRY_ASSIGN_OR_RETURN(s->keep_fp32, StringList(m["keep_fp32"], key + ".keep_fp32"));
  }
  if (m.count("keep_io_types")) {
    FERRY_ASSIGN_OR_RETURN(s->keep_io_types, Bool(m["keep_io_types"], key + ".keep_io_types"));
  }
  if (!s->fp16 && (m.count("keep_fp32") || m.count("keep_io_types")))
    return Error(e.line, key, "keep_fp32 and keep_io_types go with fp16: true");
  if (m.count("check")) {
    FERRY_ASSIGN_OR_RETURN(int64_t c, Int(m["check"], key + ".check", 0));
    s->check = static_cast<int>(std::min<int64_t>(c, 1000));
  }
  return Status::Ok();
}

Status Parser::Quantize(const Entry& e, const std::string& key, QuantizeStep* s) {
  FERRY_ASSIGN_OR_RETURN(
      auto m, Open(e, key,
                   {"mode", "calibration", "method", "activation_type", "per_channel", "symmetric",
                    "reduce_range", "exclude", "max_samples", "accuracy_budget"}));
  FERRY_ASSIGN_OR_RETURN(Entry mode, Required(m, "mode", key, e.line));
  FERRY_ASSIGN_OR_RETURN(s->mode, OneOf(mode, key + ".mode", {"static", "dynamic"}));
  if (m.count("calibration")) {
    if (s->mode != "static")
      return Error(m["calibration"].line, key + ".calibration",
                   "only static quantization is calibrated (dynamic ranges are computed at run "
                   "time)");
    FERRY_ASSIGN_OR_RETURN(s->calibration, Path(m["calibration"], key + ".calibration"));
  } else if (s->mode == "static") {
    return Error(e.line, key + ".calibration", "missing (required with mode: static)");
  }
  if (m.count("method")) {
    FERRY_ASSIGN_OR_RETURN(s->method, String(m["method"], key + ".method"));
    const std::string& t = s->method;
    bool ok = t == "minmax" || t == "entropy" || t == "percentile";
    if (!ok && t.rfind("percentile:", 0) == 0) {
      char* end = nullptr;
      double p = std::strtod(t.c_str() + 11, &end);
      ok = *end == '\0' && p > 0 && p <= 100;
    }
    if (!ok)
      return Expected(m["method"], key + ".method", "minmax, percentile, percentile:P or entropy");
  }
  if (m.count("activation_type")) {
    FERRY_ASSIGN_OR_RETURN(s->activation_type,
                           OneOf(m["activation_type"], key + ".activation_type", {"u8", "s8"}));
  }
  if (m.count("per_channel")) {
    FERRY_ASSIGN_OR_RETURN(s->per_channel, Bool(m["per_channel"], key + ".per_channel"));
  }
  if (m.count("symmetric")) {
    FERRY_ASSIGN_OR_RETURN(s->symmetric, Bool(m["symmetric"], key + ".symmetric"));
  }
  if (m.count("reduce_range")) {
    FERRY_ASSIGN_OR_RETURN(s->reduce_range, Bool(m["reduce_range"], key + ".reduce_range"));
  }
  if (m.count("exclude")) {
    FERRY_ASSIGN_OR_RETURN(s->exclude, StringList(m["exclude"], key + ".exclude"));
  }
  if (m.count("max_samples")) {
    FERRY_ASSIGN_OR_RETURN(s->max_samples, Int(m["max_samples"], key + ".max_samples", 1));
  }
  if (m.count("accuracy_budget")) {
    FERRY_ASSIGN_OR_RETURN(s->accuracy_budget,
                           Number(m["accuracy_budget"], key + ".accuracy_budget", 0));
  }
  return Status::Ok();
}

std::string FileSha256(const std::string& bytes) {
  Sha256 h;
  h.Update(bytes.data(), bytes.size());
  return h.HexDigest();
}

}  // namespace

Result<Config> ParseConfig(const std::string& text, const std::string& path) {
  Config cfg;
  cfg.path = path;
  fs::path parent = fs::path(path).parent_path();
  cfg.dir = parent.empty() ? "." : parent.string();
  cfg.text = text;
  cfg.sha256 = FileSha256(text);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    return InvalidError("{}:{}: not valid YAML: {}", path, line, e.msg);
  }
  Parser p(path, &cfg);
  try {
    FERRY_RETURN_IF_ERROR(p.Top(root));
  } catch (const YAML::Exception& e) {
    int line = e.mark.is_null() ? 1 : e.mark.line + 1;
    return InvalidError("{}:{}: {}", path, line, e.msg);
  }
  return cfg;
}

Result<Config> LoadConfig(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return InvalidError("config '{}': no such file", path);
  FERRY_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(path));
  return ParseConfig(text, path);
}

Status CheckInputs(const Config& c) {
  std::error_code ec;
  auto where = [&](const std::string& key) {
    return fmt::format("{}:{}: {}", c.path, c.Line(key), key);
  };
  if (!fs::is_regular_file(c.source, ec))
    return InvalidError("{}: '{}' is not a file", where("source.path"), c.source);
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(c.source));
  std::string got = FileSha256(bytes);
  if (got != c.source_sha256)
    return InvalidError(
        "{}: source '{}' has SHA-256 {}, but ferry.yaml pins {} (a different model: update "
        "source.sha256 only if this is the model you mean to ship)",
        where("source.sha256"), c.source, got, c.source_sha256);
  if (!c.reference_files.empty()) {
    if (c.prep.empty())
      return InvalidError("{}: raw reference files need a `prep` spec to become tensors",
                          where("reference.files"));
    if (!fs::exists(c.reference_files, ec))
      return InvalidError("{}: '{}' is not a file or folder", where("reference.files"),
                          c.reference_files);
  } else if (!fs::is_directory(c.reference_data, ec)) {
    return InvalidError("{}: '{}' is not a folder", where("reference.data"), c.reference_data);
  }
  if (c.task && !fs::is_regular_file(c.task->labels, ec))
    return InvalidError("{}: '{}' is not a file", where("task.labels"), c.task->labels);
  for (size_t vi = 0; vi < c.variants.size(); ++vi)
    for (size_t si = 0; si < c.variants[vi].steps.size(); ++si) {
      const Step& s = c.variants[vi].steps[si];
      if (s.kind != Step::Kind::kQuantize || s.quantize.calibration.empty()) continue;
      std::string key = fmt::format("variants[{}].steps[{}].quantize.calibration", vi, si);
      if (!fs::is_directory(s.quantize.calibration, ec))
        return InvalidError("{}: '{}' is not a folder", where(key), s.quantize.calibration);
    }
  return Status::Ok();
}

}  // namespace ferry::artifact
