// Helpers shared by the fuzz targets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ferry::fuzz {

// FNV-1a of the input: the seed of everything a target derives from it (input values, which
// pass runs), so a crash reproduces from the input file alone.
inline uint64_t InputHash(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

// Stops the process with a message: a property the target checks failed (libFuzzer saves the
// input as a crash, the regression runner fails).
[[noreturn]] void Fail(const std::string& what);

}  // namespace ferry::fuzz
