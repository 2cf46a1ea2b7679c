// ferry: the command-line entry point. One table row per command.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>

#include "cli/command.h"
#include "core/float_mode.h"
#include "core/memory_budget.h"

namespace {

struct CommandRow {
  const char* name;
  const char* help;
  ferry::cli::SetupFn setup;
};

constexpr CommandRow kCommands[] = {
    {"inspect", "Show a model's inputs, outputs, opsets, ops, parameters and weights checksum",
     ferry::cli::SetupInspect},
    {"run", "Run a model once on input files, or check it against ONNX test data",
     ferry::cli::SetupRun},
    {"optimize", "Simplify and fuse a model's graph; checks outputs are unchanged before writing",
     ferry::cli::SetupOptimize},
    {"audit", "Report what each target supports, dynamic axes, control flow and conversion scope",
     ferry::cli::SetupAudit},
    {"convert", "Convert a model's opset or to float16; checks the result before writing",
     ferry::cli::SetupConvert},
    {"verify", "Compare a candidate with a reference or golden outputs, per output and per layer",
     ferry::cli::SetupVerify},
    {"golden", "Capture golden test data: seeded inputs and the model's outputs",
     ferry::cli::SetupGolden},
    {"bench", "Time a model: cold start, first run, warm percentiles, throughput, peak memory",
     ferry::cli::SetupBench},
    {"prep", "Preprocessing spec: images to input tensors (run), parity with Pillow/OpenCV (check)",
     ferry::cli::SetupPrep},
    {"calibrate", "Gather activation ranges on calibration data into a calibration table (JSON)",
     ferry::cli::SetupCalibrate},
    {"quantize", "Quantize to int8: static QDQ (calibrated) or dynamic; reports accuracy and size",
     ferry::cli::SetupQuantize},
    {"build",
     "Build a verified, reproducible artifact from ferry.yaml (golden set, gate, manifest)",
     ferry::cli::SetupBuild},
    {"keys", "Generate an ECDSA P-256 signing key pair", ferry::cli::SetupKeys},
    {"sign", "Sign an artifact folder (OpenSSF model-signing format: Sigstore bundle, DSSE)",
     ferry::cli::SetupSign},
    {"artifact", "Verify an artifact: files against its manifest and signature, golden set rerun",
     ferry::cli::SetupArtifact},
    {"serve", "Serve models over the Open Inference Protocol (KServe v2): HTTP, gRPC, metrics",
     ferry::cli::SetupServe},
    {"loadgen", "Load a KServe v2 server (HTTP or gRPC): closed-loop clients, latency, throughput",
     ferry::cli::SetupLoadgen},
};

// OpenMP (libgomp, which oneDNN and the cpu kernels use) lets an idle worker spin 300000 pause
// loops before it sleeps. With a free core per thread that is fast, but when another process
// holds a core the spinning thread keeps the one the working thread needs: on a 2-vCPU VM with
// one busy core, ShuffleNetV2 at 2 threads took 790 ms per run instead of 5 (every parallel
// region's end waits out a spin). Too short a spin fails the other way: when the hypervisor
// takes the VM's vCPUs away (steal), a worker that slept waits for its halted vCPU to be woken,
// and with 1000 loops (~16 us) the zoo BERT at 2 threads ran 10-18 ms p50 against ORT's 7
// (MobileNetV2 8-13 against 5). 5000 loops (~80 us): 4.8-7.6 / 3.0-4.0 ms there; with one core
// busy, 15.6 / 11.7 ms, ORT's level (15.5 / 11.1; 1000 loops 9.5 / 7.3, 10000 19.3 / 17.5).
// libgomp reads its environment when it is loaded, before main, so the variable is set and the
// binary re-executed once; a user's own GOMP_SPINCOUNT or OMP_WAIT_POLICY is left alone.
constexpr const char* kGompSpinCount = "5000";

void ShortenOpenMpSpin(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  if (setenv("GOMP_SPINCOUNT", kGompSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: run on with libgomp's defaults
}

}  // namespace

int main(int argc, char** argv) {
  ShortenOpenMpSpin(argv);
  // The main thread in the cpu provider's run mode (subnormals flushed: FTZ/DAZ), so a run has
  // no mode to switch and no OpenMP worker to update before and after it (a parallel region
  // each way, ~60 us per run at 2 threads). Runs that keep subnormals (--provider reference,
  // flush_denormals off) clear the bits for their duration themselves.
  ferry::SetFloatMode(ferry::GetFloatMode() | ferry::kFlushDenormalBits);
  CLI::App app{"Ferry: verify, optimize and run ONNX models on the CPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ferry 0.1.0");
  ferry::cli::Action action;
  std::string max_memory;
  for (const auto& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    c.setup(*sub, &action);
    sub->add_option("--max-memory", max_memory,
                    "Memory budget of each model session, e.g. 8G or 512M (default: 3/4 of "
                    "physical memory, at most half of ulimit -v): a tensor that would pass it "
                    "is refused (exit 3)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (!max_memory.empty()) {
    auto bytes = ferry::ParseByteSize("--max-memory", max_memory);
    if (!bytes.ok()) return ferry::cli::ReportError(bytes.status());
    if (*bytes == 0) return ferry::cli::ReportError(ferry::UsageError("--max-memory must be > 0"));
    ferry::SetDefaultMaxMemory(*bytes);
  }
  try {
    return action ? action() : 2;
  } catch (const std::bad_alloc&) {
    // An allocation no budget saw (the sessions turn their own into errors): still the input's
    // doing, not a bug in Ferry.
    std::fprintf(stderr, "ferry: error: out of memory (try --max-memory to refuse earlier)\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: internal error: %s\n", e.what());
    return 70;
  }
}
