// The one explicit table of operators. Families contribute their OpDef tables through the
// functions listed in registry.cc — no static-initializer self-registration.
//
// To add a family: 1. create reference/<family>.cc with `std::span<const OpDef> <Family>Ops()`,
// 2. declare it in families.h and list it in registry.cc, 3. add its tests.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "ops/op.h"

namespace ferry::ops {

class Registry {
 public:
  static const Registry& Get();
  // The definition with the greatest since_version <= opset, or null.
  const OpDef* Find(std::string_view domain, std::string_view name, int64_t opset) const;
  // Whether any definition of the op exists (for error messages).
  bool Knows(std::string_view domain, std::string_view name) const;
  const std::vector<const OpDef*>& all() const { return all_; }

 private:
  Registry();
  std::vector<const OpDef*> all_;
};

}  // namespace ferry::ops
