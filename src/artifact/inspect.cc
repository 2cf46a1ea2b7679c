#include "artifact/inspect.h"

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "artifact/build.h"
#include "artifact/sign.h"
#include "core/json_text.h"
#include "core/lines.h"
#include "core/npy.h"
#include "core/sha256.h"

namespace ferry::artifact {

namespace fs = std::filesystem;

namespace {

// A keep-aspect resize of a prep spec's JSON: "shorter side 256", "longer side 512", or both.
std::string KeepAspectText(const nlohmann::json& resize) {
  std::string s;
  for (const char* key : {"shorter_side", "longer_side"})
    if (resize.contains(key))
      s += fmt::format("{}{} side {}", s.empty() ? "" : ", ",
                       std::string(key) == "shorter_side" ? "shorter" : "longer",
                       resize[key].dump());
  return s;
}

// Typed reads of manifest fields; the first problem names the field and wins.
class Reader {
 public:
  explicit Reader(std::string what) : what_(std::move(what)) {}

  std::string Str(const nlohmann::json& j, const char* key, const std::string& at) {
    if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
    Fail(at, key, "a string");
    return "";
  }
  // A string, or "" for null / absent.
  std::string OptStr(const nlohmann::json& j, const char* key) {
    if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
    return "";
  }
  int64_t Int(const nlohmann::json& j, const char* key, const std::string& at) {
    if (j.is_object() && j.contains(key) && j[key].is_number_integer())
      return j[key].get<int64_t>();
    Fail(at, key, "an integer");
    return 0;
  }
  int64_t OptInt(const nlohmann::json& j, const char* key) {
    if (j.is_object() && j.contains(key) && j[key].is_number_integer())
      return j[key].get<int64_t>();
    return 0;
  }
  double Num(const nlohmann::json& j, const char* key) {
    if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
    return 0;
  }
  std::optional<double> OptNum(const nlohmann::json& j, const char* key) {
    if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
    return std::nullopt;
  }
  const nlohmann::json& Array(const nlohmann::json& j, const char* key, const std::string& at) {
    static const nlohmann::json kEmpty = nlohmann::json::array();
    if (j.is_object() && j.contains(key) && j[key].is_array()) return j[key];
    Fail(at, key, "a list");
    return kEmpty;
  }

  std::vector<IoInfo> Io(const nlohmann::json& j, const char* key, const std::string& at) {
    std::vector<IoInfo> out;
    const auto& list = Array(j, key, at);
    for (size_t i = 0; i < list.size(); ++i) {
      std::string here = fmt::format("{}{}[{}]", at, key, i);
      IoInfo io;
      io.name = Str(list[i], "name", here + ".");
      io.dtype = Str(list[i], "dtype", here + ".");
      if (list[i].is_object() && list[i].contains("shape") && list[i]["shape"].is_array()) {
        io.shape.emplace();
        for (const auto& d : list[i]["shape"]) {
          DimInfo dim;
          if (d.is_number_integer())
            dim.value = d.get<int64_t>();
          else if (d.is_string())
            dim.symbol = d.get<std::string>();
          else if (!d.is_null())
            Fail(here + ".", "shape", "integers, names or null");
          io.shape->push_back(std::move(dim));
        }
      }
      out.push_back(std::move(io));
    }
    return out;
  }

  std::vector<std::pair<std::string, int64_t>> Opsets(const nlohmann::json& j,
                                                      const std::string& at) {
    std::vector<std::pair<std::string, int64_t>> out;
    const auto& list = Array(j, "opsets", at);
    for (size_t i = 0; i < list.size(); ++i) {
      std::string here = fmt::format("{}opsets[{}].", at, i);
      out.emplace_back(Str(list[i], "domain", here), Int(list[i], "version", here));
    }
    return out;
  }

  void Fail(const std::string& at, const char* key, const char* expected) {
    if (problem_.empty()) problem_ = fmt::format("{}: {}{}: expected {}", what_, at, key, expected);
  }
  Status status() const {
    return problem_.empty() ? Status::Ok() : Status(StatusCode::kInvalid, problem_);
  }

 private:
  std::string what_, problem_;
};

// The artifact's files we read, from a folder or from the archive's members.
struct Files {
  std::map<std::string, std::string> members;  // archive: path -> bytes
  std::string dir;                             // folder
  bool archive = false;

  bool Has(const std::string& rel) const {
    if (archive) return members.count(rel) > 0;
    std::error_code ec;
    return fs::is_regular_file(fs::path(dir) / rel, ec);
  }
  Result<std::string> Read(const std::string& rel, const std::string& what) const {
    if (archive) {
      auto it = members.find(rel);
      if (it == members.end()) return InvalidError("{}: no '{}' in the archive", what, rel);
      return it->second;
    }
    if (!Has(rel)) return InvalidError("{}: '{}' is missing", what, rel);
    return ReadFileBytes((fs::path(dir) / rel).string());
  }
};

std::string Digest(const std::string& bytes) {
  Sha256 h;
  h.Update(bytes.data(), bytes.size());
  return h.HexDigest();
}

nlohmann::json IoJson(const std::vector<IoInfo>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& io : list) {
    nlohmann::json shape = nullptr;
    if (io.shape) {
      shape = nlohmann::json::array();
      for (const auto& d : *io.shape)
        shape.push_back(d.value            ? nlohmann::json(*d.value)
                        : d.symbol.empty() ? nlohmann::json(nullptr)
                                           : nlohmann::json(d.symbol));
    }
    out.push_back({{"name", io.name}, {"dtype", io.dtype}, {"shape", shape}});
  }
  return out;
}

nlohmann::json OpsetsJson(const std::vector<std::pair<std::string, int64_t>>& ops) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [d, v] : ops) out.push_back({{"domain", d}, {"version", v}});
  return out;
}

std::string OpsetsText(const std::vector<std::pair<std::string, int64_t>>& ops) {
  std::string s;
  for (const auto& [d, v] : ops)
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", d.empty() ? "ai.onnx" : d, v);
  return s;
}

std::string Short(const std::string& digest) {
  return digest.size() > 12 ? digest.substr(0, 12) : digest;
}

}  // namespace

std::string IoTypeText(const IoInfo& io) {
  if (!io.shape) return io.dtype + "[*]";
  std::string s = io.dtype + "[";
  for (size_t i = 0; i < io.shape->size(); ++i) {
    const DimInfo& d = (*io.shape)[i];
    s += (i ? ", " : "") + (d.value ? std::to_string(*d.value) : d.symbol.empty() ? "?" : d.symbol);
  }
  return s + "]";
}

const VariantInfo* ArtifactInfo::FindVariant(const std::string& n) const {
  for (const auto& v : variants)
    if (v.name == n) return &v;
  return nullptr;
}

const std::vector<IoInfo>& ArtifactInfo::ServedInputs() const {
  const VariantInfo* v = FindVariant(default_variant);
  return v ? v->inputs : inputs;
}

const std::vector<IoInfo>& ArtifactInfo::ServedOutputs() const {
  const VariantInfo* v = FindVariant(default_variant);
  return v ? v->outputs : outputs;
}

Result<ArtifactInfo> ReadArtifactInfo(const std::string& path) {
  ArtifactInfo a;
  a.path = path;
  Files files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    files.dir = path;
  } else if (fs::is_regular_file(path, ec)) {
    a.archive = files.archive = true;
    FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
    FERRY_ASSIGN_OR_RETURN(auto members, ReadTar(bytes, path));
    for (auto& m : members)
      if (!m.is_dir) files.members[m.path] = std::move(m.bytes);
  } else {
    return InvalidError("artifact '{}': no such folder or archive", path);
  }
  const std::string what = fmt::format("artifact '{}'", path);
  FERRY_ASSIGN_OR_RETURN(std::string text, files.Read("manifest.json", what));
  a.manifest_sha256 = Digest(text);
  nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
  if (m.is_discarded() || !m.is_object())
    return InvalidError("{}: manifest.json is not a JSON object", what);
  Reader rd(what + ": manifest.json");
  a.format = rd.Str(m, "format", "");
  FERRY_RETURN_IF_ERROR(rd.status());
  if (a.format != kManifestFormat)
    return InvalidError("{}: manifest.json has format '{}', expected '{}'", what, a.format,
                        kManifestFormat);
  a.name = rd.Str(m, "name", "");
  a.version = rd.Str(m, "version", "");
  a.ferry_version = rd.Str(m, "ferry_version", "");
  if (m.contains("config")) a.config_sha256 = rd.OptStr(m["config"], "sha256");
  if (m.contains("source")) {
    a.source_file = rd.OptStr(m["source"], "file");
    a.source_sha256 = rd.OptStr(m["source"], "sha256");
    a.source_weights_sha256 = rd.OptStr(m["source"], "weights_sha256");
    a.source_parameters = rd.OptInt(m["source"], "parameters");
  }
  a.inputs = rd.Io(m, "inputs", "");
  a.outputs = rd.Io(m, "outputs", "");
  a.opsets = rd.Opsets(m, "");
  a.default_variant = rd.Str(m, "default_variant", "");
  a.fallback = rd.OptStr(m, "fallback");
  if (m.contains("golden") && m["golden"].is_object()) {
    const auto& g = m["golden"];
    a.golden_sets = rd.OptInt(g, "sets");
    a.golden_rows = rd.OptInt(g, "rows");
    if (g.contains("edge_cases") && g["edge_cases"].is_object() &&
        g["edge_cases"].contains("kinds") && g["edge_cases"]["kinds"].is_array())
      for (const auto& k : g["edge_cases"]["kinds"])
        if (k.is_string()) a.edge_kinds.push_back(k.get<std::string>());
  }
  const auto& variants = rd.Array(m, "variants", "");
  for (size_t i = 0; i < variants.size(); ++i) {
    const auto& vj = variants[i];
    std::string at = fmt::format("variants[{}].", i);
    VariantInfo v;
    v.name = rd.Str(vj, "name", at);
    v.file = rd.Str(vj, "file", at);
    v.sha256 = rd.Str(vj, "sha256", at);
    v.weights_sha256 = rd.OptStr(vj, "weights_sha256");
    v.bytes = static_cast<uint64_t>(rd.OptInt(vj, "bytes"));
    v.parameters = rd.OptInt(vj, "parameters");
    v.inputs = rd.Io(vj, "inputs", at);
    v.outputs = rd.Io(vj, "outputs", at);
    v.opsets = rd.Opsets(vj, at);
    if (vj.contains("steps") && vj["steps"].is_array())
      for (const auto& s : vj["steps"])
        v.steps.emplace_back(rd.OptStr(s, "step"), rd.OptStr(s, "summary"));
    if (vj.contains("verification") && vj["verification"].is_object()) {
      const auto& ver = vj["verification"];
      v.pass = ver.value("pass", false);
      v.sets = rd.OptInt(ver, "sets");
      if (ver.contains("outputs") && ver["outputs"].is_array())
        for (const auto& o : ver["outputs"]) {
          OutputCheckInfo c;
          c.name = rd.OptStr(o, "name");
          c.atol = rd.Num(o, "atol");
          c.rtol = rd.Num(o, "rtol");
          c.max_abs = rd.Num(o, "max_abs");
          c.elements = rd.OptInt(o, "elements");
          c.out_of_tolerance = rd.OptInt(o, "out_of_tolerance");
          c.pass = o.is_object() ? o.value("pass", false) : false;
          c.note = rd.OptStr(o, "note");
          v.checks.push_back(std::move(c));
        }
      if (ver.contains("task") && ver["task"].is_object()) {
        const auto& t = ver["task"];
        TaskInfo ti;
        ti.output = rd.OptStr(t, "output");
        ti.rows = rd.OptInt(t, "rows");
        ti.golden_accuracy = rd.Num(t, "golden_accuracy");
        ti.variant_accuracy = rd.Num(t, "variant_accuracy");
        ti.drop_pp = rd.Num(t, "drop_pp");
        ti.max_accuracy_drop_pp = rd.OptNum(t, "max_accuracy_drop_pp");
        ti.max_class_drop_pp = rd.OptNum(t, "max_class_drop_pp");
        v.task = ti;
      }
    }
    a.variants.push_back(std::move(v));
  }
  const auto& listed = rd.Array(m, "files", "");
  for (size_t i = 0; i < listed.size(); ++i) {
    std::string at = fmt::format("files[{}].", i);
    FileEntry f;
    f.path = rd.Str(listed[i], "path", at);
    f.sha256 = rd.Str(listed[i], "sha256", at);
    f.bytes = static_cast<uint64_t>(rd.Int(listed[i], "bytes", at));
    a.files.push_back(std::move(f));
  }
  FERRY_RETURN_IF_ERROR(rd.status());
  if (!a.variants.empty() && !a.FindVariant(a.default_variant))
    return InvalidError("{}: manifest.json: default_variant '{}' is not one of the variants", what,
                        a.default_variant);

  // Pre-processing and class names (artifacts built before they existed have neither key).
  if (m.contains("prep") && m["prep"].is_object()) {
    const auto& p = m["prep"];
    a.prep_sha256 = rd.Str(p, "sha256", "prep.");
    if (!p.contains("spec") || !p["spec"].is_object())
      return InvalidError("{}: manifest.json: prep.spec: expected an object", what);
    a.prep_json = JsonText(p["spec"], 2) + "\n";
    FERRY_RETURN_IF_ERROR(rd.status());
    std::string file = rd.OptStr(p, "file");
    if (file.empty()) file = kPrepFile;
    if (!files.Has(file))
      return InvalidError("{}: the pre-processing spec '{}' listed in manifest.json is missing",
                          what, file);
  }
  if (m.contains("class_names") && m["class_names"].is_object()) {
    const auto& c = m["class_names"];
    std::string file = rd.OptStr(c, "file");
    if (file.empty()) file = kClassNamesFile;
    FERRY_ASSIGN_OR_RETURN(std::string bytes, files.Read(file, what));
    a.class_names_sha256 = Digest(bytes);
    a.class_names = SplitLines(bytes);
  }
  a.signature_present = files.Has(kSignatureFile);
  return a;
}

std::string FormatText(const ArtifactInfo& a) {
  std::string s = fmt::format("artifact {} ({})\n", a.path, a.archive ? "archive" : "folder");
  s += fmt::format("  name {}  version {}  built by Ferry {}  ({})\n", a.name, a.version,
                   a.ferry_version, a.format);
  s += fmt::format("  source {}  sha256 {}  weights {}  {} parameters\n", a.source_file,
                   Short(a.source_sha256), Short(a.source_weights_sha256), a.source_parameters);
  s += fmt::format("  config sha256 {}  manifest sha256 {}\n", Short(a.config_sha256),
                   Short(a.manifest_sha256));
  s += "  inputs:\n";
  for (const auto& io : a.ServedInputs()) s += fmt::format("    {}  {}\n", io.name, IoTypeText(io));
  s += "  outputs:\n";
  for (const auto& io : a.ServedOutputs())
    s += fmt::format("    {}  {}\n", io.name, IoTypeText(io));
  if (a.prep_json.empty()) {
    s += "  pre-processing: none (clients send tensors)\n";
  } else {
    s += fmt::format("  pre-processing: {} (sha256 {})\n", kPrepFile, Short(a.prep_sha256));
    auto spec = nlohmann::json::parse(a.prep_json, nullptr, false);
    if (spec.is_object() && spec.contains("inputs") && spec["inputs"].is_array())
      for (const auto& in : spec["inputs"]) {
        const auto& im = in.value("image", nlohmann::json::object());
        std::string resize = "no resize";
        if (im.contains("resize") && im["resize"].is_object())
          resize = fmt::format("resize {} {}",
                               im["resize"].contains("size") ? im["resize"]["size"].dump()
                                                             : KeepAspectText(im["resize"]),
                               im["resize"].value("filter", ""));
        s += fmt::format("    {}: image, {}, {}, layout {}, {}\n", in.value("name", ""),
                         im.value("color", ""), resize, im.value("layout", ""),
                         im.value("dtype", ""));
      }
  }
  if (!a.class_names.empty())
    s += fmt::format("  class names: {} ({} classes: {}{})\n", kClassNamesFile,
                     a.class_names.size(), a.class_names.front(),
                     a.class_names.size() > 1 ? ", ..., " + a.class_names.back() : "");
  s += fmt::format("  opsets: {}\n", OpsetsText(a.opsets));
  s += fmt::format(
      "  golden set: {} set(s){}{}\n", a.golden_sets,
      a.golden_rows ? fmt::format(", {} labelled rows", a.golden_rows) : "",
      a.edge_kinds.empty() ? "" : fmt::format(", edge cases {}", fmt::join(a.edge_kinds, ", ")));
  s += "  variants:\n";
  for (const auto& v : a.variants) {
    std::string role = v.name == a.default_variant ? "default"
                       : v.name == a.fallback      ? "fallback"
                                                   : "variant";
    s += fmt::format("    {} ({}): {}  {} bytes  sha256 {}  weights {}  opsets {}\n", v.name, role,
                     v.file, v.bytes, Short(v.sha256), Short(v.weights_sha256),
                     OpsetsText(v.opsets));
    for (const auto& [kind, summary] : v.steps) s += fmt::format("      {}: {}\n", kind, summary);
    if (v.steps.empty()) s += "      (the source as is)\n";
    s += fmt::format("      verification: {} on {} golden set(s)\n", v.pass ? "PASS" : "FAIL",
                     v.sets);
    for (const auto& c : v.checks)
      s += c.note.empty()
               ? fmt::format("        {}: max abs {:.3g}, {} of {} beyond atol {:g} + rtol {:g}\n",
                             c.name, c.max_abs, c.out_of_tolerance, c.elements, c.atol, c.rtol)
               : fmt::format("        {}: {}\n", c.name, c.note);
    if (v.task)
      s += fmt::format(
          "        task {}: top-1 {:.2f}% (source {:.2f}%, drop {:.2f} pp, limit {}) on {} rows\n",
          v.task->output, 100 * v.task->variant_accuracy, 100 * v.task->golden_accuracy,
          v.task->drop_pp,
          v.task->max_accuracy_drop_pp ? fmt::format("{:g} pp", *v.task->max_accuracy_drop_pp)
                                       : "none",
          v.task->rows);
  }
  s += fmt::format("  files: {} listed in manifest.json; signature {}\n", a.files.size(),
                   a.signature_present ? "model.sig present (check it: ferry artifact verify --key)"
                                       : "none (ferry sign)");
  return s;
}

std::string FormatJson(const ArtifactInfo& a) {
  nlohmann::json j;
  j["artifact"] = a.path;
  j["archive"] = a.archive;
  j["format"] = a.format;
  j["name"] = a.name;
  j["version"] = a.version;
  j["ferry_version"] = a.ferry_version;
  j["manifest_sha256"] = a.manifest_sha256;
  j["config_sha256"] = a.config_sha256;
  j["source"] = {{"file", a.source_file},
                 {"sha256", a.source_sha256},
                 {"weights_sha256", a.source_weights_sha256},
                 {"parameters", a.source_parameters}};
  j["inputs"] = IoJson(a.ServedInputs());
  j["outputs"] = IoJson(a.ServedOutputs());
  j["source_inputs"] = IoJson(a.inputs);
  j["source_outputs"] = IoJson(a.outputs);
  j["opsets"] = OpsetsJson(a.opsets);
  j["prep"] = nullptr;
  if (!a.prep_json.empty())
    j["prep"] = {{"file", kPrepFile},
                 {"sha256", a.prep_sha256},
                 {"spec", nlohmann::json::parse(a.prep_json, nullptr, false)}};
  j["class_names"] = a.class_names;
  j["default_variant"] = a.default_variant;
  j["fallback"] = a.fallback.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.fallback);
  j["golden"] = {{"sets", a.golden_sets}, {"rows", a.golden_rows}, {"edge_cases", a.edge_kinds}};
  nlohmann::json vs = nlohmann::json::array();
  for (const auto& v : a.variants) {
    nlohmann::json vj = {{"name", v.name},
                         {"file", v.file},
                         {"bytes", v.bytes},
                         {"sha256", v.sha256},
                         {"weights_sha256", v.weights_sha256},
                         {"parameters", v.parameters},
                         {"inputs", IoJson(v.inputs)},
                         {"outputs", IoJson(v.outputs)},
                         {"opsets", OpsetsJson(v.opsets)},
                         {"pass", v.pass},
                         {"sets", v.sets}};
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& [kind, summary] : v.steps)
      steps.push_back({{"step", kind}, {"summary", summary}});
    vj["steps"] = steps;
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : v.checks) {
      nlohmann::json cj = {{"name", c.name},         {"atol", c.atol},
                           {"rtol", c.rtol},         {"max_abs", c.max_abs},
                           {"elements", c.elements}, {"out_of_tolerance", c.out_of_tolerance},
                           {"pass", c.pass}};
      if (!c.note.empty()) cj["note"] = c.note;
      checks.push_back(cj);
    }
    vj["outputs_checked"] = checks;
    if (v.task)
      vj["task"] = {{"output", v.task->output},
                    {"rows", v.task->rows},
                    {"golden_accuracy", v.task->golden_accuracy},
                    {"variant_accuracy", v.task->variant_accuracy},
                    {"drop_pp", v.task->drop_pp}};
    vs.push_back(vj);
  }
  j["variants"] = vs;
  j["files"] = a.files.size();
  j["signature_present"] = a.signature_present;
  return JsonText(j, 2) + "\n";
}

}  // namespace ferry::artifact
