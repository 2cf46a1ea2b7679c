// ferry loadgen --http HOST:PORT | --grpc HOST:PORT --model M [--model-version V]
//               [--input-dir DIR] [--concurrency 1,4,16] [--requests N] [--duration S]
//               [--warmup K] [--json] ...
// The work is serve::RunLoadgen (src/serve/loadgen.h) with the HTTP or gRPC client factory;
// this file parses, renders and picks the exit code: 0 every request succeeded, 1 some failed
// (they are counted in the report), 2 bad flags, 3 the server cannot be reached, does not know
// the model or the input files do not fit it, 4 an input that cannot be generated (BYTES).
#include <signal.h>

#include "cli/command.h"
#include "serve/loadgen.h"
#include "serve/loadgen_grpc.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string http, grpc, model, version, input_dir, concurrency = "1";
  std::string grpc_channels = "per-client";
  uint64_t requests = 1000, seed = 0;
  double duration_s = 60;
  int warmup = 2, connect_timeout_s = 5, timeout_s = 30;
  bool json = false;
};

int LoadgenCommand(const Options& o) {
  if (o.http.empty() == o.grpc.empty()) {
    return ReportError(UsageError("ferry loadgen needs one of --http HOST:PORT, --grpc HOST:PORT"));
  }
  serve::LoadgenOptions lo;
  lo.protocol = o.http.empty() ? "grpc" : "http";
  auto target =
      serve::ParseHostPort(o.http.empty() ? "--grpc" : "--http", o.http.empty() ? o.grpc : o.http);
  if (!target.ok()) return ReportError(target.status());
  lo.target = *target;
  auto conc = serve::ParseConcurrencyList("--concurrency", o.concurrency);
  if (!conc.ok()) return ReportError(conc.status());
  lo.concurrency = *conc;
  lo.model = o.model;
  lo.version = o.version;
  lo.input_dir = o.input_dir;
  lo.seed = o.seed;
  lo.requests = o.requests;
  lo.duration_s = o.duration_s;
  lo.warmup = o.warmup;
  if (o.connect_timeout_s < 1 || o.connect_timeout_s > 3600 || o.timeout_s < 1 ||
      o.timeout_s > 3600) {
    return ReportError(UsageError("--connect-timeout-s and --timeout-s must be 1..3600"));
  }
  serve::LoadTimeouts timeouts{o.connect_timeout_s, o.timeout_s};
  serve::GrpcChannels channels = serve::GrpcChannels::kPerClient;
  if (o.grpc_channels == "shared") {
    channels = serve::GrpcChannels::kShared;
  } else if (o.grpc_channels != "per-client") {
    return ReportError(
        UsageError("--grpc-channels expects per-client or shared, got '{}'", o.grpc_channels));
  }
  signal(SIGPIPE, SIG_IGN);  // a server that closes mid-request is an error, not a signal
  auto factory = lo.protocol == "http"
                     ? serve::HttpLoadClientFactory(lo.target, timeouts)
                     : serve::GrpcLoadClientFactory(lo.target, timeouts, channels);
  auto report = serve::RunLoadgen(lo, factory);
  if (!report.ok()) return ReportError(report.status());
  PrintOut(o.json ? serve::FormatJson(*report) : serve::FormatText(*report));
  return report->failed() ? 1 : 0;
}

}  // namespace

void SetupLoadgen(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("--http", o->http, "Server's HTTP/REST address, HOST:PORT");
  sub.add_option("--grpc", o->grpc, "Server's gRPC address, HOST:PORT");
  sub.add_option("--model", o->model, "Model name")->required();
  sub.add_option("--model-version", o->version, "Model version (default: the server's choice)");
  sub.add_option("--input-dir", o->input_dir,
                 "Inputs: input_0.pb .. input_{N-1}.pb (ONNX TensorProto), matched by position "
                 "to the model's metadata inputs (default: generated from the metadata, dynamic "
                 "dims 1)");
  sub.add_option("--seed", o->seed, "Seed of generated inputs (default 0)");
  sub.add_option("--concurrency", o->concurrency,
                 "Clients at once, a comma list: one cell per value (default 1)");
  sub.add_option("--requests", o->requests,
                 "Requests per cell, shared by its clients (default 1000, at most 10^7)");
  sub.add_option("--duration", o->duration_s,
                 "Seconds per cell at most: it stops at whichever of --requests and --duration "
                 "comes first (default 60)");
  sub.add_option("--warmup", o->warmup, "Untimed requests per client before a cell (default 2)");
  sub.add_option("--connect-timeout-s", o->connect_timeout_s,
                 "Give up connecting after this long (default 5)");
  sub.add_option("--timeout-s", o->timeout_s,
                 "A request without an answer after this long fails (default 30)");
  sub.add_option("--grpc-channels", o->grpc_channels,
                 "gRPC: per-client (one connection per client, default) or shared (one for all)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return LoadgenCommand(*o); }; });
}

}  // namespace ferry::cli
