#include "serve/http.h"

#include <httplib.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace ferry::serve {
using json = nlohmann::json;

namespace {

// Connections beyond the worker count wait in the kernel's accept queue: enqueue blocks the
// accept loop while every worker is busy and `max_waiting` connections are queued.
class BoundedPool : public httplib::TaskQueue {
 public:
  BoundedPool(size_t threads, size_t max_waiting) : max_waiting_(max_waiting) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  void enqueue(std::function<void()> fn) override {
    std::unique_lock<std::mutex> lock(mu_);
    space_.wait(lock, [&] { return jobs_.size() < max_waiting_ || shutdown_; });
    jobs_.push_back(std::move(fn));
    lock.unlock();
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    space_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty() || shutdown_; });
        if (jobs_.empty()) return;
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      space_.notify_one();
      fn();
    }
  }
  size_t max_waiting_;
  std::mutex mu_;
  std::condition_variable cv_, space_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool shutdown_ = false;
};

void Reply(httplib::Response& res, const Error& err) {
  res.status = HttpStatus(err.kind);
  res.set_content(ErrorJson(err.message), "application/json");
}

std::string Bearer(const httplib::Request& req) {
  std::string h = req.get_header_value("Authorization");
  if (h.rfind("Bearer ", 0) == 0) return h.substr(7);
  return "";
}

std::string Iso8601Now() {
  auto now = std::chrono::system_clock::now();
  auto t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms.count()));
}

json DurationJson(const Duration& d) {
  return {{"count", d.count}, {"ns", d.ns}};
}

json StatsJson(const ModelStatistics& s) {
  json batches = json::array();
  for (const auto& b : s.batch_stats) {
    batches.push_back({{"batch_size", b.batch_size},
                       {"compute_input", DurationJson(b.compute_input)},
                       {"compute_infer", DurationJson(b.compute_infer)},
                       {"compute_output", DurationJson(b.compute_output)}});
  }
  return {{"name", s.name},
          {"version", s.version},
          {"last_inference", s.last_inference_ms},
          {"inference_count", s.inference_count},
          {"execution_count", s.execution_count},
          {"inference_stats",
           {{"success", DurationJson(s.success)},
            {"fail", DurationJson(s.fail)},
            {"queue", DurationJson(s.queue)},
            {"compute_input", DurationJson(s.compute_input)},
            {"compute_infer", DurationJson(s.compute_infer)},
            {"compute_output", DurationJson(s.compute_output)},
            {"cache_hit", DurationJson({})},
            {"cache_miss", DurationJson({})}}},
          {"response_stats", json::object()},
          {"batch_stats", batches},
          {"memory_usage", json::array()}};
}

}  // namespace

struct HttpServer::Impl {
  Service* service = nullptr;
  HttpOptions options;
  httplib::Server http, metrics;
  std::thread http_thread, metrics_thread;
  int port = 0, metrics_port = -1;
  std::once_flag stopped;

  void Routes();
};

void HttpServer::Impl::Routes() {
  Service* svc = service;
  const RequestLimits limits = options.limits;
  auto infer_auth = [svc](const httplib::Request& req, httplib::Response& res,
                          const std::string& model) {
    Error e = svc->Authorize(Bearer(req), Scope::kInfer, model);
    if (!e.ok()) Reply(res, e);
    return e.ok();
  };
  auto admin_auth = [svc](const httplib::Request& req, httplib::Response& res) {
    Error e = svc->Authorize(Bearer(req), Scope::kAdmin, "");
    if (!e.ok()) Reply(res, e);
    return e.ok();
  };
  http.Get("/v2/health/live", [svc](const httplib::Request&, httplib::Response& res) {
    res.status = svc->Live() ? 200 : 400;
  });
  http.Get("/v2/health/ready", [svc](const httplib::Request&, httplib::Response& res) {
    res.status = svc->Ready() ? 200 : 400;
  });
  http.Get("/v2", [svc](const httplib::Request&, httplib::Response& res) {
    auto m = svc->Metadata();
    res.set_content(
        JsonText({{"name", m.name}, {"version", m.version}, {"extensions", m.extensions}}),
        "application/json");
  });
  const std::string model_re = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  http.Get(model_re, [=](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1], version = req.matches[2];
    if (!infer_auth(req, res, name)) return;
    ModelMetadata m;
    Error e = svc->GetModelMetadata(name, version, &m);
    if (!e.ok()) return Reply(res, e);
    auto tensors = [](const std::vector<TensorMetadata>& ts) {
      json a = json::array();
      for (const auto& t : ts) {
        a.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
      }
      return a;
    };
    res.set_content(JsonText({{"name", m.name},
                              {"versions", m.versions},
                              {"platform", m.platform},
                              {"inputs", tensors(m.inputs)},
                              {"outputs", tensors(m.outputs)},
                              {"verified", m.verified}}),
                    "application/json");
  });
  http.Get(model_re + "/config", [=](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1], version = req.matches[2];
    if (!infer_auth(req, res, name)) return;
    ModelConfigInfo c;
    Error e = svc->GetModelConfig(name, version, &c);
    if (!e.ok()) return Reply(res, e);
    res.set_content(ModelConfigJson(c), "application/json");
  });
  http.Get(model_re + "/ready", [=](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1], version = req.matches[2];
    if (!infer_auth(req, res, name)) return;
    Error e = svc->ModelReady(name, version);
    if (!e.ok()) {
      // Not ready is a 400 with the reason (tritonclient reads any 200 as ready).
      res.status = 400;
      res.set_content(ErrorJson(e.message), "application/json");
    }
  });
  http.Post(model_re + "/infer", [=](const httplib::Request& req, httplib::Response& res) {
    InferRequest r;
    r.model = req.matches[1];
    r.version = req.matches[2];
    if (!infer_auth(req, res, r.model)) return;
    Error e = ParseInferRequest(req.get_header_value("Inference-Header-Content-Length"), req.body,
                                limits, &r);
    if (!e.ok()) return Reply(res, e);
    InferResponse out;
    e = svc->Infer(std::move(r), &out);
    if (!e.ok()) return Reply(res, e);
    std::string body;
    size_t header_length = 0;
    EncodeInferResponse(out, &body, &header_length);
    if (header_length) {
      res.set_header("Inference-Header-Content-Length", std::to_string(header_length));
      res.set_content(std::move(body), "application/octet-stream");
    } else {
      res.set_content(std::move(body), "application/json");
    }
  });
  auto stats = [=](const httplib::Request& req, httplib::Response& res) {
    if (!admin_auth(req, res)) return;
    std::string name = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
    std::string version = req.matches.size() > 2 ? std::string(req.matches[2]) : "";
    std::vector<ModelStatistics> s;
    Error e = svc->Statistics(name, version, &s);
    if (!e.ok()) return Reply(res, e);
    json a = json::array();
    for (const auto& m : s) a.push_back(StatsJson(m));
    res.set_content(JsonText({{"model_stats", a}}), "application/json");
  };
  http.Get("/v2/models/stats", stats);
  http.Get(model_re + "/stats", stats);
  http.Post("/v2/repository/index", [=](const httplib::Request& req, httplib::Response& res) {
    if (!admin_auth(req, res)) return;
    bool ready = false;
    if (!req.body.empty()) {
      json j = json::parse(req.body, nullptr, false);
      if (j.is_discarded() || !j.is_object()) {
        return Reply(res, InvalidArg("repository index: the body must be a JSON object"));
      }
      if (j.contains("ready")) {
        if (!j["ready"].is_boolean())
          return Reply(res, InvalidArg("'ready' must be true or false"));
        ready = j["ready"].get<bool>();
      }
    }
    json a = json::array();
    for (const auto& m : svc->RepositoryIndex(ready)) {
      json e = {{"name", m.name}};
      if (!m.version.empty()) e["version"] = m.version;
      if (!m.state.empty()) e["state"] = m.state;
      e["reason"] = m.reason;
      a.push_back(std::move(e));
    }
    res.set_content(JsonText(a), "application/json");
  });
  auto repo_body = [](const httplib::Request& req, bool load) -> Error {
    if (req.body.empty()) return Error::Ok();
    json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return InvalidArg("the body must be a JSON object");
    if (j.contains("parameters")) {
      const auto& p = j["parameters"];
      if (!p.is_object()) return InvalidArg("'parameters' must be an object");
      for (const auto& [k, v] : p.items()) {
        if (!load && k == "unload_dependents") continue;
        return MakeError(ErrorKind::kUnsupported,
                         fmt::format("repository parameter '{}' is not supported: Ferry loads "
                                     "models only from the repository's files",
                                     k));
      }
    }
    return Error::Ok();
  };
  http.Post(R"(/v2/repository/models/([^/]+)/load)",
            [=](const httplib::Request& req, httplib::Response& res) {
              if (!admin_auth(req, res)) return;
              Error e = repo_body(req, true);
              if (e.ok()) e = svc->LoadModel(req.matches[1]);
              if (!e.ok()) return Reply(res, e);
            });
  http.Post(R"(/v2/repository/models/([^/]+)/unload)",
            [=](const httplib::Request& req, httplib::Response& res) {
              if (!admin_auth(req, res)) return;
              Error e = repo_body(req, false);
              if (e.ok()) e = svc->UnloadModel(req.matches[1]);
              if (!e.ok()) return Reply(res, e);
            });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string what = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                       : res.status == 413 ? "request body over the server's limit"
                                           : "bad request";
    res.set_content(ErrorJson(what), "application/json");
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::bad_alloc&) {
          what = "out of memory";
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        res.status = 500;
        res.set_content(ErrorJson(what), "application/json");
      });
  if (options.access_log) {
    auto log = options.access_log;
    http.set_logger([log](const httplib::Request& req, const httplib::Response& res) {
      json line = {{"time", Iso8601Now()},        {"remote", req.remote_addr},
                   {"method", req.method},        {"path", req.path},
                   {"status", res.status},        {"bytes_in", req.body.size()},
                   {"bytes_out", res.body.size()}};
      if (res.status >= 400) {
        json err = json::parse(res.body, nullptr, false);
        if (err.is_object() && err.contains("error")) line["error"] = err["error"];
      }
      log(JsonText(line));
    });
  }
  metrics.Get("/metrics", [svc](const httplib::Request&, httplib::Response& res) {
    res.set_content(svc->Metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(Service* service,
                                                      const HttpOptions& options) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->impl_ = std::make_unique<Impl>();
  auto& impl = *s->impl_;
  impl.service = service;
  impl.options = options;
  size_t threads = static_cast<size_t>(std::max(1, options.max_connections));
  impl.http.new_task_queue = [threads] { return new BoundedPool(threads, threads); };
  impl.metrics.new_task_queue = [] { return new BoundedPool(2, 8); };
  for (auto* srv : {&impl.http, &impl.metrics}) {
    srv->set_payload_max_length(options.limits.max_body_bytes);
    srv->set_read_timeout(options.read_timeout_s, 0);
    srv->set_write_timeout(options.read_timeout_s, 0);
    srv->set_keep_alive_timeout(options.keep_alive_timeout_s);
    srv->set_keep_alive_max_count(100000);
    srv->set_tcp_nodelay(true);
  }
  impl.Routes();
  auto bind = [&](httplib::Server& srv, int port) -> int {
    if (port == 0) return srv.bind_to_any_port(options.host);
    return srv.bind_to_port(options.host, port) ? port : -1;
  };
  impl.port = bind(impl.http, options.port);
  if (impl.port < 0) return InvalidError("cannot listen on {}:{}", options.host, options.port);
  if (options.metrics_port >= 0) {
    impl.metrics_port = bind(impl.metrics, options.metrics_port);
    if (impl.metrics_port < 0) {
      return InvalidError("cannot listen on {}:{} (metrics)", options.host, options.metrics_port);
    }
    impl.metrics_thread = std::thread([&impl] { impl.metrics.listen_after_bind(); });
  }
  impl.http_thread = std::thread([&impl] { impl.http.listen_after_bind(); });
  // Stop() before the loop runs would be lost: wait until both loops are up.
  for (int i = 0; i < 5000 && (!impl.http.is_running() ||
                               (impl.metrics_port >= 0 && !impl.metrics.is_running()));
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

HttpServer::~HttpServer() {
  Stop();
}

int HttpServer::port() const {
  return impl_->port;
}
int HttpServer::metrics_port() const {
  return impl_->metrics_port;
}

void HttpServer::Stop() {
  if (!impl_) return;
  std::call_once(impl_->stopped, [this] {
    impl_->http.stop();
    impl_->metrics.stop();
    if (impl_->http_thread.joinable()) impl_->http_thread.join();
    if (impl_->metrics_thread.joinable()) impl_->metrics_thread.join();
  });
}

}  // namespace ferry::serve
