// The weights checksum `ferry inspect` prints and `ferry verify` reports: SHA-256 over the raw
// little-endian bytes of every initializer in graph order (strings: their bytes, concatenated).
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace ferry::ir {

struct WeightsDigest {
  int64_t parameters = 0;  // elements over all initializers
  int64_t bytes = 0;
  std::string sha256;  // lower-case hex
};

WeightsDigest DigestWeights(const Graph& graph);

}  // namespace ferry::ir
