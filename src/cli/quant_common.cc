#include "cli/quant_common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ferry::cli {

Result<int64_t> ParseBatch(const std::string& text) {
  if (text == "auto") return int64_t{0};
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < 1)
    return UsageError("--batch must be 'auto' or a number >= 1, got '{}'", text);
  return static_cast<int64_t>(n);
}

void Progress(std::string_view stage, size_t i, size_t n) {
  static const bool tty = isatty(2);
  if (!tty) return;
  std::fprintf(stderr, "\r%.*s: %zu/%zu ", static_cast<int>(stage.size()), stage.data(), i + 1, n);
  if (i + 1 == n) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace ferry::cli
