#include "fuzz_common.h"

#include <cstdio>
#include <cstdlib>

namespace ferry::fuzz {

void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz target check failed: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ferry::fuzz
