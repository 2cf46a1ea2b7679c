// Internal to prep: what `ferry prep check` and `ferry prep embed --check` need to run their
// Python references (tools/prep_reference*.py, tools/prep_embed_ort.py) in the project venv.
#pragma once

#include <string>
#include <vector>

namespace ferry::prep {

// A fresh private folder under the system temp dir (`prefix` + random), removed with its
// contents by the destructor; `path` is empty when it could not be made.
struct TempDir {
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

// Runs argv (no shell; argv[0] a path), stderr passed through; the exit status, or -1 when it
// could not start or did not exit normally.
int RunProcess(const std::vector<std::string>& argv);

}  // namespace ferry::prep
