// The HTTP/REST front end: the Open Inference Protocol's endpoints with Triton's extensions
// (binary tensor data, model repository, statistics, classification) over a Service, and the
// Prometheus endpoint on its own port. cpp-httplib serves; one worker thread per open
// connection, up to max_connections (more wait in the kernel's accept queue: the accept loop
// blocks rather than queueing without bound).
// The request/response codec is serve/codec.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "serve/codec.h"
#include "serve/service.h"

namespace ferry::serve {

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8000;           // 0: a free port
  int metrics_port = 8002;   // 0: a free port; -1: no metrics endpoint
  int max_connections = 64;  // worker threads (one per open connection)
  int read_timeout_s = 10;   // a connection that stalls mid-request longer is closed
  int keep_alive_timeout_s = 5;
  RequestLimits limits;
  // One JSON line per request (access log); null: none.
  std::function<void(const std::string&)> access_log;
};

class HttpServer {
 public:
  // Binds both ports and starts serving on background threads. Errors: kInvalid naming the
  // address that could not be bound.
  static Result<std::unique_ptr<HttpServer>> Start(Service* service, const HttpOptions& options);
  ~HttpServer();
  int port() const;
  int metrics_port() const;
  // Stops accepting; requests being served finish. Idempotent.
  void Stop();

 private:
  HttpServer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::serve
