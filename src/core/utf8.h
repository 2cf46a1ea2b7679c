// Text Ferry writes for people and machines (JSON, Markdown, terminal text) is valid UTF-8,
// whatever bytes a model's names, metadata or doc strings hold.
#pragma once

#include <string>
#include <string_view>

namespace ferry {

// `s` with every byte sequence that is not well-formed UTF-8 (stray continuation bytes,
// truncated or overlong sequences, surrogates, code points past U+10FFFF) replaced by U+FFFD;
// valid text comes back unchanged.
std::string ValidUtf8(std::string_view s);
// Whether `s` is well-formed UTF-8.
bool IsValidUtf8(std::string_view s);

}  // namespace ferry
