#include "cli/quant_common.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/tensor_files.h"
#include "quant/data.h"

namespace ferry::cli {

Result<DType> ParseActivationType(const std::string& text) {
  if (text == "u8" || text == "uint8") return DType::kUint8;
  if (text == "s8" || text == "int8") return DType::kInt8;
  return UsageError("--activation-type must be u8 or s8, got '{}'", text);
}

Result<int64_t> ParseBatch(const std::string& text) {
  if (text == "auto") return int64_t{0};
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || n < 1)
    return UsageError("--batch must be 'auto' or a number >= 1, got '{}'", text);
  return static_cast<int64_t>(n);
}

Result<std::vector<verify::DataSet>> LoadSets(const std::string& dir, const std::string& flag,
                                              const ir::Graph& graph) {
  verify::DataReaders readers{ReadInputFile, SanitizeFileName};
  auto sets = verify::LoadDataSets(dir, graph, readers, false);
  if (!sets.ok()) return sets.status().With(flag);
  return sets;
}

Result<std::vector<verify::DataSet>> LoadSamples(const std::string& dir, const std::string& flag,
                                                 const ir::Graph& graph, int64_t batch,
                                                 int64_t max_samples, int64_t* samples) {
  auto sets = LoadSets(dir, flag, graph);
  if (!sets.ok()) return sets.status();
  return quant::SplitSamples(std::move(sets).value(), graph, batch, max_samples, samples);
}

void Progress(const std::string& role, size_t i, size_t n) {
  static const bool tty = isatty(2);
  if (!tty) return;
  std::fprintf(stderr, "\r%s: %zu/%zu ", role.c_str(), i + 1, n);
  if (i + 1 == n) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace ferry::cli
