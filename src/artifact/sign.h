// Signatures in the format of the OpenSSF model-signing project (PyPI `model-signing` 1.1.1,
// `model_signing sign key` / `verify key`), so that its CLI verifies what Ferry signs and Ferry
// verifies what it signs:
//  - the statement is in-toto v1 (predicateType https://model_signing/signature/v1.0): one
//    resource {name, algorithm sha256, digest} per file of the folder, sorted by name, and one
//    subject {name: folder name, digest.sha256: SHA-256 over the concatenated raw per-file
//    digests in that order};
//  - it is signed as a DSSE envelope (payload type application/vnd.in-toto+json; the signature
//    is ECDSA with SHA-256 for P-256 (SHA-384 / SHA-512 for P-384 / P-521), DER, over the DSSE
//    v1 pre-authentication encoding);
//  - the file (default `model.sig` inside the folder, never itself hashed) is a Sigstore bundle
//    v0.3 JSON whose verificationMaterial.publicKey.hint is the SHA-256 of the public key's PEM.
// Keys are ECDSA P-256 PEM files made through OpenSSL 3 (libssl-dev). Safe to call from any
// thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "artifact/files.h"
#include "core/status.h"

namespace ferry::artifact {

inline constexpr const char* kSignatureFile = "model.sig";
inline constexpr const char* kBundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json";
inline constexpr const char* kInTotoPayloadType = "application/vnd.in-toto+json";
inline constexpr const char* kStatementType = "https://in-toto.io/Statement/v1";
inline constexpr const char* kPredicateType = "https://model_signing/signature/v1.0";

// ---- keys ----

struct KeyFiles {
  std::string private_key, public_key;  // paths written
  std::string public_sha256;            // the bundle's key hint
};
// A new ECDSA P-256 key: PKCS#8 PEM at `private_path` (mode 0600) and the SubjectPublicKeyInfo
// PEM at the same path with ".pem" replaced by ".pub.pem" (or ".pub.pem" appended). Refuses
// (kInvalid) to overwrite either file unless `force`.
Result<KeyFiles> GenerateKeyFiles(const std::string& private_path, bool force);
// The public key file next to a private key path: KEY.pem -> KEY.pub.pem.
std::string PublicKeyPath(const std::string& private_path);

// ---- signing ----

// The digests model-signing signs: every file under `dir` except the signature file (a path as
// the filesystem sees it, e.g. "DIR/model.sig") and the git paths model-signing ignores (.git,
// .gitattributes, .github, .gitignore), sorted.
Result<std::vector<FileEntry>> SignedFiles(const std::string& dir, const std::string& signature);
// The subject digest: SHA-256 over the raw (binary) digests of `files` in order (hex).
std::string SubjectDigest(const std::vector<FileEntry>& files);
// DSSE v1 pre-authentication encoding of (type, body).
std::string DssePae(const std::string& type, const std::string& body);

struct SignOptions {
  std::string folder;                      // the artifact (or any model folder)
  std::string key;                         // private key PEM (ECDSA P-256/384/521)
  std::string signature = kSignatureFile;  // relative to `folder`, or absolute
};

struct SignResult {
  std::string folder, signature;  // the signature file written
  std::string subject_digest, key_hint;
  std::vector<FileEntry> files;
};

// Errors: kInvalid for a missing folder or unreadable key; kUnsupported for a key that is not
// ECDSA on P-256/384/521 (model-signing verifies no other). The bundle is written atomically.
Result<SignResult> Sign(const SignOptions& options);

// ---- checking a signature ----

struct SignatureCheck {
  bool ok = false;
  std::string subject_digest, key_hint;
  // Problems, each naming what differs: "signature: does not match the public key ...",
  // "Hash mismatch for 'models/int8.onnx'", "Missing files: ...", "Extra files found: ...".
  std::vector<std::string> problems;
  std::vector<FileEntry> files;  // the signed resources
};

// Checks the bundle at `signature` (relative to `folder` or absolute) with the public key PEM
// `public_key`: media type, key hint, the ECDSA signature over the envelope, the statement's
// subject against its resources, and every resource against the folder's files (the names
// compared as model-signing does: name -> digest). A failed check is not an error (see
// problems); errors are kInvalid for an unreadable key or a bundle that is not JSON of this
// format.
Result<SignatureCheck> CheckSignature(const std::string& folder, const std::string& signature,
                                      const std::string& public_key);

// Base64 (standard alphabet, padded) as the bundle uses it.
std::string Base64Encode(const std::string& bytes);
Result<std::string> Base64Decode(const std::string& text);

}  // namespace ferry::artifact
