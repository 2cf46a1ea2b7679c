#include "runtime/context.h"

#include <algorithm>
#include <atomic>

namespace ferry::runtime {

void ExecState::ResetProfile() {
  for (StepState& ss : steps) {
    ss.total_ns = 0;
    ss.calls = 0;
    for (auto& [name, sub] : ss.subgraphs) sub->ResetProfile();
  }
}

namespace {

void DropMemo(ExecState& state) {
  for (StepState& ss : state.steps) {
    ss.memo_valid = false;
    ss.memo_outs.clear();
    for (auto& [name, sub] : ss.subgraphs) DropMemo(*sub);
  }
}

}  // namespace

RunContext* ContextPool::Acquire(int threads, const GraphExecutor& root) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = idle_.size(); i-- > 0;)
      if (idle_[i]->threads == threads) {
        RunContext* c = idle_[i];
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
        return c;
      }
  }
  auto c = std::make_unique<RunContext>();
  c->threads = threads;
  c->pool = std::make_unique<ThreadPool>(threads);
  if (root.shared().cpu()) c->cpu = ops::cpu::MakeProvider(threads, root.shared().cpu_engine.get());
  c->root = root.NewState(c->cpu.get());
  RunContext* raw = c.get();
  std::lock_guard<std::mutex> lock(mu_);
  all_.push_back(std::move(c));
  return raw;
}

void ContextPool::Release(RunContext* ctx, bool failed) {
  if (failed) DropMemo(*ctx->root);
  std::lock_guard<std::mutex> lock(mu_);
  if (ctx->reset_profile) {
    ctx->root->ResetProfile();
    ctx->reset_profile = false;
  }
  idle_.push_back(ctx);
  last_ = ctx;
}

std::vector<NodeReport> ContextPool::Report(const GraphExecutor& root) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeReport> out = root.Report(last_ ? last_->root.get() : nullptr);
  for (const RunContext* c : idle_) {
    if (c == last_) continue;
    const std::vector<NodeReport> more = root.Report(c->root.get());
    for (size_t i = 0; i < out.size() && i < more.size(); ++i) {
      out[i].total_ms += more[i].total_ms;
      out[i].calls += more[i].calls;
    }
  }
  return out;
}

void ContextPool::ResetProfile() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : all_) {
    if (std::find(idle_.begin(), idle_.end(), c.get()) != idle_.end())
      c->root->ResetProfile();
    else
      c->reset_profile = true;
  }
}

size_t ContextPool::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size();
}

namespace {

std::atomic<int> g_threads_in_use{0};

}  // namespace

int CoreBudget::Acquire(int want) {
  want = std::max(1, want);
  const int cores = ThreadPool::DefaultThreads();
  int used = g_threads_in_use.load(std::memory_order_relaxed);
  for (;;) {
    const int got = std::clamp(cores - used, 1, want);
    if (g_threads_in_use.compare_exchange_weak(used, used + got, std::memory_order_relaxed))
      return got;
  }
}

void CoreBudget::Release(int got) {
  g_threads_in_use.fetch_sub(got, std::memory_order_relaxed);
}

int CoreBudget::InUse() {
  return g_threads_in_use.load(std::memory_order_relaxed);
}

}  // namespace ferry::runtime
