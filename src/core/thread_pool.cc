#include "core/thread_pool.h"

#include <algorithm>

#include "core/float_mode.h"

namespace ferry {

int ThreadPool::DefaultThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads <= 0 ? DefaultThreads() : num_threads) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& w : workers_) w.join();
}

static void RunChunk(int64_t n, int64_t chunks, int64_t k,
                     const std::function<void(int64_t, int64_t)>& fn) {
  int64_t begin = n * k / chunks, end = n * (k + 1) / chunks;
  if (begin < end) fn(begin, end);
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int64_t chunks =
      std::min<int64_t>(num_threads_, std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk)));
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (chunks <= 1 || busy_) {
      lock.unlock();
      fn(0, n);
      return;
    }
    busy_ = true;
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    job_mode_ = GetFloatMode();
    pending_ = static_cast<int>(chunks) - 1;
    ++generation_;
  }
  cv_work_.notify_all();
  RunChunk(n, chunks, 0, fn);
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  busy_ = false;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n, chunks;
    uint32_t mode;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      chunks = job_chunks_;
      mode = job_mode_;
      if (job == nullptr || index >= chunks) continue;
    }
    SetFloatMode(mode);  // the caller's (e.g. flushed subnormals, see core/float_mode.h)
    RunChunk(n, chunks, index, *job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_all();
    }
  }
}

}  // namespace ferry
