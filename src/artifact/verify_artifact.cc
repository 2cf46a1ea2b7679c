#include "artifact/verify_artifact.h"

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "artifact/build.h"
#include "artifact/files.h"
#include "core/json_text.h"
#include "core/npy.h"

namespace ferry::artifact {

namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// Unpacks a .ferry archive into `dir`. Entry paths must stay inside it.
Status Unpack(const std::string& archive, const std::string& dir) {
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(archive));
  FERRY_ASSIGN_OR_RETURN(auto members, ReadTar(bytes, archive));
  for (const auto& m : members) {
    fs::path rel = fs::path(m.path).lexically_normal();
    if (rel.is_absolute() || rel.empty() || *rel.begin() == "..")
      return InvalidError("archive '{}': entry '{}' points outside the archive", archive, m.path);
    fs::path p = fs::path(dir) / rel;
    std::error_code ec;
    if (m.is_dir) {
      fs::create_directories(p, ec);
      continue;
    }
    fs::create_directories(p.parent_path(), ec);
    FERRY_RETURN_IF_ERROR(WriteFileAtomic(p.string(), m.bytes));
  }
  return Status::Ok();
}

std::optional<double> OptNumber(const nlohmann::json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
  return std::nullopt;
}

ToleranceSpec TolFrom(const nlohmann::json& j) {
  ToleranceSpec t;
  if (j.is_object()) {
    if (auto a = OptNumber(j, "atol")) t.atol = *a;
    if (auto r = OptNumber(j, "rtol")) t.rtol = *r;
  }
  return t;
}

Status CheckManifest(const std::string& dir, const std::string& signature, const nlohmann::json& m,
                     ArtifactVerifyResult* r) {
  if (!m.contains("files") || !m["files"].is_array())
    return InvalidError("'{}/manifest.json' lists no files", dir);
  std::map<std::string, std::pair<uint64_t, std::string>> listed;
  for (const auto& f : m["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("sha256") ||
        !f["sha256"].is_string() || !f.contains("bytes") || !f["bytes"].is_number_unsigned())
      return InvalidError("'{}/manifest.json': a files entry without path, bytes and sha256", dir);
    listed[f["path"].get<std::string>()] = {f["bytes"].get<uint64_t>(),
                                            f["sha256"].get<std::string>()};
  }
  r->files = static_cast<int64_t>(listed.size());
  FERRY_ASSIGN_OR_RETURN(auto present, DigestFiles(dir, {"manifest.json", signature}));
  std::set<std::string> seen;
  for (const auto& f : present) {
    seen.insert(f.path);
    auto it = listed.find(f.path);
    if (it == listed.end()) {
      r->problems.push_back(
          fmt::format("'{}' is not listed in manifest.json (a file was added)", f.path));
    } else if (it->second.second != f.sha256 || it->second.first != f.bytes) {
      r->problems.push_back(fmt::format(
          "'{}' differs from manifest.json: SHA-256 {} ({} bytes), listed {} ({} bytes)", f.path,
          f.sha256, f.bytes, it->second.second, it->second.first));
    }
  }
  for (const auto& [path, v] : listed)
    if (!seen.count(path))
      r->problems.push_back(fmt::format("'{}' is listed in manifest.json but missing", path));
  return Status::Ok();
}

Status RerunGolden(const std::string& dir, const nlohmann::json& m, ArtifactVerifyResult* r,
                   ProgressFn progress) {
  fs::path d(dir);
  if (!m.contains("variants") || !m["variants"].is_array())
    return InvalidError("'{}/manifest.json' lists no variants", dir);
  for (const auto& v : m["variants"]) {
    VariantGolden vg;
    vg.variant = v.value("name", "");
    vg.file = v.value("file", "");
    if (vg.variant.empty() || vg.file.empty())
      return InvalidError("'{}/manifest.json': a variant without name or file", dir);
    FERRY_ASSIGN_OR_RETURN(GoldenPlan plan, LoadGoldenPlan(dir, m, vg.variant));
    FERRY_ASSIGN_OR_RETURN(vg.gate, RunGate(vg.variant, (d / vg.file).string(), plan.data_dir,
                                            plan.edge_dir, plan.labels, plan.spec, progress));
    for (const auto& f : vg.gate.failures) r->problems.push_back("golden: " + f);
    r->golden.push_back(std::move(vg));
  }
  return Status::Ok();
}

}  // namespace

Result<GoldenPlan> LoadGoldenPlan(const std::string& dir, const nlohmann::json& m,
                                  const std::string& variant) {
  fs::path d(dir);
  FERRY_ASSIGN_OR_RETURN(std::string tol_text,
                         ReadFileBytes((d / "golden" / "tolerances.json").string()));
  nlohmann::json tol = nlohmann::json::parse(tol_text, nullptr, false);
  if (tol.is_discarded() || !tol.is_object())
    return InvalidError("'{}/golden/tolerances.json' is not JSON", dir);
  const nlohmann::json& golden = m.contains("golden") ? m["golden"] : nlohmann::json::object();
  const nlohmann::json& vt = tol.contains("variants") && tol["variants"].contains(variant)
                                 ? tol["variants"][variant]
                                 : nlohmann::json::object();
  GoldenPlan plan;
  plan.data_dir = (d / "golden" / "data").string();
  bool edge = !vt.is_object() || !vt.contains("edge_cases") || !vt["edge_cases"].is_boolean() ||
              vt["edge_cases"].get<bool>();
  if (edge && golden.contains("edge_cases")) plan.edge_dir = (d / "golden" / "edge_cases").string();
  if (golden.contains("labels")) plan.labels = (d / "golden" / "labels.npy").string();
  plan.spec.tolerance =
      TolFrom(vt.contains("default") ? vt["default"] : tol.value("default", nlohmann::json()));
  if (vt.contains("outputs") && vt["outputs"].is_object())
    for (const auto& [n, t] : vt["outputs"].items()) plan.spec.tolerances[n] = TolFrom(t);
  if (tol.contains("task") && tol["task"].is_object()) {
    plan.spec.task_output = tol["task"].value("output", "");
    plan.spec.top_k = tol["task"].value("top_k", int64_t{5});
    plan.spec.max_accuracy_drop = OptNumber(vt, "max_accuracy_drop_pp");
    plan.spec.max_class_drop = OptNumber(vt, "max_class_drop_pp");
  }
  return plan;
}

Result<ArtifactVerifyResult> VerifyArtifact(const ArtifactVerifyOptions& o) {
  ArtifactVerifyResult r;
  r.artifact = o.artifact;
  std::error_code ec;
  std::string dir = o.artifact;
  TempDir unpacked;
  if (fs::is_regular_file(o.artifact, ec)) {
    std::string tmpl = (fs::temp_directory_path(ec) / "ferry-artifact-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return InvalidError("cannot create a temporary folder");
    unpacked.path = tmpl;
    FERRY_RETURN_IF_ERROR(Unpack(o.artifact, tmpl));
    dir = tmpl;
  } else if (!fs::is_directory(o.artifact, ec)) {
    return InvalidError("'{}': no such artifact folder or archive", o.artifact);
  }
  std::string mpath = (fs::path(dir) / "manifest.json").string();
  if (!fs::is_regular_file(mpath, ec))
    return InvalidError("'{}' has no manifest.json (not a ferry build artifact)", o.artifact);
  FERRY_ASSIGN_OR_RETURN(std::string mtext, ReadFileBytes(mpath));
  nlohmann::json m = nlohmann::json::parse(mtext, nullptr, false);
  if (m.is_discarded() || !m.is_object() || m.value("format", "") != kManifestFormat) {
    // Without a key a changed manifest is all we can report; with one, the signature names it.
    if (o.key.empty())
      return InvalidError("'{}/manifest.json' is not a {} manifest", o.artifact, kManifestFormat);
    m = nlohmann::json::object();
    r.problems.push_back("'manifest.json' is not a valid manifest (it was changed)");
  }
  r.name = m.value("name", "");
  r.version = m.value("version", "");
  if (!o.key.empty()) {
    FERRY_ASSIGN_OR_RETURN(SignatureCheck sc, CheckSignature(dir, o.signature, o.key));
    for (const auto& p : sc.problems) r.problems.push_back(p);
    r.signature = std::move(sc);
  }
  if (m.contains("files")) FERRY_RETURN_IF_ERROR(CheckManifest(dir, o.signature, m, &r));
  if (o.golden && r.problems.empty()) FERRY_RETURN_IF_ERROR(RerunGolden(dir, m, &r, o.progress));
  return r;
}

std::string FormatText(const ArtifactVerifyResult& r) {
  std::string s = fmt::format("artifact {} ({} {}): {} files in the manifest\n", r.artifact, r.name,
                              r.version, r.files);
  if (r.signature)
    s += fmt::format("signature: {} ({} signed files, key hint {})\n",
                     r.signature->ok ? "ok" : "FAILED", r.signature->files.size(),
                     r.signature->key_hint.substr(0, 16));
  else
    s += "signature: not checked (no --key)\n";
  for (const auto& g : r.golden) {
    for (const auto& out : g.gate.golden.outputs)
      s += fmt::format("golden {} {}: max abs {:.3g}, {} of {} out of tolerance\n", g.variant,
                       out.name, out.stats.max_abs, out.stats.out_of_tolerance, out.stats.elements);
    if (g.gate.task)
      s += fmt::format("golden {} top-1 on '{}': {:.2f}% (source {:.2f}%)\n", g.variant,
                       g.gate.task->output, 100 * g.gate.task->variant_accuracy,
                       100 * g.gate.task->golden_accuracy);
  }
  for (const auto& p : r.problems) s += "FAIL " + p + "\n";
  s += r.pass() ? "PASS\n" : "FAIL\n";
  return s;
}

std::string FormatJson(const ArtifactVerifyResult& r) {
  nlohmann::json j;
  j["artifact"] = r.artifact;
  j["name"] = r.name;
  j["version"] = r.version;
  j["files"] = r.files;
  j["pass"] = r.pass();
  j["problems"] = r.problems;
  if (r.signature)
    j["signature"] = {{"ok", r.signature->ok},
                      {"subject_digest", r.signature->subject_digest},
                      {"key_hint", r.signature->key_hint},
                      {"signed_files", r.signature->files.size()}};
  else
    j["signature"] = nullptr;
  nlohmann::json g = nlohmann::json::array();
  for (const auto& v : r.golden) {
    nlohmann::json outs = nlohmann::json::array();
    for (const auto& out : v.gate.golden.outputs)
      outs.push_back({{"name", out.name}, {"pass", !out.failed()}, {"max_abs", out.stats.max_abs}});
    g.push_back({{"variant", v.variant}, {"outputs", outs}, {"failures", v.gate.failures}});
  }
  j["golden"] = g;
  return JsonText(j, 2) + "\n";
}

}  // namespace ferry::artifact
