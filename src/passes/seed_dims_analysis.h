// The analysis behind seed_dims.h, shared by its two files: seed_dims.cc (following the
// dynamic input dims through a graph, choosing the sizes) and seed_dims_ops.cc (what each op
// does to a dim and asks of it). Not for other users.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "passes/seed_dims.h"

namespace ferry::passes::seed_dims {

// How a tensor dim follows from a dynamic input dim v: v + add, v scaled (Resize), or a
// sliding window (Conv, pooling) over it.
struct Step {
  enum class Kind { kAdd, kScale, kWindow } kind = Kind::kAdd;
  int64_t add = 0;                       // kAdd
  double scale = 1;                      // kScale: floor(v * scale)
  int64_t pads = 0, dk = 1, stride = 1;  // kWindow: pads both ends, dilated kernel
  bool same = false, ceil = false;       // kWindow: auto_pad SAME_*, ceil_mode
};

// v through `steps`; -1 once a window does not fit.
int64_t Eval(const std::vector<Step>& steps, int64_t v);

inline constexpr int64_t kMaxDim = int64_t{1} << 24;

// Smallest v in [1, kMaxDim] with Eval(steps, v) >= need (Eval is non-decreasing in v); 0 when
// there is none.
int64_t MinFor(const std::vector<Step>& steps, int64_t need);

struct Carry {
  size_t key = 0;
  std::vector<Step> steps;
};
// One dim of a tracked tensor: a known size, a function of a dynamic input dim, or neither.
struct Axis {
  std::optional<int64_t> known;
  std::optional<Carry> carry;
};
using Info = std::vector<Axis>;

// A dynamic input dim (all dims sharing a symbol are one key) and what the graph asks of it.
struct Key {
  std::string name;  // "x axis 2", or "x axis 0 ('batch')"
  std::optional<int64_t> given, exact;
  std::string exact_why;
  int64_t min = 1;
  std::string min_why;
  // Two functions of the dim that must be equal (a Concat of a downsampled-then-upsampled
  // branch with a skip connection): the dim must be one where they agree.
  std::vector<std::pair<std::vector<Step>, std::vector<Step>>> equal;
  std::vector<std::pair<std::vector<Step>, int64_t>> at_least;  // Eval(steps, v) >= need
  std::string equal_why;
};

inline Axis Known(int64_t v) {
  Axis a;
  a.known = v;
  return a;
}

// A dim_param that names nothing: paddle2onnx writes "?" for every unknown dim.
bool Anonymous(const std::string& symbol);

class Analysis {
 public:
  explicit Analysis(const ir::Graph& g) : g_(g) {}

  // Follows the dynamic input dims of `g` (whose real inputs are those of the graph the dims
  // are chosen for) and adds what its nodes need to the keys.
  void Follow(const ir::Graph& g, const std::map<std::string, Shape>& given);
  // The dims of the real inputs of the first graph, from every graph's needs.
  SeedDims Choose(const std::map<std::string, Shape>& given);

 private:
  // The key of dynamic dim `axis` of `input`: one per symbol, else one per input axis.
  size_t KeyOf(const std::string& input, size_t axis, const std::string& symbol);
  void Const(const std::string& name, const Tensor& t);
  const Info* Find(const ir::Node& n, size_t k) const;
  std::optional<std::vector<int64_t>> Ints(const ir::Node& n, size_t k) const;
  // Integers from attribute `attr` (older opsets) or constant input `k`.
  std::optional<std::vector<int64_t>> IntsOf(const ir::Node& n, const char* attr, size_t k) const;
  void Set(const ir::Node& n, size_t k, Info info);
  void RequireMin(const Carry& c, int64_t need, const std::string& why);
  void RequireExact(const Carry& c, int64_t d, const std::string& why);
  static bool SameSteps(const Carry& a, const Carry& b);
  // Two dims that must be equal (a broadcast of non-1 sizes, Concat's other axes, a MatMul's
  // K): a known one fixes a carried one. Returns the merged dim.
  Axis Unify(const Axis& a, const Axis& b, const ir::Node& n);
  // The nodes of `g` and of their subgraphs (If/Loop bodies read outer values by name; their
  // own initializers are constants like the main graph's).
  void Walk(const ir::Graph& g);
  // One node: dispatches to the rules below (seed_dims_ops.cc) by op type.
  void Node(const ir::Node& n);
  void Broadcast(const ir::Node& n);
  void Window(const ir::Node& n, bool conv);
  void MatMul(const ir::Node& n);
  void Gemm(const ir::Node& n);
  void Pad(const ir::Node& n);
  void Transpose(const ir::Node& n);
  void Squeeze(const ir::Node& n, bool unsqueeze);
  // A Reshape to a constant shape without -1 fixes the one carried dim of its input: the
  // element counts must agree.
  void Reshape(const ir::Node& n);
  void Concat(const ir::Node& n);
  // Constant scales (Resize opset 11+: input 2; Resize 10 / Upsample: input 1 or attribute
  // `scales`) scale each dim; constant sizes fix them.
  void Resize(const ir::Node& n);
  // X [seq, batch, input] (layout 0): the input size is W's last dim.
  void Recurrent(const ir::Node& n);

  const ir::Graph& g_;  // the graph whose inputs get the dims
  std::map<std::string, const Tensor*> consts_;
  std::map<std::string, Info> info_;
  std::vector<Key> keys_;
  std::map<std::string, size_t> key_ids_;  // symbol, or "input\naxis" for anonymous dims
};

}  // namespace ferry::passes::seed_dims
