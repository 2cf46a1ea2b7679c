#include "ops/registry.h"

#include <algorithm>

#include "ops/families.h"

namespace ferry::ops {

Registry::Registry() {
  const std::span<const OpDef> families[] = {
#define FERRY_OP_FAMILY(fn) fn(),
#include "ops/families.inc"
#undef FERRY_OP_FAMILY
  };
  for (auto fam : families)
    for (const OpDef& d : fam) all_.push_back(&d);
}

const Registry& Registry::Get() {
  static const Registry registry;
  return registry;
}

const OpDef* Registry::Find(std::string_view domain, std::string_view name, int64_t opset) const {
  if (domain == "ai.onnx") domain = "";
  const OpDef* best = nullptr;
  for (const OpDef* d : all_) {
    if (d->name != name || d->domain != domain || d->since_version > opset) continue;
    if (!best || d->since_version > best->since_version) best = d;
  }
  return best;
}

bool Registry::Knows(std::string_view domain, std::string_view name) const {
  if (domain == "ai.onnx") domain = "";
  return std::any_of(all_.begin(), all_.end(),
                     [&](const OpDef* d) { return d->name == name && d->domain == domain; });
}

}  // namespace ferry::ops
