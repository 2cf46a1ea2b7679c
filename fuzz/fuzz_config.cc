// ferry.yaml parser: bytes -> artifact::ParseConfig (yaml-cpp, then every key's validation).
// Properties: never a crash, an escaped exception or a hang; an error is one line naming the
// file; a config it accepts parses again from its own text to the same digest.
#include <string>

#include "artifact/config.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = artifact::ParseConfig(text, "fuzz/ferry.yaml");
  if (!c.ok()) {
    if (c.status().message().rfind("fuzz/ferry.yaml", 0) != 0)
      fuzz::Fail("a config error that does not start with the file: " + c.status().message());
    return 0;
  }
  auto again = artifact::ParseConfig(c->text, "fuzz/ferry.yaml");
  if (!again.ok())
    fuzz::Fail("an accepted config is refused the second time: " + again.status().message());
  if (again->sha256 != c->sha256) fuzz::Fail("the config digest changed between two parses");
  return 0;
}
