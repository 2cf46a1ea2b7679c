// One function per op family file under reference/; each returns that file's OpDef table.
#pragma once

#include <span>

#include "ops/op.h"

namespace ferry::ops {

#define FERRY_OP_FAMILY(fn) std::span<const OpDef> fn();
#include "ops/families.inc"
#undef FERRY_OP_FAMILY

}  // namespace ferry::ops
