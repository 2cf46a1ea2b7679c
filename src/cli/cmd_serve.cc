// ferry serve --models DIR [--trusted-key PUB.pem | --allow-unsigned] [--keys KEYS.yaml |
//             --insecure-no-auth] [--http-port 8000] [--grpc-port 8001] [--metrics-port 8002] ...
// The work is serve::Service (src/serve/service.h) behind serve::HttpServer and the gRPC front
// end; this file parses flags, prints what is served and where, and waits for SIGTERM/SIGINT
// (then drains: new requests refused, running ones finish, exit 0).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>

#include "cli/command.h"
#include "serve/grpc_server.h"
#include "serve/http.h"
#include "serve/service.h"

namespace ferry::cli {

namespace {

struct ServeOptions {
  std::string models, trusted_key, keys, host = "0.0.0.0", access_log;
  bool allow_unsigned = false, insecure_no_auth = false;
  int http_port = 8000, grpc_port = 8001, metrics_port = 8002;
  int poll_ms = 5000, threads = 1, instances = 0, max_connections = 64, read_timeout_s = 10;
  uint64_t max_body_mb = 2048, max_elements = uint64_t{1} << 30;
};

int RunServe(const ServeOptions& o) {
  if (o.keys.empty() && !o.insecure_no_auth) {
    return ReportError(UsageError(
        "ferry serve needs --keys KEYS.yaml (API keys) or --insecure-no-auth (local use only)"));
  }
  if (!o.keys.empty() && o.insecure_no_auth) {
    return ReportError(UsageError("--keys and --insecure-no-auth exclude each other"));
  }
  if (o.trusted_key.empty() && !o.allow_unsigned) {
    return ReportError(UsageError(
        "ferry serve needs --trusted-key PUB.pem (signed artifacts) or --allow-unsigned"));
  }
  // SIGTERM and SIGINT are taken by sigwait below: blocked before any thread starts, so every
  // thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::mutex log_mu;
  std::unique_ptr<std::ofstream> access_file;
  if (!o.access_log.empty() && o.access_log != "-") {
    access_file = std::make_unique<std::ofstream>(o.access_log, std::ios::app);
    if (!*access_file) {
      return ReportError(InvalidError("--access-log {}: cannot open for writing", o.access_log));
    }
  }
  serve::ServiceOptions so;
  so.models_dir = o.models;
  so.trusted_key = o.trusted_key;
  so.allow_unsigned = o.allow_unsigned;
  so.poll_interval_ms = o.poll_ms;
  so.threads_per_run = o.threads;
  so.default_instances = o.instances;
  so.keys_file = o.keys;
  so.log = [&log_mu](const std::string& line) {
    std::lock_guard<std::mutex> lock(log_mu);
    std::fprintf(stderr, "ferry serve: %s\n", line.c_str());
  };
  if (o.insecure_no_auth) {
    std::fprintf(stderr,
                 "ferry serve: WARNING: --insecure-no-auth: every client may infer, "
                 "load and unload models; use API keys (--keys) beyond local use\n");
  }
  if (o.allow_unsigned) {
    std::fprintf(stderr,
                 "ferry serve: WARNING: --allow-unsigned: unsigned artifacts and plain "
                 "ONNX models are served, marked unverified\n");
  }
  auto service = serve::Service::Create(so);
  if (!service.ok()) return ReportError(service.status());

  serve::HttpOptions ho;
  ho.host = o.host;
  ho.port = o.http_port;
  ho.metrics_port = o.metrics_port;
  ho.max_connections = o.max_connections;
  ho.read_timeout_s = o.read_timeout_s;
  ho.limits.max_body_bytes = o.max_body_mb << 20;
  ho.limits.max_elements = o.max_elements;
  if (!o.access_log.empty()) {
    std::ostream* out = access_file ? access_file.get() : &std::cout;
    ho.access_log = [out, &log_mu](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mu);
      *out << line << '\n' << std::flush;
    };
  }
  auto http = serve::HttpServer::Start(service->get(), ho);
  if (!http.ok()) return ReportError(http.status());
  std::unique_ptr<serve::GrpcServer> grpc;
  if (o.grpc_port >= 0) {
    serve::GrpcOptions go;
    go.address = o.host + ":" + std::to_string(o.grpc_port);
    // The same body limit as HTTP (gRPC's own ceiling is 2 GiB - 1).
    go.max_message_bytes =
        static_cast<int>(std::min<uint64_t>(o.max_body_mb << 20, uint64_t{2147483647}));
    auto g = serve::StartGrpcServer(service->get(), go);
    if (!g.ok()) return ReportError(g.status());
    grpc = std::move(g.value());
  }
  std::string shown = o.host == "0.0.0.0" ? "127.0.0.1" : o.host;
  std::string banner = fmt::format("http: {}:{}\n", shown, http.value()->port());
  if (grpc) banner += fmt::format("grpc: {}:{}\n", shown, grpc->port());
  if (http.value()->metrics_port() >= 0) {
    banner += fmt::format("metrics: {}:{}/metrics\n", shown, http.value()->metrics_port());
  }
  banner += fmt::format(
      "auth: {}\n", o.insecure_no_auth ? "none (--insecure-no-auth)" : "API keys from " + o.keys);
  banner += fmt::format("repository: {} (polled every {} ms)\n", o.models, o.poll_ms);
  banner += service.value()->Describe();
  banner += "ready\n";
  PrintOut(banner);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "ferry serve: %s: draining (new requests are refused)\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT");
  service.value()->BeginDrain();
  service.value()->WaitIdle();
  http.value()->Stop();
  if (grpc) grpc->Shutdown(5000);
  service.value().reset();
  std::fprintf(stderr, "ferry serve: stopped\n");
  return 0;
}

}  // namespace

void SetupServe(CLI::App& sub, Action* action) {
  auto o = std::make_shared<ServeOptions>();
  sub.add_option("--models", o->models,
                 "Model repository: DIR/<model>/<version>/ holding an artifact (ferry build) or "
                 "model.onnx; DIR/<model>/serve.yaml optional")
      ->required();
  sub.add_option("--trusted-key", o->trusted_key,
                 "Public key PEM: artifacts must carry a valid signature by it");
  sub.add_flag("--allow-unsigned", o->allow_unsigned,
               "Also serve unsigned artifacts and plain ONNX models (marked unverified)");
  sub.add_option("--keys", o->keys, "API keys file (YAML: sha256 and scopes per key)");
  sub.add_flag("--insecure-no-auth", o->insecure_no_auth,
               "No API keys: anyone who reaches the ports may use every endpoint");
  sub.add_option("--host", o->host, "Address to listen on (default 0.0.0.0)");
  sub.add_option("--http-port", o->http_port, "HTTP/REST port (default 8000; 0: any free)");
  sub.add_option("--grpc-port", o->grpc_port, "gRPC port (default 8001; 0: any free; -1: off)");
  sub.add_option("--metrics-port", o->metrics_port,
                 "Prometheus /metrics port (default 8002; 0: any free; -1: off)");
  sub.add_option("--poll-interval-ms", o->poll_ms,
                 "Rescan the repository this often (default 5000; 0: only on repository "
                 "load/unload)")
      ->check(CLI::Range(0, 86400000));
  sub.add_option("--threads", o->threads, "Engine threads per execution (default 1)")
      ->check(CLI::Range(1, 256));
  sub.add_option("--instances", o->instances,
                 "Executions at once per model version unless serve.yaml says (default: one "
                 "per core / threads)")
      ->check(CLI::Range(0, 256));
  sub.add_option("--max-connections", o->max_connections,
                 "HTTP connections served at once (default 64)")
      ->check(CLI::Range(1, 4096));
  sub.add_option("--max-body-mb", o->max_body_mb,
                 "Largest request body or gRPC message, MiB (default 2048)")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--max-elements", o->max_elements,
                 "Largest input tensor, elements (default 2^30)");
  sub.add_option("--read-timeout-s", o->read_timeout_s,
                 "Close a connection that stalls mid-request this long (default 10)")
      ->check(CLI::Range(1, 3600));
  sub.add_option("--access-log", o->access_log,
                 "Write one JSON line per HTTP request to FILE ('-': stdout)");
  sub.callback([o, action] { *action = [o] { return RunServe(*o); }; });
}

}  // namespace ferry::cli
