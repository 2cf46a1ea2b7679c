// Small helpers for the YAML readers that validate every key and name its line (ferry.yaml in
// artifact/config.cc, the preprocessing spec in prep/spec.cc). Header-only: only libraries that
// link yaml-cpp include it; core itself does not.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include <fmt/format.h>

namespace ferry::yaml_keys {

// "a.b" from the parent path "a" and the key "b" ("b" at the top).
inline std::string Join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

// What a node is, for "expected X, got Y" messages.
inline std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return fmt::format("'{}'", n.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

// The node's 1-based line, or `fallback` when yaml-cpp has no mark for it.
inline int LineOf(const YAML::Node& n, int fallback) {
  YAML::Mark m = n.Mark();
  return m.is_null() ? fallback : m.line + 1;
}

}  // namespace ferry::yaml_keys
