// BufferPool: large 64-byte aligned buffers kept for reuse. A session hands its graph outputs
// out as tensors that own their storage; one of tens of MB allocated fresh at every run comes
// from mmap and is faulted in page by page (PP-OCRv6 rec's [6, 125, 18710] probabilities: 23 of
// its 218 ms per run, nearly all page faults). A buffer released by its last owner goes back to
// the pool (while the pool lives and has room) and the next request of that size takes it.
// Thread-safe; buffers outlive the pool safely (then they are freed).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace ferry {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Requests below `min_bytes` are not pooled (malloc serves them from its heap); at most
  // `max_bytes` are kept idle.
  static std::shared_ptr<BufferPool> Create(size_t min_bytes, size_t max_bytes);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Whether a request of `bytes` goes through the pool.
  bool Pools(size_t bytes) const { return bytes >= min_bytes_; }
  // At least `bytes` bytes (rounded up to 64), 64-byte aligned, at *data; charged to the calling
  // thread's memory budget (MemoryBudget::Current) while owned, as Tensor's own storage is.
  std::shared_ptr<void> Get(size_t bytes, void** data);

  size_t idle_bytes() const;
  size_t reused() const;  // requests served from kept buffers (tests)

 private:
  BufferPool(size_t min_bytes, size_t max_bytes) : min_bytes_(min_bytes), max_bytes_(max_bytes) {}
  void Put(void* p, size_t bytes);

  const size_t min_bytes_, max_bytes_;
  mutable std::mutex mu_;
  std::vector<std::pair<size_t, void*>> idle_;  // (rounded bytes, buffer)
  size_t idle_bytes_ = 0, reused_ = 0;
};

}  // namespace ferry
