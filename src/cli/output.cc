// What every command prints: results on stdout, errors on stderr, always valid UTF-8 (a model's
// names and metadata may hold any bytes; invalid sequences print as U+FFFD).
#include <cstdio>

#include "cli/command.h"
#include "core/utf8.h"

namespace ferry::cli {

void PrintOut(const std::string& text) {
  const std::string valid = ValidUtf8(text);
  std::fwrite(valid.data(), 1, valid.size(), stdout);
}

int ReportError(const Status& status) {
  std::fprintf(stderr, "ferry: error: %s\n", ValidUtf8(status.message()).c_str());
  return status.exit_code();
}

}  // namespace ferry::cli
