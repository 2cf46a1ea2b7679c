// API keys for `ferry serve`: a keys file lists each key's SHA-256 (never the key itself) and
// its scopes; a request presents the key as `Authorization: Bearer KEY` (HTTP) or the
// `authorization` metadata (gRPC). The file is re-read when its modification time or size
// changes, so a revoked key fails on its next request.
//
// keys.yaml:
//   keys:
//     - name: ci                     # for the access log
//       sha256: 9f86d0...            # sha256 of the key's bytes, hex (`ferry serve hash-key`)
//       scopes: [infer:digits*, admin]
// Scopes: `infer:PATTERN` (metadata, ready and infer on models whose name matches the glob
// PATTERN; `infer` alone: every model), `admin` (the repository extension and statistics).
// Health, server metadata and /metrics need no key.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry::serve {

enum class Scope { kInfer, kAdmin };

struct KeyEntry {
  std::string name;
  std::string sha256;  // lowercase hex
  std::vector<std::string> infer_patterns;
  bool admin = false;
};

// Parses a keys file's text. Errors: kInvalid naming the entry and key that is wrong.
Result<std::vector<KeyEntry>> ParseKeys(const std::string& text, const std::string& what);

enum class AuthResult { kOk, kUnauthenticated, kPermissionDenied };

class KeyStore {
 public:
  // Errors: an unreadable or invalid file at start-up.
  static Result<std::unique_ptr<KeyStore>> Open(const std::string& path);
  // Re-reads the file if it changed (a file that became invalid keeps no key: every request
  // is refused until it is fixed, and the error is in last_error()). `name` gets the key's name.
  AuthResult Check(const std::string& token, Scope scope, const std::string& model,
                   std::string* name);
  std::string last_error() const;

 private:
  KeyStore() = default;
  void ReloadIfChanged();
  std::string path_;
  mutable std::mutex mu_;
  std::vector<KeyEntry> keys_;
  int64_t mtime_ns_ = -1, size_ = -1;
  std::string error_;
};

std::string HashKey(const std::string& key);  // lowercase hex SHA-256

}  // namespace ferry::serve
