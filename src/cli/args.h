// Parsing of the option values several commands share: NAME=VALUE specs, dims, comma lists.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ferry::cli {

// "NAME=VALUE" -> {NAME, VALUE}; kUsage naming `flag` and the expected `form` otherwise.
Result<std::pair<std::string, std::string>> SplitSpec(const std::string& spec,
                                                      const std::string& flag,
                                                      const std::string& form);
// "1x3x224x224" or "1,3,224,224" -> dims (non-negative integers).
Result<Shape> ParseDims(const std::string& flag, const std::string& text);
// Repeated `--flag NAME=DIMS` values -> name -> dims (a name given twice is an error).
Result<std::map<std::string, Shape>> ParseShapeSpecs(const std::string& flag,
                                                     const std::vector<std::string>& specs);
// "a,b" "c" -> {a, b, c} (empty items dropped).
std::vector<std::string> SplitCommaList(const std::vector<std::string>& items);

}  // namespace ferry::cli
