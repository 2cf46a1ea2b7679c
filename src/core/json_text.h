// JSON documents as text, always valid UTF-8: strings from a model (node names, metadata, doc
// strings) may hold any bytes, and nlohmann::json's dump throws on invalid UTF-8 by default.
// Invalid sequences are written as U+FFFD instead. Every JSON Ferry prints or writes goes
// through here.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace ferry {

// `indent` as nlohmann::json::dump (-1: one line).
inline std::string JsonText(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ferry
