// fold_constants: evaluates, through Ferry's own engine, every node whose inputs are all
// constants (initializers or none), and Shape/Size of values whose shape is statically known.
// Never folds random ops, nodes with subgraphs, or results above the size limit that are
// larger than what they consume (a big Expand/Tile/ConstantOfShape stays a node).
#include <algorithm>
#include <cassert>
#include <set>

#include "passes/pass.h"
#include "runtime/session.h"

namespace ferry::passes {

namespace {

const std::set<std::string, std::less<>> kNondeterministic = {
    "RandomNormal",      "RandomUniform", "RandomNormalLike",
    "RandomUniformLike", "Bernoulli",     "Multinomial"};

bool HasSubgraph(const ir::Node& n) {
  for (const auto& a : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

ir::Node CopyNode(const ir::Node& n) {
  ir::Node c;
  c.name = n.name;
  c.op_type = n.op_type;
  c.domain = n.domain;
  c.inputs = n.inputs;
  c.outputs = n.outputs;
  for (const auto& a : n.attributes) {
    ir::Attribute b;
    b.name = a.name;
    b.type = a.type;
    b.f = a.f;
    b.i = a.i;
    b.s = a.s;
    b.t = a.t;
    b.floats = a.floats;
    b.ints = a.ints;
    b.strings = a.strings;
    b.tensors = a.tensors;
    b.tp = a.tp;
    c.attributes.push_back(std::move(b));
  }
  return c;
}

class FoldConstants final : public Pass {
 public:
  std::string_view name() const override { return "fold_constants"; }

  Result<int> RunOnGraph(GraphCtx& ctx) override {
    int changes = 0;
    for (size_t i = 0; i < ctx.graph.nodes.size();) {
      FERRY_ASSIGN_OR_RETURN(bool folded, TryFold(ctx, i));
      if (folded) {
        ++changes;
        continue;  // node i was removed; the next node moved into its place
      }
      ++i;
    }
    return changes;
  }

 private:
  // Replaces node i's outputs by initializers of the same names and removes the node; `values`
  // holds one tensor per output.
  static void Replace(GraphCtx& ctx, size_t i, std::vector<Tensor> values) {
    ir::Node& n = ctx.graph.nodes[i];
    assert(values.size() == n.outputs.size());
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty())
        ctx.graph.initializers.push_back(ir::Initializer{n.outputs[k], std::move(values[k]), ""});
    ctx.RemoveNode(i);
  }

  Result<bool> TryFold(GraphCtx& ctx, size_t i) {
    const ir::Node& n = ctx.graph.nodes[i];
    if (!n.domain.empty() || kNondeterministic.count(n.op_type) || HasSubgraph(n)) return false;
    for (const auto& o : n.outputs)
      if (!o.empty() && ctx.outer.count(o)) return false;
    if (n.op_type == "Shape" || n.op_type == "Size") return FoldShape(ctx, i);
    if (n.op_type == "Gather" || n.op_type == "Slice") {
      FERRY_ASSIGN_OR_RETURN(bool done, FoldShapePart(ctx, i));
      if (done) return true;
    }
    size_t in_bytes = 0;
    for (const auto& in : n.inputs) {
      if (in.empty()) continue;
      const Tensor* t = ctx.Constant(in);
      if (!t) return false;
      in_bytes += t->nbytes();
    }
    // Evaluate the node alone in a one-node model.
    auto m = std::make_shared<ir::Model>();
    m->ir_version = ctx.model.ir_version;
    m->opset_imports = ctx.model.opset_imports;
    m->graph.name = "fold";
    std::set<std::string> seen;
    for (const auto& in : n.inputs)
      if (!in.empty() && seen.insert(in).second)
        m->graph.initializers.push_back(ir::Initializer{in, *ctx.Constant(in), ""});
    m->graph.nodes.push_back(CopyNode(n));
    for (const auto& o : n.outputs)
      if (!o.empty()) m->graph.outputs.push_back(ir::ValueInfo{o, {}, ""});
    runtime::SessionOptions so;
    so.threads = 1;
    so.provider = "reference";  // folded values become weights: computed by the spec kernels
    // Only results up to max(limit, inputs) are kept: a larger one is refused by the budget
    // while it is sized, before it is allocated (a ConstantOfShape to 2^40 floats is not made
    // to be thrown away). Twice that, and 64 MiB, for the kernel's own temporaries.
    so.max_memory = 2 * std::max<uint64_t>(ctx.options.fold_limit_bytes, in_bytes) + (64 << 20);
    auto session = runtime::Session::Create(m, so);
    if (!session.ok()) return false;  // unsupported here: leave it to run time
    auto out = session.value()->Run({});
    if (!out.ok()) return false;  // e.g. data-dependent errors: keep the node, the runtime reports
    std::vector<Tensor> values;
    size_t out_bytes = 0;
    size_t k = 0;
    for (const auto& o : n.outputs) {
      if (o.empty()) {
        values.emplace_back();
        continue;
      }
      Value& v = out.value()[k++];
      if (!v.is_tensor()) return false;
      out_bytes += v.tensor().nbytes();
      values.push_back(v.tensor().owned() ? v.tensor() : v.tensor().Clone());
    }
    if (out_bytes > ctx.options.fold_limit_bytes && out_bytes > in_bytes) return false;
    Replace(ctx, i, std::move(values));
    return true;
  }

  Result<bool> FoldShape(GraphCtx& ctx, size_t i) {
    const ir::Node& n = ctx.graph.nodes[i];
    // One output: a Shape or Size with more is left to the engine to refuse (folding it
    // replaced the outputs past the first from a one-value list: a heap overflow).
    if (n.inputs.empty() || n.outputs.size() != 1 || n.outputs[0].empty()) return false;
    auto shape = StaticShape(ctx.graph, n.inputs[0]);
    if (!shape) return false;
    if (n.op_type == "Size") {
      return Fold1(ctx, i, Tensor::FromVector<int64_t>({NumElements(*shape)}, {}));
    }
    const int64_t r = static_cast<int64_t>(shape->size());
    int64_t start = n.attr_int("start", 0), end = n.attr_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
    std::vector<int64_t> dims;
    for (int64_t d = start; d < end; ++d) dims.push_back((*shape)[static_cast<size_t>(d)]);
    int64_t len = static_cast<int64_t>(dims.size());
    return Fold1(ctx, i, Tensor::FromVector<int64_t>(dims, {len}));
  }

  // Gather(Shape(x), k) or Slice(Shape(x), ...) reading only dims of x that are statically
  // known, though others are symbolic (a transformer's hidden size under a dynamic batch).
  Result<bool> FoldShapePart(GraphCtx& ctx, size_t i) {
    const ir::Node& n = ctx.graph.nodes[i];
    if (n.inputs.size() < 2 || n.outputs.size() != 1 || n.outputs[0].empty()) return false;
    auto p = ctx.index.Producer(n.inputs[0]);
    if (!p) return false;
    const ir::Node& shape_node = ctx.graph.nodes[*p];
    if (shape_node.op_type != "Shape" || !shape_node.domain.empty() || shape_node.inputs.empty())
      return false;
    auto dims = PartialShape(ctx.graph, shape_node.inputs[0]);
    if (!dims) return false;
    const int64_t r = static_cast<int64_t>(dims->size());
    int64_t start = shape_node.attr_int("start", 0), end = shape_node.attr_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    std::vector<std::optional<int64_t>> sv(dims->begin() + start, dims->begin() + end);
    const int64_t len = static_cast<int64_t>(sv.size());
    std::vector<int64_t> picked;
    Shape out_shape;
    if (n.op_type == "Gather") {
      const Tensor* idx = ctx.Constant(n.inputs[1]);
      if (!idx || n.attr_int("axis", 0) != 0 || idx->rank() > 1) return false;
      for (int64_t k : idx->ToInt64Vector()) {
        if (k < 0) k += len;
        if (k < 0 || k >= len || !sv[static_cast<size_t>(k)]) return false;
        picked.push_back(*sv[static_cast<size_t>(k)]);
      }
      if (idx->rank() == 1) out_shape = {static_cast<int64_t>(picked.size())};
    } else {  // Slice(data, starts, ends[, axes[, steps]]) of opset >= 10
      if (ctx.opset < 10 || n.inputs.size() < 3) return false;
      const Tensor* st = ctx.Constant(n.inputs[1]);
      const Tensor* en = ctx.Constant(n.inputs[2]);
      const Tensor* ax =
          n.inputs.size() > 3 && !n.inputs[3].empty() ? ctx.Constant(n.inputs[3]) : nullptr;
      const Tensor* sp =
          n.inputs.size() > 4 && !n.inputs[4].empty() ? ctx.Constant(n.inputs[4]) : nullptr;
      if (!st || !en || st->size() != 1 || en->size() != 1) return false;
      if (n.inputs.size() > 3 && !n.inputs[3].empty() &&
          (!ax || ax->ToInt64Vector() != std::vector<int64_t>{0}) &&
          !(ax && ax->ToInt64Vector() == std::vector<int64_t>{-1}))
        return false;
      if (n.inputs.size() > 4 && !n.inputs[4].empty() &&
          (!sp || sp->ToInt64Vector() != std::vector<int64_t>{1}))
        return false;
      int64_t b = st->ToInt64Vector()[0], e = en->ToInt64Vector()[0];
      if (b < 0) b += len;
      if (e < 0) e += len;
      b = std::clamp<int64_t>(b, 0, len);
      e = std::clamp<int64_t>(e, b, len);
      for (int64_t k = b; k < e; ++k) {
        if (!sv[static_cast<size_t>(k)]) return false;
        picked.push_back(*sv[static_cast<size_t>(k)]);
      }
      out_shape = {static_cast<int64_t>(picked.size())};
    }
    Tensor t(DType::kInt64, out_shape);
    for (size_t k = 0; k < picked.size(); ++k) t.data<int64_t>()[k] = picked[k];
    return Fold1(ctx, i, std::move(t));
  }

  static bool Fold1(GraphCtx& ctx, size_t i, Tensor t) {
    std::vector<Tensor> v;
    v.push_back(std::move(t));
    Replace(ctx, i, std::move(v));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFoldConstants() {
  return std::make_unique<FoldConstants>();
}

}  // namespace ferry::passes
