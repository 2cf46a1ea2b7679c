// The load generator's driver, its HTTP client and its renderers (serve/loadgen.h).
#include "serve/loadgen.h"

#include <httplib.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ir/value_files.h"

namespace ferry::serve {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr size_t kMaxErrorChars = 300;

std::string Clip(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (s.size() > kMaxErrorChars) s = s.substr(0, kMaxErrorChars) + "...";
  return s;
}

bool ParseInt(std::string_view text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

std::string ShapeJson(const Shape& shape) {
  return json(shape).dump();
}

size_t ElementSize(const std::string& datatype) {
  auto dt = DTypeFromDatatype(datatype);
  if (!dt || *dt == DType::kString) return 0;
  return DTypeSize(*dt);
}

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

// --- arguments -------------------------------------------------------------------------------

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Result<HostPort> ParseHostPort(std::string_view flag, std::string_view text) {
  auto bad = [&](std::string_view why) {
    return UsageError("{} expects HOST:PORT, got '{}' ({})", flag, text, why);
  };
  HostPort hp;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("an IPv6 host is written [ADDR]:PORT");
    }
    hp.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    hp.host = std::string(text.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) return bad("an IPv6 host is written [ADDR]:PORT");
    port = text.substr(colon + 1);
  }
  if (hp.host.empty()) return bad("no host");
  int64_t p = 0;
  if (!ParseInt(port, 1, 65535, &p)) return bad("the port must be 1..65535");
  hp.port = static_cast<int>(p);
  return hp;
}

Result<std::vector<int>> ParseConcurrencyList(std::string_view flag, std::string_view text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    int64_t v = 0;
    if (!ParseInt(item, 1, kMaxConcurrency, &v)) {
      return UsageError("{} expects a comma list of client counts 1..{}, got '{}'", flag,
                        kMaxConcurrency, text);
    }
    out.push_back(static_cast<int>(v));
    pos = comma + 1;
  }
  return out;
}

double Percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.size() == 1) return static_cast<double>(sorted[0]);
  double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return static_cast<double>(sorted[lo]) +
         (static_cast<double>(sorted[hi]) - static_cast<double>(sorted[lo])) * frac;
}

// --- tensors ---------------------------------------------------------------------------------

Result<LoadInput> EncodeLoadInput(const std::string& name, const Tensor& tensor) {
  std::string_view datatype = DatatypeName(tensor.dtype());
  if (datatype.empty()) {
    return UnsupportedError("input '{}': dtype {} has no protocol datatype", name,
                            DTypeName(tensor.dtype()));
  }
  LoadInput in{name, std::string(datatype), tensor.shape(), {}};
  if (tensor.dtype() == DType::kString) {
    const auto* s = tensor.data<std::string>();
    for (int64_t i = 0; i < tensor.size(); ++i) {
      uint32_t n = static_cast<uint32_t>(s[i].size());
      char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                     static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
      in.raw.append(len, 4);
      in.raw += s[i];
    }
  } else {
    in.raw.assign(static_cast<const char*>(tensor.raw()), tensor.nbytes());
  }
  return in;
}

std::string CheckOutputs(const std::vector<SeenOutput>& seen,
                         const std::vector<TensorMetadata>& expected) {
  for (const auto& e : expected) {
    const SeenOutput* got = nullptr;
    for (const auto& s : seen) {
      if (s.name != e.name) continue;
      if (got) return fmt::format("output '{}' answered twice", e.name);
      got = &s;
    }
    if (!got) return fmt::format("output '{}' missing from the answer", e.name);
    if (got->datatype != e.datatype) {
      return fmt::format("output '{}': datatype {}, expected {}", e.name, got->datatype,
                         e.datatype);
    }
    bool fits = got->shape.size() == e.shape.size();
    for (size_t i = 0; fits && i < e.shape.size(); ++i) {
      fits = got->shape[i] >= 0 && (e.shape[i] < 0 || e.shape[i] == got->shape[i]);
    }
    if (!fits) {
      return fmt::format("output '{}': shape {}, expected {}", e.name, ShapeJson(got->shape),
                         ShapeJson(e.shape));
    }
    uint64_t count = static_cast<uint64_t>(NumElements(got->shape));
    size_t esize = ElementSize(e.datatype);
    if (esize != 0 ? got->raw_bytes != count * esize : got->raw_bytes < count * 4) {
      return fmt::format("output '{}': {} bytes for shape {} of {}", e.name, got->raw_bytes,
                         ShapeJson(got->shape), e.datatype);
    }
  }
  if (seen.size() != expected.size()) {
    return fmt::format("{} outputs answered, the model has {}", seen.size(), expected.size());
  }
  return "";
}

// --- HTTP codec ------------------------------------------------------------------------------

std::string EncodeHttpInferRequest(const LoadRequest& request, size_t* header_length) {
  json inputs = json::array();
  size_t raw = 0;
  for (const auto& in : request.inputs) {
    inputs.push_back({{"name", in.name},
                      {"shape", in.shape},
                      {"datatype", in.datatype},
                      {"parameters", {{"binary_data_size", in.raw.size()}}}});
    raw += in.raw.size();
  }
  json header = {{"inputs", inputs}, {"parameters", {{"binary_data_output", true}}}};
  std::string body = header.dump();
  *header_length = body.size();
  body.reserve(body.size() + raw);
  for (const auto& in : request.inputs) body += in.raw;
  return body;
}

std::string ParseHttpInferResponse(const std::string& header_length, const std::string& body,
                                   std::vector<SeenOutput>* outputs) {
  outputs->clear();
  size_t hlen = body.size();
  if (!header_length.empty()) {
    int64_t v = 0;
    if (!ParseInt(header_length, 0, static_cast<int64_t>(body.size()), &v)) {
      return fmt::format("Inference-Header-Content-Length '{}' for a {}-byte body",
                         Clip(header_length), body.size());
    }
    hlen = static_cast<size_t>(v);
  }
  json h =
      json::parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(hlen), nullptr, false);
  if (h.is_discarded() || !h.is_object()) return "the answer's header is not a JSON object";
  auto it = h.find("outputs");
  if (it == h.end() || !it->is_array()) return "the answer has no \"outputs\" list";
  uint64_t binary = 0;
  for (const auto& o : *it) {
    SeenOutput s;
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string() ||
        !o.contains("datatype") || !o["datatype"].is_string() || !o.contains("shape") ||
        !o["shape"].is_array()) {
      return "an output without name, datatype or shape";
    }
    s.name = o["name"].get<std::string>();
    s.datatype = o["datatype"].get<std::string>();
    for (const auto& d : o["shape"]) {
      if (!d.is_number_integer()) return fmt::format("output '{}': shape is not integers", s.name);
      s.shape.push_back(d.get<int64_t>());
    }
    auto p = o.find("parameters");
    if (p != o.end() && p->is_object() && p->contains("binary_data_size")) {
      const auto& n = (*p)["binary_data_size"];
      if (!n.is_number_unsigned()) {
        return fmt::format("output '{}': binary_data_size is not a count", s.name);
      }
      s.raw_bytes = n.get<uint64_t>();
      binary += s.raw_bytes;
    } else if (o.contains("data")) {  // JSON data: counted as if raw
      json flat = o["data"].flatten();
      size_t esize = ElementSize(s.datatype);
      s.raw_bytes = flat.size() * (esize ? esize : 4);
    } else {
      return fmt::format("output '{}' has neither binary_data_size nor data", s.name);
    }
    outputs->push_back(std::move(s));
  }
  if (binary != body.size() - hlen) {
    return fmt::format("binary outputs declare {} bytes, the body holds {}", binary,
                       body.size() - hlen);
  }
  return "";
}

std::string ParseHttpModelMetadata(const std::string& body, ModelMetadata* out) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "the metadata is not a JSON object";
  auto tensors = [&](const char* key, std::vector<TensorMetadata>* list) -> std::string {
    auto it = j.find(key);
    if (it == j.end() || !it->is_array()) return fmt::format("no \"{}\" list", key);
    for (const auto& t : *it) {
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
          !t.contains("datatype") || !t["datatype"].is_string() || !t.contains("shape") ||
          !t["shape"].is_array()) {
        return fmt::format("an entry of \"{}\" without name, datatype or shape", key);
      }
      TensorMetadata m{t["name"].get<std::string>(), t["datatype"].get<std::string>(), {}};
      for (const auto& d : t["shape"]) {
        if (!d.is_number_integer())
          return fmt::format("{} '{}': shape is not integers", key, m.name);
        m.shape.push_back(d.get<int64_t>());
      }
      list->push_back(std::move(m));
    }
    return "";
  };
  if (j.contains("name") && j["name"].is_string()) out->name = j["name"].get<std::string>();
  if (j.contains("platform") && j["platform"].is_string()) {
    out->platform = j["platform"].get<std::string>();
  }
  if (auto it = j.find("versions"); it != j.end() && it->is_array()) {
    for (const auto& v : *it) {
      if (v.is_string()) out->versions.push_back(v.get<std::string>());
    }
  }
  std::string err = tensors("inputs", &out->inputs);
  if (err.empty()) err = tensors("outputs", &out->outputs);
  return err;
}

// --- HTTP client -----------------------------------------------------------------------------

namespace {

std::string Describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "cannot connect (refused, unreachable or no answer within the connect timeout)";
    case httplib::Error::Read:
      return "no answer (connection closed, or nothing within the request timeout)";
    case httplib::Error::Write:
      return "cannot send (connection closed, or stalled past the request timeout)";
    default:
      return httplib::to_string(e);
  }
}

class HttpLoadClient : public LoadClient {
 public:
  HttpLoadClient(const HostPort& target, const LoadTimeouts& t)
      : target_(target), client_(target.host, target.port) {
    client_.set_keep_alive(true);
    client_.set_tcp_nodelay(true);
    client_.set_decompress(false);  // no Accept-Encoding: the answer's bytes as sent
    client_.set_connection_timeout(t.connect_s, 0);
    client_.set_read_timeout(t.request_s, 0);
    client_.set_write_timeout(t.request_s, 0);
  }

  Status Metadata(const std::string& model, const std::string& version,
                  ModelMetadata* out) override {
    std::string path = "/v2/models/" + model;
    if (!version.empty()) path += "/versions/" + version;
    auto res = client_.Get(path);
    if (!res) {
      return InvalidError("{} (HTTP): GET {}: {}", target_.ToString(), path, Describe(res.error()));
    }
    if (res->status != 200) {
      return InvalidError("{} (HTTP): GET {}: status {}: {}", target_.ToString(), path, res->status,
                          Clip(res->body));
    }
    std::string err = ParseHttpModelMetadata(res->body, out);
    if (!err.empty()) {
      return InvalidError("{} (HTTP): GET {}: {}", target_.ToString(), path, err);
    }
    return Status::Ok();
  }

  void SetRequest(const LoadRequest& request) override {
    path_ = "/v2/models/" + request.model;
    if (!request.version.empty()) path_ += "/versions/" + request.version;
    path_ += "/infer";
    size_t hlen = 0;
    body_ = EncodeHttpInferRequest(request, &hlen);
    headers_ = {{"Inference-Header-Content-Length", std::to_string(hlen)}};
    outputs_ = request.outputs;
    checked_size_ = 0;
  }

  bool Infer(std::string* error) override {
    // A content provider: cpp-httplib then sends no Content-Type (with a plain body it adds
    // "text/plain"), as tritonclient does, and does not copy the body.
    auto res = client_.Post(
        path_, headers_, body_.size(),
        [this](size_t offset, size_t length, httplib::DataSink& sink) {
          return sink.write(body_.data() + offset, length);
        },
        std::string());
    if (!res) {
      *error = fmt::format("POST {}: {}", path_, Describe(res.error()));
      return false;
    }
    if (res->status != 200) {
      *error = fmt::format("status {}: {}", res->status, Clip(res->body));
      return false;
    }
    std::string hlen = res->get_header_value("Inference-Header-Content-Length");
    if (checked_size_ != 0 && res->body.size() == checked_size_ && hlen == checked_hlen_) {
      return true;
    }
    std::string err = ParseHttpInferResponse(hlen, res->body, &seen_);
    if (err.empty()) err = CheckOutputs(seen_, outputs_);
    if (!err.empty()) {
      *error = Clip(err);
      return false;
    }
    checked_size_ = res->body.size();
    checked_hlen_ = hlen;
    return true;
  }

 private:
  HostPort target_;
  httplib::Client client_;
  std::string path_, body_;
  httplib::Headers headers_;
  std::vector<TensorMetadata> outputs_;
  std::vector<SeenOutput> seen_;
  size_t checked_size_ = 0;  // body size of the last fully checked answer (0: none yet)
  std::string checked_hlen_;
};

}  // namespace

LoadClientFactory HttpLoadClientFactory(const HostPort& target, const LoadTimeouts& timeouts) {
  return [target, timeouts]() -> Result<std::unique_ptr<LoadClient>> {
    return std::unique_ptr<LoadClient>(std::make_unique<HttpLoadClient>(target, timeouts));
  };
}

// --- inputs ----------------------------------------------------------------------------------

namespace {

// Fills `t` with seeded values: floats in [0, 1), integers in [0, 10), bools 0/1.
void FillGenerated(std::mt19937_64& rng, Tensor* t) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  int64_t n = t->size();
  switch (t->dtype()) {
#define FERRY_FILL(DT, T, EXPR)                                  \
  case DType::DT: {                                              \
    auto* p = static_cast<T*>(t->raw());                         \
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(EXPR); \
    break;                                                       \
  }
    FERRY_FILL(kFloat, float, unit(rng))
    FERRY_FILL(kDouble, double, unit(rng))
    FERRY_FILL(kUint8, uint8_t, small(rng))
    FERRY_FILL(kInt8, int8_t, small(rng))
    FERRY_FILL(kUint16, uint16_t, small(rng))
    FERRY_FILL(kInt16, int16_t, small(rng))
    FERRY_FILL(kInt32, int32_t, small(rng))
    FERRY_FILL(kInt64, int64_t, small(rng))
    FERRY_FILL(kUint32, uint32_t, small(rng))
    FERRY_FILL(kUint64, uint64_t, small(rng))
    FERRY_FILL(kBool, bool, small(rng) % 2)
#undef FERRY_FILL
    case DType::kFloat16: {
      auto* p = static_cast<Float16*>(t->raw());
      for (int64_t i = 0; i < n; ++i) p[i] = Float16(unit(rng));
      break;
    }
    case DType::kBFloat16: {
      auto* p = static_cast<BFloat16*>(t->raw());
      for (int64_t i = 0; i < n; ++i) p[i] = BFloat16(unit(rng));
      break;
    }
    default:
      break;
  }
}

Result<std::vector<LoadInput>> BuildInputs(const LoadgenOptions& o, const ModelMetadata& md) {
  std::vector<LoadInput> out;
  std::mt19937_64 rng(o.seed);
  if (!o.input_dir.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(o.input_dir, ec)) {
      return InvalidError("--input-dir {}: not a directory", o.input_dir);
    }
    std::string extra = fmt::format("{}/input_{}.pb", o.input_dir, md.inputs.size());
    if (fs::exists(extra, ec)) {
      return InvalidError("--input-dir {}: holds {} but model '{}' has {} input(s)", o.input_dir,
                          extra, md.name, md.inputs.size());
    }
  }
  for (size_t k = 0; k < md.inputs.size(); ++k) {
    const TensorMetadata& m = md.inputs[k];
    auto dt = DTypeFromDatatype(m.datatype);
    if (!dt) {
      return UnsupportedError("model input '{}': datatype '{}' is not one Ferry can send", m.name,
                              m.datatype);
    }
    Tensor t;
    if (!o.input_dir.empty()) {
      std::string path = fmt::format("{}/input_{}.pb", o.input_dir, k);
      ir::TypeInfo type;
      type.kind = ir::TypeInfo::Kind::kTensor;
      type.elem_type = *dt;
      auto v = ir::ReadInputFile(path, type);
      if (!v.ok()) return v.status().With(fmt::format("input '{}'", m.name));
      if (!v->is_tensor()) return InvalidError("{}: not a tensor", path);
      t = std::move(v->tensor());
      if (t.dtype() != *dt) {
        return InvalidError("{}: {} tensor for input '{}' of datatype {}", path,
                            DTypeName(t.dtype()), m.name, m.datatype);
      }
      bool fits = t.shape().size() == m.shape.size();
      for (size_t i = 0; fits && i < m.shape.size(); ++i) {
        fits = m.shape[i] < 0 || m.shape[i] == t.shape()[i];
      }
      if (!fits) {
        return InvalidError("{}: shape {} does not fit input '{}' {}", path, ShapeJson(t.shape()),
                            m.name, ShapeJson(m.shape));
      }
    } else {
      if (*dt == DType::kString) {
        return UnsupportedError("input '{}' is BYTES: values cannot be generated, give --input-dir",
                                m.name);
      }
      Shape shape;
      for (int64_t d : m.shape) shape.push_back(d < 0 ? 1 : d);
      t = Tensor(*dt, shape);
      FillGenerated(rng, &t);
    }
    FERRY_ASSIGN_OR_RETURN(LoadInput in, EncodeLoadInput(m.name, t));
    out.push_back(std::move(in));
  }
  return out;
}

// --- one cell --------------------------------------------------------------------------------

struct ClientTally {
  std::vector<int64_t> latency_ns;  // successful timed requests
  uint64_t errors = 0, warmup_errors = 0;
  std::string first_error;
  Clock::time_point first_error_at = Clock::time_point::max();
  Clock::time_point last_answer{};
  bool hit_deadline = false;
};

struct StartGate {
  std::mutex mu;
  std::condition_variable cv;
  int ready = 0;
  bool go = false;
  Clock::time_point start{}, deadline{};
};

void NoteError(ClientTally* t, const std::string& message, const char* phase) {
  Clock::time_point now = Clock::now();
  if (now < t->first_error_at) {
    t->first_error_at = now;
    t->first_error = fmt::format("{}: {}", phase, message);
  }
}

void ClientLoop(LoadClient* client, int warmup, StartGate* gate, std::atomic<int64_t>* tickets,
                ClientTally* tally) {
  std::string error;
  for (int i = 0; i < warmup; ++i) {
    if (!client->Infer(&error)) {
      ++tally->warmup_errors;
      NoteError(tally, error, "warm-up");
    }
  }
  Clock::time_point deadline;
  {
    std::unique_lock<std::mutex> lock(gate->mu);
    ++gate->ready;
    gate->cv.notify_all();
    gate->cv.wait(lock, [&] { return gate->go; });
    deadline = gate->deadline;
  }
  for (;;) {
    Clock::time_point t0 = Clock::now();
    if (t0 >= deadline) {
      tally->hit_deadline = true;
      break;
    }
    if (tickets->fetch_sub(1, std::memory_order_relaxed) <= 0) break;
    bool ok = client->Infer(&error);
    Clock::time_point t1 = Clock::now();
    if (ok) {
      tally->latency_ns.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    } else {
      ++tally->errors;
      NoteError(tally, error, "request");
    }
    tally->last_answer = t1;
  }
}

Result<LoadCell> RunCell(const LoadgenOptions& o, const LoadRequest& request, int concurrency,
                         const LoadClientFactory& factory) {
  std::vector<std::unique_ptr<LoadClient>> clients;
  for (int i = 0; i < concurrency; ++i) {
    FERRY_ASSIGN_OR_RETURN(auto c, factory());
    c->SetRequest(request);
    clients.push_back(std::move(c));
  }
  StartGate gate;
  std::atomic<int64_t> tickets{static_cast<int64_t>(o.requests)};
  std::vector<ClientTally> tallies(static_cast<size_t>(concurrency));
  std::vector<std::thread> threads;
  threads.reserve(clients.size());
  for (size_t i = 0; i < clients.size(); ++i) {
    threads.emplace_back(ClientLoop, clients[i].get(), o.warmup, &gate, &tickets, &tallies[i]);
  }
  double cpu0 = 0;
  {
    std::unique_lock<std::mutex> lock(gate.mu);
    gate.cv.wait(lock, [&] { return gate.ready == concurrency; });
    cpu0 = CpuSeconds();
    gate.start = Clock::now();
    gate.deadline = gate.start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o.duration_s));
    gate.go = true;
  }
  gate.cv.notify_all();
  for (auto& t : threads) t.join();
  double cpu = CpuSeconds() - cpu0;

  LoadCell cell;
  cell.concurrency = concurrency;
  cell.requests = o.requests;
  std::vector<int64_t> lat;
  Clock::time_point last = gate.start, first_error_at = Clock::time_point::max();
  bool hit_deadline = false;
  for (auto& t : tallies) {
    lat.insert(lat.end(), t.latency_ns.begin(), t.latency_ns.end());
    cell.errors += t.errors;
    cell.warmup_errors += t.warmup_errors;
    if (t.first_error_at < first_error_at) {
      first_error_at = t.first_error_at;
      cell.first_error = t.first_error;
    }
    if (t.last_answer > last) last = t.last_answer;
    hit_deadline = hit_deadline || t.hit_deadline;
  }
  cell.ok = lat.size();
  cell.completed = cell.ok + cell.errors;
  cell.stopped_by = hit_deadline && cell.completed < o.requests ? "duration" : "requests";
  cell.wall_s = std::chrono::duration<double>(last - gate.start).count();
  cell.throughput = cell.wall_s > 0 ? static_cast<double>(cell.ok) / cell.wall_s : 0;
  if (!lat.empty()) {
    std::sort(lat.begin(), lat.end());
    cell.p50_us = Percentile(lat, 50) / 1e3;
    cell.p90_us = Percentile(lat, 90) / 1e3;
    cell.p99_us = Percentile(lat, 99) / 1e3;
    cell.max_us = static_cast<double>(lat.back()) / 1e3;
    double sum = 0;
    for (int64_t v : lat) sum += static_cast<double>(v);
    cell.mean_us = sum / static_cast<double>(lat.size()) / 1e3;
  }
  cell.cpu_s = cpu;
  cell.cpu_us_per_request = cell.completed ? cpu / static_cast<double>(cell.completed) * 1e6 : 0;
  return cell;
}

}  // namespace

uint64_t LoadReport::failed() const {
  uint64_t n = 0;
  for (const auto& c : cells) n += c.errors + c.warmup_errors;
  return n;
}

Result<LoadReport> RunLoadgen(const LoadgenOptions& o, const LoadClientFactory& factory) {
  if (o.model.empty()) return UsageError("--model is required");
  if (o.concurrency.empty()) return UsageError("--concurrency needs at least one value");
  for (int c : o.concurrency) {
    if (c < 1 || c > kMaxConcurrency) {
      return UsageError("--concurrency {} is outside 1..{}", c, kMaxConcurrency);
    }
  }
  if (o.requests < 1 || o.requests > kMaxRequests) {
    return UsageError("--requests {} is outside 1..{}", o.requests, kMaxRequests);
  }
  if (!(o.duration_s > 0) || o.duration_s > 86400) {
    return UsageError("--duration {} is outside (0, 86400] seconds", o.duration_s);
  }
  if (o.warmup < 0 || o.warmup > 1000000) {
    return UsageError("--warmup {} is outside 0..1000000", o.warmup);
  }
  FERRY_ASSIGN_OR_RETURN(auto probe, factory());
  ModelMetadata md;
  FERRY_RETURN_IF_ERROR(probe->Metadata(o.model, o.version, &md));
  probe.reset();
  if (md.name.empty()) md.name = o.model;
  if (md.inputs.empty()) return InvalidError("model '{}': its metadata lists no inputs", o.model);

  LoadReport report;
  report.protocol = o.protocol;
  report.target = o.target.ToString();
  report.model = o.model;
  report.version = o.version;
  report.input_source =
      o.input_dir.empty() ? fmt::format("generated (seed {})", o.seed) : o.input_dir;
  FERRY_ASSIGN_OR_RETURN(report.inputs, BuildInputs(o, md));
  report.outputs = md.outputs;
  report.warmup = o.warmup;
  report.duration_s = o.duration_s;

  LoadRequest request{o.model, o.version, report.inputs, md.outputs};
  for (int c : o.concurrency) {
    FERRY_ASSIGN_OR_RETURN(LoadCell cell, RunCell(o, request, c, factory));
    report.cells.push_back(std::move(cell));
  }
  return report;
}

// --- renderers -------------------------------------------------------------------------------

namespace {

std::string TensorLine(const std::string& name, const std::string& datatype, const Shape& shape) {
  return fmt::format("{} {} {}", name, datatype, ShapeJson(shape));
}

}  // namespace

std::string FormatText(const LoadReport& r) {
  std::string s = fmt::format("ferry loadgen: {} {}, model {}{}\n", r.protocol, r.target, r.model,
                              r.version.empty() ? "" : " version " + r.version);
  for (const auto& in : r.inputs) {
    s += fmt::format("  input  {} ({})\n", TensorLine(in.name, in.datatype, in.shape),
                     r.input_source);
  }
  for (const auto& out : r.outputs) {
    s += fmt::format("  output {}\n", TensorLine(out.name, out.datatype, out.shape));
  }
  s += fmt::format("  {} warm-up request(s) per client, at most {:g} s per cell\n\n", r.warmup,
                   r.duration_s);
  s += fmt::format("{:>5} {:>9} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>11}  {}\n", "C",
                   "requests", "ok", "errors", "req/s", "p50 us", "p90 us", "p99 us", "max us",
                   "cpu us/req", "stopped by");
  for (const auto& c : r.cells) {
    s += fmt::format(
        "{:>5} {:>9} {:>9} {:>7} {:>10.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} "
        "{:>11.1f}  {}\n",
        c.concurrency, c.requests, c.ok, c.errors + c.warmup_errors, c.throughput, c.p50_us,
        c.p90_us, c.p99_us, c.max_us, c.cpu_us_per_request, c.stopped_by);
  }
  for (const auto& c : r.cells) {
    if (c.first_error.empty()) continue;
    s += fmt::format("C={}: {} failed ({} warm-up), first: {}\n", c.concurrency,
                     c.errors + c.warmup_errors, c.warmup_errors, c.first_error);
  }
  return s;
}

std::string FormatJson(const LoadReport& r) {
  json inputs = json::array(), outputs = json::array(), cells = json::array();
  for (const auto& in : r.inputs) {
    inputs.push_back({{"name", in.name},
                      {"datatype", in.datatype},
                      {"shape", in.shape},
                      {"bytes", in.raw.size()}});
  }
  for (const auto& out : r.outputs) {
    outputs.push_back({{"name", out.name}, {"datatype", out.datatype}, {"shape", out.shape}});
  }
  for (const auto& c : r.cells) {
    cells.push_back({{"concurrency", c.concurrency},
                     {"requests", c.requests},
                     {"completed", c.completed},
                     {"ok", c.ok},
                     {"errors", c.errors},
                     {"warmup_errors", c.warmup_errors},
                     {"first_error", c.first_error.empty() ? json(nullptr) : json(c.first_error)},
                     {"stopped_by", c.stopped_by},
                     {"wall_s", c.wall_s},
                     {"throughput", c.throughput},
                     {"p50_us", c.p50_us},
                     {"p90_us", c.p90_us},
                     {"p99_us", c.p99_us},
                     {"max_us", c.max_us},
                     {"mean_us", c.mean_us},
                     {"cpu_s", c.cpu_s},
                     {"cpu_us_per_request", c.cpu_us_per_request}});
  }
  json j = {{"protocol", r.protocol},
            {"target", r.target},
            {"model", r.model},
            {"model_version", r.version},
            {"input_source", r.input_source},
            {"inputs", inputs},
            {"outputs", outputs},
            {"warmup", r.warmup},
            {"duration_s", r.duration_s},
            {"cells", cells}};
  return j.dump(2) + "\n";
}

}  // namespace ferry::serve
