#include "cli/quant_common.h"

#include <unistd.h>

#include <cstdio>

#include "cli/tensor_files.h"
#include "quant/data.h"

namespace ferry::cli {

Result<DType> ParseActivationType(const std::string& text) {
  if (text == "u8" || text == "uint8") return DType::kUint8;
  if (text == "s8" || text == "int8") return DType::kInt8;
  return UsageError("--activation-type must be u8 or s8, got '{}'", text);
}

Result<std::vector<verify::DataSet>> LoadSamples(const std::string& dir, const std::string& flag,
                                                 const ir::Graph& graph, int64_t batch,
                                                 int64_t max_samples, int64_t* samples) {
  verify::DataReaders readers{ReadInputFile, SanitizeFileName};
  auto sets = verify::LoadDataSets(dir, graph, readers, false);
  if (!sets.ok()) return sets.status().With(flag);
  return quant::SplitSamples(std::move(sets).value(), graph, batch, max_samples, samples);
}

void Progress(const std::string& role, size_t i, size_t n) {
  static const bool tty = isatty(2);
  if (!tty) return;
  std::fprintf(stderr, "\r%s: run %zu/%zu ", role.c_str(), i + 1, n);
  if (i + 1 == n) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace ferry::cli
