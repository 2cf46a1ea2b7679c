// matmul_add_to_gemm: MatMul(A, B) + C -> Gemm(A, B, C) when A is statically 2-D, B is a
// constant [K, N] float matrix and C a constant of shape [N], [1, N] or a scalar. (With A of
// rank > 2 ONNX's Gemm does not apply; the pair stays for the runtime to fuse.)
#include "passes/pass.h"

namespace ferry::passes {

namespace {

class MatMulAddToGemm final : public Pass {
 public:
  std::string_view name() const override { return "matmul_add_to_gemm"; }
  std::vector<std::string_view> targets() const override { return {"Add"}; }

  struct Match {
    size_t matmul;
    int bias_side;
  };

  std::optional<Match> Find(const GraphCtx& ctx, size_t i) const {
    const ir::Node& add = ctx.graph.nodes[i];
    if (add.inputs.size() != 2) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const std::string& y = add.inputs[static_cast<size_t>(1 - side)];
      const Tensor* c = ctx.Constant(add.inputs[static_cast<size_t>(side)]);
      if (!c || c->dtype() != DType::kFloat || !ctx.index.SingleUse(y)) continue;
      auto p = ctx.index.Producer(y);
      if (!p) continue;
      const ir::Node& mm = ctx.graph.nodes[*p];
      if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2) continue;
      const Tensor* b = ctx.Constant(mm.inputs[1]);
      auto a_shape = StaticShape(ctx.graph, mm.inputs[0]);
      if (!b || b->dtype() != DType::kFloat || b->rank() != 2 || !a_shape || a_shape->size() != 2)
        continue;
      if (KnownType(ctx.graph, mm.inputs[0]) != DType::kFloat) continue;
      const int64_t n = b->dim(1);
      const Shape& cs = c->shape();
      bool ok = c->size() == 1
                    ? cs.size() <= 2
                    : (c->size() == n && (cs.size() == 1 || (cs.size() == 2 && cs[0] == 1)));
      if (!ok) continue;
      return Match{*p, side};
    }
    return std::nullopt;
  }

  bool match(const GraphCtx& ctx, size_t i) const override { return Find(ctx, i).has_value(); }

  Status apply(GraphCtx& ctx, size_t i) override {
    Match m = *Find(ctx, i);
    ir::Node& mm = ctx.graph.nodes[m.matmul];
    const ir::Node& add = ctx.graph.nodes[i];
    mm.op_type = "Gemm";
    mm.inputs.push_back(add.inputs[static_cast<size_t>(m.bias_side)]);
    mm.outputs[0] = add.outputs[0];
    ctx.RemoveNode(i);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Pass> MakeMatMulAddToGemm() {
  return std::make_unique<MatMulAddToGemm>();
}

}  // namespace ferry::passes
