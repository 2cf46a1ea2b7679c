// Internal to the cpu provider: the com.microsoft Attention kernel (contrib_attention.cc), listed
// in contrib.cc's table.
#pragma once

#include "ops/cpu/cpu_kernel.h"

namespace ferry::ops::cpu {

Status PrepareContribAttention(OpContext& ctx, NodeSlot& slot);
void RunContribAttention(OpContext& ctx, NodeSlot& slot);

}  // namespace ferry::ops::cpu
