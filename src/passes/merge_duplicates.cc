// merge_duplicates: initializers with identical dtype, shape and bytes become one; nodes with
// the same op, inputs and attributes (common subexpressions; never random ops or nodes with
// subgraphs) become one.
#include <cstring>
#include <map>
#include <set>

#include "core/sha256.h"
#include "passes/pass.h"

namespace ferry::passes {

namespace {

bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() == DType::kString) {
    for (int64_t i = 0; i < a.size(); ++i)
      if (a.data<std::string>()[i] != b.data<std::string>()[i]) return false;
    return true;
  }
  // memcmp must not see the null pointers of empty storage, even with a zero length.
  return a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool SameAttr(const ir::Attribute& a, const ir::Attribute& b) {
  if (a.name != b.name || a.type != b.type || a.f != b.f || a.i != b.i || a.s != b.s ||
      a.ints != b.ints || a.strings != b.strings || a.g || b.g || !a.graphs.empty() ||
      !b.graphs.empty())
    return false;
  if (a.floats.size() != b.floats.size() ||
      (!a.floats.empty() &&
       std::memcmp(a.floats.data(), b.floats.data(), a.floats.size() * sizeof(float)) != 0))
    return false;
  if (a.t.defined() != b.t.defined() || (a.t.defined() && !SameTensor(a.t, b.t))) return false;
  if (a.tensors.size() != b.tensors.size()) return false;
  for (size_t k = 0; k < a.tensors.size(); ++k)
    if (!SameTensor(a.tensors[k], b.tensors[k])) return false;
  return true;
}

const std::set<std::string, std::less<>> kNoMerge = {"RandomNormal",     "RandomUniform",
                                                     "RandomNormalLike", "RandomUniformLike",
                                                     "Bernoulli",        "Multinomial"};

// "[batch,sequence,256]" when every dim of `name` is known or a named symbol; "" otherwise.
// Values with equal such shapes have equal Shape() results (ONNX shape inference gives one
// symbol one value, its generated unk__N symbols included).
std::string SymbolicShapeKey(const ir::Graph& g, const std::string& name) {
  for (const auto* list : {&g.inputs, &g.value_info, &g.outputs})
    for (const auto& v : *list) {
      if (v.name != name) continue;
      if (v.type.kind != ir::TypeInfo::Kind::kTensor || !v.type.shape) return "";
      std::string key = "[";
      for (const auto& d : *v.type.shape) {
        if (!d.value && d.symbol.empty()) return "";
        key += (d.value ? std::to_string(*d.value) : "$" + d.symbol) + ",";
      }
      return key + "]";
    }
  return "";
}

class MergeDuplicates final : public Pass {
 public:
  std::string_view name() const override { return "merge_duplicates"; }

  Result<int> RunOnGraph(GraphCtx& ctx) override {
    int changes = MergeInitializers(ctx);
    changes += MergeNodes(ctx);
    return changes;
  }

 private:
  static int MergeInitializers(GraphCtx& ctx) {
    ir::Graph& g = ctx.graph;
    std::map<std::string, std::vector<size_t>> by_hash;  // dtype+shape+digest -> initializers
    int changes = 0;
    for (size_t k = 0; k < g.initializers.size(); ++k) {
      const ir::Initializer& in = g.initializers[k];
      if (!ctx.IsConstant(in.name) || ctx.index.graph_outputs.count(in.name) ||
          in.tensor.dtype() == DType::kString)
        continue;
      Sha256 h;
      h.Update(in.tensor.raw(), in.tensor.nbytes());
      std::string key = fmt::format("{}{}", static_cast<int>(in.tensor.dtype()),
                                    ShapeToString(in.tensor.shape())) +
                        h.HexDigest();
      auto& list = by_hash[key];
      bool merged = false;
      for (size_t j : list) {
        if (SameTensor(g.initializers[j].tensor, in.tensor)) {
          RenameReads(g, in.name, g.initializers[j].name);
          merged = true;
          ++changes;
          break;
        }
      }
      if (!merged) list.push_back(k);
    }
    if (changes) ctx.Reindex();  // the unread copies go in eliminate_dead
    return changes;
  }

  static int MergeNodes(GraphCtx& ctx) {
    int changes = 0;
    ir::Graph& g = ctx.graph;
    std::map<std::string, std::vector<size_t>> by_key;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const ir::Node& n = g.nodes[i];
      if (kNoMerge.count(n.op_type) || !n.domain.empty() || n.outputs.empty()) continue;
      std::string key = n.op_type;
      std::string sym =
          n.op_type == "Shape" && n.inputs.size() == 1 ? SymbolicShapeKey(g, n.inputs[0]) : "";
      if (!sym.empty())
        key += "|shape-of" + sym;  // Shape of any value with this (symbolic) shape
      else
        for (const auto& in : n.inputs) key += "|" + in;
      key += "#" + std::to_string(n.outputs.size());
      auto& list = by_key[key];
      bool merged = false;
      for (size_t j : list) {
        const ir::Node& m = g.nodes[j];
        if (m.attributes.size() != n.attributes.size()) continue;
        bool same = true;
        for (size_t a = 0; a < n.attributes.size() && same; ++a) {
          // Attributes may be listed in any order.
          const ir::Attribute* other = m.attr(n.attributes[a].name);
          same = other && SameAttr(n.attributes[a], *other);
        }
        if (!same) continue;
        // Forward every output of n to m's; n becomes dead (eliminate_dead removes it).
        bool ok = true;
        for (size_t k = 0; k < n.outputs.size(); ++k)
          if (!n.outputs[k].empty() &&
              (m.outputs[k].empty() || ctx.index.graph_outputs.count(n.outputs[k])))
            ok = false;
        if (!ok) continue;
        for (size_t k = 0; k < n.outputs.size(); ++k)
          if (!n.outputs[k].empty()) RenameReads(g, n.outputs[k], m.outputs[k]);
        merged = true;
        ++changes;
        break;
      }
      if (!merged) list.push_back(i);
    }
    if (changes) ctx.Reindex();
    return changes;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeMergeDuplicates() {
  return std::make_unique<MergeDuplicates>();
}

}  // namespace ferry::passes
