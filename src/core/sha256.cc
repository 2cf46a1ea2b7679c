#include "core/sha256.h"

#include <sodium.h>

namespace ferry {

struct Sha256::State {
  crypto_hash_sha256_state s;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  crypto_hash_sha256_init(&state_->s);
}
Sha256::~Sha256() = default;

void Sha256::Update(const void* data, size_t n) {
  crypto_hash_sha256_update(&state_->s, static_cast<const unsigned char*>(data), n);
}

std::string Sha256::HexDigest() {
  unsigned char out[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state_->s, out);
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : out) {
    s += kHex[c >> 4];
    s += kHex[c & 15];
  }
  return s;
}

}  // namespace ferry
