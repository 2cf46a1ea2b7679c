// Signing: keys, the model-signing bundle layout, the round trip, and every tampering named.
#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "artifact/sign.h"
#include "core/npy.h"
#include "verb_models.h"

namespace ferry::artifact {
namespace {

namespace fs = std::filesystem;

TEST(ArtifactSign, Base64AndPae) {
  for (const std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    auto d = Base64Decode(Base64Encode(s));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, s);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_FALSE(Base64Decode("Zm9v!").ok());
  EXPECT_EQ(DssePae("t", "body"), "DSSEv1 1 t 4 body");
}

struct Signed {
  std::string dir, key, pub;
};

Signed MakeSigned() {
  std::string root = ferry::testing::FreshDir();
  Signed s;
  s.dir = root + "/art";
  fs::create_directories(s.dir + "/models");
  EXPECT_TRUE(WriteFileAtomic(s.dir + "/models/m.onnx", std::string(3000, 'm')).ok());
  EXPECT_TRUE(WriteFileAtomic(s.dir + "/manifest.json", "{\"a\": 1}\n").ok());
  auto keys = GenerateKeyFiles(root + "/key.pem", false);
  EXPECT_TRUE(keys.ok()) << keys.status().message();
  s.key = keys->private_key;
  s.pub = keys->public_key;
  EXPECT_EQ(s.pub, root + "/key.pub.pem");
  struct stat st {};
  EXPECT_EQ(::stat(s.key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  SignOptions so;
  so.folder = s.dir;
  so.key = s.key;
  auto r = Sign(so);
  EXPECT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->files.size(), 2u);
  EXPECT_EQ(r->key_hint, keys->public_sha256);
  return s;
}

TEST(ArtifactSign, BundleLayout) {
  Signed s = MakeSigned();
  auto text = ReadFileBytes(s.dir + "/model.sig");
  ASSERT_TRUE(text.ok());
  auto b = nlohmann::json::parse(*text);
  EXPECT_EQ(b["mediaType"], kBundleMediaType);
  EXPECT_EQ(b["verificationMaterial"]["tlogEntries"], nlohmann::json::array());
  EXPECT_EQ(b["dsseEnvelope"]["payloadType"], kInTotoPayloadType);
  auto payload = Base64Decode(b["dsseEnvelope"]["payload"].get<std::string>());
  ASSERT_TRUE(payload.ok());
  auto st = nlohmann::json::parse(*payload);
  EXPECT_EQ(st["_type"], kStatementType);
  EXPECT_EQ(st["predicateType"], kPredicateType);
  EXPECT_EQ(st["subject"][0]["name"], "art");
  ASSERT_EQ(st["predicate"]["resources"].size(), 2u);
  EXPECT_EQ(st["predicate"]["resources"][0]["name"], "manifest.json");
  EXPECT_EQ(st["predicate"]["resources"][1]["name"], "models/m.onnx");
  EXPECT_EQ(st["predicate"]["serialization"]["method"], "files");
  EXPECT_EQ(st["predicate"]["serialization"]["ignore_paths"][0], "model.sig");
}

TEST(ArtifactSign, RoundTripAndTampering) {
  Signed s = MakeSigned();
  auto ok = CheckSignature(s.dir, kSignatureFile, s.pub);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->ok);
  EXPECT_TRUE(ok->problems.empty());

  // One byte of a model file.
  std::string model = s.dir + "/models/m.onnx";
  ASSERT_TRUE(WriteFileAtomic(model, std::string(2999, 'm') + "n").ok());
  auto bad = CheckSignature(s.dir, kSignatureFile, s.pub);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->ok);
  ASSERT_EQ(bad->problems.size(), 1u);
  EXPECT_NE(bad->problems[0].find("Hash mismatch for 'models/m.onnx'"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(model, std::string(3000, 'm')).ok());

  // An extra file, a missing file.
  ASSERT_TRUE(WriteFileAtomic(s.dir + "/extra.txt", "x").ok());
  bad = CheckSignature(s.dir, kSignatureFile, s.pub);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->problems, (std::vector<std::string>{"Extra files found: 'extra.txt'"}));
  fs::remove(s.dir + "/extra.txt");
  fs::rename(s.dir + "/manifest.json", s.dir + "/../manifest.json");
  bad = CheckSignature(s.dir, kSignatureFile, s.pub);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->problems, (std::vector<std::string>{"Missing files: 'manifest.json'"}));
  fs::rename(s.dir + "/../manifest.json", s.dir + "/manifest.json");

  // Another key.
  std::string other = fs::path(s.dir).parent_path().string() + "/other.pem";
  auto keys = GenerateKeyFiles(other, false);
  ASSERT_TRUE(keys.ok());
  bad = CheckSignature(s.dir, kSignatureFile, keys->public_key);
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->problems.size(), 1u);
  EXPECT_NE(bad->problems[0].find("made with another key"), std::string::npos);
  EXPECT_FALSE(GenerateKeyFiles(other, false).ok());  // exists: needs force

  // A changed signature byte (inside the base64 signature).
  auto text = ReadFileBytes(s.dir + "/model.sig");
  ASSERT_TRUE(text.ok());
  auto b = nlohmann::json::parse(*text);
  std::string sig = b["dsseEnvelope"]["signatures"][0]["sig"];
  sig[10] = sig[10] == 'A' ? 'B' : 'A';
  b["dsseEnvelope"]["signatures"][0]["sig"] = sig;
  ASSERT_TRUE(WriteFileAtomic(s.dir + "/model.sig", b.dump()).ok());
  bad = CheckSignature(s.dir, kSignatureFile, s.pub);
  ASSERT_TRUE(bad.ok());
  ASSERT_EQ(bad->problems.size(), 1u);
  EXPECT_NE(bad->problems[0].find("does not verify"), std::string::npos) << bad->problems[0];

  // Not a bundle at all.
  ASSERT_TRUE(WriteFileAtomic(s.dir + "/model.sig", "garbage").ok());
  auto err = CheckSignature(s.dir, kSignatureFile, s.pub);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.status().code(), StatusCode::kInvalid);
}

}  // namespace
}  // namespace ferry::artifact
