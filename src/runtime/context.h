// Run contexts: everything one run mutates, kept between runs and reused.
//
// A RunContext holds the run state of every graph of the session (ExecState: kernel slots and
// their states, memoized shapes, the arena memory, profile counters), the cpu provider's
// per-run resources (oneDNN stream, scratch buffers) and a thread pool for the reference
// kernels, all for one thread count. Session::Run takes an idle context with the run's thread
// count from the ContextPool (or makes one), runs, and gives it back; so concurrent runs never
// share mutable state, and the packed weights, primitives' plans and arena layouts they read
// are the session's, built once (runtime/executor.h).
//
// Cores: runs of all sessions in the process share the machine's cores through CoreBudget. A
// run asks for T threads (RunOptions::threads, else SessionOptions::threads) and gets T while
// the threads of the runs in flight leave T cores free, else what is left, at least one: C
// callers running T-thread runs on fewer than C * T cores do not oversubscribe (no OpenMP
// workers spinning on cores another run needs), and none waits for another.
//
// Sharing between threads: ContextPool and CoreBudget are thread-safe; a RunContext is used
// by one run at a time.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "runtime/executor.h"

namespace ferry::runtime {

struct RunContext {
  int threads = 1;
  std::unique_ptr<ThreadPool> pool;
  ops::cpu::ProviderPtr cpu;  // null with provider "reference"
  std::unique_ptr<ExecState> root;
  bool reset_profile = false;  // ResetProfile was called while this context ran
};

class ContextPool {
 public:
  // An idle context for `threads` threads, or a new one for `root`'s graph.
  RunContext* Acquire(int threads, const GraphExecutor& root);
  // Gives a context back. `failed`: its run returned an error; memoized results it kept are
  // dropped so the next run starts clean.
  void Release(RunContext* ctx, bool failed);

  // Profile and last-run providers over the idle contexts: the times summed, the providers of
  // the context released last (runs still in flight are not counted).
  std::vector<NodeReport> Report(const GraphExecutor& root) const;
  void ResetProfile();
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<RunContext>> all_;
  std::vector<RunContext*> idle_;
  RunContext* last_ = nullptr;
};

// The process's cores, shared by the runs in flight (see above).
class CoreBudget {
 public:
  // Threads for a run that wants `want` (>= 1): `want` when that many cores are free, else
  // the free ones, at least 1. Give them back with Release.
  static int Acquire(int want);
  static void Release(int got);
  // Threads held by runs in flight (tests).
  static int InUse();
};

}  // namespace ferry::runtime
