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

// Sets FTZ and DAZ on the calling thread for its lifetime (when `on`), then restores the mode
// the thread had.
class ScopedFlushDenormals {
 public:
  explicit ScopedFlushDenormals(bool on) : on_(on) {
    if (!on_) return;
    saved_ = GetFloatMode();
    SetFloatMode(saved_ | kFlushDenormalBits);
  }
  ~ScopedFlushDenormals() {
    if (on_) SetFloatMode(saved_);
  }
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  bool on_;
  uint32_t saved_ = 0;
};

}  // namespace ferry
