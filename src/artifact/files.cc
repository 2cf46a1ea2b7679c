#include "artifact/files.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/sha256.h"

namespace ferry::artifact {

namespace fs = std::filesystem;

namespace {

Status Walk(const fs::path& root, const fs::path& rel, std::vector<std::string>* files,
            std::vector<std::string>* dirs) {
  std::error_code ec;
  fs::directory_iterator it(root / rel, ec);
  if (ec) return InvalidError("cannot list '{}': {}", (root / rel).string(), ec.message());
  for (const auto& de : it) {
    fs::path r = rel.empty() ? de.path().filename() : rel / de.path().filename();
    fs::file_status st = de.symlink_status(ec);
    if (fs::is_symlink(st))
      return InvalidError("'{}' is a symbolic link (artifacts hold regular files only)",
                          (root / r).string());
    if (fs::is_directory(st)) {
      if (dirs) dirs->push_back(r.generic_string() + "/");
      FERRY_RETURN_IF_ERROR(Walk(root, r, files, dirs));
    } else if (fs::is_regular_file(st)) {
      files->push_back(r.generic_string());
    } else {
      return InvalidError("'{}' is not a regular file", (root / r).string());
    }
  }
  return Status::Ok();
}

// ustar numeric field: octal, NUL-terminated, zero-padded to `width` - 1 digits; base-256
// (GNU) when the value does not fit (files of 8 GiB and more).
void PutNumber(char* field, size_t width, uint64_t v) {
  std::string oct = fmt::format("{:o}", v);
  if (oct.size() <= width - 1) {
    std::string padded = std::string(width - 1 - oct.size(), '0') + oct;
    std::memcpy(field, padded.data(), width - 1);
    field[width - 1] = '\0';
    return;
  }
  std::memset(field, 0, width);
  field[0] = static_cast<char>(0x80);
  for (size_t i = width - 1; i > 0; --i) {
    field[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

Result<std::string> Header(const std::string& path, bool is_dir, uint64_t size) {
  std::string h(512, '\0');
  std::string name = path, prefix;
  if (name.size() > 100) {
    // Split at a '/' so that the name part fits 100 bytes and the prefix 155.
    size_t cut = name.rfind('/', name.size() - (is_dir ? 2 : 1));
    while (cut != std::string::npos && name.size() - cut - 1 > 100) cut = std::string::npos;
    if (cut == std::string::npos || cut > 155)
      return InvalidError("'{}': path too long for a tar entry", path);
    prefix = name.substr(0, cut);
    name = name.substr(cut + 1);
  }
  std::memcpy(&h[0], name.data(), name.size());
  PutNumber(&h[100], 8, is_dir ? 0755 : 0644);
  PutNumber(&h[108], 8, 0);  // uid
  PutNumber(&h[116], 8, 0);  // gid
  PutNumber(&h[124], 12, is_dir ? 0 : size);
  PutNumber(&h[136], 12, 0);  // mtime
  h[156] = is_dir ? '5' : '0';
  std::memcpy(&h[257], "ustar", 6);  // magic "ustar\0"
  std::memcpy(&h[263], "00", 2);     // version
  PutNumber(&h[329], 8, 0);          // devmajor
  PutNumber(&h[337], 8, 0);          // devminor
  std::memcpy(&h[345], prefix.data(), prefix.size());
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::string chk = fmt::format("{:06o}", sum);
  std::memcpy(&h[148], chk.data(), 6);
  h[154] = '\0';
  h[155] = ' ';
  return h;
}

uint64_t ParseNumber(const char* field, size_t width, bool* ok) {
  if (static_cast<unsigned char>(field[0]) & 0x80) {
    uint64_t v = 0;
    for (size_t i = 1; i < width; ++i) v = (v << 8) | static_cast<unsigned char>(field[i]);
    return v;
  }
  uint64_t v = 0;
  size_t i = 0;
  while (i < width && field[i] == ' ') ++i;
  for (; i < width && field[i] >= '0' && field[i] <= '7'; ++i) v = v * 8 + (field[i] - '0');
  if (i < width && field[i] != '\0' && field[i] != ' ') *ok = false;
  return v;
}

}  // namespace

Result<std::vector<std::string>> ListFiles(const std::string& dir,
                                           const std::vector<std::string>& skip) {
  std::vector<std::string> files;
  FERRY_RETURN_IF_ERROR(Walk(fs::path(dir), fs::path(), &files, nullptr));
  std::erase_if(files, [&](const std::string& f) {
    return std::find(skip.begin(), skip.end(), f) != skip.end();
  });
  std::sort(files.begin(), files.end());
  return files;
}

Result<std::string> FileSha256(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return InvalidError("cannot read '{}'", path);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (f.gcount() > 0) h.Update(buf.data(), static_cast<size_t>(f.gcount()));
  }
  if (f.bad()) return InvalidError("cannot read '{}'", path);
  return h.HexDigest();
}

Result<std::vector<FileEntry>> DigestFiles(const std::string& dir,
                                           const std::vector<std::string>& skip) {
  FERRY_ASSIGN_OR_RETURN(auto files, ListFiles(dir, skip));
  std::vector<FileEntry> out;
  for (const auto& f : files) {
    FileEntry e;
    e.path = f;
    std::error_code ec;
    e.bytes = fs::file_size(fs::path(dir) / f, ec);
    if (ec) return InvalidError("cannot read '{}'", (fs::path(dir) / f).string());
    FERRY_ASSIGN_OR_RETURN(e.sha256, FileSha256((fs::path(dir) / f).string()));
    out.push_back(std::move(e));
  }
  return out;
}

Status WriteTar(const std::string& dir, const std::string& out) {
  std::vector<std::string> files, dirs;
  FERRY_RETURN_IF_ERROR(Walk(fs::path(dir), fs::path(), &files, &dirs));
  std::vector<std::pair<std::string, bool>> entries;
  for (auto& d : dirs) entries.emplace_back(std::move(d), true);
  for (auto& f : files) entries.emplace_back(std::move(f), false);
  std::sort(entries.begin(), entries.end());
  std::string tmp = out + ".tmp." + std::to_string(::getpid());
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      if (!path.empty()) std::remove(path.c_str());
    }
  } cleanup{tmp};
  std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
  if (!o) return InvalidError("cannot write '{}': {}", out, std::strerror(errno));
  std::vector<char> buf(1 << 20);
  for (const auto& [path, is_dir] : entries) {
    fs::path src = fs::path(dir) / path;
    std::error_code ec;
    uint64_t size = is_dir ? 0 : fs::file_size(src, ec);
    if (ec) return InvalidError("cannot read '{}'", src.string());
    FERRY_ASSIGN_OR_RETURN(std::string h, Header(path, is_dir, size));
    o.write(h.data(), 512);
    if (is_dir) continue;
    std::ifstream in(src, std::ios::binary);
    if (!in) return InvalidError("cannot read '{}'", src.string());
    uint64_t copied = 0;
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      o.write(buf.data(), in.gcount());
      copied += static_cast<uint64_t>(in.gcount());
    }
    if (copied != size) return InvalidError("'{}' changed while it was archived", src.string());
    size_t pad = (512 - size % 512) % 512;
    o.write(std::string(pad, '\0').data(), static_cast<std::streamsize>(pad));
  }
  o.write(std::string(1024, '\0').data(), 1024);
  o.flush();
  if (!o) return InvalidError("cannot write '{}': {}", out, std::strerror(errno));
  o.close();
  if (std::rename(tmp.c_str(), out.c_str()) != 0)
    return InvalidError("cannot write '{}': {}", out, std::strerror(errno));
  cleanup.path.clear();
  return Status::Ok();
}

Result<std::vector<TarMember>> ReadTar(const std::string& bytes, const std::string& what) {
  std::vector<TarMember> out;
  size_t pos = 0;
  for (;;) {
    if (pos + 512 > bytes.size())
      return InvalidError("archive '{}' is truncated (no end marker after {} entries)", what,
                          out.size());
    const char* h = bytes.data() + pos;
    if (std::all_of(h, h + 512, [](char c) { return c == '\0'; })) break;
    bool ok = true;
    uint64_t want = ParseNumber(h + 148, 8, &ok);
    unsigned sum = 0;
    for (int i = 0; i < 512; ++i)
      sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    if (!ok || want != sum)
      return InvalidError("archive '{}': entry {} has a bad header checksum", what, out.size());
    TarMember m;
    std::string name(h, strnlen(h, 100));
    std::string prefix(h + 345, strnlen(h + 345, 155));
    m.path = prefix.empty() ? name : prefix + "/" + name;
    char type = h[156];
    if (type != '0' && type != '\0' && type != '5')
      return InvalidError("archive '{}': entry '{}' has type '{}' (only files and folders)", what,
                          m.path, type);
    m.is_dir = type == '5';
    uint64_t size = ParseNumber(h + 124, 12, &ok);
    pos += 512;
    if (!m.is_dir) {
      if (size > bytes.size() - pos)
        return InvalidError("archive '{}' is truncated inside '{}' ({} of {} bytes)", what, m.path,
                            bytes.size() - pos, size);
      m.bytes = bytes.substr(pos, size);
      pos += size + (512 - size % 512) % 512;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace ferry::artifact
