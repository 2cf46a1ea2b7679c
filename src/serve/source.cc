#include "serve/source.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace ferry::serve {
namespace fs = std::filesystem;

namespace {

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 200 || s == "." || s == "..") return false;
  for (unsigned char c : s) {
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

Status KeyError(const std::string& what, const YAML::Node& node, const std::string& key,
                const std::string& problem) {
  return InvalidError("{}:{}: {}: {}", what, node.Mark().line + 1, key, problem);
}

template <typename T>
Status ReadScalar(const std::string& what, const YAML::Node& node, const std::string& key, T min,
                  T max, T* out) {
  if (!node.IsScalar()) return KeyError(what, node, key, "expected a number");
  try {
    T v = node.as<T>();
    if (v < min || v > max) {
      return KeyError(what, node, key, fmt::format("{} is outside [{}, {}]", v, min, max));
    }
    *out = v;
  } catch (const YAML::Exception&) {
    return KeyError(what, node, key, fmt::format("expected a number, got '{}'", node.Scalar()));
  }
  return Status::Ok();
}

std::string Fingerprint(const fs::path& dir) {
  // Names, sizes and modification times of every file below the version folder, sorted.
  std::vector<std::string> rows;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    auto size = it->file_size(e2);
    auto mtime = it->last_write_time(e2).time_since_epoch().count();
    rows.push_back(fmt::format("{}:{}:{}", fs::relative(it->path(), dir, e2).string(), size,
                               static_cast<long long>(mtime)));
  }
  std::sort(rows.begin(), rows.end());
  std::string out;
  for (auto& r : rows) out += r + "\n";
  return out;
}

class DirectorySource : public ModelSource {
 public:
  explicit DirectorySource(std::string dir) : dir_(std::move(dir)) {}
  std::string Describe() const override { return "directory " + dir_; }

  Result<std::vector<ModelEntry>> List() const override {
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) {
      return InvalidError("model repository {}: not a directory", dir_);
    }
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code e2;
      if (it->is_directory(e2)) names.push_back(it->path().filename().string());
    }
    if (ec) return InvalidError("model repository {}: {}", dir_, ec.message());
    std::sort(names.begin(), names.end());
    std::vector<ModelEntry> out;
    for (const auto& n : names) {
      if (n.empty() || n[0] == '.') continue;
      out.push_back(Read(n));
    }
    return out;
  }

  Result<std::optional<ModelEntry>> Find(const std::string& name) const override {
    std::error_code ec;
    if (!ValidName(name) || !fs::is_directory(fs::path(dir_) / name, ec)) {
      return std::optional<ModelEntry>();
    }
    return std::optional<ModelEntry>(Read(name));
  }

 private:
  ModelEntry Read(const std::string& name) const {
    ModelEntry m;
    m.name = name;
    m.path = (fs::path(dir_) / name).string();
    if (!ValidName(name)) {
      m.problem = "model name must be letters, digits, '.', '_' or '-'";
      return m;
    }
    std::error_code ec;
    fs::path cfg = fs::path(m.path) / "serve.yaml";
    if (fs::exists(cfg, ec)) {
      std::ifstream in(cfg, std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      m.fingerprint = ss.str() + "\n";
      auto parsed = ParseServeConfig(ss.str(), cfg.string());
      if (!parsed.ok()) {
        m.problem = parsed.status().message();
        return m;
      }
      m.config = std::move(parsed.value());
    }
    for (fs::directory_iterator it(m.path, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code e2;
      if (!it->is_directory(e2)) continue;
      std::string v = it->path().filename().string();
      if (!ValidName(v)) continue;
      VersionEntry e;
      e.version = v;
      e.path = it->path().string();
      e.artifact = fs::exists(it->path() / "manifest.json", e2);
      if (!e.artifact && !fs::exists(it->path() / "model.onnx", e2)) continue;
      e.fingerprint = Fingerprint(it->path());
      m.versions.push_back(std::move(e));
    }
    std::sort(m.versions.begin(), m.versions.end(),
              [](const VersionEntry& a, const VersionEntry& b) {
                return VersionLess(a.version, b.version);
              });
    for (const auto& v : m.versions) m.fingerprint += v.version + "\n" + v.fingerprint;
    return m;
  }

  std::string dir_;
};

}  // namespace

std::unique_ptr<ModelSource> MakeDirectorySource(const std::string& dir) {
  return std::make_unique<DirectorySource>(dir);
}

bool VersionLess(const std::string& a, const std::string& b) {
  auto split = [](const std::string& s) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : s) {
      if (c == '.') {
        parts.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    parts.push_back(cur);
    return parts;
  };
  auto digits = [](const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  auto pa = split(a), pb = split(b);
  for (size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    const auto& x = pa[i];
    const auto& y = pb[i];
    if (x == y) continue;
    if (digits(x) && digits(y)) {
      // Compare as numbers without overflow: strip leading zeros, then length, then text.
      auto sx = x.substr(std::min(x.find_first_not_of('0'), x.size()));
      auto sy = y.substr(std::min(y.find_first_not_of('0'), y.size()));
      if (sx.size() != sy.size()) return sx.size() < sy.size();
      if (sx != sy) return sx < sy;
      continue;
    }
    return x < y;
  }
  if (pa.size() != pb.size()) return pa.size() < pb.size();
  return a < b;
}

Result<ServeConfig> ParseServeConfig(const std::string& text, const std::string& what) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidError("{}:{}: not YAML: {}", what, e.mark.line + 1, e.msg);
  }
  ServeConfig c;
  if (root.IsNull()) return c;
  if (!root.IsMap()) return InvalidError("{}:1: expected a mapping of keys", what);
  static const std::set<std::string> kKeys = {"max_batch_size",
                                              "dynamic_batching",
                                              "instances",
                                              "max_queue_size",
                                              "priority_levels",
                                              "default_priority",
                                              "default_timeout_us",
                                              "version_policy",
                                              "variant",
                                              "labels",
                                              "prep",
                                              "breaking_changes"};
  for (const auto& kv : root) {
    std::string key = kv.first.as<std::string>("");
    if (!kKeys.count(key)) {
      return KeyError(what, kv.first, key,
                      "unknown key (expected one of max_batch_size, dynamic_batching, "
                      "instances, max_queue_size, priority_levels, default_priority, "
                      "default_timeout_us, version_policy, variant, labels, prep, "
                      "breaking_changes)");
    }
    const YAML::Node& v = kv.second;
    Status st;
    if (key == "max_batch_size") {
      st = ReadScalar<int64_t>(what, v, key, 0, 1 << 20, &c.max_batch_size);
    } else if (key == "instances") {
      st = ReadScalar<int>(what, v, key, 1, 256, &c.instances);
    } else if (key == "max_queue_size") {
      st = ReadScalar<int64_t>(what, v, key, 1, 1 << 24, &c.max_queue_size);
    } else if (key == "priority_levels") {
      st = ReadScalar<uint64_t>(what, v, key, 1, 16, &c.priority_levels);
    } else if (key == "default_priority") {
      st = ReadScalar<uint64_t>(what, v, key, 0, 16, &c.default_priority);
    } else if (key == "default_timeout_us") {
      st = ReadScalar<uint64_t>(what, v, key, 0, uint64_t{1} << 40, &c.default_timeout_us);
    } else if (key == "variant" || key == "labels" || key == "prep") {
      if (!v.IsScalar()) return KeyError(what, v, key, "expected a string");
      (key == "variant" ? c.variant : key == "labels" ? c.labels : c.prep) = v.Scalar();
      if (key != "variant" && (v.Scalar().find("..") != std::string::npos ||
                               (!v.Scalar().empty() && v.Scalar()[0] == '/'))) {
        return KeyError(what, v, key, "must be a path inside the model folder");
      }
    } else if (key == "breaking_changes") {
      if (!v.IsScalar() || (v.Scalar() != "allow" && v.Scalar() != "refuse"))
        return KeyError(what, v, key, "expected allow or refuse");
      c.breaking_changes = v.Scalar() == "refuse" ? ServeConfig::BreakingChanges::kRefuse
                                                  : ServeConfig::BreakingChanges::kAllow;
    } else if (key == "dynamic_batching") {
      if (!v.IsMap()) return KeyError(what, v, key, "expected a mapping");
      for (const auto& b : v) {
        std::string bk = b.first.as<std::string>("");
        std::string path = "dynamic_batching." + bk;
        if (bk == "max_queue_delay_us") {
          st = ReadScalar<uint64_t>(what, b.second, path, 0, 10'000'000, &c.max_queue_delay_us);
        } else if (bk == "preferred_batch_size") {
          if (!b.second.IsSequence()) return KeyError(what, b.second, path, "expected a list");
          for (const auto& e : b.second) {
            int64_t n = 0;
            st = ReadScalar<int64_t>(what, e, path, 1, 1 << 20, &n);
            if (!st.ok()) return st;
            c.preferred_batch_sizes.push_back(n);
          }
        } else {
          return KeyError(what, b.first, path,
                          "unknown key (expected max_queue_delay_us or preferred_batch_size)");
        }
        if (!st.ok()) return st;
      }
    } else if (key == "version_policy") {
      if (v.IsScalar() && v.Scalar() == "all") {
        c.policy = ServeConfig::Policy::kAll;
      } else if (v.IsMap() && v.size() == 1 && v["latest"]) {
        c.policy = ServeConfig::Policy::kLatest;
        st = ReadScalar<int64_t>(what, v["latest"], "version_policy.latest", 1, 1000, &c.latest);
      } else if (v.IsMap() && v.size() == 1 && v["specific"] && v["specific"].IsSequence()) {
        c.policy = ServeConfig::Policy::kSpecific;
        for (const auto& e : v["specific"]) {
          if (!e.IsScalar()) return KeyError(what, e, "version_policy.specific", "expected names");
          c.specific.push_back(e.Scalar());
        }
      } else {
        return KeyError(what, v, key, "expected `all`, {latest: N} or {specific: [V, ...]}");
      }
    }
    if (!st.ok()) return st;
  }
  for (int64_t p : c.preferred_batch_sizes) {
    if (p > c.max_batch_size) {
      return InvalidError("{}: dynamic_batching.preferred_batch_size: {} exceeds max_batch_size {}",
                          what, p, c.max_batch_size);
    }
  }
  if (c.default_priority > c.priority_levels) {
    return InvalidError("{}: default_priority: {} exceeds priority_levels {}", what,
                        c.default_priority, c.priority_levels);
  }
  return c;
}

}  // namespace ferry::serve
