#include "artifact/sign.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/npy.h"
#include "core/sha256.h"

namespace ferry::artifact {

namespace fs = std::filesystem;

namespace {

// model-signing's default ignore list (its CLI adds the signature path).
const char* const kIgnoredPaths[] = {".git", ".gitattributes", ".github", ".gitignore"};

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Bio = std::unique_ptr<BIO, BioFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

std::string BioText(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> PublicPem(EVP_PKEY* pkey) {
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_PUBKEY(b.get(), pkey) != 1)
    return InvalidError("cannot write the public key: {}", OpenSslError());
  return BioText(b.get());
}

std::string Sha256Hex(const std::string& bytes) {
  Sha256 h;
  h.Update(bytes.data(), bytes.size());
  return h.HexDigest();
}

// The digest model-signing pairs with the key's curve; kUnsupported for other keys.
Result<const EVP_MD*> DigestFor(EVP_PKEY* pkey, const std::string& what) {
  if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_EC)
    return UnsupportedError(
        "{}: a {} key; model-signing keys are ECDSA on P-256, P-384 or P-521", what,
        EVP_PKEY_get0_type_name(pkey) ? EVP_PKEY_get0_type_name(pkey) : "non-EC");
  char group[64] = {0};
  size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) !=
      1)
    return UnsupportedError("{}: cannot read the key's curve", what);
  std::string g(group, len);
  if (g == "prime256v1" || g == "P-256" || g == "secp256r1") return EVP_sha256();
  if (g == "secp384r1" || g == "P-384") return EVP_sha384();
  if (g == "secp521r1" || g == "P-521") return EVP_sha512();
  return UnsupportedError("{}: ECDSA key on curve {}; model-signing allows P-256, P-384, P-521",
                          what, g);
}

Result<Pkey> LoadPrivate(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(std::string pem, ReadFileBytes(path));
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Pkey k(PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr));
  if (!k) return InvalidError("--key '{}': not a PEM private key ({})", path, OpenSslError());
  return k;
}

Result<Pkey> LoadPublic(const std::string& pem, const std::string& path) {
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Pkey k(PEM_read_bio_PUBKEY(b.get(), nullptr, nullptr, nullptr));
  if (!k) return InvalidError("--key '{}': not a PEM public key ({})", path, OpenSslError());
  return k;
}

std::vector<uint8_t> HexBytes(const std::string& hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string ResolveSignature(const std::string& folder, const std::string& signature) {
  fs::path p(signature);
  return p.is_absolute() ? p.string() : (fs::path(folder) / p).string();
}

// The signature file's path (as the filesystem sees it: absolute, or relative to the working
// folder) relative to `folder` when it lies inside it ("" otherwise).
std::string RelativeSignature(const std::string& folder, const std::string& signature) {
  std::error_code ec;
  fs::path f = fs::absolute(folder, ec).lexically_normal();
  fs::path p = fs::absolute(signature, ec).lexically_normal();
  fs::path rel = p.lexically_relative(f);
  if (rel.empty() || *rel.begin() == "..") return "";
  return rel.generic_string();
}

Status WritePrivateFile(const std::string& path, const std::string& pem) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return InvalidError("cannot write '{}': {}", path, std::strerror(errno));
  bool ok = ::write(fd, pem.data(), pem.size()) == static_cast<ssize_t>(pem.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return InvalidError("cannot write '{}': {}", path, std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

std::string Base64Encode(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char c : text) {
    if (c == '=') {
      ++pad;
      continue;
    }
    if (c == '\n' || c == '\r') continue;
    int v = value(c);
    if (v < 0 || pad) return InvalidError("not base64 (character '{}')", c);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (pad > 2 || bits >= 6) return InvalidError("not base64 (bad length)");
  return out;
}

std::string PublicKeyPath(const std::string& private_path) {
  const std::string ext = ".pem";
  if (private_path.size() > ext.size() &&
      private_path.compare(private_path.size() - ext.size(), ext.size(), ext) == 0)
    return private_path.substr(0, private_path.size() - ext.size()) + ".pub.pem";
  return private_path + ".pub.pem";
}

Result<KeyFiles> GenerateKeyFiles(const std::string& private_path, bool force) {
  KeyFiles kf;
  kf.private_key = private_path;
  kf.public_key = PublicKeyPath(private_path);
  std::error_code ec;
  for (const auto& p : {kf.private_key, kf.public_key})
    if (fs::exists(p, ec) && !force)
      return InvalidError("'{}' already exists (pass --force to replace it)", p);
  Pkey k(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!k) return InvalidError("cannot generate an ECDSA P-256 key: {}", OpenSslError());
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_PrivateKey(b.get(), k.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return InvalidError("cannot write the private key: {}", OpenSslError());
  FERRY_ASSIGN_OR_RETURN(std::string pub, PublicPem(k.get()));
  FERRY_RETURN_IF_ERROR(WritePrivateFile(kf.private_key, BioText(b.get())));
  FERRY_RETURN_IF_ERROR(WriteFileAtomic(kf.public_key, pub));
  kf.public_sha256 = Sha256Hex(pub);
  return kf;
}

Result<std::vector<FileEntry>> SignedFiles(const std::string& dir, const std::string& signature) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return InvalidError("'{}' is not a folder", dir);
  std::string sig_rel = RelativeSignature(dir, signature);
  FERRY_ASSIGN_OR_RETURN(auto all, DigestFiles(dir));
  std::vector<FileEntry> out;
  for (auto& f : all) {
    if (f.path == sig_rel) continue;
    std::string top = f.path.substr(0, f.path.find('/'));
    if (std::find(std::begin(kIgnoredPaths), std::end(kIgnoredPaths), top) !=
        std::end(kIgnoredPaths))
      continue;
    out.push_back(std::move(f));
  }
  return out;
}

std::string SubjectDigest(const std::vector<FileEntry>& files) {
  Sha256 h;
  for (const auto& f : files) {
    std::vector<uint8_t> raw = HexBytes(f.sha256);
    h.Update(raw.data(), raw.size());
  }
  return h.HexDigest();
}

std::string DssePae(const std::string& type, const std::string& body) {
  return fmt::format("DSSEv1 {} {} {} ", type.size(), type, body.size()) + body;
}

Result<SignResult> Sign(const SignOptions& o) {
  FERRY_ASSIGN_OR_RETURN(Pkey key, LoadPrivate(o.key));
  FERRY_ASSIGN_OR_RETURN(const EVP_MD* md, DigestFor(key.get(), "--key '" + o.key + "'"));
  FERRY_ASSIGN_OR_RETURN(std::string pub, PublicPem(key.get()));
  SignResult r;
  r.folder = o.folder;
  r.signature = ResolveSignature(o.folder, o.signature);
  FERRY_ASSIGN_OR_RETURN(r.files, SignedFiles(o.folder, r.signature));
  r.subject_digest = SubjectDigest(r.files);
  r.key_hint = Sha256Hex(pub);
  fs::path folder_abs = fs::absolute(o.folder).lexically_normal();
  if (folder_abs.filename().empty()) folder_abs = folder_abs.parent_path();
  std::string name = folder_abs.filename().string();
  nlohmann::json resources = nlohmann::json::array();
  for (const auto& f : r.files)
    resources.push_back({{"name", f.path}, {"algorithm", "sha256"}, {"digest", f.sha256}});
  // As model_signing writes it: the signature file, then its default git paths.
  std::vector<std::string> ignore;
  std::string sig_rel = RelativeSignature(o.folder, r.signature);
  if (!sig_rel.empty()) ignore.push_back(sig_rel);
  ignore.insert(ignore.end(), std::begin(kIgnoredPaths), std::end(kIgnoredPaths));
  nlohmann::json statement = {
      {"_type", kStatementType},
      {"subject",
       nlohmann::json::array({{{"name", name}, {"digest", {{"sha256", r.subject_digest}}}}})},
      {"predicateType", kPredicateType},
      {"predicate",
       {{"serialization",
         {{"method", "files"},
          {"hash_type", "sha256"},
          {"allow_symlinks", false},
          {"ignore_paths", ignore}}},
        {"resources", resources}}}};
  std::string payload = JsonText(statement);
  std::string pae = DssePae(kInTotoPayloadType, payload);
  MdCtx ctx(EVP_MD_CTX_new());
  size_t siglen = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &siglen,
                     reinterpret_cast<const unsigned char*>(pae.data()), pae.size()) != 1)
    return InvalidError("signing failed: {}", OpenSslError());
  std::string sig(siglen, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &siglen,
                     reinterpret_cast<const unsigned char*>(pae.data()), pae.size()) != 1)
    return InvalidError("signing failed: {}", OpenSslError());
  sig.resize(siglen);
  nlohmann::json bundle = {
      {"mediaType", kBundleMediaType},
      {"verificationMaterial",
       {{"publicKey", {{"hint", r.key_hint}}}, {"tlogEntries", nlohmann::json::array()}}},
      {"dsseEnvelope",
       {{"payload", Base64Encode(payload)},
        {"payloadType", kInTotoPayloadType},
        {"signatures", nlohmann::json::array({{{"sig", Base64Encode(sig)}, {"keyid", ""}}})}}}};
  FERRY_RETURN_IF_ERROR(WriteFileAtomic(r.signature, JsonText(bundle) + "\n"));
  return r;
}

Result<SignatureCheck> CheckSignature(const std::string& folder, const std::string& signature,
                                      const std::string& public_key) {
  SignatureCheck c;
  std::string sig_path = ResolveSignature(folder, signature);
  std::error_code ec;
  if (!fs::is_regular_file(sig_path, ec))
    return InvalidError("signature '{}': no such file (sign with ferry sign)", sig_path);
  FERRY_ASSIGN_OR_RETURN(std::string pub, ReadFileBytes(public_key));
  FERRY_ASSIGN_OR_RETURN(Pkey key, LoadPublic(pub, public_key));
  FERRY_ASSIGN_OR_RETURN(const EVP_MD* md, DigestFor(key.get(), "--key '" + public_key + "'"));
  c.key_hint = Sha256Hex(pub);
  FERRY_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(sig_path));
  nlohmann::json bundle = nlohmann::json::parse(text, nullptr, false);
  const std::string what = fmt::format("signature '{}'", sig_path);
  if (bundle.is_discarded() || !bundle.is_object())
    return InvalidError("{}: not JSON (a Sigstore bundle is expected)", what);
  auto str = [](const nlohmann::json& j, const char* k) -> std::string {
    return j.is_object() && j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
  };
  std::string media = str(bundle, "mediaType");
  if (media != kBundleMediaType)
    return InvalidError("{}: mediaType '{}', expected '{}'", what, media, kBundleMediaType);
  const nlohmann::json& env =
      bundle.contains("dsseEnvelope") ? bundle["dsseEnvelope"] : nlohmann::json();
  if (str(env, "payloadType") != kInTotoPayloadType || !env.contains("signatures") ||
      !env["signatures"].is_array() || env["signatures"].empty())
    return InvalidError("{}: no DSSE envelope with an in-toto payload and a signature", what);
  auto payload = Base64Decode(str(env, "payload"));
  auto sig = Base64Decode(str(env["signatures"][0], "sig"));
  if (!payload.ok() || !sig.ok())
    return InvalidError("{}: payload or signature is not base64", what);
  std::string hint;
  if (bundle.contains("verificationMaterial") && bundle["verificationMaterial"].is_object() &&
      bundle["verificationMaterial"].contains("publicKey"))
    hint = str(bundle["verificationMaterial"]["publicKey"], "hint");
  if (!hint.empty() && hint != c.key_hint) {
    c.problems.push_back(fmt::format(
        "signature: made with another key (key hint {}, the public key '{}' hashes to {})", hint,
        public_key, c.key_hint));
    return c;
  }
  std::string pae = DssePae(kInTotoPayloadType, *payload);
  MdCtx ctx(EVP_MD_CTX_new());
  int ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, key.get()) == 1
               ? EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig->data()),
                                  sig->size(), reinterpret_cast<const unsigned char*>(pae.data()),
                                  pae.size())
               : -1;
  ERR_clear_error();
  if (ok != 1) {
    c.problems.push_back(fmt::format(
        "signature: does not verify with the public key '{}' (another key, or '{}' was changed)",
        public_key, sig_path));
    return c;
  }
  nlohmann::json st = nlohmann::json::parse(*payload, nullptr, false);
  if (st.is_discarded() || str(st, "_type") != kStatementType ||
      str(st, "predicateType") != kPredicateType || !st.contains("predicate") ||
      !st["predicate"].is_object() || !st["predicate"].contains("resources") ||
      !st["predicate"]["resources"].is_array())
    return InvalidError("{}: the signed statement is not an in-toto v1 model-signing statement",
                        what);
  std::map<std::string, std::string> signed_files;
  for (const auto& res : st["predicate"]["resources"]) {
    std::string name = str(res, "name"), digest = str(res, "digest");
    if (name.empty() || str(res, "algorithm") != "sha256")
      return InvalidError("{}: a resource without a name or not hashed with sha256", what);
    signed_files[name] = digest;
    c.files.push_back(FileEntry{name, 0, digest});
  }
  std::sort(c.files.begin(), c.files.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  c.subject_digest = SubjectDigest(c.files);
  std::string subject;
  if (st.contains("subject") && st["subject"].is_array() && st["subject"].size() == 1 &&
      st["subject"][0].contains("digest"))
    subject = str(st["subject"][0]["digest"], "sha256");
  if (subject != c.subject_digest) {
    c.problems.push_back(
        fmt::format("signature: the statement is inconsistent (subject {} vs {} "
                    "over its resources)",
                    subject, c.subject_digest));
    return c;
  }
  // The folder as it is now, hashed the way it was signed.
  std::set<std::string> ignore;
  if (st["predicate"].contains("serialization") && st["predicate"]["serialization"].is_object() &&
      st["predicate"]["serialization"].contains("ignore_paths") &&
      st["predicate"]["serialization"]["ignore_paths"].is_array())
    for (const auto& p : st["predicate"]["serialization"]["ignore_paths"])
      if (p.is_string()) ignore.insert(p.get<std::string>());
  FERRY_ASSIGN_OR_RETURN(auto now, SignedFiles(folder, sig_path));
  std::vector<std::string> extra, missing;
  std::set<std::string> present;
  for (const auto& f : now) {
    std::string top = f.path.substr(0, f.path.find('/'));
    if (ignore.count(f.path) || ignore.count(top)) continue;
    present.insert(f.path);
    auto it = signed_files.find(f.path);
    if (it == signed_files.end())
      extra.push_back(f.path);
    else if (it->second != f.sha256)
      c.problems.push_back(
          fmt::format("Hash mismatch for '{}' (signed {}, now {})", f.path, it->second, f.sha256));
  }
  for (const auto& [name, d] : signed_files)
    if (!present.count(name)) missing.push_back(name);
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
    return s;
  };
  if (!missing.empty()) c.problems.push_back("Missing files: " + join(missing));
  if (!extra.empty()) c.problems.push_back("Extra files found: " + join(extra));
  c.ok = c.problems.empty();
  return c;
}

}  // namespace ferry::artifact
