#include "serve/service.h"

#include <cmath>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <shared_mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "artifact/build.h"
#include "artifact/diff.h"
#include "artifact/inspect.h"
#include "artifact/verify_artifact.h"
#include "core/lines.h"
#include "ir/data_sets.h"
#include "ir/onnx_io.h"
#include "prep/spec.h"
#include "runtime/session.h"
#include "serve/scheduler.h"
#include "verify/compare.h"

namespace ferry::serve {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kVersion = "0.1.0";

struct VersionState {
  std::string version, path, fingerprint;
  std::string state = "UNAVAILABLE";
  std::string reason;
  std::string detail;  // what Describe prints: source kind, signature, warmup
  bool verified = false;
  std::shared_ptr<Executor> executor;  // set while READY
  ModelMetadata meta;
  // The artifact's manifest as read when this version loaded (null for plain ONNX): what a
  // newer version is compared with (artifact diff), even after its files changed on disk.
  std::shared_ptr<const artifact::ArtifactInfo> info;
};

struct ModelState {
  std::mutex load_mu;  // one load of this model at a time
  std::string fingerprint;
  bool unloaded = false;  // by the repository extension: polling leaves it alone
  std::map<std::string, VersionState> versions;  // guarded by Impl::mu
};

struct Loaded {
  std::shared_ptr<Executor> executor;
  ModelMetadata meta;
  bool verified = false;
  std::string detail;
};

std::string ReadFile(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  std::string s;
  if (!in) return s;
  s.resize(limit);
  in.read(s.data(), static_cast<std::streamsize>(limit));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// Model metadata: an unknown rank is shown as [-1].
std::vector<int64_t> MetaShape(const ir::TypeInfo& t) {
  return t.shape ? DeclaredShape(t) : std::vector<int64_t>{-1};
}

bool DynamicFirstAxis(const ir::ValueInfo& v) {
  const auto& t = v.type;
  return t.kind == ir::TypeInfo::Kind::kTensor && t.shape && !t.shape->empty() &&
         !(*t.shape)[0].value;
}

std::string LabelEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

struct Service::Impl {
  ServiceOptions options;
  std::unique_ptr<ModelSource> source;
  std::unique_ptr<KeyStore> keys;

  mutable std::shared_mutex mu;
  std::map<std::string, std::shared_ptr<ModelState>> models;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<VersionStats>> stats;
  std::map<std::string, std::pair<uint64_t, uint64_t>> load_counts;  // model: ok, failed

  std::atomic<bool> draining{false}, started{false};
  std::mutex idle_mu;
  std::condition_variable idle_cv;
  int64_t in_flight = 0;

  std::mutex poll_mu;
  std::condition_variable poll_cv;
  bool stop_polling = false;
  std::thread poller;

  void Log(const std::string& line) const {
    if (options.log) options.log(line);
  }

  std::shared_ptr<VersionStats> StatsFor(const std::string& model, const std::string& version) {
    std::unique_lock<std::shared_mutex> lock(mu);
    auto& s = stats[{model, version}];
    if (!s) {
      s = std::make_shared<VersionStats>();
      s->stats.name = model;
      s->stats.version = version;
    }
    return s;
  }

  Result<Loaded> LoadVersion(const ModelEntry& m, const VersionEntry& v);
  Error Sync(const std::string& name, bool explicit_load);
  void Poll();
  std::shared_ptr<Executor> Find(const std::string& name, const std::string& version,
                                 Error* error) const;
};

Result<Loaded> Service::Impl::LoadVersion(const ModelEntry& m, const VersionEntry& v) {
  Loaded out;
  std::string model_path = (fs::path(v.path) / "model.onnx").string();
  artifact::GoldenPlan golden;  // artifacts only: the sets and tolerances of the variant
  std::string variant;
  if (v.artifact) {
    if (options.trusted_key.empty() && !options.allow_unsigned) {
      return InvalidError(
          "artifact is not checked against a key: start the server with "
          "--trusted-key PUB.pem (or --allow-unsigned)");
    }
    artifact::ArtifactVerifyOptions vo;
    vo.artifact = v.path;
    vo.key = options.trusted_key;
    auto checked = artifact::VerifyArtifact(vo);
    if (!checked.ok()) return checked.status();
    if (!checked->pass()) {
      return InvalidError("artifact check failed: {}", checked->problems.front());
    }
    out.verified = !options.trusted_key.empty() && checked->signature.has_value();
    json manifest;
    try {
      manifest = json::parse(ReadFile((fs::path(v.path) / "manifest.json").string(), 64 << 20));
      variant = m.config.variant.empty() ? manifest.at("default_variant").get<std::string>()
                                         : m.config.variant;
      bool found = false;
      for (const auto& var : manifest.at("variants")) {
        if (var.at("name").get<std::string>() == variant) {
          model_path = (fs::path(v.path) / var.at("file").get<std::string>()).string();
          found = true;
        }
      }
      if (!found) return InvalidError("artifact has no variant '{}'", variant);
      auto plan = artifact::LoadGoldenPlan(v.path, manifest, variant);
      if (!plan.ok()) return plan.status();
      golden = std::move(plan.value());
    } catch (const json::exception& e) {
      return InvalidError("manifest.json or golden/tolerances.json: {}", e.what());
    }
  } else if (!options.allow_unsigned) {
    return InvalidError("plain ONNX model (no artifact): served only with --allow-unsigned");
  }
  auto model = ir::LoadModel(model_path);
  if (!model.ok()) return model.status();
  std::shared_ptr<const ir::Model> shared(std::move(model.value()));
  runtime::SessionOptions so;
  so.threads = options.threads_per_run;
  so.max_memory = options.max_memory;
  auto session = runtime::Session::Create(shared, so);
  if (!session.ok()) return session.status();

  // Warmup: the golden set through the session that will serve.
  int64_t sets = 0;
  for (const auto& dir : {golden.data_dir, golden.edge_dir}) {
    if (dir.empty()) continue;
    auto data = ir::LoadDataSets(dir, shared->graph, true);
    if (!data.ok()) return data.status();
    for (const auto& set : data.value()) {
      runtime::RunOptions ro;
      ro.threads = options.threads_per_run;
      auto got = session.value()->Run(set.inputs, ro);
      if (!got.ok()) return got.status().With(fmt::format("golden set {}", set.name));
      const auto& outs = shared->graph.outputs;
      for (const auto& [name, want] : set.expected) {
        size_t k = 0;
        while (k < outs.size() && outs[k].name != name) ++k;
        if (k == outs.size()) continue;
        auto it = golden.spec.tolerances.find(name);
        const auto& t = it != golden.spec.tolerances.end() ? it->second : golden.spec.tolerance;
        double atol = t.atol, rtol = t.rtol;
        auto c = verify::CompareExpected(got.value()[k], want, rtol, atol);
        if (!c.ok) {
          return Status(
              StatusCode::kCheckFailed,
              c.problem.empty()
                  ? fmt::format("golden set {}: output '{}': {} elements beyond atol "
                                "{:g} + rtol {:g} (max abs diff {:g})",
                                set.name, name, c.mismatches, atol, rtol, c.max_abs)
                  : fmt::format("golden set {}: output '{}': {}", set.name, name, c.problem));
        }
      }
      ++sets;
    }
  }

  ExecutorSpec spec;
  spec.model = m.name;
  spec.version = v.version;
  spec.config = m.config;
  spec.threads_per_run = std::max(1, options.threads_per_run);
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  spec.instances = m.config.instances          ? m.config.instances
                   : options.default_instances ? options.default_instances
                                               : std::max(1, cores / spec.threads_per_run);
  const auto& g = shared->graph;
  spec.batchable = !g.outputs.empty() && !g.RealInputs().empty();
  for (const auto* in : g.RealInputs()) spec.batchable = spec.batchable && DynamicFirstAxis(*in);
  for (const auto& o : g.outputs) spec.batchable = spec.batchable && DynamicFirstAxis(o);
  if (m.config.max_batch_size > 0 && !spec.batchable) {
    return InvalidError(
        "serve.yaml sets max_batch_size {} but not every input and output of "
        "the model has a dynamic first axis",
        m.config.max_batch_size);
  }
  // Labels: in the version folder (plain ONNX, or an artifact built with class_names: its
  // labels.txt) or beside serve.yaml.
  std::string labels = m.config.labels.empty() ? "labels.txt" : m.config.labels;
  std::string labels_path;
  for (const auto& dir : {fs::path(v.path), fs::path(m.path)}) {
    if (labels_path.empty() && fs::is_regular_file(dir / labels)) {
      labels_path = (dir / labels).string();
    }
  }
  if (!labels_path.empty()) {
    spec.labels = SplitLines(ReadFile(labels_path, 16 << 20));
  } else if (!m.config.labels.empty()) {
    return InvalidError("labels file {} is missing", m.config.labels);
  }

  // Preprocessing: the artifact's own spec (prep.yaml, covered by its manifest and signature),
  // else a spec beside serve.yaml; its inputs must name model inputs.
  std::string prep_file = m.config.prep.empty() ? "prep.yaml" : m.config.prep;
  fs::path prep_path = fs::path(m.path) / prep_file;
  if (v.artifact && fs::is_regular_file(fs::path(v.path) / artifact::kPrepFile)) {
    prep_file = std::string("the artifact's ") + artifact::kPrepFile;
    prep_path = fs::path(v.path) / artifact::kPrepFile;
  }
  if (fs::is_regular_file(prep_path)) {
    auto parsed = prep::LoadSpec(prep_path.string());
    if (!parsed.ok()) return parsed.status();
    for (const auto& in : parsed->inputs) {
      bool known = false;
      for (const auto* gi : g.RealInputs()) known = known || gi->name == in.name;
      if (!known) {
        return InvalidError("{}: input '{}' is not an input of the model", prep_file, in.name);
      }
    }
    spec.prep = std::make_shared<const prep::Spec>(std::move(parsed.value()));
  } else if (!m.config.prep.empty()) {
    return InvalidError("preprocessing spec {} is missing", m.config.prep);
  }

  out.meta.name = m.name;
  out.meta.platform = "onnx_onnxv1";
  out.meta.verified = out.verified;
  for (const auto* in : g.RealInputs()) {
    out.meta.inputs.push_back(
        {in->name, std::string(DatatypeName(in->type.elem_type)), MetaShape(in->type)});
  }
  for (const auto& o : g.outputs) {
    out.meta.outputs.push_back(
        {o.name, std::string(DatatypeName(o.type.elem_type)), MetaShape(o.type)});
  }
  // The spec's post-processed outputs: BYTES, one JSON document per row.
  if (spec.prep) {
    for (const auto& post : spec.prep->outputs) {
      bool known = false;
      for (const auto& o : g.outputs) known = known || o.name == post.name;
      if (!known)
        return InvalidError("{}: output '{}' is not an output of the model", prep_file, post.name);
      out.meta.outputs.push_back({post.name + "_decoded", "BYTES", {-1}});
    }
  }
  out.detail = v.artifact ? fmt::format("artifact variant {}, {}, golden {} sets matched", variant,
                                        out.verified ? "signature verified"
                                                     : "UNVERIFIED: signature not checked "
                                                       "(no --trusted-key)",
                                        sets)
                          : "plain ONNX, UNVERIFIED (--allow-unsigned), no golden set";
  if (spec.batchable && m.config.max_batch_size > 0) {
    out.detail += fmt::format(", dynamic batching up to {}", m.config.max_batch_size);
  }
  if (spec.prep) out.detail += ", preprocessing " + prep_file;
  out.detail += fmt::format(", {} instance(s)", spec.instances);
  out.executor = std::make_shared<Executor>(std::move(spec), std::move(session.value()),
                                            StatsFor(m.name, v.version));
  return out;
}

Error Service::Impl::Sync(const std::string& name, bool explicit_load) {
  std::shared_ptr<ModelState> model;
  {
    std::unique_lock<std::shared_mutex> lock(mu);
    auto& slot = models[name];
    if (!slot) slot = std::make_shared<ModelState>();
    model = slot;
  }
  std::lock_guard<std::mutex> load_lock(model->load_mu);
  auto found = source->Find(name);
  std::vector<std::shared_ptr<Executor>> retired;  // released after the lock
  auto retire_all = [&](const std::string& reason) {
    std::unique_lock<std::shared_mutex> lock(mu);
    for (auto& [v, st] : model->versions) {
      if (st.executor) retired.push_back(std::move(st.executor));
      st.state = "UNAVAILABLE";
      st.reason = reason;
    }
  };
  if (!found.ok() || !found.value()) {
    retire_all("unloaded: the model is no longer in the repository");
    if (!found.ok()) return MakeError(ErrorKind::kInternal, found.status().message());
    return MakeError(ErrorKind::kNotFound,
                     fmt::format("failed to load '{}': no such model in the repository", name));
  }
  ModelEntry entry = std::move(*found.value());
  if (explicit_load) model->unloaded = false;
  model->fingerprint = entry.fingerprint;
  if (!entry.problem.empty()) {
    Log(fmt::format("model {}: {}", name, entry.problem));
    std::unique_lock<std::shared_mutex> lock(mu);
    load_counts[name].second += 1;
    return MakeError(ErrorKind::kInvalidArg,
                     fmt::format("failed to load '{}': {}", name, entry.problem));
  }
  // The versions the policy wants.
  std::vector<const VersionEntry*> wanted;
  const auto& cfg = entry.config;
  for (size_t i = 0; i < entry.versions.size(); ++i) {
    const auto& v = entry.versions[i];
    bool want = cfg.policy == ServeConfig::Policy::kAll ||
                (cfg.policy == ServeConfig::Policy::kLatest &&
                 static_cast<int64_t>(entry.versions.size() - i) <= cfg.latest) ||
                (cfg.policy == ServeConfig::Policy::kSpecific &&
                 std::count(cfg.specific.begin(), cfg.specific.end(), v.version));
    if (want) wanted.push_back(&v);
  }
  if (wanted.empty()) {
    retire_all("unloaded: no version in the repository matches the version policy");
    return MakeError(
        ErrorKind::kInvalidArg,
        fmt::format("failed to load '{}': no version matches the version policy", name));
  }
  std::string first_failure;
  int ready_wanted = 0;
  for (const VersionEntry* v : wanted) {
    {
      std::shared_lock<std::shared_mutex> lock(mu);
      auto it = model->versions.find(v->version);
      if (it != model->versions.end() && it->second.executor &&
          it->second.fingerprint == v->fingerprint) {
        ++ready_wanted;
        continue;  // unchanged and serving
      }
    }
    {
      std::unique_lock<std::shared_mutex> lock(mu);
      auto& st = model->versions[v->version];
      st.version = v->version;
      if (!st.executor) {
        st.state = "LOADING";
        st.reason.clear();
      }
    }
    Log(fmt::format("model {} version {}: loading from {}", name, v->version, v->path));
    // Compatibility with the version it supersedes: the serving copy of the same version (files
    // replaced in place), else the newest serving version older than it.
    std::shared_ptr<const artifact::ArtifactInfo> info;
    std::string compat, refused;
    if (v->artifact) {
      auto ai = artifact::ReadArtifactInfo(v->path);
      if (ai.ok()) info = std::make_shared<const artifact::ArtifactInfo>(std::move(ai).value());
    }
    if (info) {
      std::shared_ptr<const artifact::ArtifactInfo> prev;
      std::string prev_version;
      {
        std::shared_lock<std::shared_mutex> lock(mu);
        auto same = model->versions.find(v->version);
        if (same != model->versions.end() && same->second.executor && same->second.info) {
          prev = same->second.info;
          prev_version = v->version;
        } else {
          for (const auto& [ver, st] : model->versions) {
            if (!st.executor || !st.info || !VersionLess(ver, v->version)) continue;
            if (prev_version.empty() || VersionLess(prev_version, ver)) {
              prev = st.info;
              prev_version = ver;
            }
          }
        }
      }
      if (prev) {
        artifact::ArtifactDiff d = artifact::DiffArtifacts(*prev, *info);
        if (int b = d.breaking()) {
          const artifact::ArtifactChange& c = d.changes.front();
          std::string first = fmt::format("{} ({}){}", c.what, c.why,
                                          b > 1 ? fmt::format(", {} breaking changes", b) : "");
          if (cfg.breaking_changes == ServeConfig::BreakingChanges::kRefuse)
            refused = fmt::format(
                "refused by serve.yaml breaking_changes: refuse: it breaks clients of version "
                "{}: {}",
                prev_version, first);
          else
            compat = fmt::format("BREAKING against version {}: {}", prev_version, first);
        } else {
          compat = fmt::format("compatible with version {}", prev_version);
        }
      }
    }
    auto loaded = refused.empty() ? LoadVersion(entry, *v)
                                  : Result<Loaded>(Status(StatusCode::kInvalid, refused));
    std::unique_lock<std::shared_mutex> lock(mu);
    auto& st = model->versions[v->version];
    if (!loaded.ok()) {
      std::string why = loaded.status().message();
      load_counts[name].second += 1;
      if (first_failure.empty()) first_failure = fmt::format("version {}: {}", v->version, why);
      if (st.executor) {
        st.reason = "the last reload failed; the previous files keep serving: " + why;
        ++ready_wanted;
      } else {
        st.state = "UNAVAILABLE";
        st.reason = why;
      }
      lock.unlock();
      Log(fmt::format("model {} version {}: not served: {}", name, v->version, why));
      continue;
    }
    load_counts[name].first += 1;
    if (st.executor) retired.push_back(std::move(st.executor));
    st.executor = std::move(loaded->executor);
    st.meta = std::move(loaded->meta);
    st.verified = loaded->verified;
    st.detail = loaded->detail + (compat.empty() ? "" : ", " + compat);
    st.info = std::move(info);
    st.path = v->path;
    st.fingerprint = v->fingerprint;
    st.state = "READY";
    st.reason.clear();
    ++ready_wanted;
    std::string detail = st.detail;
    lock.unlock();
    Log(fmt::format("model {} version {}: READY ({})", name, v->version, detail));
  }
  // Versions the policy no longer wants leave only when a wanted one serves in their place.
  {
    std::unique_lock<std::shared_mutex> lock(mu);
    for (auto& [ver, st] : model->versions) {
      bool want = std::any_of(wanted.begin(), wanted.end(),
                              [&](const VersionEntry* w) { return w->version == ver; });
      if (want || !st.executor) continue;
      bool on_disk = std::any_of(entry.versions.begin(), entry.versions.end(),
                                 [&](const VersionEntry& e) { return e.version == ver; });
      if (ready_wanted > 0 || !on_disk) {
        retired.push_back(std::move(st.executor));
        st.state = "UNAVAILABLE";
        st.reason = on_disk ? "unloaded: a newer version serves (version policy)"
                            : "unloaded: removed from the repository";
      } else {
        st.reason = "kept serving: no newer version could be loaded";
      }
    }
  }
  retired.clear();  // the old executors finish what they hold, then stop
  if (!first_failure.empty()) {
    return MakeError(ErrorKind::kInvalidArg,
                     fmt::format("failed to load '{}': {}", name, first_failure));
  }
  return Error::Ok();
}

void Service::Impl::Poll() {
  std::unique_lock<std::mutex> lock(poll_mu);
  while (!stop_polling) {
    poll_cv.wait_for(lock, std::chrono::milliseconds(options.poll_interval_ms));
    if (stop_polling) break;
    lock.unlock();
    auto listed = source->List();
    if (listed.ok()) {
      std::set<std::string> present;
      for (const auto& m : listed.value()) {
        present.insert(m.name);
        std::shared_ptr<ModelState> st;
        {
          std::shared_lock<std::shared_mutex> r(mu);
          if (auto it = models.find(m.name); it != models.end()) st = it->second;
        }
        if (st && (st->unloaded || st->fingerprint == m.fingerprint)) continue;
        (void)Sync(m.name, false);
      }
      std::vector<std::string> gone;
      {
        std::shared_lock<std::shared_mutex> r(mu);
        for (const auto& [name, st] : models) {
          bool serving = std::any_of(st->versions.begin(), st->versions.end(),
                                     [](const auto& kv) { return kv.second.executor != nullptr; });
          if (!present.count(name) && serving) gone.push_back(name);
        }
      }
      for (const auto& name : gone) (void)Sync(name, false);
    } else {
      Log("repository poll failed: " + listed.status().message());
    }
    lock.lock();
  }
}

std::shared_ptr<Executor> Service::Impl::Find(const std::string& name, const std::string& version,
                                              Error* error) const {
  std::shared_lock<std::shared_mutex> lock(mu);
  auto it = models.find(name);
  if (it == models.end() || it->second->versions.empty()) {
    *error = MakeError(ErrorKind::kNotFound, fmt::format("Request for unknown model: '{}' is not "
                                                         "found",
                                                         name));
    return nullptr;
  }
  const auto& versions = it->second->versions;
  if (!version.empty()) {
    auto v = versions.find(version);
    if (v == versions.end()) {
      *error = MakeError(
          ErrorKind::kNotFound,
          fmt::format("Request for unknown model: '{}' version {} is not found", name, version));
      return nullptr;
    }
    if (!v->second.executor) {
      *error = MakeError(
          ErrorKind::kUnavailable,
          fmt::format("Request for unknown model: '{}' version {} is not at ready "
                      "state{}",
                      name, version, v->second.reason.empty() ? "" : ": " + v->second.reason));
      return nullptr;
    }
    return v->second.executor;
  }
  const VersionState* best = nullptr;
  for (const auto& [v, st] : versions) {
    if (st.executor && (!best || VersionLess(best->version, v))) best = &st;
  }
  if (!best) {
    *error =
        MakeError(ErrorKind::kUnavailable,
                  fmt::format("Request for unknown model: '{}' has no available versions", name));
    return nullptr;
  }
  return best->executor;
}

Result<std::unique_ptr<Service>> Service::Create(ServiceOptions options) {
  std::unique_ptr<Service> s(new Service());
  s->impl_ = std::make_unique<Impl>();
  auto& impl = *s->impl_;
  impl.options = std::move(options);
  impl.source = MakeDirectorySource(impl.options.models_dir);
  if (!impl.options.keys_file.empty()) {
    auto ks = KeyStore::Open(impl.options.keys_file);
    if (!ks.ok()) return ks.status();
    impl.keys = std::move(ks.value());
  }
  if (!impl.options.trusted_key.empty() && !fs::exists(impl.options.trusted_key)) {
    return InvalidError("trusted key {}: no such file", impl.options.trusted_key);
  }
  auto listed = impl.source->List();
  if (!listed.ok()) return listed.status();
  for (const auto& m : listed.value()) (void)impl.Sync(m.name, false);
  impl.started = true;
  if (impl.options.poll_interval_ms > 0) {
    impl.poller = std::thread([&impl] { impl.Poll(); });
  }
  return s;
}

Service::~Service() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lock(impl_->poll_mu);
    impl_->stop_polling = true;
  }
  impl_->poll_cv.notify_all();
  if (impl_->poller.joinable()) impl_->poller.join();
  BeginDrain();
  WaitIdle();
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  auto models = std::move(impl_->models);
  lock.unlock();
  models.clear();  // executors stop and join
}

bool Service::Live() const {
  return true;
}
bool Service::Ready() const {
  return impl_->started && !impl_->draining;
}

ServerMetadata Service::Metadata() const {
  ServerMetadata m;
  m.name = impl_->options.server_name;
  m.version = kVersion;
  m.extensions = {
      "classification",     "model_repository",    "model_repository(unload_dependents)",
      "schedule_policy",    "model_configuration", "system_shared_memory",
      "binary_tensor_data", "statistics"};
  // Ferry does not implement shared memory: not advertised.
  m.extensions.erase(
      std::remove_if(m.extensions.begin(), m.extensions.end(),
                     [](const std::string& e) { return e == "system_shared_memory"; }),
      m.extensions.end());
  return m;
}

Error Service::GetModelMetadata(const std::string& name, const std::string& version,
                                ModelMetadata* out) const {
  Error err;
  if (!impl_->Find(name, version, &err)) return err;
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  const auto& versions = impl_->models.at(name)->versions;
  const VersionState* chosen = nullptr;
  std::vector<std::string> ready;
  for (const auto& [v, st] : versions) {
    if (!st.executor) continue;
    ready.push_back(v);
    if (version.empty() ? (!chosen || VersionLess(chosen->version, v)) : v == version) {
      chosen = &st;
    }
  }
  std::sort(ready.begin(), ready.end(),
            [](const std::string& a, const std::string& b) { return VersionLess(b, a); });
  *out = chosen->meta;
  out->versions = ready;
  return Error::Ok();
}

Error Service::GetModelConfig(const std::string& name, const std::string& version,
                              ModelConfigInfo* out) const {
  Error err;
  std::shared_ptr<Executor> executor = impl_->Find(name, version, &err);
  if (!executor) return err;
  ModelMetadata meta;
  if (Error e = GetModelMetadata(name, executor->spec().version, &meta); !e.ok()) return e;
  const ExecutorSpec& spec = executor->spec();
  *out = MakeModelConfig(meta, spec.version, spec.config, spec.batchable, spec.instances,
                         !spec.labels.empty());
  return Error::Ok();
}

Error Service::ModelReady(const std::string& name, const std::string& version) const {
  Error err;
  if (!impl_->Find(name, version, &err)) return err;
  return Error::Ok();
}

Error Service::Infer(InferRequest request, InferResponse* response) {
  if (impl_->draining) {
    return MakeError(ErrorKind::kUnavailable, "the server is shutting down");
  }
  {
    std::lock_guard<std::mutex> lock(impl_->idle_mu);
    ++impl_->in_flight;
  }
  Error err;
  auto executor = impl_->Find(request.model, request.version, &err);
  if (executor) err = executor->Infer(std::move(request), response);
  executor.reset();
  {
    std::lock_guard<std::mutex> lock(impl_->idle_mu);
    --impl_->in_flight;
  }
  impl_->idle_cv.notify_all();
  return err;
}

std::vector<ModelIndexEntry> Service::RepositoryIndex(bool ready_only) const {
  std::vector<ModelIndexEntry> out;
  std::set<std::string> listed;
  {
    std::shared_lock<std::shared_mutex> lock(impl_->mu);
    for (const auto& [name, m] : impl_->models) {
      listed.insert(name);
      for (const auto& [v, st] : m->versions) {
        if (ready_only && st.state != "READY") continue;
        out.push_back({name, v, st.state, st.reason});
      }
    }
  }
  if (!ready_only) {
    // Models in the repository that were never loaded (Triton lists them without a state).
    auto all = impl_->source->List();
    if (all.ok()) {
      for (const auto& m : all.value()) {
        if (!listed.count(m.name)) out.push_back({m.name, "", "", m.problem});
      }
    }
  }
  return out;
}

Error Service::LoadModel(const std::string& name) {
  if (impl_->draining) return MakeError(ErrorKind::kUnavailable, "the server is shutting down");
  return impl_->Sync(name, true);
}

Error Service::UnloadModel(const std::string& name) {
  std::shared_ptr<ModelState> model;
  {
    std::shared_lock<std::shared_mutex> lock(impl_->mu);
    auto it = impl_->models.find(name);
    if (it == impl_->models.end()) {
      return MakeError(ErrorKind::kNotFound,
                       fmt::format("failed to unload '{}': the model is not loaded", name));
    }
    model = it->second;
  }
  std::lock_guard<std::mutex> load_lock(model->load_mu);
  std::vector<std::shared_ptr<Executor>> retired;
  {
    std::unique_lock<std::shared_mutex> lock(impl_->mu);
    model->unloaded = true;
    for (auto& [v, st] : model->versions) {
      if (st.executor) retired.push_back(std::move(st.executor));
      st.state = "UNAVAILABLE";
      st.reason = "unloaded";
    }
  }
  impl_->Log(fmt::format("model {}: unloaded", name));
  return Error::Ok();
}

Error Service::Statistics(const std::string& name, const std::string& version,
                          std::vector<ModelStatistics>* out) const {
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  if (!name.empty() && !impl_->models.count(name)) {
    return MakeError(ErrorKind::kNotFound, fmt::format("requested model '{}' is not found", name));
  }
  bool any = false;
  for (const auto& [key, s] : impl_->stats) {
    if (!name.empty() && key.first != name) continue;
    if (!version.empty() && key.second != version) continue;
    std::lock_guard<std::mutex> sl(s->mu);
    ModelStatistics ms = s->stats;
    for (const auto& [size, b] : s->batches) ms.batch_stats.push_back(b);
    out->push_back(std::move(ms));
    any = true;
  }
  if (!version.empty() && !any) {
    return MakeError(ErrorKind::kNotFound,
                     fmt::format("requested model '{}' version {} is not found", name, version));
  }
  return Error::Ok();
}

std::string Service::Metrics() const {
  struct Family {
    const char* name;
    const char* type;
    const char* help;
  };
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  std::string out;
  auto head = [&](const Family& f) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, f.help, f.name, f.type);
  };
  auto labels = [](const std::string& m, const std::string& v) {
    return fmt::format("model=\"{}\",version=\"{}\"", LabelEscape(m), LabelEscape(v));
  };
  using Get = uint64_t (*)(const VersionStats&);
  struct Row {
    Family f;
    Get get;
  };
  const Row rows[] = {
      {{"nv_inference_request_success", "counter",
        "Number of successful inference requests, all batch sizes"},
       [](const VersionStats& s) { return s.stats.success.count; }},
      {{"nv_inference_count", "counter",
        "Number of inferences performed (does not include cached requests)"},
       [](const VersionStats& s) { return s.stats.inference_count; }},
      {{"nv_inference_exec_count", "counter",
        "Number of model executions performed (does not include cached requests)"},
       [](const VersionStats& s) { return s.stats.execution_count; }},
      {{"nv_inference_request_duration_us", "counter",
        "Cumulative inference request duration in microseconds (includes cached requests)"},
       [](const VersionStats& s) { return s.request_duration_ns / 1000; }},
      {{"nv_inference_queue_duration_us", "counter",
        "Cumulative inference queuing duration in microseconds (includes cached requests)"},
       [](const VersionStats& s) { return s.stats.queue.ns / 1000; }},
      {{"nv_inference_compute_input_duration_us", "counter",
        "Cumulative compute input duration in microseconds (does not include cached requests)"},
       [](const VersionStats& s) { return s.stats.compute_input.ns / 1000; }},
      {{"nv_inference_compute_infer_duration_us", "counter",
        "Cumulative compute inference duration in microseconds (does not include cached "
        "requests)"},
       [](const VersionStats& s) { return s.stats.compute_infer.ns / 1000; }},
      {{"nv_inference_compute_output_duration_us", "counter",
        "Cumulative inference compute output duration in microseconds (does not include cached "
        "requests)"},
       [](const VersionStats& s) { return s.stats.compute_output.ns / 1000; }},
  };
  for (const auto& row : rows) {
    head(row.f);
    for (const auto& [key, s] : impl_->stats) {
      std::lock_guard<std::mutex> sl(s->mu);
      out += fmt::format("{}{{{}}} {}\n", row.f.name, labels(key.first, key.second), row.get(*s));
    }
  }
  // Summaries (Triton's --metrics-config summary_latencies=true names): quantiles over the
  // most recent LatencyWindow::kSize requests of the version, count and sum over all of them.
  struct SummaryRow {
    Family f;
    const LatencyWindow& (*get)(const VersionStats&);
  };
  const SummaryRow summaries[] = {
      {{"nv_inference_request_summary_us", "summary",
        "Summary of inference request duration in microseconds (includes cached requests)"},
       [](const VersionStats& s) -> const LatencyWindow& { return s.request_us; }},
      {{"nv_inference_queue_summary_us", "summary",
        "Summary of inference queuing duration in microseconds (includes cached requests)"},
       [](const VersionStats& s) -> const LatencyWindow& { return s.queue_us; }},
  };
  for (const auto& row : summaries) {
    head(row.f);
    for (const auto& [key, s] : impl_->stats) {
      std::lock_guard<std::mutex> sl(s->mu);
      const LatencyWindow& w = row.get(*s);
      const std::string l = labels(key.first, key.second);
      for (const char* q : {"0.5", "0.9", "0.95", "0.99"}) {
        double v = w.Quantile(std::stod(q));
        out += fmt::format("{}{{{},quantile=\"{}\"}} {}\n", row.f.name, l, q,
                           std::isnan(v) ? std::string("NaN") : fmt::format("{:.0f}", v));
      }
      out += fmt::format("{}_sum{{{}}} {}\n", row.f.name, l, w.sum());
      out += fmt::format("{}_count{{{}}} {}\n", row.f.name, l, w.count());
    }
  }
  head({"nv_inference_request_failure", "counter",
        "Number of failed inference requests, all batch sizes"});
  for (const auto& [key, s] : impl_->stats) {
    std::lock_guard<std::mutex> sl(s->mu);
    for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
      auto it = s->failures.find(reason);
      out += fmt::format("nv_inference_request_failure{{{},reason=\"{}\"}} {}\n",
                         labels(key.first, key.second), reason,
                         it == s->failures.end() ? 0 : it->second);
    }
  }
  head({"nv_inference_pending_request_count", "gauge",
        "Instantaneous number of pending requests awaiting execution per-model."});
  for (const auto& [key, s] : impl_->stats) {
    out += fmt::format("nv_inference_pending_request_count{{{}}} {}\n",
                       labels(key.first, key.second), s->pending.load());
  }
  head({"ferry_model_ready", "gauge", "1 when the model version is READY and serving, else 0."});
  for (const auto& [name, m] : impl_->models) {
    for (const auto& [v, st] : m->versions) {
      out += fmt::format("ferry_model_ready{{{}}} {}\n", labels(name, v), st.executor ? 1 : 0);
    }
  }
  head({"ferry_model_loads_total", "counter",
        "Model version loads by result (failure: signature, golden set, engine or memory)."});
  for (const auto& [name, c] : impl_->load_counts) {
    out += fmt::format("ferry_model_loads_total{{model=\"{}\",result=\"success\"}} {}\n",
                       LabelEscape(name), c.first);
    out += fmt::format("ferry_model_loads_total{{model=\"{}\",result=\"failure\"}} {}\n",
                       LabelEscape(name), c.second);
  }
  return out;
}

Error Service::Authorize(const std::string& token, Scope scope, const std::string& model) const {
  if (!impl_->keys) return Error::Ok();
  std::string who;
  switch (impl_->keys->Check(token, scope, model, &who)) {
    case AuthResult::kOk:
      return Error::Ok();
    case AuthResult::kUnauthenticated:
      return MakeError(ErrorKind::kUnauthenticated,
                       token.empty() ? "missing API key (Authorization: Bearer KEY)"
                                     : "unknown or revoked API key");
    case AuthResult::kPermissionDenied:
      return MakeError(ErrorKind::kPermissionDenied,
                       scope == Scope::kAdmin
                           ? fmt::format("API key '{}' lacks the admin scope", who)
                           : fmt::format("API key '{}' may not use model '{}'", who, model));
  }
  return MakeError(ErrorKind::kInternal, "authorisation");
}

bool Service::auth_enabled() const {
  return impl_->keys != nullptr;
}

void Service::BeginDrain() {
  impl_->draining = true;
}

void Service::WaitIdle() {
  std::unique_lock<std::mutex> lock(impl_->idle_mu);
  impl_->idle_cv.wait(lock, [&] { return impl_->in_flight == 0; });
}

std::string Service::Describe() const {
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  std::string out;
  for (const auto& [name, m] : impl_->models) {
    for (const auto& [v, st] : m->versions) {
      out += fmt::format("model {} version {}: {}", name, v, st.state);
      if (!st.detail.empty() && st.executor) out += " (" + st.detail + ")";
      if (!st.reason.empty()) out += ": " + st.reason;
      out += "\n";
    }
  }
  if (out.empty()) out = "no models in " + impl_->source->Describe() + "\n";
  return out;
}

}  // namespace ferry::serve
