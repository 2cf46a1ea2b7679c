// The Service: what `ferry serve` serves, independent of the wire. Front ends (serve/http.h,
// serve/grpc_server.h) parse a request, call one member here and render the answer; every
// member is safe to call from any number of threads at once.
//
// Models come from a ModelSource (serve/source.h): a directory of artifacts, one model per
// folder, versions side by side. A version is loaded beside the versions already serving:
// its files and signature are checked against the trusted key, a session is created and the
// golden set is run through that session and compared with the artifact's tolerances; only
// then does it become READY and take requests (the switch is one pointer swap under the
// model's lock). A version that fails any step is never served; the versions that were
// serving keep serving, and the reason is in RepositoryIndex. Requests already queued on a
// version that is retired finish on it.
//
// Execution: each ready version has a scheduler (serve/scheduler.h): a bounded priority queue,
// `instances` worker threads sharing one runtime::Session, and dynamic batching on models
// whose inputs and outputs all have a dynamic first axis.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "serve/auth.h"
#include "serve/model_config.h"
#include "serve/source.h"
#include "serve/types.h"

namespace ferry::serve {

struct ServiceOptions {
  std::string models_dir;       // the repository (DirectorySource)
  std::string trusted_key;      // public key PEM: artifacts must carry a valid signature by it
  bool allow_unsigned = false;  // also serve unsigned artifacts and plain ONNX (Triton layout),
                                // marked unverified
  int poll_interval_ms = 0;     // > 0: rescan the repository this often; 0: only on load/unload
  int threads_per_run = 1;      // engine threads of one execution
  int default_instances = 0;    // executions at once per version when serve.yaml says none;
                                // 0: one per core
  uint64_t max_memory = 0;      // per session (runtime::SessionOptions::max_memory); 0: default
  std::string server_name = "ferry";
  std::string keys_file;                        // API keys (serve/auth.h); "" : no authentication
  std::function<void(const std::string&)> log;  // load/unload events, one line each
};

class Service {
 public:
  // Scans the repository and loads every model it finds (each failure is logged and left in
  // the index as UNAVAILABLE with its reason; it does not stop the others). Errors: kInvalid
  // for a repository that cannot be read or a key that cannot be parsed.
  static Result<std::unique_ptr<Service>> Create(ServiceOptions options);
  ~Service();  // stops polling, drains, joins every worker

  bool Live() const;
  bool Ready() const;  // live, not draining, the start-up scan done
  ServerMetadata Metadata() const;

  Error GetModelMetadata(const std::string& name, const std::string& version,
                         ModelMetadata* out) const;
  // The model configuration extension: what runs for the version ("" : the newest ready one).
  Error GetModelConfig(const std::string& name, const std::string& version,
                       ModelConfigInfo* out) const;
  // Ok when the version (or, with version "", the model's newest version) is READY.
  Error ModelReady(const std::string& name, const std::string& version) const;
  // Queues the request on the version and waits for its answer. kNotFound: no such model or
  // version; kUnavailable: not ready, queue full (counted REJECTED), timed out in the queue,
  // or the server is draining; kInvalidArg: inputs that do not match the model.
  Error Infer(InferRequest request, InferResponse* response);

  std::vector<ModelIndexEntry> RepositoryIndex(bool ready_only) const;
  // Rescans the model's folder and loads what changed (new versions loaded and switched to,
  // removed ones retired). Blocks until done; the error says why a version failed.
  Error LoadModel(const std::string& name);
  Error UnloadModel(const std::string& name);

  // name "" : every model; version "" : every version of the model.
  Error Statistics(const std::string& name, const std::string& version,
                   std::vector<ModelStatistics>* out) const;
  // Prometheus text exposition: Triton's nv_* metrics per model and version, and Ferry's own.
  std::string Metrics() const;

  // Authorisation for one request: `token` is the bearer token ("" : none). Ok with no keys
  // file. kUnauthenticated: missing or unknown key; kPermissionDenied: the key lacks the scope.
  Error Authorize(const std::string& token, Scope scope, const std::string& model) const;
  bool auth_enabled() const;

  // SIGTERM: new requests are refused (kUnavailable), queued and running ones finish.
  void BeginDrain();
  // Blocks until no request is queued or running.
  void WaitIdle();

  // One line per model and version: what is served, from where, its state.
  std::string Describe() const;

 private:
  Service() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::serve
