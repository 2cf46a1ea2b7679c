// Small helpers the Markdown renderers of every verb share (verify, quant, passes, runtime...).
#pragma once

#include <string>
#include <string_view>

namespace ferry {

// `text` made safe for one cell of a Markdown table: '|' escaped, newlines as spaces.
inline std::string MarkdownCell(std::string_view text) {
  std::string s;
  s.reserve(text.size());
  for (char c : text) {
    if (c == '|')
      s += "\\|";
    else if (c == '\n' || c == '\r')
      s += ' ';
    else
      s += c;
  }
  return s;
}

}  // namespace ferry
