#include "cli/output_files.h"

#include <filesystem>

#include "cli/map_json.h"
#include "core/npy.h"

namespace ferry::cli {

Result<std::string> WriteOutputValue(const Value& v, const std::string& base) {
  namespace fs = std::filesystem;
  if (v.is_tensor()) {
    FERRY_RETURN_IF_ERROR(WriteFileAtomic(base + ".npy", SerializeNpy(v.tensor())));
    return base + ".npy";
  }
  if (v.is_map() || v.is_map_sequence()) {
    FERRY_RETURN_IF_ERROR(WriteFileAtomic(base + ".json", MapValueToJson(v)));
    return base + ".json";
  }
  if (v.is_sequence()) {
    std::error_code ec;
    fs::create_directories(base, ec);
    for (size_t i = 0; i < v.sequence().size(); ++i)
      FERRY_RETURN_IF_ERROR(WriteFileAtomic(
          (fs::path(base) / (std::to_string(i) + ".npy")).string(), SerializeNpy(v.sequence()[i])));
    return base + "/";
  }
  return std::string();
}

}  // namespace ferry::cli
