// SHA-256 (libsodium), streaming.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace ferry {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  void Update(const void* data, size_t n);
  // Lower-case hex digest; the object must not be updated afterwards.
  std::string HexDigest();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ferry
