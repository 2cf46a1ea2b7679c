// Text files of one item per line (class names, labels): split as std::getline does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ferry {

// `text` split at '\n', a trailing '\r' dropped from each line; a final '\n' adds no empty line.
inline std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
    start = end + 1;
  }
  return out;
}

}  // namespace ferry
