// The `cpu` provider: optimized kernels for a subset of ops, each tested against its reference
// kernel (tests/cpu/). The runtime assigns a node to the cpu provider when a KernelDef here
// matches (op, opset, and `accepts` on the node's attributes); the kernel may still decline at
// prepare time (dtype, shape, layout it does not handle), and the node then runs its reference
// kernel for that run.
//
// Differences from the reference contract (ops/op.h):
//  * a NodeSlot persists across the runs of one run context (the runtime keeps one per
//    context, and concurrent runs use different contexts): library primitives and plans live
//    in `slot.state` and are rebuilt by the kernel when its key (shapes, layouts, fusion)
//    changes. Packed forms of constant weights go through `slot.packs`, shared by every
//    context of the session: packed once, never written after (PackCache);
//  * activations may be stored in a provider layout (channels-last or channel-blocked, whatever
//    the convolution library prefers on this CPU) between cpu nodes. Tensor shapes stay logical
//    (NCHW); the runtime tracks each value's Layout and converts to plain before any reference
//    kernel, graph output or observer sees it;
//  * the runtime may ask a kernel to absorb the following Relu/Clip/Add nodes (`slot.fusion`);
//    the kernel accepts by setting `slot.fused` in prepare.
//
// To add a kernel: 1. write Prepare/Run in a family file here, 2. add its row to that file's
// KernelDef table (listed in cpu_kernels.cc), 3. add a sweep against the reference in tests/cpu/.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/op.h"

namespace ferry::ops::cpu {

// How a value's elements are stored. Non-plain layouts are rank-4 [N,C,H,W] float32, or uint8 /
// int8 (the int8 kernels of qconv.cc), of the same byte size as plain (blocked layouts only when
// C is a multiple of the block). One exception: channels-last also holds a rank-5+ float value
// [N, C1..Ck, H, W] whose channels were split by a Reshape view (ShuffleNet's channel shuffle:
// Reshape [N,g,C/g,H,W] -> Transpose [0,2,1,3,4] -> Reshape [N,C,H,W]), stored [N,H,W,C1..Ck];
// only Reshape views, Transpose, Slice and Shape read it (the runtime's NHWC rule), and
// ConvertLayout converts it.
enum class Layout : uint8_t {
  kPlain = 0,      // row-major in the logical shape
  kNhwc = 1,       // stored [N,H,W,C] (oneDNN acdb; its AVX-512 fp32 convolutions)
  kBlocked8 = 2,   // stored [N,C/8,H,W,8] (oneDNN aBcd8b; its AVX2 fp32 convolutions)
  kBlocked16 = 3,  // stored [N,C/16,H,W,16] (oneDNN aBcd16b)
};

// Element strides of each logical dim of a channels-last value of rank >= 4 ([N, C1..Ck, H, W]
// stored [N, H, W, C1..Ck]).
inline std::vector<int64_t> NhwcStrides(const Shape& s) {
  const size_t r = s.size();
  std::vector<int64_t> st(r, 1);
  if (r < 4) return st;
  int64_t acc = 1;
  for (size_t k = r - 2; k-- > 1;) {  // the channel dims, innermost last
    st[k] = acc;
    acc *= s[k];
  }
  st[r - 1] = acc;
  st[r - 2] = acc * s[r - 1];
  st[0] = st[r - 2] * s[r - 2];
  return st;
}
// Element strides of each dim of a row-major (plain) tensor.
inline std::vector<int64_t> PlainStrides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;) st[k - 1] = st[k] * s[k];
  return st;
}
// Whether a permutation of rank 4+ keeps N first and H, W last (a channels-last value stays
// channels-last under it: only each pixel's channels move).
inline bool KeepsPixelDims(const std::vector<int64_t>& perm) {
  const size_t r = perm.size();
  return r >= 4 && perm[0] == 0 && perm[r - 2] == static_cast<int64_t>(r - 2) &&
         perm[r - 1] == static_cast<int64_t>(r - 1);
}
// The logical dims of a rank-r channels-last value in storage order: 0, r-2, r-1, 1..r-3.
inline std::vector<size_t> NhwcOrder(size_t r) {
  std::vector<size_t> o = {0, r - 2, r - 1};
  for (size_t k = 1; k + 2 < r; ++k) o.push_back(k);
  return o;
}

// Post-operations a kernel may absorb (Conv: sum, then activation).
struct Fusion {
  // kSwish: x * sigmoid(x) (SiLU); kHardSwish: x * max(0, min(1, x / 6 + 0.5)). Only Conv
  // takes these two (the runtime offers them to every fusing kernel; others refuse).
  // kGelu: x * 0.5 * (1 + erf(x / sqrt(2))) (torch's exact GELU); only MatMul and Conv take it
  // (the runtime offers it to no other kernel).
  enum class Act : uint8_t { kNone, kRelu, kClip, kSwish, kHardSwish, kGelu };
  Act act = Act::kNone;
  float lo = 0, hi = 0;  // kClip bounds
  bool sum = false;      // input KernelDef::fuse_input is added to the result before `act`
  // A BatchNormalization (inference, constant statistics) right after a Conv: the output times
  // a[c] plus b[c] per output channel, before `sum` and `act`. Only Conv takes it (it scales
  // its weights and bias); the runtime offers it to no other kernel.
  struct Affine {
    std::vector<float> a, b;
  };
  std::shared_ptr<const Affine> affine;
  bool any() const { return act != Act::kNone || sum || affine; }
  // The clamp `act` amounts to: [0, inf) for Relu, [lo, hi] for Clip, unbounded otherwise.
  std::pair<float, float> bounds() const {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    if (act == Act::kRelu) return {0.f, kInf};
    if (act == Act::kClip) return {lo, hi};
    return {-kInf, kInf};
  }
};

class KernelState {
 public:
  virtual ~KernelState() = default;
};

class Provider;  // a run context's cpu resources (the shared oneDNN engine, a stream, scratch)

// The packed forms of one node's constant inputs (weights), shared by every run context of a
// session: each made once, by the first prepare that asks, and read-only afterwards, so
// concurrent runs read them at once. Thread-safe. A packed form is keyed by the constant's
// address (an initializer's or folded constant's storage, stable for the session) and a tag
// naming everything else its bytes depend on (kernel, tile, blocking, layout).
class PackCache {
 public:
  // The form stored under (weights, tag), or the one `make` returns (a shared_ptr<T>, T with
  // a bytes() member: what Session::weights_bytes() counts), stored. `make` runs at most once
  // per key: callers with the same key wait for the first.
  template <typename T, typename Make>
  std::shared_ptr<const T> Get(const void* weights, const std::string& tag, Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Item& it : items_)
      if (it.weights == weights && it.tag == tag)
        return std::static_pointer_cast<const T>(it.value);
    std::shared_ptr<const T> v = make();
    items_.push_back({weights, tag, v, v ? v->bytes() : 0});
    return v;
  }
  size_t bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t b = 0;
    for (const Item& it : items_) b += it.bytes;
    return b;
  }

 private:
  struct Item {
    const void* weights;
    std::string tag;
    std::shared_ptr<const void> value;
    size_t bytes;
  };
  mutable std::mutex mu_;
  std::vector<Item> items_;
};

// One per cpu-assigned node and run context, owned by the runtime, kept across that
// context's runs (one run at a time).
struct NodeSlot {
  Provider* provider = nullptr;
  PackCache* packs = nullptr;        // the node's packed constants, shared by all contexts
  const OpDef* reference = nullptr;  // the node's reference definition (for validation)
  std::vector<bool> const_inputs;    // input i is an initializer: same data every run
  // Set by the runtime before each prepare:
  Fusion fusion;                   // requested post-ops (none when fusion is off for this run)
  std::vector<Layout> in_layouts;  // layout of each input this run
  std::vector<bool>
      nhwc_ok;  // output k may be written in a non-plain Layout (every reader accepts it)
  // Set by the runtime before each run: output 0 is a channel slice of a wider channels-last
  // buffer (a Concat's output, see `place_offsets`), its pixels this many elements apart; 0:
  // dense. Only when this run's prepare set `strided_out_ok`.
  int64_t out_pixel_stride = 0;
  // Set by the kernel's prepare:
  bool declined = false;            // run the reference kernel instead (this run)
  bool fused = false;               // `fusion` was accepted
  bool strided_out_ok = false;      // output 0 may be written with `out_pixel_stride`
  std::vector<float> params;        // a pattern kernel's parameters (PatternMatch::params)
  std::vector<Layout> out_layouts;  // layout of each output (default kPlain)
  // A kernel that copies its inputs into output 0 unchanged (Concat): per input, the byte offset
  // of its place in the output when its producer could write it there instead (-1: no); its
  // pixels `place_pixel_stride` elements apart (channels-last; the producer must support
  // `out_pixel_stride`), or contiguous (0). Run skips an input already in its place.
  std::vector<int64_t> place_offsets;
  int64_t place_pixel_stride = 0;
  std::unique_ptr<KernelState> state;
};

using CpuPrepareFn = Status (*)(OpContext&, NodeSlot&);
using CpuRunFn = void (*)(OpContext&, NodeSlot&);

struct KernelDef {
  std::string_view domain;  // "" for the default ONNX domain
  std::string_view name;
  int since_version, last_version;  // opset range covered, inclusive
  // Whether the node's attributes are handled (checked once, at session build). May be null.
  bool (*accepts)(const ir::Node&);
  uint32_t nhwc_inputs;  // bit i: input i may arrive in a non-plain Layout
  int fuse_input;        // > 0: takes Fusion post-ops; the sum operand arrives as this input
  CpuPrepareFn prepare;
  CpuRunFn run;
};

// The kernel for (domain, op, opset) whose `accepts` takes the node, or null.
const KernelDef* FindKernel(const ir::Node& node, int64_t opset);
std::span<const KernelDef* const> AllKernels();

// Pattern fusion: a cpu kernel that computes a whole subgraph (e.g. the decomposed LayerNorm
// torch exports) in one pass. At session build the runtime offers each step to every Pattern's
// matcher through a read-only GraphView of the steps (execution order) and their values (ids);
// a match names the steps it computes, the values it reads and the one value it writes. The
// runtime accepts it only if no absorbed step's output is read outside the match or exposed
// (graph output, subgraph read), and every value read is available when the host (first) step
// runs. At run time the match's kernel runs at the host step with `inputs` as its inputs (the
// OpContext's node is the host's) and `params` in NodeSlot::params; when it declines, the
// steps run one by one. Runs with an observer never use patterns.
class GraphView {
 public:
  virtual ~GraphView() = default;
  virtual size_t num_steps() const = 0;
  virtual const ir::Node& node(size_t step) const = 0;
  virtual int64_t opset(size_t step) const = 0;
  virtual int input(size_t step, size_t i) const = 0;  // value id, -1 when absent
  virtual int output(size_t step, size_t k) const = 0;
  virtual std::vector<size_t> readers(int value) const = 0;  // steps reading it, in order
  // A constant's data (initializer, Constant node's `value`, Identity of one), else null.
  virtual const Tensor* constant(int value) const = 0;
};

struct PatternMatch {
  const KernelDef* kernel = nullptr;  // computes the whole match (prepare / run as any kernel)
  std::vector<size_t> absorbed;       // steps computed by it, besides the host
  std::vector<int> inputs;            // values it reads (-1: an absent optional input)
  int output = -1;                    // the value it writes
  std::vector<float> params;
};

struct Pattern {
  std::string_view name;
  // Whether the subgraph starting at step `host` is this pattern; fills `m` when it is.
  bool (*match)(const GraphView& g, size_t host, PatternMatch* m);
};
std::span<const Pattern> AllPatterns();

// A run context's resources. `threads` is the number of threads the provider's kernels use
// (oneDNN runs on OpenMP; the calling thread is one of them). A provider made with `engine_of`
// shares that provider's oneDNN engine (primitives made on either are interchangeable) and
// has its own stream and scratch buffers; the runtime makes one per session (the engine) and
// one per run context.
void DestroyProvider(Provider* p);
struct ProviderDeleter {
  void operator()(Provider* p) const { DestroyProvider(p); }
};
using ProviderPtr = std::unique_ptr<Provider, ProviderDeleter>;
ProviderPtr MakeProvider(int threads, const Provider* engine_of = nullptr);
// Called by the runtime at the start of every run on the running thread: sets the OpenMP thread
// count and gives every OpenMP worker the running thread's floating-point mode
// (core/float_mode.h) unless they have it already. EndRun, after the caller's mode is restored,
// gives them that mode back the same way.
void BeginRun(Provider* p);
void EndRun(Provider* p);

// Whether the convolutions write channels-last on this CPU (oneDNN's choice for an fp32 3x3
// convolution: AVX-512; with AVX2 they write 8-channel blocks). The runtime keeps views that
// only channels-last allows (the channel shuffle's Reshapes) to machines where it is native.
bool ChannelsLastNative();

// Copies `src` (layout `from`) into `dst` (same shape and byte size, layout `to`).
void ConvertLayout(const Tensor& src, Layout from, Tensor* dst, Layout to);
// The same into `dst`'s bytes (src.nbytes() of them), e.g. a slice of a larger output.
void ConvertLayoutInto(const Tensor& src, Layout from, void* dst, Layout to);

}  // namespace ferry::ops::cpu
