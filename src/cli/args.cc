#include "cli/args.h"

#include <cstdlib>

namespace ferry::cli {

Result<std::pair<std::string, std::string>> SplitSpec(const std::string& spec,
                                                      const std::string& flag,
                                                      const std::string& form) {
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return UsageError("{} expects {}, got '{}'", flag, form, spec);
  return std::make_pair(spec.substr(0, eq), spec.substr(eq + 1));
}

Result<Shape> ParseDims(const std::string& flag, const std::string& text) {
  Shape dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find_first_of("x,", pos);
    std::string part = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    char* stop = nullptr;
    long long v = part.empty() || part.size() > 12 ? -1 : std::strtoll(part.c_str(), &stop, 10);
    if (v < 0 || *stop != '\0')
      return UsageError("{} {}: expected non-negative dims like 1x3x224x224 or 1,3,224,224", flag,
                        text);
    dims.push_back(v);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return dims;
}

Result<std::map<std::string, Shape>> ParseShapeSpecs(const std::string& flag,
                                                     const std::vector<std::string>& specs) {
  std::map<std::string, Shape> out;
  for (const auto& spec : specs) {
    FERRY_ASSIGN_OR_RETURN(auto kv, SplitSpec(spec, flag, "NAME=DIMS (e.g. input=1x3x224x224)"));
    auto parsed = ParseDims(flag, kv.second);
    if (!parsed.ok())
      return UsageError("{} {}: expected non-negative dims like 1x3x224x224", flag, spec);
    if (!out.emplace(kv.first, parsed.value()).second)
      return UsageError("{} is given twice for '{}'", flag, kv.first);
  }
  return out;
}

std::vector<std::string> SplitCommaList(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    size_t pos = 0;
    while (pos <= item.size()) {
      size_t end = item.find(',', pos);
      std::string s = item.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      if (!s.empty()) out.push_back(s);
      if (end == std::string::npos) break;
      pos = end + 1;
    }
  }
  return out;
}

}  // namespace ferry::cli
