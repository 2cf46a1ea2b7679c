// What `ferry quantize --eval` measures, as library calls: the quantized model against the
// float one on an evaluation set (verify's statistics per output; top-1 agreement; with labels
// accuracy overall and per class), the per-layer error table (verify's LayerCapture between
// the prepared float model and the quantized file) and the latency p50 of both files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/progress.h"
#include "core/status.h"
#include "ir/graph.h"
#include "quant/calibrate.h"
#include "verify/compare.h"
#include "verify/layers.h"

namespace ferry::quant {

struct ClassRow {
  int64_t label = 0, rows = 0, before = 0, after = 0;  // correct before / after
  double drop_pp = 0;
  bool flagged = false;  // drop > 2x the average class drop
};

struct OutputEval {
  std::string name;
  verify::Stats stats;
  std::optional<verify::ClassifierStats> classifier;  // [N, C] float outputs, C > 1
  std::vector<ClassRow> classes;                      // with labels
  double average_class_drop_pp = 0;
};

struct Evaluation {
  std::string data;  // the evaluation folder
  int64_t samples = 0, runs = 0;
  bool labeled = false;
  std::vector<OutputEval> outputs;
};

struct EvalOptions {
  std::string float_model, quantized_model;  // ONNX files
  std::string data;                          // evaluation folder (cut into runs of 64 samples)
  std::string labels;                        // "" or a .npy of class ids
  int threads = 0;
  ProgressFn progress;  // stage "evaluate", per run
};

// Runs both models on every evaluation run and compares each output (tolerance 1e-2 / 1e-2 for
// the statistics). Errors name the model and set, or the labels file (count, no classifier).
Result<Evaluation> EvaluateQuantized(const EvalOptions& options);

struct LayerTable {
  int64_t samples = 0;
  std::vector<verify::LayerRow> rows;
  int64_t first_failed = -1;
  int64_t candidate_only = 0;
};

// The QDQ writer folds a Relu/Clip whose range starts at 0 into the QuantizeLinear after its
// producer, and the producer then writes the Relu's output name with pre-Relu values. For the
// per-layer table the comparable (post-Relu) values are the DequantizeLinear's output after that
// QuantizeLinear: in `cand` (a copy used only for the table) the producer's output is renamed
// "<name>/pre_relu" and the DequantizeLinear writes <name>. Returns the number of renames.
int AlignFoldedRelus(ir::Graph& cand, const ir::Graph& ref);

// Float (prepared) vs quantized per layer on the first 64 samples of `data`. Tolerance per
// tensor: 4 quantization steps of its range in `table` + 2% relative (1e-2 / 1e-2 without a
// table or range).
Result<LayerTable> CompareLayers(std::shared_ptr<const ir::Model> prepared,
                                 std::shared_ptr<const ir::Model> quantized, const Table* table,
                                 const std::string& data, int threads);

inline constexpr const char* kLatencyNote =
    "engine defaults (cpu provider); static QDQ Conv, Add and MaxPool and the dynamic "
    "MatMulInteger chain run as int8 kernels, other quantized ops as DequantizeLinear -> float op "
    "-> QuantizeLinear (cpu or reference kernels)";

struct Latency {
  std::string input;  // what was fed
  int runs = 0;
  double before_p50_ms = 0, after_p50_ms = 0;
};

// p50 of `runs` timed runs (after one first run and 2 warm-up runs) of both files on the first
// sample of `options.data` (batch 1), engine defaults (provider cpu, see kLatencyNote).
Result<Latency> MeasureLatency(const EvalOptions& options, int runs);

}  // namespace ferry::quant
