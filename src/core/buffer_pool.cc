#include "core/buffer_pool.h"

#include <new>

#include "core/memory_budget.h"

namespace ferry {

namespace {
constexpr std::align_val_t kAlign{64};
}  // namespace

std::shared_ptr<BufferPool> BufferPool::Create(size_t min_bytes, size_t max_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(min_bytes, max_bytes));
}

BufferPool::~BufferPool() {
  for (const auto& [bytes, p] : idle_) ::operator delete[](p, kAlign);
}

std::shared_ptr<void> BufferPool::Get(size_t bytes, void** data) {
  bytes = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < idle_.size(); ++i)
      if (idle_[i].first == bytes) {
        p = idle_[i].second;
        idle_bytes_ -= bytes;
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
        ++reused_;
        break;
      }
  }
  if (!p) p = ::operator new[](bytes, kAlign);
  std::shared_ptr<MemoryBudget> budget = MemoryBudget::Current();
  if (budget) budget->Charge(bytes);
  *data = p;
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::shared_ptr<void>(p, [pool, budget, bytes](void* q) {
    if (budget) budget->Credit(bytes);
    if (auto live = pool.lock()) {
      live->Put(q, bytes);
      return;
    }
    ::operator delete[](q, kAlign);
  });
}

void BufferPool::Put(void* p, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_bytes_ + bytes <= max_bytes_) {
      idle_.emplace_back(bytes, p);
      idle_bytes_ += bytes;
      return;
    }
  }
  ::operator delete[](p, kAlign);
}

size_t BufferPool::idle_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_bytes_;
}

size_t BufferPool::reused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reused_;
}

}  // namespace ferry
