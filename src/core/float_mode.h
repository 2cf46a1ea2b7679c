// The calling thread's floating-point mode for subnormal numbers. On x86 that is MXCSR's FTZ
// (results that would be subnormal become 0) and DAZ (subnormal inputs read as 0) bits; on
// other targets these functions do nothing and report mode 0.
//
// Why: an FMA or multiply that meets a subnormal takes a microcode assist, ~100x the normal
// cost. Seeded or trained CNNs produce them (sigmoid of a large negative number, SE channel
// scales): a 1152->192 1x1 convolution whose input is half subnormal ran 80x slower on
// Sapphire Rapids, and EfficientNet-B0's SE projections 2x slower in the model than alone.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define FERRY_HAS_MXCSR 1
#endif

namespace ferry {

inline uint32_t GetFloatMode() {
#ifdef FERRY_HAS_MXCSR
  return _mm_getcsr();
#else
  return 0;
#endif
}

inline void SetFloatMode([[maybe_unused]] uint32_t mode) {
#ifdef FERRY_HAS_MXCSR
  _mm_setcsr(mode);
#endif
}

// The FTZ and DAZ bits.
inline constexpr uint32_t kFlushDenormalBits = 0x8040;

// For its lifetime, the calling thread flushes subnormals (`on`: FTZ and DAZ set) or keeps them
// (both cleared, whatever the caller had: IEEE arithmetic); then the thread's own mode is back.
class ScopedFlushDenormals {
 public:
  explicit ScopedFlushDenormals(bool on) : saved_(GetFloatMode()) {
    const uint32_t want = on ? saved_ | kFlushDenormalBits : saved_ & ~kFlushDenormalBits;
    if (want != saved_) SetFloatMode(want);
  }
  ~ScopedFlushDenormals() {
    if (GetFloatMode() != saved_) SetFloatMode(saved_);
  }
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  uint32_t saved_;
};

}  // namespace ferry
