// MemoryBudget: the bytes a session may hold, and the checks that refuse an allocation which
// would pass them before it is made (a model that asks for a 2^40-element tensor gets an error
// naming the node, the shape and the bytes, not std::bad_alloc or the machine's swap).
//
// What is charged: every owned Tensor allocated on a thread while a budget is installed there
// (MemoryBudget::Scope; Session::Create and Session::Run install their session's budget), and
// the run arenas. Freeing credits the budget the bytes were charged to, on any thread, even after
// the session is gone (the storage holds a reference to its budget). What is not charged: the
// model's initializers (checked against the file's size when it is loaded), oneDNN's own
// buffers, kernels' scratch vectors, tensors allocated on a kernel's worker threads.
//
// Threads: a budget may be charged and credited by any number of threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ferry {

class MemoryBudget {
 public:
  // `limit` bytes; 0: DefaultMaxMemory().
  explicit MemoryBudget(uint64_t limit);

  uint64_t limit() const { return limit_; }
  uint64_t in_use() const { return in_use_.load(std::memory_order_relaxed); }
  uint64_t peak() const { return peak_.load(std::memory_order_relaxed); }
  // Whether `bytes` more fit under the limit now (charges nothing).
  bool Fits(uint64_t bytes) const { return bytes <= limit_ && in_use() <= limit_ - bytes; }

  void Charge(uint64_t bytes);
  void Credit(uint64_t bytes) { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

  // Installs `budget` on the calling thread until destroyed (the previous one is restored);
  // null installs none.
  class Scope {
   public:
    explicit Scope(std::shared_ptr<MemoryBudget> budget);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::shared_ptr<MemoryBudget> previous_;
  };
  // The calling thread's budget (null: none installed).
  static const std::shared_ptr<MemoryBudget>& Current();

 private:
  uint64_t limit_;
  std::atomic<uint64_t> in_use_{0}, peak_{0};
};

// The budget of a session that does not set one: the process default if SetDefaultMaxMemory
// was called (the CLI's --max-memory), else 3/4 of the machine's physical memory, and at most
// half of the address-space limit (`ulimit -v`) when one is set.
uint64_t DefaultMaxMemory();
// Sets the process default (0: back to the machine's share). Call before creating sessions.
void SetDefaultMaxMemory(uint64_t bytes);

// Bytes of a tensor of `dtype` and `shape` into `bytes`; false when a dim is negative or the
// product overflows 2^63 (the fast check; TensorBytes says what was wrong).
inline bool TensorBytesChecked(DType dtype, const Shape& shape, uint64_t* bytes) {
  constexpr uint64_t kMax = uint64_t{1} << 63;
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > kMax / static_cast<uint64_t>(d))) return false;
    n *= static_cast<uint64_t>(d);
  }
  *bytes = n;
  return true;
}
// Bytes of a tensor of `dtype` and `shape`; kInvalid when a dim is negative or the product
// overflows 2^63 (`what` names the tensor in the message).
Result<uint64_t> TensorBytes(DType dtype, const Shape& shape, const std::string& what);

// The check before an allocation of `bytes` for `what` (e.g. "Tile 'n': output 0
// float32[1000000,1000000]"): kInvalid naming it, the bytes, the limit and what is in use when
// `budget` (may be null: no check) cannot hold them.
Status CheckFits(const MemoryBudget* budget, uint64_t bytes, const std::string& what);

// "512 B", "3.0 MiB", "12.5 GiB".
std::string FormatBytes(uint64_t bytes);
// "8G", "512M", "64k", "1000000" (bytes; K/M/G/T binary multiples, an optional trailing "B"
// or "iB") -> bytes; kUsage naming `flag` otherwise.
Result<uint64_t> ParseByteSize(const std::string& flag, const std::string& text);

}  // namespace ferry
