#include "serve/auth.h"

#include <fnmatch.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/sha256.h"

namespace ferry::serve {

std::string HashKey(const std::string& key) {
  Sha256 h;
  h.Update(key.data(), key.size());
  return h.HexDigest();
}

Result<std::vector<KeyEntry>> ParseKeys(const std::string& text, const std::string& what) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidError("{}:{}: not YAML: {}", what, e.mark.line + 1, e.msg);
  }
  if (!root.IsMap() || !root["keys"] || !root["keys"].IsSequence()) {
    return InvalidError("{}: expected `keys:` with a list of {{name, sha256, scopes}}", what);
  }
  std::vector<KeyEntry> out;
  for (const auto& k : root["keys"]) {
    int line = k.Mark().line + 1;
    if (!k.IsMap()) return InvalidError("{}:{}: keys[]: expected a mapping", what, line);
    KeyEntry e;
    for (const auto& kv : k) {
      std::string key = kv.first.as<std::string>("");
      const auto& v = kv.second;
      if (key == "name" && v.IsScalar()) {
        e.name = v.Scalar();
      } else if (key == "sha256" && v.IsScalar()) {
        e.sha256 = v.Scalar();
        bool hex = e.sha256.size() == 64;
        for (char& c : e.sha256) {
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          hex = hex && std::isxdigit(static_cast<unsigned char>(c));
        }
        if (!hex) {
          return InvalidError(
              "{}:{}: keys[].sha256: expected 64 hex digits (ferry serve "
              "hash-key KEY)",
              what, v.Mark().line + 1);
        }
      } else if (key == "scopes" && v.IsSequence()) {
        for (const auto& s : v) {
          std::string scope = s.as<std::string>("");
          if (scope == "admin") {
            e.admin = true;
          } else if (scope == "infer") {
            e.infer_patterns.push_back("*");
          } else if (scope.rfind("infer:", 0) == 0 && scope.size() > 6) {
            e.infer_patterns.push_back(scope.substr(6));
          } else {
            return InvalidError(
                "{}:{}: keys[].scopes: '{}' is not admin, infer or "
                "infer:PATTERN",
                what, s.Mark().line + 1, scope);
          }
        }
      } else {
        return InvalidError(
            "{}:{}: keys[].{}: unknown key or wrong type (expected name, "
            "sha256, scopes)",
            what, kv.first.Mark().line + 1, key);
      }
    }
    if (e.sha256.empty()) return InvalidError("{}:{}: keys[]: sha256 is missing", what, line);
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::unique_ptr<KeyStore>> KeyStore::Open(const std::string& path) {
  std::unique_ptr<KeyStore> s(new KeyStore());
  s->path_ = path;
  s->ReloadIfChanged();
  if (!s->error_.empty()) return InvalidError("{}", s->error_);
  return s;
}

void KeyStore::ReloadIfChanged() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    keys_.clear();
    error_ = fmt::format("keys file {}: cannot be read", path_);
    mtime_ns_ = size_ = -1;
    return;
  }
  int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (mtime == mtime_ns_ && st.st_size == size_) return;
  mtime_ns_ = mtime;
  size_ = st.st_size;
  std::ifstream in(path_, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto parsed = ParseKeys(ss.str(), path_);
  if (!parsed.ok()) {
    keys_.clear();  // fail closed
    error_ = parsed.status().message();
    return;
  }
  keys_ = std::move(parsed.value());
  error_.clear();
}

AuthResult KeyStore::Check(const std::string& token, Scope scope, const std::string& model,
                           std::string* name) {
  std::lock_guard<std::mutex> lock(mu_);
  ReloadIfChanged();
  if (token.empty()) return AuthResult::kUnauthenticated;
  std::string digest = HashKey(token);
  for (const auto& k : keys_) {
    if (k.sha256 != digest) continue;
    if (name) *name = k.name;
    if (scope == Scope::kAdmin) return k.admin ? AuthResult::kOk : AuthResult::kPermissionDenied;
    if (k.admin) return AuthResult::kOk;
    for (const auto& p : k.infer_patterns) {
      if (::fnmatch(p.c_str(), model.c_str(), 0) == 0) return AuthResult::kOk;
    }
    return AuthResult::kPermissionDenied;
  }
  return AuthResult::kUnauthenticated;
}

std::string KeyStore::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

}  // namespace ferry::serve
