#include "artifact/diff.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace ferry::artifact {

namespace {

std::string DimText(const DimInfo& d) {
  return d.value ? std::to_string(*d.value) : d.symbol.empty() ? "?" : d.symbol;
}

class Differ {
 public:
  // A change already listed (the same field and values without the variant prefix: the same
  // output renamed in every variant) is listed once.
  void Add(bool breaking, std::string what, std::string old_value, std::string new_value,
           std::string why) {
    auto key = std::make_tuple(what, old_value, new_value);
    if (!seen_.insert(key).second) return;
    changes_.push_back(
        {breaking, prefix_ + what, std::move(old_value), std::move(new_value), std::move(why)});
  }
  // Prepended to the changes Interface reports ("variant 'int8': ").
  void SetPrefix(std::string prefix) { prefix_ = std::move(prefix); }
  void Breaking(std::string what, std::string o, std::string n, std::string why) {
    Add(true, std::move(what), std::move(o), std::move(n), std::move(why));
  }
  void Compatible(std::string what, std::string o, std::string n, std::string why = "") {
    Add(false, std::move(what), std::move(o), std::move(n), std::move(why));
  }

  // One side of the interface (inputs or outputs).
  void Interface(const std::vector<IoInfo>& olds, const std::vector<IoInfo>& news, bool inputs) {
    const char* kind = inputs ? "input" : "output";
    std::map<std::string, const IoInfo*> by_name;
    for (const auto& n : news) by_name[n.name] = &n;
    std::set<std::string> old_names;
    for (const auto& o : olds) old_names.insert(o.name);
    std::vector<const IoInfo*> added;
    for (const auto& n : news)
      if (!old_names.count(n.name)) added.push_back(&n);
    for (const auto& o : olds) {
      std::string what = fmt::format("{} '{}'", kind, o.name);
      auto it = by_name.find(o.name);
      if (it == by_name.end()) {
        // One removed and one added with the same type: most likely a rename.
        std::string renamed;
        for (const IoInfo* a : added)
          if (IoTypeText(*a) == IoTypeText(o)) renamed = a->name;
        Breaking(what, IoTypeText(o), "",
                 renamed.empty()
                     ? fmt::format("removed: clients that {} it fail", inputs ? "send" : "read")
                     : fmt::format("renamed to '{}' (same type): clients that {} '{}' fail",
                                   renamed, inputs ? "send" : "read", o.name));
        continue;
      }
      const IoInfo& n = *it->second;
      if (o.dtype != n.dtype) {
        Breaking(what + " dtype", o.dtype, n.dtype,
                 inputs ? "clients' tensors are refused" : "clients decode other bytes");
        continue;
      }
      if (!o.shape || !n.shape) {
        // Known -> unknown rank widens an input and loosens an output; the reverse narrows.
        if (o.shape.has_value() != n.shape.has_value())
          Add(inputs ? n.shape.has_value() : o.shape.has_value(), what + " shape", IoTypeText(o),
              IoTypeText(n), n.shape ? "the rank is now fixed" : "the rank is now unknown");
        continue;
      }
      if (o.shape->size() != n.shape->size()) {
        Breaking(what + " rank", IoTypeText(o), IoTypeText(n),
                 inputs ? "clients' tensors are refused" : "clients get another rank");
        continue;
      }
      for (size_t d = 0; d < o.shape->size(); ++d) {
        const DimInfo& od = (*o.shape)[d];
        const DimInfo& nd = (*n.shape)[d];
        if (od == nd) continue;
        std::string dim = fmt::format("{} dim {}", what, d);
        if (od.value && nd.value) {
          Breaking(dim, DimText(od), DimText(nd),
                   inputs ? "clients' tensors are refused" : "clients get another size");
        } else if (!od.value && !nd.value) {
          Compatible(dim, DimText(od), DimText(nd), "the dynamic axis is renamed");
        } else if (!od.value && nd.value) {
          if (inputs)
            Breaking(dim, DimText(od), DimText(nd),
                     "narrower: inputs of any other size are now refused");
          else
            Compatible(dim, DimText(od), DimText(nd), "now always this size");
        } else if (inputs) {
          Compatible(dim, DimText(od), DimText(nd), "wider: the old size is still accepted");
        } else {
          Breaking(dim, DimText(od), DimText(nd), "clients may rely on the fixed size");
        }
      }
    }
    for (const IoInfo* a : added) {
      std::string what = fmt::format("{} '{}'", kind, a->name);
      if (inputs)
        Breaking(what, "", IoTypeText(*a), "added: clients of the old version do not send it");
      else
        Compatible(what, "", IoTypeText(*a), "added");
    }
  }

  // Every leaf of two JSON documents that differs, as "prep inputs[image].image.resize.filter".
  void Json(const nlohmann::json& o, const nlohmann::json& n, const std::string& path,
            const std::string& why) {
    if (o.is_object() && n.is_object()) {
      std::set<std::string> keys;
      for (auto it = o.begin(); it != o.end(); ++it) keys.insert(it.key());
      for (auto it = n.begin(); it != n.end(); ++it) keys.insert(it.key());
      for (const auto& k : keys) {
        std::string p = path + "." + k;
        if (!o.contains(k))
          Breaking(p, "", n[k].dump(), why);
        else if (!n.contains(k))
          Breaking(p, o[k].dump(), "", why);
        else
          Json(o[k], n[k], p, why);
      }
      return;
    }
    if (o.is_array() && n.is_array() && o.size() == n.size() && !o.empty() &&
        (o[0].is_object() || o[0].is_array())) {
      for (size_t i = 0; i < o.size(); ++i) {
        std::string label = std::to_string(i);
        if (o[i].is_object() && o[i].contains("name") && o[i]["name"].is_string())
          label = o[i]["name"].get<std::string>();
        Json(o[i], n[i], fmt::format("{}[{}]", path, label), why);
      }
      return;
    }
    if (o != n) Breaking(path, o.dump(), n.dump(), why);
  }

  void Prep(const ArtifactInfo& a, const ArtifactInfo& b) {
    if (a.prep_json.empty() && b.prep_json.empty()) return;
    if (a.prep_json.empty()) {
      Compatible("pre-processing", "", "prep.yaml",
                 "added: clients may also send raw inputs; tensors work as before");
      return;
    }
    if (b.prep_json.empty()) {
      Breaking("pre-processing", "prep.yaml", "",
               "removed: clients that send raw inputs (encoded images) fail");
      return;
    }
    if (a.prep_json == b.prep_json) {
      if (a.prep_sha256 != b.prep_sha256)
        Compatible("pre-processing file", a.prep_sha256, b.prep_sha256,
                   "reworded; the same steps with every default filled in");
      return;
    }
    auto o = nlohmann::json::parse(a.prep_json, nullptr, false);
    auto n = nlohmann::json::parse(b.prep_json, nullptr, false);
    // Inputs matched by name, so a reordered list is not a change.
    auto by_name = [](const nlohmann::json& spec) {
      std::map<std::string, nlohmann::json> m;
      if (spec.is_object() && spec.contains("inputs") && spec["inputs"].is_array())
        for (const auto& in : spec["inputs"])
          if (in.is_object()) m[in.value("name", "")] = in.value("image", nlohmann::json());
      return m;
    };
    auto om = by_name(o), nm = by_name(n);
    const std::string why = "the same raw input gives the model another tensor";
    for (const auto& [name, im] : om) {
      std::string p = fmt::format("prep inputs[{}]", name);
      auto it = nm.find(name);
      if (it == nm.end())
        Breaking(p, "image steps", "", "clients can no longer send this input raw");
      else
        Json(im, it->second, p + ".image", why);
    }
    for (const auto& [name, im] : nm)
      if (!om.count(name))
        Compatible(fmt::format("prep inputs[{}]", name), "", "image steps",
                   "added: clients may send this input raw");
    // Post-processing (decoded outputs): any change gives clients other results.
    const nlohmann::json none = nlohmann::json::array();
    const nlohmann::json& oo = o.is_object() && o.contains("outputs") ? o["outputs"] : none;
    const nlohmann::json& no = n.is_object() && n.contains("outputs") ? n["outputs"] : none;
    if (oo != no) Json(oo, no, "prep outputs", "the decoded outputs differ for the same tensors");
  }

  void ClassNames(const ArtifactInfo& a, const ArtifactInfo& b) {
    const auto &o = a.class_names, &n = b.class_names;
    if (o == n) return;
    if (o.empty()) {
      Compatible("class names", "", fmt::format("{} names", n.size()), "added");
      return;
    }
    if (n.empty()) {
      Breaking("class names", fmt::format("{} names", o.size()), "",
               "removed: classification results lose their labels");
      return;
    }
    if (o.size() != n.size()) {
      Breaking("class names", fmt::format("{} names", o.size()), fmt::format("{} names", n.size()),
               "another number of classes");
      return;
    }
    size_t differ = 0, first = 0;
    for (size_t i = o.size(); i-- > 0;)
      if (o[i] != n[i]) {
        ++differ;
        first = i;
      }
    Breaking(
        fmt::format("class name {}", first), o[first], n[first],
        fmt::format("{} of {} class names differ: clients get other labels", differ, o.size()));
  }

  void Variant(const VariantInfo& o, const VariantInfo& n) {
    std::string what = fmt::format("variant '{}'", o.name);
    if (o.sha256 != n.sha256) {
      Compatible(
          what + " model", o.sha256, n.sha256,
          o.weights_sha256 == n.weights_sha256 ? "same weights, other graph" : "other weights");
    }
    std::string os, ns;
    for (const auto& [k, s] : o.steps) os += (os.empty() ? "" : "; ") + k + ": " + s;
    for (const auto& [k, s] : n.steps) ns += (ns.empty() ? "" : "; ") + k + ": " + s;
    if (os != ns) Compatible(what + " steps", os, ns);
    auto opsets = [](const VariantInfo& v) {
      std::string s;
      for (const auto& [d, ver] : v.opsets)
        s += fmt::format("{}{} {}", s.empty() ? "" : ", ", d.empty() ? "ai.onnx" : d, ver);
      return s;
    };
    if (opsets(o) != opsets(n)) Compatible(what + " opsets", opsets(o), opsets(n));
    std::map<std::string, const OutputCheckInfo*> checks;
    for (const auto& c : n.checks) checks[c.name] = &c;
    for (const auto& c : o.checks) {
      auto it = checks.find(c.name);
      if (it == checks.end()) continue;
      const OutputCheckInfo& d = *it->second;
      if (c.atol != d.atol || c.rtol != d.rtol)
        Compatible(fmt::format("{} tolerance on '{}'", what, c.name),
                   fmt::format("atol {:g} rtol {:g}", c.atol, c.rtol),
                   fmt::format("atol {:g} rtol {:g}", d.atol, d.rtol),
                   d.atol > c.atol || d.rtol > c.rtol ? "loosened" : "tightened");
      if (c.max_abs != d.max_abs)
        Compatible(fmt::format("{} max abs error on '{}'", what, c.name),
                   fmt::format("{:.3g}", c.max_abs), fmt::format("{:.3g}", d.max_abs),
                   "against its golden set");
    }
    if (o.task && n.task && o.task->variant_accuracy != n.task->variant_accuracy)
      Compatible(what + " top-1", fmt::format("{:.2f}%", 100 * o.task->variant_accuracy),
                 fmt::format("{:.2f}%", 100 * n.task->variant_accuracy), "on its golden set");
  }

  std::vector<ArtifactChange> Take() {
    std::stable_partition(changes_.begin(), changes_.end(),
                          [](const ArtifactChange& c) { return c.breaking; });
    return std::move(changes_);
  }

 private:
  std::vector<ArtifactChange> changes_;
  std::set<std::tuple<std::string, std::string, std::string>> seen_;
  std::string prefix_;
};

std::string Value(const std::string& v) {
  return v.empty() ? "(none)" : v;
}

}  // namespace

int ArtifactDiff::breaking() const {
  int n = 0;
  for (const auto& c : changes) n += c.breaking ? 1 : 0;
  return n;
}

ArtifactDiff DiffArtifacts(const ArtifactInfo& a, const ArtifactInfo& b) {
  ArtifactDiff d;
  d.old_path = a.path;
  d.new_path = b.path;
  d.old_name = a.name;
  d.old_version = a.version;
  d.new_name = b.name;
  d.new_version = b.version;
  d.identical = a.manifest_sha256 == b.manifest_sha256;
  Differ df;
  if (a.name != b.name) df.Breaking("name", a.name, b.name, "another model");
  if (a.version != b.version) df.Compatible("version", a.version, b.version);
  // The served interface first (the default variant's), then every variant both hold.
  df.Interface(a.ServedInputs(), b.ServedInputs(), true);
  df.Interface(a.ServedOutputs(), b.ServedOutputs(), false);
  for (const auto& ov : a.variants) {
    const VariantInfo* nv = b.FindVariant(ov.name);
    if (!nv) continue;
    df.SetPrefix(fmt::format("variant '{}': ", ov.name));
    df.Interface(ov.inputs, nv->inputs, true);
    df.Interface(ov.outputs, nv->outputs, false);
  }
  df.SetPrefix("");
  df.Prep(a, b);
  df.ClassNames(a, b);
  for (const auto& ov : a.variants) {
    const VariantInfo* nv = b.FindVariant(ov.name);
    if (!nv)
      df.Breaking(fmt::format("variant '{}'", ov.name), ov.file, "",
                  "removed: a deployment that serves it by name cannot load the new version");
    else
      df.Variant(ov, *nv);
  }
  for (const auto& nv : b.variants)
    if (!a.FindVariant(nv.name))
      df.Compatible(fmt::format("variant '{}'", nv.name), "", nv.file, "added");
  if (a.default_variant != b.default_variant)
    df.Compatible("default variant", a.default_variant, b.default_variant,
                  "deployments that do not name a variant serve another model file");
  if (a.fallback != b.fallback) df.Compatible("fallback", a.fallback, b.fallback);
  if (a.source_sha256 != b.source_sha256)
    df.Compatible(
        "source model", a.source_sha256, b.source_sha256,
        a.source_weights_sha256 == b.source_weights_sha256 ? "same weights" : "other weights");
  if (a.config_sha256 != b.config_sha256)
    df.Compatible("ferry.yaml", a.config_sha256, b.config_sha256);
  // The golden set: its files' digests.
  auto golden = [](const ArtifactInfo& x) {
    std::string s;
    for (const auto& f : x.files)
      if (f.path.rfind("golden/", 0) == 0) s += f.path + ":" + f.sha256 + "\n";
    return s;
  };
  if (golden(a) != golden(b))
    df.Compatible("golden set", fmt::format("{} set(s), {} rows", a.golden_sets, a.golden_rows),
                  fmt::format("{} set(s), {} rows", b.golden_sets, b.golden_rows),
                  "other reference inputs or expected outputs");
  if (a.ferry_version != b.ferry_version)
    df.Compatible("built by Ferry", a.ferry_version, b.ferry_version);
  d.changes = df.Take();
  return d;
}

std::string FormatText(const ArtifactDiff& d) {
  int breaking = d.breaking();
  std::string s = fmt::format("artifact diff {} ({} {}) -> {} ({} {})\n", d.old_path, d.old_name,
                              d.old_version, d.new_path, d.new_name, d.new_version);
  if (d.identical) return s + "identical: the manifests are byte-identical\n";
  s += breaking ? fmt::format("BREAKING: {} breaking change(s), {} compatible\n", breaking,
                              d.changes.size() - breaking)
                : fmt::format("compatible: {} change(s), none breaking\n", d.changes.size());
  for (const auto& c : d.changes) {
    s += fmt::format("  {} {}: {} -> {}", c.breaking ? "BREAKING  " : "compatible", c.what,
                     Value(c.old_value), Value(c.new_value));
    if (!c.why.empty()) s += " (" + c.why + ")";
    s += "\n";
  }
  return s;
}

std::string FormatJson(const ArtifactDiff& d) {
  nlohmann::json j;
  j["old"] = {{"artifact", d.old_path}, {"name", d.old_name}, {"version", d.old_version}};
  j["new"] = {{"artifact", d.new_path}, {"name", d.new_name}, {"version", d.new_version}};
  j["identical"] = d.identical;
  j["compatible"] = d.breaking() == 0;
  j["breaking"] = d.breaking();
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : d.changes)
    changes.push_back({{"breaking", c.breaking},
                       {"what", c.what},
                       {"old", c.old_value},
                       {"new", c.new_value},
                       {"why", c.why}});
  j["changes"] = changes;
  return JsonText(j, 2) + "\n";
}

}  // namespace ferry::artifact
