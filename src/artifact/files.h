// The files of an artifact folder: listed in a fixed order, digested, and archived as a
// deterministic tar (ustar: sorted entries, mtime 0, uid/gid 0, modes 0644/0755, no user or
// group names), so that the same folder always gives the same archive bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry::artifact {

struct FileEntry {
  std::string path;  // relative, '/'-separated
  uint64_t bytes = 0;
  std::string sha256;  // lower-case hex
};

// Regular files under `dir`, recursively, as relative '/'-separated paths sorted by byte
// order. `skip` names top-level files left out (the manifest itself, a signature). Errors
// (kInvalid) for anything that is not a regular file or a folder (symlinks, devices).
Result<std::vector<std::string>> ListFiles(const std::string& dir,
                                           const std::vector<std::string>& skip = {});
// SHA-256 of a file's bytes, streamed.
Result<std::string> FileSha256(const std::string& path);
// ListFiles with each file's size and SHA-256.
Result<std::vector<FileEntry>> DigestFiles(const std::string& dir,
                                           const std::vector<std::string>& skip = {});

// Writes `dir` as a tar to `out` (temp file, then rename): one entry per folder (path with a
// trailing '/') and file, sorted by path, each with mtime 0, uid/gid 0, mode 0755 (folders) /
// 0644 (files), empty user and group names; two 512-byte zero blocks at the end. Entry paths
// are relative to `dir` (no leading folder). Paths longer than ustar holds (100 bytes, or 155 +
// 100 split at a '/') are kInvalid.
Status WriteTar(const std::string& dir, const std::string& out);

struct TarMember {
  std::string path;  // as stored (folders end in '/')
  bool is_dir = false;
  std::string bytes;  // files
};
// Parses a tar written by WriteTar (ustar, regular files and folders only). kInvalid naming
// `what` for a truncated archive, a bad header checksum or another entry type.
Result<std::vector<TarMember>> ReadTar(const std::string& bytes, const std::string& what);

}  // namespace ferry::artifact
