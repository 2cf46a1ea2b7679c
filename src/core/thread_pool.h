// A fixed-size thread pool with one primitive: ParallelFor over [0, n) in contiguous,
// deterministic chunks (chunk k always covers the same range for the same n and thread count).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry {

class ThreadPool {
 public:
  // num_threads <= 0 picks the number of hardware threads. The calling thread counts as one.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(begin, end) over [0, n) split into at most num_threads() chunks of at least
  // `min_chunk` items. Returns when every chunk is done. Not re-entrant from inside fn:
  // a nested call runs serially on the calling thread. Chunks run under the calling thread's
  // floating-point mode (core/float_mode.h).
  void ParallelFor(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

  static int DefaultThreads();

 private:
  void WorkerLoop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunks_ = 0;
  uint32_t job_mode_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  bool busy_ = false;
};

}  // namespace ferry
