// Calibration: per-tensor ranges of a model's float activations, gathered while the engine
// runs a calibration set, in bounded memory (a running min/max and a fixed-bin histogram per
// tensor; activations are never kept), and the calibration table written as JSON.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "runtime/session.h"
#include "verify/golden.h"

namespace ferry::quant {

// How a tensor's range is chosen from what calibration saw.
struct Method {
  enum class Kind { kMinMax, kPercentile, kEntropy };
  Kind kind = Kind::kMinMax;
  double percentile = 99.99;     // kPercentile: share of |x| kept, in percent
  std::string ToString() const;  // "minmax", "percentile:99.99", "entropy"
};
// "minmax", "percentile" (99.99), "percentile:P" (0 < P <= 100), "entropy"; kUsage otherwise.
Result<Method> ParseMethod(const std::string& text);

// "u8" / "uint8" -> kUint8, "s8" / "int8" -> kInt8; kUsage otherwise.
Result<DType> ParseActivationType(const std::string& text);
// How reports name the int8 types: "u8", "s8" ("?" for other types).
const char* Int8TypeName(DType type);

// Running statistics of one tensor: exact min/max of the finite values, a count of the
// non-finite ones, and a histogram of kBins equal bins over [lo, hi]. When a value falls outside
// [lo, hi] the range grows (by at least a quarter of its width) and the old bins are re-binned
// by their centres, so memory stays kBins doubles however many samples are seen.
class Histogram {
 public:
  static constexpr int kBins = 2048;
  void Add(const float* x, int64_t n);

  double min = 0, max = 0;
  int64_t count = 0, non_finite = 0;
  double lo = 0, hi = 0;
  std::vector<double> bins;  // empty until the first finite value

  // The range to quantize to under `method`, within [min, max] (ranges include 0 later, when
  // scales are computed). minmax: [min, max]; percentile/entropy: a threshold t on |x| from
  // the histogram, giving [max(min, -t), min(max, t)].
  std::pair<double, double> Range(const Method& method) const;

 private:
  void Grow(double new_lo, double new_hi);
};

// A tensor's quantization parameters.
struct QParams {
  float scale = 1;
  int32_t zero_point = 0;
};
// Scale and zero point mapping [lo, hi] (widened to include 0) onto `type` (kUint8 or kInt8).
// Asymmetric: the full 256 levels; symmetric: zero point 0 (int8) or 128 (uint8) and a scale
// of max(|lo|, |hi|) / 127 (int8) or / 127.5 (uint8). A zero-width range gets scale 1.
QParams ComputeQParams(double lo, double hi, DType type, bool symmetric);

struct TensorRange {
  std::string name;
  double min = 0, max = 0;  // what calibration saw
  double lo = 0, hi = 0;    // the range used (by the method)
  QParams q;                // for the table's activation type
  int64_t count = 0;        // values seen
};

struct Table {
  std::string model;  // the model file calibrated
  std::string data;   // the calibration folder
  Method method;
  DType activation_type = DType::kUint8;
  bool symmetric = false;
  int64_t samples = 0;
  std::vector<TensorRange> tensors;  // in the order calibration first saw them
  // How RunCalibration ran the samples (not part of the JSON): engine runs and samples per run.
  int64_t runs = 0, batch = 0;

  const TensorRange* Find(const std::string& name) const;
};

// JSON rendering ({"tensors": {name: {min, max, range, scale, zero_point, method}}, ...}) and
// parsing (kInvalid naming the file and what is wrong).
std::string TableToJson(const Table& table);
Result<Table> ParseTable(const std::string& json, const std::string& what);
Result<Table> ReadTable(const std::string& path);

// Collects ranges of every float tensor it is shown: node outputs through Observer(), graph
// inputs through Observe().
class Calibrator {
 public:
  void Observe(const std::string& name, const Value& value);
  runtime::NodeObserver Observer();
  // Ranges by method, with parameters for `type`/`symmetric`.
  Table Finish(const Method& method, DType type, bool symmetric) const;
  size_t tensors() const { return order_.size(); }
  // Bytes of float tensors shown so far (what one sample produces, after a one-sample run).
  int64_t bytes_observed() const { return bytes_; }

 private:
  std::map<std::string, Histogram> hist_;
  std::vector<std::string> order_;
  int64_t bytes_ = 0;
};

struct CalibrateOptions {
  Method method;
  DType activation_type = DType::kUint8;
  bool symmetric = false;
  int threads = 0;
  // Samples per run, for sets holding many along their first axis (SplitSamples' rule). 0 =
  // auto: the first sample runs alone, then as many per run as keep the float tensors one run
  // produces under kAutoBatchBytes (1 to 16) — the batch's activations are what calibration
  // adds to a plain run's memory.
  int64_t batch = 0;
  int64_t max_samples = 0;  // use the first N samples (0: all)
  // Called before each run (samples done, samples in all) for progress output; may be empty.
  std::function<void(size_t, size_t)> progress;
};
inline constexpr int64_t kAutoBatchBytes = int64_t{64} << 20;
inline constexpr int64_t kMaxAutoBatch = 16;

// Runs `sets` (as loaded, one set may hold many samples) through a Session of `model`, cut
// into runs of `options.batch` samples as they go (a run's rows are copied just before it and
// a set is released once its last run is done), observing inputs too, and returns the table
// with samples/runs/batch filled in. Errors name the set and rows.
Result<Table> RunCalibration(std::shared_ptr<const ir::Model> model,
                             std::vector<verify::DataSet> sets, const CalibrateOptions& options);

// The graph rewrites run before calibration and quantization (so both see the same tensor
// names): ferry optimize's passes at level "all" (constants folded, BatchNormalization fused
// into Conv/Gemm, no-ops removed).
Status PrepareForQuantization(ir::Model& model);

}  // namespace ferry::quant
