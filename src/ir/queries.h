// Questions about a graph that several commands ask (golden capture, bench, optimize's check).
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace ferry::ir {

// Row count of the smallest embedding table (an initializer) that a Gather indexes with values
// derived from `input` (directly, or through Cast/Reshape/Squeeze/Unsqueeze/Flatten/Identity);
// 0 when `input` feeds no such Gather. `table` (optional) receives that initializer's name.
int64_t EmbeddingRows(const Graph& g, const std::string& input, std::string* table = nullptr);

}  // namespace ferry::ir
