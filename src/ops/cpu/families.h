// Internal to the cpu provider: each family file's kernel table, and the helper every kernel
// uses to validate a node with its reference prepare.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "ops/cpu/cpu_kernel.h"

namespace ferry::ops::cpu {

std::span<const KernelDef> ConvKernels();  // conv.cc: Conv (oneDNN)
// conv.cc's 2-D Conv, and conv1d.cc's 1-D Conv run as that 2-D Conv (the Conv kernel picks by
// the input's rank).
Status PrepareConv2d(OpContext& ctx, NodeSlot& slot);
void RunConv2d(OpContext& ctx, NodeSlot& slot);
Status PrepareConv1d(OpContext& ctx, NodeSlot& slot);
void RunConv1d(OpContext& ctx, NodeSlot& slot);
// How many 1-D convs with short outputs ran on the own GEMM path (conv1d.cc; tests).
uint64_t OwnConv1dRuns();
// A 2-D Conv over a column ([N,C,H,1] plain, kernel width 1, no W pads): conv1d.cc runs it as a
// row. HasConv1dState: the slot holds conv1d.cc's state (RunConv dispatches on it).
bool IsColumnConv(const OpContext& ctx, const NodeSlot& slot);
bool HasConv1dState(const NodeSlot& slot);
// conv1d.cc: Transpose(perm 0,2,1,3) -> column Conv as one row conv on the untransposed input
std::span<const Pattern> TransposeColumnConvPatterns();
const KernelDef* TransposeColumnConvKernel();
std::span<const KernelDef> DeconvKernels();    // deconv.cc: ConvTranspose (oneDNN)
std::span<const KernelDef> ResizeKernels();    // resize.cc: Resize, Upsample (own loops)
std::span<const KernelDef> MlTreeKernels();    // ml_tree.cc: ai.onnx.ml tree ensembles
std::span<const KernelDef> MlLinearKernels();  // ml_linear.cc: LinearClassifier, LinearRegressor
std::span<const KernelDef> PoolKernels();      // pool.cc: MaxPool, AveragePool, GlobalAveragePool
std::span<const Pattern> PoolPatterns();       // pool.cc: zero Pad -> AveragePool
std::span<const KernelDef> ElementwiseKernels();  // elementwise.cc: Relu, Clip, Add...
std::span<const KernelDef> MatMulKernels();       // matmul.cc: MatMul, Gemm (oneDNN)
std::span<const KernelDef> NormKernels();  // norm.cc: Softmax, ReduceMean/Sum, LayerNormalization
std::span<const Pattern> NormPatterns();   // norm.cc: decomposed LayerNorm
std::span<const KernelDef> MovementKernels();  // movement.cc: Transpose, Slice
std::span<const KernelDef> GatherKernels();    // gather.cc: Gather
std::span<const KernelDef> RnnKernels();       // rnn.cc: GRU, LSTM (own GEMM + gate math)
std::span<const KernelDef> ConcatKernels();    // concat.cc: Concat (any layout)
// Number of Concat inputs found already in their place in the output (written there by their
// producer, the runtime's plan) in this process (tests check the path was taken).
uint64_t ConcatInputsInPlace();
std::span<const KernelDef> BatchNormKernels();  // batchnorm.cc: BatchNormalization (inference)
std::span<const Pattern> BatchNormPatterns();   // batchnorm.cc: Concat -> BN [-> Relu]
// mbconv.cc: 1x1 -> act -> depthwise -> act -> 1x1 [-> + x] (the inverted residual block)
std::span<const Pattern> MbConvPatterns();
// stem.cc: a first conv (few input channels) -> [act] -> MaxPool as one kernel
std::span<const Pattern> StemPoolPatterns();
// qmatmul.cc: DynamicQuantizeLinear, MatMulInteger, QLinearMatMul (own int8 GEMM, qgemm.h)
std::span<const KernelDef> QMatMulKernels();
std::span<const Pattern> QMatMulPatterns();  // qmatmul.cc: the dynamic-quantized MatMul chain
std::span<const KernelDef> QuantKernels();   // qconv.cc: QuantizeLinear, DequantizeLinear
std::span<const Pattern> QuantPatterns();    // qconv.cc: QDQ Conv / Gemm as int8 (oneDNN)
// qconv.cc's QConv and QAdd pattern kernels (inputs and params as their patterns give them),
// which contrib.cc also runs for QLinearConv and com.microsoft QLinearAdd nodes.
const KernelDef* Int8ConvKernel();
const KernelDef* Int8AddKernel();
// qlinear_conv.cc: QLinearConv on the own int8 GEMM (group 1, depthwise), for what QConv
// declines; IsOwnQLinearConv: the slot's state is this kernel's.
Status PrepareOwnQLinearConv(OpContext& ctx, NodeSlot& slot);
void RunOwnQLinearConv(OpContext& ctx, NodeSlot& slot);
bool IsOwnQLinearConv(const NodeSlot& slot);
// qlinear_conv.cc: ConvInteger (group 1) on the same kernel, int32 out.
std::span<const KernelDef> ConvIntegerKernels();
std::span<const KernelDef> DynQLstmKernels();  // dynq_lstm.cc: com.microsoft DynamicQuantizeLSTM
// Tests: 1 = the reference's std::exp / std::tanh gates (bit-exact), 0 = vec.h's, -1 = default.
void SetDqLstmExactGatesForTesting(int exact);
// contrib.cc: com.microsoft Attention (contrib_attention.cc), SkipLayerNormalization,
// QLinearAdd, QLinearGlobalAveragePool, QGemm, and the default domain's QLinearConv
std::span<const KernelDef> ContribKernels();
// logic.cc: Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, Not, Where, Cast,
// GlobalMaxPool
std::span<const KernelDef> LogicKernels();
// gelu_tanh.cc: the tanh-approximation GELU chain (tf2onnx) as one pass
std::span<const Pattern> GeluTanhPatterns();
const KernelDef* GeluTanhPatternKernel();
// logic.cc's integer Add / Sub / Mul (op 0 / 1 / 2; int32 or int64, broadcasting), called by
// elementwise.cc's binary kernels for integer inputs.
bool IntArithInputs(const OpContext& ctx);
Status PrepareIntArith(OpContext& ctx, NodeSlot& slot, int op);
bool HasIntArithState(const NodeSlot& slot);
void RunIntArith(OpContext& ctx, NodeSlot& slot, int op);

// Tests only: makes rnn.cc use its portable scalar loops even where AVX2+FMA is available.
void SetRnnScalarOnlyForTesting(bool on);
// Tests only: makes rnn.cc use its AVX2 path even where AVX-512 is available.
void SetRnnNoAvx512ForTesting(bool on);
// Tests only: the path a GRU/LSTM prepared now would take: 0 scalar, 1 AVX2, 2 AVX-512.
int RnnPathForTesting();
// Tests only: the expanded rows one strip of mbconv.cc's block kernel may hold, in bytes (a few
// bytes: one output row per strip); 0: the default. Takes effect when a block's state is built.
void SetMbConvStripBytesForTesting(int64_t bytes);
// Tests only: caps pool.cc's own MaxPool loops at AVX2 (1) or scalar (2); 0: the widest.
void SetMaxPoolIsaForTesting(int cap);

// pool.cc: d[b * c + ch] = scale * (sum over the hw pixels of image b, channel ch) of a float
// [n, c, H, W] tensor stored in layout `in` (GlobalAveragePool's loops; NHWC images in fixed
// pixel chunks on every thread, summed in order: the same bits at any thread count). `partial`
// is scratch the caller keeps.
void ChannelSums(const float* s, Layout in, int64_t n, int64_t c, int64_t hw, float scale, float* d,
                 std::vector<float>& partial);
// Pattern matchers' questions about the steps (GraphView):
// whether node n is the default-domain op `op`;
inline bool IsOnnxOp(const ir::Node& n, std::string_view op) {
  return n.op_type == op && (n.domain.empty() || n.domain == "ai.onnx");
}
// ... step s is;
inline bool IsOp(const GraphView& g, size_t s, std::string_view op) {
  return IsOnnxOp(g.node(s), op);
}
// the one step reading value v (false when none or several);
inline bool OnlyReader(const GraphView& g, int v, size_t* step) {
  const std::vector<size_t> r = g.readers(v);
  if (r.size() != 1) return false;
  *step = r[0];
  return true;
}
// the operand of binary step s that is not v (-1 if v is not an operand, or both are v).
inline int Other(const GraphView& g, size_t s, int v) {
  const int a = g.input(s, 0), b = g.input(s, 1);
  if (a == v && b != v) return b;
  if (b == v && a != v) return a;
  return -1;
}

// Conv step with constant float weights [k0, k1, kh, kw] (and a bias of k0 when given), dilation
// 1, explicit pads (no auto_pad): its weights, group, strides and pads (ConvStep).
struct ConvAt {
  const Tensor* w = nullptr;
  int64_t group = 1;
  std::vector<int64_t> strides, pads;
};
bool ConvStep(const GraphView& g, size_t s, ConvAt* c);
// After value *v: a Relu, a Clip (constant bounds) or, with `gates`, a HardSwish that alone reads
// it, or a SiLU / HardSwish gate (v * Sigmoid(v), v * HardSigmoid(v) with 1/6, 0.5). Sets f and
// moves *v to its output, adding the steps to `steps`; without one f stays kNone. False: a
// Clip's bounds are not constants (or the activation's output is missing).
bool TakeAct(const GraphView& g, int* v, Fusion* f, std::vector<size_t>* steps, bool gates);

// Validates the node with its reference prepare on the first `num_inputs` inputs of `ctx` and
// returns what it declares for each output (the reference's state is discarded).
Result<std::vector<OpContext::Declared>> ReferenceDeclare(const OpContext& ctx,
                                                          const NodeSlot& slot, size_t num_inputs);

// The shapes, layouts and requests a kernel's state was built for; a change means rebuild.
struct StateKey {
  std::vector<Shape> shapes;
  std::vector<Layout> layouts;
  std::vector<bool> nhwc_ok;
  Fusion fusion;
  bool operator==(const StateKey& o) const {
    return shapes == o.shapes && layouts == o.layouts && nhwc_ok == o.nhwc_ok &&
           fusion.act == o.fusion.act && fusion.lo == o.fusion.lo && fusion.hi == o.fusion.hi &&
           fusion.sum == o.fusion.sum && fusion.affine == o.fusion.affine;
  }
};
// The node's current key, read in place: a prepare runs at every step and compares before it
// builds, so the comparison copies nothing (the copies were most of a small node's prepare:
// silero-vad's If bodies); a state being built converts it into the StateKey it keeps. Holds
// references: use it within the prepare that made it.
struct KeyProbe {
  const OpContext& ctx;
  const NodeSlot& slot;
  operator StateKey() const;
};
bool operator==(const StateKey& k, const KeyProbe& p);
KeyProbe MakeKey(const OpContext& ctx, const NodeSlot& slot);

}  // namespace ferry::ops::cpu
