// Artifact files: sorted listing, digests, and the deterministic tar (same bytes whatever the
// files' times and modes, readable back, truncation detected).
#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "artifact/files.h"
#include "core/npy.h"
#include "verb_models.h"

namespace ferry::artifact {
namespace {

namespace fs = std::filesystem;

void Fill(const std::string& dir, bool loose_modes) {
  fs::create_directories(fs::path(dir) / "models");
  fs::create_directories(fs::path(dir) / "golden" / "data" / "test_data_set_0");
  ASSERT_TRUE(WriteFileAtomic(dir + "/manifest.json", "{}\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/models/b.onnx", std::string(1000, 'b')).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/models/a.onnx", std::string(512, 'a')).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/golden/data/test_data_set_0/input_0.pb", "x").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/RUNBOOK.md", "").ok());
  if (loose_modes) {
    ::chmod((dir + "/models/a.onnx").c_str(), 0600);
    ::chmod((dir + "/models").c_str(), 0700);
  }
}

TEST(ArtifactFiles, ListsSortedAndDigests) {
  std::string dir = ferry::testing::FreshDir();
  Fill(dir, false);
  auto files = ListFiles(dir, {"manifest.json"});
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_EQ(*files,
            (std::vector<std::string>{"RUNBOOK.md", "golden/data/test_data_set_0/input_0.pb",
                                      "models/a.onnx", "models/b.onnx"}));
  auto d = DigestFiles(dir);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 5u);
  EXPECT_EQ((*d)[0].path, "RUNBOOK.md");
  EXPECT_EQ((*d)[0].sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ((*d)[4].bytes, 1000u);
  fs::create_symlink("models/a.onnx", fs::path(dir) / "link.onnx");
  auto bad = ListFiles(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("symbolic link"), std::string::npos);
}

TEST(ArtifactFiles, TarIsDeterministicAndReadable) {
  std::string a = ferry::testing::FreshDir("_a"), b = ferry::testing::FreshDir("_b");
  Fill(a, false);
  Fill(b, true);  // other modes, other times
  std::string ta = a + ".tar", tb = b + ".tar";
  ASSERT_TRUE(WriteTar(a, ta).ok());
  ASSERT_TRUE(WriteTar(b, tb).ok());
  auto ba = ReadFileBytes(ta), bb = ReadFileBytes(tb);
  ASSERT_TRUE(ba.ok() && bb.ok());
  EXPECT_EQ(*ba, *bb);
  EXPECT_EQ(ba->size() % 512, 0u);
  auto members = ReadTar(*ba, ta);
  ASSERT_TRUE(members.ok()) << members.status().message();
  std::vector<std::string> paths;
  for (const auto& m : *members) paths.push_back(m.path);
  EXPECT_EQ(paths, (std::vector<std::string>{
                       "RUNBOOK.md", "golden/", "golden/data/", "golden/data/test_data_set_0/",
                       "golden/data/test_data_set_0/input_0.pb", "manifest.json", "models/",
                       "models/a.onnx", "models/b.onnx"}));
  EXPECT_EQ(members->back().bytes, std::string(1000, 'b'));
  // Header fields: mode 0644, uid/gid 0, mtime 0, ustar magic.
  EXPECT_EQ(ba->substr(100, 7), "0000644");
  EXPECT_EQ(ba->substr(108, 7), "0000000");
  EXPECT_EQ(ba->substr(136, 11), "00000000000");
  EXPECT_EQ(ba->substr(257, 5), "ustar");
  // Truncated: refused, naming the archive.
  auto cut = ReadTar(ba->substr(0, ba->size() - 1500), ta);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
  std::string flipped = *ba;
  flipped[10] ^= 1;  // inside the first header's name
  auto bad = ReadTar(flipped, ta);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("checksum"), std::string::npos);
}

}  // namespace
}  // namespace ferry::artifact
