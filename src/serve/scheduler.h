// One ready model version's execution: a bounded priority queue, `instances` worker threads
// that share one runtime::Session, and dynamic batching (Triton's semantics: a batch is sent as
// soon as it reaches max_batch_size or a preferred size, else when its oldest request has waited
// max_queue_delay_us; requests batch together when their inputs differ only in the first axis).
// Thread-safe: Infer may be called from any number of threads; it blocks until the answer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "prep/spec.h"
#include "runtime/session.h"
#include "serve/source.h"
#include "serve/types.h"

namespace ferry::serve {

// Latencies of the most recent kSize requests (a ring) for the summary metrics' quantiles, plus
// the count and sum over all requests. Guarded by VersionStats::mu.
class LatencyWindow {
 public:
  static constexpr size_t kSize = 1024;
  void Add(uint64_t us) {
    if (ring_.size() < kSize) {
      ring_.push_back(us);
    } else {
      ring_[next_] = us;
    }
    next_ = (next_ + 1) % kSize;
    ++count_;
    sum_ += us;
  }
  // The q-quantile (0..1) of the window: the nearest-rank value; NaN when empty.
  double Quantile(double q) const;
  uint64_t count() const { return count_; }
  uint64_t sum() const { return sum_; }

 private:
  std::vector<uint64_t> ring_;
  size_t next_ = 0;
  uint64_t count_ = 0, sum_ = 0;
};

// Counters of one model version; they outlive the version's executor (a reload keeps them),
// so the metrics count every request once.
struct VersionStats {
  mutable std::mutex mu;
  ModelStatistics stats;                     // name, version, counts and durations
  std::map<std::string, uint64_t> failures;  // reason (REJECTED, CANCELED, BACKEND, OTHER)
  std::map<int64_t, BatchStat> batches;      // by batch size
  uint64_t request_duration_ns = 0;          // success and failure
  LatencyWindow request_us, queue_us;        // the summaries: every request / successful ones
  std::atomic<int64_t> pending{0};           // queued or running
  void Fail(const std::string& reason, uint64_t ns);
};

// A declared tensor type's dims as the protocol writes them: -1 for a dynamic dim; empty when
// the rank is unknown.
std::vector<int64_t> DeclaredShape(const ir::TypeInfo& t);

struct ExecutorSpec {
  std::string model, version;
  ServeConfig config;
  int instances = 1;
  int threads_per_run = 1;
  bool batchable = false;  // every input and output has a dynamic first axis
  std::vector<std::string> labels;
  // Inputs named here may arrive as BYTES, one encoded image per element: each runs through
  // its steps (prep::Preprocess) and the results are stacked on the first axis.
  std::shared_ptr<const prep::Spec> prep;
};

class Executor {
 public:
  Executor(ExecutorSpec spec, std::unique_ptr<runtime::Session> session,
           std::shared_ptr<VersionStats> stats);
  ~Executor();  // Stop()
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Checks the request against the model, queues it and waits for its answer.
  Error Infer(InferRequest request, InferResponse* response);
  // Refuses new requests; the queued ones still run. Idempotent; joins the workers.
  void Stop();
  runtime::Session& session() { return *session_; }
  const ExecutorSpec& spec() const { return spec_; }

 private:
  struct Pending {
    InferRequest request;
    int64_t rows = 1;  // first-axis length when batching
    uint64_t level = 0;
    std::chrono::steady_clock::time_point enqueued;
    std::promise<std::pair<Error, InferResponse>> done;
  };
  Error Check(const InferRequest& request, int64_t* rows) const;
  // The spec's post-processing for `<output>_decoded` (nullptr for any other name).
  const prep::OutputSpec* DecodedOutput(const std::string& name) const;
  // `rows` rows of `t` through `post`: BYTES [rows], one JSON document per row.
  Result<Tensor> Decode(const prep::OutputSpec& post, const Tensor& t, int64_t rows,
                        const InferRequest& request) const;
  Error Preprocess(InferRequest* request) const;
  Error PreprocessText(InferInput& in, const prep::InputSpec& steps, const InferRequest& request,
                       std::vector<InferInput>* extra) const;
  void Worker();
  // Takes the next batch from the queue (lock held); empty when stopping and nothing is left.
  std::vector<std::unique_ptr<Pending>> NextBatch(std::unique_lock<std::mutex>& lock);
  void Execute(std::vector<std::unique_ptr<Pending>> batch);
  void Finish(Pending& p, Error error, InferResponse response,
              std::chrono::steady_clock::time_point dequeued);
  Result<Tensor> Classify(const Tensor& t, int64_t top) const;

  ExecutorSpec spec_;
  std::unique_ptr<runtime::Session> session_;
  std::shared_ptr<VersionStats> stats_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<std::unique_ptr<Pending>>> queues_;  // by level, 0 highest
  int64_t queued_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace ferry::serve
