// The CLI's names for ir/weights_digest.h (the weights SHA-256 of inspect, verify, golden).
#pragma once

#include "ir/weights_digest.h"

namespace ferry::cli {

using ir::DigestWeights;
using ir::WeightsDigest;

}  // namespace ferry::cli
