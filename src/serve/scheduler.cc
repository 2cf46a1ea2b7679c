#include "serve/scheduler.h"

#include <limits>

#include <cmath>

#include <algorithm>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "core/utf8.h"
#include "prep/decode.h"
#include "prep/pipeline.h"
#include "prep/table.h"
#include "prep/text.h"

namespace ferry::serve {

using Clock = std::chrono::steady_clock;

namespace {

uint64_t Ns(Clock::duration d) {
  auto n = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return n < 0 ? 0 : static_cast<uint64_t>(n);
}

uint64_t EpochMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void Add(Duration& d, uint64_t ns) {
  d.count += 1;
  d.ns += ns;
}

std::string ShapeList(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::vector<int64_t> DeclaredShape(const ir::TypeInfo& t) {
  std::vector<int64_t> out;
  if (!t.shape) return out;
  for (const auto& d : *t.shape) out.push_back(d.value ? *d.value : -1);
  return out;
}

namespace {

// Copies rows [begin, begin + rows) of `t`'s first axis into a new tensor.
Tensor SliceRows(const Tensor& t, int64_t begin, int64_t rows) {
  Shape shape = t.shape();
  int64_t inner = t.dim(0) == 0 ? 0 : t.size() / t.dim(0);
  shape[0] = rows;
  Tensor out(t.dtype(), shape);
  if (t.dtype() == DType::kString) {
    const auto* src = t.data<std::string>() + begin * inner;
    std::copy(src, src + rows * inner, out.data<std::string>());
  } else {
    size_t esz = DTypeSize(t.dtype());
    std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + begin * inner * esz,
                static_cast<size_t>(rows * inner) * esz);
  }
  return out;
}

}  // namespace

double LatencyWindow::Quantile(double q) const {
  if (ring_.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<uint64_t> v = ring_;
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size()) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank), v.end());
  return static_cast<double>(v[rank]);
}

void VersionStats::Fail(const std::string& reason, uint64_t ns) {
  std::lock_guard<std::mutex> lock(mu);
  failures[reason] += 1;
  Add(stats.fail, ns);
  request_duration_ns += ns;
  request_us.Add(ns / 1000);
}

Executor::Executor(ExecutorSpec spec, std::unique_ptr<runtime::Session> session,
                   std::shared_ptr<VersionStats> stats)
    : spec_(std::move(spec)), session_(std::move(session)), stats_(std::move(stats)) {
  queues_.resize(std::max<uint64_t>(1, spec_.config.priority_levels));
  int n = std::max(1, spec_.instances);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Worker(); });
}

Executor::~Executor() {
  Stop();
}

void Executor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
}

Error Executor::Check(const InferRequest& r, int64_t* rows) const {
  const auto& m = spec_.model;
  const auto& graph = session_->model().graph;
  auto required = graph.RealInputs();
  std::vector<bool> seen(session_->inputs().size(), false);
  *rows = -1;
  bool same_rows = true;
  for (const auto& in : r.inputs) {
    size_t k = 0;
    while (k < session_->inputs().size() && session_->inputs()[k]->name != in.name) ++k;
    if (k == session_->inputs().size()) {
      return MakeError(ErrorKind::kInvalidArg,
                       fmt::format("unexpected inference input '{}' for model '{}'", in.name, m));
    }
    if (seen[k]) {
      return MakeError(ErrorKind::kInvalidArg,
                       fmt::format("input '{}' given twice for model '{}'", in.name, m));
    }
    seen[k] = true;
    const auto& type = session_->inputs()[k]->type;
    if (type.kind != ir::TypeInfo::Kind::kTensor) {
      return MakeError(ErrorKind::kUnsupported,
                       fmt::format("input '{}' of model '{}' is a {}, the protocol carries tensors",
                                   in.name, m, type.ToString()));
    }
    if (in.tensor.dtype() != type.elem_type) {
      return MakeError(
          ErrorKind::kInvalidArg,
          fmt::format("inference input '{}' data-type is '{}', but model '{}' "
                      "expects '{}'",
                      in.name, DatatypeName(in.tensor.dtype()), m, DatatypeName(type.elem_type)));
    }
    if (type.shape) {
      auto want = DeclaredShape(type);
      bool ok = want.size() == in.tensor.shape().size();
      for (size_t d = 0; ok && d < want.size(); ++d) {
        ok = want[d] < 0 || want[d] == in.tensor.shape()[d];
      }
      if (!ok) {
        return MakeError(ErrorKind::kInvalidArg,
                         fmt::format("unexpected shape for input '{}' for model '{}'. Expected "
                                     "{}, got {}",
                                     in.name, m, ShapeList(want), ShapeList(in.tensor.shape())));
      }
    }
    if (in.tensor.rank() == 0) {
      same_rows = false;
    } else if (*rows < 0) {
      *rows = in.tensor.dim(0);
    } else if (*rows != in.tensor.dim(0)) {
      same_rows = false;
    }
  }
  for (const auto* need : required) {
    bool given = std::any_of(r.inputs.begin(), r.inputs.end(),
                             [&](const InferInput& i) { return i.name == need->name; });
    if (!given) {
      return MakeError(ErrorKind::kInvalidArg,
                       fmt::format("expected {} inputs but got {} inputs for model '{}': "
                                   "input '{}' is missing",
                                   required.size(), r.inputs.size(), m, need->name));
    }
  }
  for (const auto& o : r.outputs) {
    auto it = std::find_if(graph.outputs.begin(), graph.outputs.end(),
                           [&](const ir::ValueInfo& v) { return v.name == o.name; });
    if (it == graph.outputs.end() && DecodedOutput(o.name)) {
      if (o.classification != 0)
        return MakeError(ErrorKind::kInvalidArg,
                         fmt::format("output '{}' is decoded already: no classification", o.name));
      continue;
    }
    if (it == graph.outputs.end()) {
      return MakeError(ErrorKind::kInvalidArg,
                       fmt::format("unexpected inference output '{}' for model '{}'", o.name, m));
    }
    if (o.classification < 0 || o.classification > 1'000'000) {
      return MakeError(ErrorKind::kInvalidArg,
                       fmt::format("classification count {} for output '{}' is out of range",
                                   o.classification, o.name));
    }
  }
  if (!spec_.batchable || !same_rows || *rows < 1) *rows = -1;
  if (spec_.config.max_batch_size > 0 && *rows > spec_.config.max_batch_size) {
    return MakeError(ErrorKind::kInvalidArg,
                     fmt::format("inference request batch-size must be <= {} for '{}', got {}",
                                 spec_.config.max_batch_size, m, *rows));
  }
  return Error::Ok();
}

// A text input's BYTES elements ([N] or [N, 1], one UTF-8 example each) through its tokenizer,
// and the companion inputs the spec derives from the same text (attention mask, type ids),
// appended to `extra`. A client does not send companions itself (an error names them).
Error Executor::PreprocessText(InferInput& in, const prep::InputSpec& steps,
                               const InferRequest& request, std::vector<InferInput>* extra) const {
  if (!steps.text.from.empty()) {
    return InvalidArg(fmt::format(
        "input '{}' is computed from the text sent as input '{}' (the spec {}): send only the "
        "text",
        in.name, steps.text.from, spec_.prep->path));
  }
  if (in.tensor.rank() > 2 || (in.tensor.rank() == 2 && in.tensor.dim(1) != 1) ||
      in.tensor.size() < 1) {
    return InvalidArg(fmt::format("input '{}': texts come as BYTES of shape [N] or [N, 1], got {}",
                                  in.name, ShapeToString(in.tensor.shape())));
  }
  const std::string* first = in.tensor.data<std::string>();
  std::vector<std::string> texts(first, first + in.tensor.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!IsValidUtf8(texts[i])) {
      return InvalidArg(fmt::format("input '{}' text {}: not valid UTF-8", in.name, i));
    }
  }
  const std::string what = fmt::format("input '{}'", in.name);
  for (const prep::InputSpec& other : spec_.prep->inputs) {
    if (!other.is_text() || other.text.from != in.name) continue;
    for (const InferInput& sent : request.inputs) {
      if (sent.name == other.name) {
        return InvalidArg(fmt::format(
            "input '{}' is computed from the text of input '{}' (the spec {}): do not send it",
            other.name, in.name, spec_.prep->path));
      }
    }
    auto t = prep::EncodeTexts(other.text, texts, what);
    if (!t.ok()) return InvalidArg(t.status().message());
    extra->push_back({other.name, std::move(t).value()});
  }
  auto ids = prep::EncodeTexts(steps.text, texts, what);
  if (!ids.ok()) return InvalidArg(ids.status().message());
  in.tensor = std::move(ids).value();
  return Error::Ok();
}

Error Executor::Preprocess(InferRequest* request) const {
  if (!spec_.prep) return Error::Ok();
  std::vector<InferInput> extra;  // companion text inputs
  for (auto& in : request->inputs) {
    if (in.tensor.dtype() != DType::kString) continue;
    const prep::InputSpec* steps = prep::FindInput(*spec_.prep, in.name);
    if (!steps) continue;
    if (steps->is_text()) {
      if (Error e = PreprocessText(in, *steps, *request, &extra); !e.ok()) return e;
      continue;
    }
    if (steps->is_table()) {
      // Each BYTES element a CSV document (header and rows): the rows, concatenated.
      std::vector<Tensor> parts;
      for (int64_t i = 0; i < in.tensor.size(); ++i) {
        auto t = prep::PreprocessTable(steps->table, in.tensor.data<std::string>()[i],
                                       fmt::format("input '{}' table {}", in.name, i));
        if (!t.ok()) return InvalidArg(t.status().message());
        parts.push_back(std::move(t).value());
      }
      if (parts.empty()) return InvalidArg(fmt::format("input '{}': no CSV document", in.name));
      in.tensor = parts.size() == 1 ? std::move(parts[0]) : prep::StackRows(parts);
      continue;
    }
    if (in.tensor.rank() > 2 || (in.tensor.rank() == 2 && in.tensor.dim(1) != 1)) {
      return InvalidArg(
          fmt::format("input '{}': encoded images come as BYTES of shape [N] or "
                      "[N, 1], got {}",
                      in.name, ShapeToString(in.tensor.shape())));
    }
    int64_t n = in.tensor.size();
    if (n < 1 || (!steps->image.batch && n != 1)) {
      return InvalidArg(fmt::format("input '{}': {} images given, the spec {} takes {}", in.name, n,
                                    spec_.prep->path,
                                    steps->image.batch ? "one or more" : "exactly one"));
    }
    std::vector<Tensor> parts;
    auto& sizes = request->raw_image_sizes[in.name];
    for (int64_t i = 0; i < n; ++i) {
      prep::ImageInfo info;
      auto t = prep::Preprocess(steps->image, in.tensor.data<std::string>()[i],
                                fmt::format("input '{}' image {}", in.name, i), &info);
      sizes.emplace_back(info.height, info.width);
      if (!t.ok()) return InvalidArg(t.status().message());
      if (!parts.empty() && t->shape() != parts[0].shape()) {
        return InvalidArg(
            fmt::format("input '{}': image {} gives {}, image 0 gives {} (the spec "
                        "needs a fixed size or a crop to batch them)",
                        in.name, i, ShapeToString(t->shape()), ShapeToString(parts[0].shape())));
      }
      parts.push_back(std::move(t.value()));
    }
    if (parts.size() == 1) {
      in.tensor = std::move(parts[0]);
      continue;
    }
    Shape shape = parts[0].shape();
    shape[0] *= n;
    Tensor joined(parts[0].dtype(), shape);
    size_t offset = 0;
    for (const auto& p : parts) {
      std::memcpy(static_cast<char*>(joined.raw()) + offset, p.raw(), p.nbytes());
      offset += p.nbytes();
    }
    in.tensor = std::move(joined);
  }
  for (InferInput& e : extra) request->inputs.push_back(std::move(e));
  return Error::Ok();
}

Error Executor::Infer(InferRequest request, InferResponse* response) {
  auto start = Clock::now();
  int64_t rows = -1;
  Error err = Preprocess(&request);
  if (err.ok()) err = Check(request, &rows);
  if (!err.ok()) {
    stats_->Fail("OTHER", Ns(Clock::now() - start));
    return err;
  }
  const auto& cfg = spec_.config;
  uint64_t levels = queues_.size();
  uint64_t priority =
      request.priority ? request.priority : (cfg.default_priority ? cfg.default_priority : levels);
  if (priority > levels) {
    stats_->Fail("OTHER", Ns(Clock::now() - start));
    return MakeError(
        ErrorKind::kInvalidArg,
        fmt::format("priority {} is outside 1..{} for model '{}'", priority, levels, spec_.model));
  }
  if (!request.timeout_us) request.timeout_us = cfg.default_timeout_us;
  auto p = std::make_unique<Pending>();
  p->rows = rows;
  p->level = priority - 1;
  p->enqueued = start;
  p->request = std::move(request);
  auto future = p->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      stats_->Fail("REJECTED", Ns(Clock::now() - start));
      return MakeError(
          ErrorKind::kUnavailable,
          fmt::format("model '{}' version {} is being unloaded", spec_.model, spec_.version));
    }
    if (queued_ >= cfg.max_queue_size) {
      stats_->Fail("REJECTED", Ns(Clock::now() - start));
      return MakeError(ErrorKind::kUnavailable,
                       fmt::format("exceeds maximum queue size: the queue of model '{}' holds "
                                   "{} requests",
                                   spec_.model, queued_));
    }
    stats_->pending.fetch_add(1);
    queues_[p->level].push_back(std::move(p));
    ++queued_;
  }
  cv_.notify_all();
  auto result = future.get();
  if (result.first.ok()) *response = std::move(result.second);
  return result.first;
}

void Executor::Worker() {
  for (;;) {
    std::vector<std::unique_ptr<Pending>> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      batch = NextBatch(lock);
    }
    if (batch.empty()) return;
    Execute(std::move(batch));
  }
}

auto Executor::NextBatch(std::unique_lock<std::mutex>& lock)
    -> std::vector<std::unique_ptr<Pending>> {
  const auto& cfg = spec_.config;
  for (;;) {
    // Requests that waited longer than their timeout leave the queue unanswered by the engine.
    auto now = Clock::now();
    for (auto& q : queues_) {
      for (auto it = q.begin(); it != q.end();) {
        auto& p = **it;
        if (p.request.timeout_us && Ns(now - p.enqueued) > p.request.timeout_us * uint64_t{1000}) {
          auto owned = std::move(*it);
          it = q.erase(it);
          --queued_;
          Finish(*owned,
                 MakeError(ErrorKind::kUnavailable,
                           fmt::format("request timed out after {} us in the queue of model "
                                       "'{}'",
                                       owned->request.timeout_us, spec_.model)),
                 {}, now);
        } else {
          ++it;
        }
      }
    }
    if (queued_ == 0) {
      if (stopping_) return {};
      cv_.wait(lock);
      continue;
    }
    size_t level = 0;
    while (queues_[level].empty()) ++level;
    Pending* head = queues_[level].front().get();
    bool batching = cfg.max_batch_size > 0 && head->rows > 0;
    std::vector<Pending*> chosen{head};
    int64_t total = head->rows;
    if (batching) {
      auto compatible = [&](const Pending& p) {
        if (p.rows < 1 || p.request.inputs.size() != head->request.inputs.size()) return false;
        for (size_t i = 0; i < p.request.inputs.size(); ++i) {
          const auto& a = p.request.inputs[i];
          const auto& b = head->request.inputs[i];
          if (a.name != b.name || a.tensor.dtype() != b.tensor.dtype() ||
              a.tensor.rank() != b.tensor.rank()) {
            return false;
          }
          for (int64_t d = 1; d < a.tensor.rank(); ++d) {
            if (a.tensor.dim(d) != b.tensor.dim(d)) return false;
          }
        }
        return true;
      };
      for (auto& q : queues_) {
        for (auto& up : q) {
          if (up.get() == head || total >= cfg.max_batch_size) continue;
          if (total + up->rows > cfg.max_batch_size || !compatible(*up)) continue;
          chosen.push_back(up.get());
          total += up->rows;
        }
      }
      bool full = total >= cfg.max_batch_size ||
                  std::find(cfg.preferred_batch_sizes.begin(), cfg.preferred_batch_sizes.end(),
                            total) != cfg.preferred_batch_sizes.end();
      auto deadline = head->enqueued + std::chrono::microseconds(cfg.max_queue_delay_us);
      if (!full && !stopping_ && cfg.max_queue_delay_us > 0 && Clock::now() < deadline) {
        cv_.wait_until(lock, deadline);
        continue;
      }
    }
    std::vector<std::unique_ptr<Pending>> out;
    for (Pending* c : chosen) {
      auto& q = queues_[c->level];
      auto it = std::find_if(q.begin(), q.end(), [&](const auto& up) { return up.get() == c; });
      out.push_back(std::move(*it));
      q.erase(it);
      --queued_;
    }
    return out;
  }
}

void Executor::Finish(Pending& p, Error error, InferResponse response, Clock::time_point dequeued) {
  auto now = Clock::now();
  uint64_t total = Ns(now - p.enqueued);
  {
    std::lock_guard<std::mutex> lock(stats_->mu);
    auto& s = stats_->stats;
    s.last_inference_ms = EpochMs();
    stats_->request_duration_ns += total;
    stats_->request_us.Add(total / 1000);
    if (error.ok()) {
      Add(s.success, total);
      Add(s.queue, Ns(dequeued - p.enqueued));
      stats_->queue_us.Add(Ns(dequeued - p.enqueued) / 1000);
      s.inference_count += static_cast<uint64_t>(p.rows > 0 ? p.rows : 1);
    } else {
      Add(s.fail, total);
      stats_->failures[error.kind == ErrorKind::kUnavailable ? "OTHER" : "BACKEND"] += 1;
    }
  }
  stats_->pending.fetch_sub(1);
  p.done.set_value({std::move(error), std::move(response)});
}

const prep::OutputSpec* Executor::DecodedOutput(const std::string& name) const {
  if (!spec_.prep) return nullptr;
  for (const auto& o : spec_.prep->outputs)
    if (name == o.name + "_decoded") return &o;
  return nullptr;
}

Result<Tensor> Executor::Decode(const prep::OutputSpec& post, const Tensor& t, int64_t rows,
                                const InferRequest& request) const {
  // The image input the boxes refer to, and the sizes of the images the client sent for it.
  const prep::InputSpec* in = prep::BoxInput(*spec_.prep, post);
  const std::vector<std::pair<int64_t, int64_t>>* sizes = nullptr;
  if (in) {
    auto it = request.raw_image_sizes.find(in->name);
    if (it != request.raw_image_sizes.end()) sizes = &it->second;
  }
  const bool per_row = rows > 0 && t.rank() >= 1 && t.dim(0) == rows;
  const int64_t n = per_row ? rows : 1;
  Tensor out(DType::kString, {n});
  for (int64_t r = 0; r < n; ++r) {
    Tensor row = per_row ? SliceRows(t, r, 1) : t;
    prep::ImageInfo original;
    if (sizes && r < static_cast<int64_t>(sizes->size()))
      original = {(*sizes)[r].first, (*sizes)[r].second};
    auto d = prep::DecodeOutput(*spec_.prep, post, row, sizes ? &original : nullptr);
    if (!d.ok()) return d.status();
    out.data<std::string>()[r] = prep::DecodedJson(*d);
  }
  return out;
}

Result<Tensor> Executor::Classify(const Tensor& t, int64_t top) const {
  if (!IsNumeric(t.dtype()) || t.rank() < 1 || t.rank() > 2) {
    return InvalidError("classification needs a numeric output of rank 1 or 2, got {} {}",
                        DTypeName(t.dtype()), ShapeToString(t.shape()));
  }
  int64_t batch = t.rank() == 2 ? t.dim(0) : 1;
  int64_t classes = t.rank() == 2 ? t.dim(1) : t.dim(0);
  int64_t k = std::min(top, classes);
  Shape shape = t.rank() == 2 ? Shape{batch, k} : Shape{k};
  Tensor out(DType::kString, shape);
  std::vector<double> row(static_cast<size_t>(classes));
  std::vector<int64_t> idx(static_cast<size_t>(classes));
  for (int64_t b = 0; b < batch; ++b) {
    VisitNumeric(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = t.data<T>() + b * classes;
      for (int64_t c = 0; c < classes; ++c) row[c] = static_cast<double>(p[c]);
    });
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t c) {
      return row[a] > row[c] || (row[a] == row[c] && a < c);
    });
    for (int64_t j = 0; j < k; ++j) {
      int64_t c = idx[j];
      std::string s = fmt::format("{:f}:{}", row[c], c);
      if (c < static_cast<int64_t>(spec_.labels.size())) s += ":" + spec_.labels[c];
      out.data<std::string>()[b * k + j] = std::move(s);
    }
  }
  return out;
}

void Executor::Execute(std::vector<std::unique_ptr<Pending>> batch) {
  auto t0 = Clock::now();
  std::vector<std::pair<std::string, Value>> inputs;
  int64_t total = 0;
  for (auto& p : batch) total += p->rows > 0 ? p->rows : 1;
  if (batch.size() == 1) {
    for (auto& in : batch[0]->request.inputs) inputs.emplace_back(in.name, Value(in.tensor));
  } else {
    for (size_t i = 0; i < batch[0]->request.inputs.size(); ++i) {
      const Tensor& first = batch[0]->request.inputs[i].tensor;
      Shape shape = first.shape();
      shape[0] = total;
      Tensor joined(first.dtype(), shape);
      int64_t offset = 0;
      for (auto& p : batch) {
        const Tensor& part = p->request.inputs[i].tensor;
        if (part.dtype() == DType::kString) {
          std::copy(part.data<std::string>(), part.data<std::string>() + part.size(),
                    joined.data<std::string>() + offset);
        } else {
          std::memcpy(static_cast<char*>(joined.raw()) + offset * DTypeSize(part.dtype()),
                      part.raw(), part.nbytes());
        }
        offset += part.size();
      }
      inputs.emplace_back(batch[0]->request.inputs[i].name, Value(std::move(joined)));
    }
  }
  auto t1 = Clock::now();
  runtime::RunOptions options;
  options.threads = spec_.threads_per_run;
  auto result = session_->Run(inputs, options);
  auto t2 = Clock::now();
  inputs.clear();
  if (!result.ok()) {
    ErrorKind kind = result.status().code() == StatusCode::kUnsupported ? ErrorKind::kUnsupported
                                                                        : ErrorKind::kInvalidArg;
    for (auto& p : batch) {
      Finish(*p,
             MakeError(kind, fmt::format("model '{}' version {}: {}", spec_.model, spec_.version,
                                         result.status().message())),
             {}, t0);
    }
    return;
  }
  const auto& outs = session_->outputs();
  std::vector<Tensor> tensors;
  std::string problem;
  for (size_t i = 0; i < outs.size(); ++i) {
    const Value& v = result.value()[i];
    if (v.kind() != Value::Kind::kTensor) {
      problem = fmt::format(
          "output '{}' of model '{}' is not a tensor; the protocol carries "
          "tensors",
          outs[i].name, spec_.model);
      break;
    }
    if (batch.size() > 1 && (v.tensor().rank() < 1 || v.tensor().dim(0) != total)) {
      problem = fmt::format(
          "output '{}' of model '{}' has shape {}, not the batch's first axis "
          "{}",
          outs[i].name, spec_.model, ShapeToString(v.tensor().shape()), total);
      break;
    }
    tensors.push_back(v.tensor());
  }
  int64_t offset = 0;
  std::vector<std::pair<Error, InferResponse>> answers;
  for (auto& p : batch) {
    int64_t rows = p->rows > 0 ? p->rows : 1;
    InferResponse r;
    r.model = spec_.model;
    r.version = spec_.version;
    r.id = p->request.id;
    Error err = problem.empty() ? Error::Ok() : MakeError(ErrorKind::kUnsupported, problem);
    auto add = [&](size_t i, const RequestedOutput* ro) {
      Tensor t = batch.size() > 1 ? SliceRows(tensors[i], offset, rows) : tensors[i];
      InferOutput o;
      o.name = outs[i].name;
      o.binary = ro ? ro->binary : p->request.binary_output;
      if (ro && ro->classification > 0) {
        auto c = Classify(t, ro->classification);
        if (!c.ok()) {
          err = MakeError(ErrorKind::kInvalidArg,
                          fmt::format("output '{}': {}", o.name, c.status().message()));
          return;
        }
        t = std::move(c.value());
      }
      o.tensor = std::move(t);
      r.outputs.push_back(std::move(o));
    };
    // `<output>_decoded`: the spec's post-processing of that output, one JSON per row.
    auto add_decoded = [&](const prep::OutputSpec& post, const RequestedOutput* ro) {
      for (size_t i = 0; i < outs.size(); ++i) {
        if (outs[i].name != post.name) continue;
        Tensor t = batch.size() > 1 ? SliceRows(tensors[i], offset, rows) : tensors[i];
        auto d = Decode(post, t, p->rows > 0 ? rows : -1, p->request);
        if (!d.ok()) {
          err = MakeError(ErrorKind::kInvalidArg,
                          fmt::format("output '{}_decoded': {}", post.name, d.status().message()));
          return;
        }
        InferOutput o;
        o.name = post.name + "_decoded";
        o.binary = ro ? ro->binary : p->request.binary_output;
        o.tensor = std::move(d).value();
        r.outputs.push_back(std::move(o));
      }
    };
    if (err.ok()) {
      if (p->request.outputs.empty()) {
        for (size_t i = 0; i < tensors.size(); ++i) add(i, nullptr);
        if (spec_.prep)
          for (const auto& post : spec_.prep->outputs)
            if (err.ok()) add_decoded(post, nullptr);
      } else {
        for (const auto& ro : p->request.outputs) {
          for (size_t i = 0; i < outs.size() && err.ok(); ++i) {
            if (outs[i].name == ro.name) add(i, &ro);
          }
          if (const prep::OutputSpec* post = DecodedOutput(ro.name); post && err.ok())
            add_decoded(*post, &ro);
        }
      }
    }
    offset += rows;
    answers.emplace_back(std::move(err), std::move(r));
  }
  auto t3 = Clock::now();
  {
    std::lock_guard<std::mutex> lock(stats_->mu);
    auto& s = stats_->stats;
    s.execution_count += 1;
    auto& b = stats_->batches[total];
    b.batch_size = total;
    Add(b.compute_input, Ns(t1 - t0));
    Add(b.compute_infer, Ns(t2 - t1));
    Add(b.compute_output, Ns(t3 - t2));
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!answers[i].first.ok()) continue;
      Add(s.compute_input, Ns(t1 - t0));
      Add(s.compute_infer, Ns(t2 - t1));
      Add(s.compute_output, Ns(t3 - t2));
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Finish(*batch[i], std::move(answers[i].first), std::move(answers[i].second), t0);
  }
}

}  // namespace ferry::serve
