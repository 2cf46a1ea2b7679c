// Graph rewrites behind `ferry quantize`: static QDQ from a calibration table, and dynamic
// (weights only, activations quantized at run time) quantization. The results are standard ONNX
// (QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear / MatMulInteger in the default
// domain) that ONNX Runtime loads; Ferry's engine runs them through its reference int8 ops.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"
#include "quant/calibrate.h"

namespace ferry::quant {

struct QuantizeOptions {
  DType activation_type = DType::kUint8;  // static: kUint8 or kInt8
  DType weight_type = DType::kInt8;
  bool per_channel = false;  // weights: one scale per output channel
  bool symmetric = false;    // static activations: symmetric ranges
  // Weights in [-63, 63] (7 bits): uint8 x int8 products summed in pairs then fit int16, so
  // kernels built on AVX2's vpmaddubsw (ONNX Runtime's without VNNI) cannot saturate.
  bool reduce_range = false;
  std::set<std::string> exclude;  // node names or op types left in float
};

struct QuantizeSummary {
  std::vector<std::string> quantized_nodes;  // "Conv 'conv1'"
  std::vector<std::string> quantized_names;  // the same nodes' names (may be empty)
  std::vector<std::string> excluded_nodes;   // quantizable, but excluded by name or op type
  std::vector<std::string> missing_ranges;   // activations without a table entry (kept float)
  int64_t activations = 0;  // tensors given a QuantizeLinear/DequantizeLinear pair (static)
                            // or a DynamicQuantizeLinear (dynamic)
  int64_t weights = 0;      // initializers stored as int8
  int64_t biases = 0;       // initializers stored as int32
};

// Static QDQ. Every non-excluded Conv, ConvTranspose-free MatMul/Gemm, Add, Mul, pooling,
// Concat and Resize gets:
//  - a QuantizeLinear -> DequantizeLinear pair on each float activation input (one pair per
//    tensor, shared by all readers), with the table's range;
//  - weights (Conv input 1, constant MatMul/Gemm B) as int8 initializers with a
//    DequantizeLinear (symmetric; per output channel with `per_channel`);
//  - biases (Conv input 2, Gemm C when 1-D and beta is 1) as int32 with scale
//    activation scale * weight scale, through a DequantizeLinear;
//  - a pair on its output (after a single-reader Relu/Clip when one follows), except on
//    graph outputs. MaxPool, GlobalMaxPool, Resize, Reshape, Flatten, Transpose, Squeeze and
//    Unsqueeze reuse their input's parameters for their output.
// Errors: kUnsupported below opset 10 (13 for per-channel); kInvalid when no tensor the
// rewrite needs has a range in `table` (a table of another model).
Result<QuantizeSummary> QuantizeStatic(ir::Model& model, const Table& table,
                                       const QuantizeOptions& options);

// Dynamic: MatMul and Gemm with a constant 2-D weight become DynamicQuantizeLinear (one per
// activation tensor) -> MatMulInteger (uint8 x int8 weights, symmetric) -> Cast -> Mul by
// activation scale * weight scale (-> Add bias for Gemm), the pattern ONNX Runtime fuses into
// MatMulIntegerToFloat; Conv weights are stored int8 with a DequantizeLinear; constant Gather
// tables of 1024+ elements (embeddings) are stored int8 (per tensor) and the gathered rows go
// through a DequantizeLinear. Errors: kUnsupported below opset 11.
Result<QuantizeSummary> QuantizeDynamic(ir::Model& model, const QuantizeOptions& options);

}  // namespace ferry::quant
