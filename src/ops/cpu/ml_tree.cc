// cpu kernel: ai.onnx.ml tree ensembles (TreeEnsembleClassifier, TreeEnsembleRegressor,
// TreeEnsemble) on float32 X, laid out for batched traversal.
//
// The validated model (ops/reference/ml_tree.h) is packed once per session (PackCache): each
// tree's nodes contiguous as 16-byte {threshold, feature, true child, false child} records with
// tree-relative child indices; a leaf points to itself (feature 0, threshold NaN, so every
// comparison sends it back), so rows that reached their leaf can keep stepping. Rows run in
// blocks of 64 (each block's rows stay in L1 across the trees); per tree, 8 rows descend in
// lockstep with branch-free selects (no mispredicted branches, 8 independent loads in flight)
// until all 8 are at their leaves (at most the tree's depth in steps).
// Leaf weights are accumulated in double, tree after tree, and finished by the reference's
// FinishRow: the outputs are bit-identical to the reference kernel's.
//
// Declines (the node then runs its reference kernel): X not float32 or not plain, branch modes
// other than one of LEQ / LT / GTE / GT for the whole ensemble (EQ, NEQ, set membership), a
// threshold a float cannot hold exactly (double `nodes_values_as_tensor`), trees deeper than 64.
#include <cmath>
#include <limits>
#include <tuple>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/reference/ml_tree.h"

namespace ferry::ops::cpu {

namespace {

using ml::TreeModel;

constexpr int64_t kBlock = 64;  // rows per block
constexpr int kLanes = 8;       // rows descending one tree together
constexpr int32_t kMaxDepth = 64;

struct PNode {
  float threshold;
  int32_t feature;
  int32_t next[2];  // [false, true], relative to the tree's first node
};
static_assert(sizeof(PNode) == 16);

struct PackedForest {
  std::shared_ptr<const TreeModel> model;
  std::vector<PNode> nodes;
  std::vector<int32_t> tree_begin, tree_depth;  // per tree
  std::vector<int32_t> leaf_of;                 // packed node -> model node (leaves)
  uint8_t mode = ml::kLeq;
  bool missing = false;               // some node sends NaN to its true branch
  bool ok = false;                    // false: the kernel declines this model
  std::vector<uint8_t> missing_true;  // per packed node
  // Leaves with a single weight under SUM / AVERAGE: its target (else -1) and value, added in
  // place of the reference's AddLeaf (the same double addition).
  std::vector<int32_t> leaf_target;
  std::vector<double> leaf_weight;
  size_t bytes() const { return nodes.size() * (sizeof(PNode) + 16) + missing_true.size(); }
};

std::shared_ptr<const PackedForest> Pack(std::shared_ptr<const TreeModel> m) {
  auto p = std::make_shared<PackedForest>();
  p->model = m;
  bool first = true;
  for (const auto& n : m->nodes) {
    if (n.mode == ml::kLeaf) continue;
    if (n.mode > ml::kGt) return p;  // EQ, NEQ, MEMBER: declined
    if (first) p->mode = n.mode;
    if (n.mode != p->mode) return p;
    first = false;
    if (static_cast<double>(static_cast<float>(n.threshold)) != n.threshold) return p;
  }
  if (m->max_depth > kMaxDepth) return p;
  p->missing = m->has_missing;
  // Each tree's nodes in depth-first order from its root (shared subtrees are copied).
  std::vector<int32_t> stack;
  for (int32_t root : m->roots) {
    const int32_t begin = static_cast<int32_t>(p->nodes.size());
    p->tree_begin.push_back(begin);
    int32_t depth = 0;
    // (model node, packed slot, depth)
    std::vector<std::tuple<int32_t, int32_t, int32_t>> todo;
    auto place = [&](int32_t mi) {
      p->nodes.push_back({});
      p->leaf_of.push_back(mi);
      p->missing_true.push_back(0);
      const TreeModel::Node& n = m->nodes[static_cast<size_t>(mi)];
      const bool single =
          n.mode == ml::kLeaf && n.next_false == 1 &&
          (m->aggregate == ml::Aggregate::kSum || m->aggregate == ml::Aggregate::kAverage);
      p->leaf_target.push_back(single ? m->weight_target[static_cast<size_t>(n.next_true)] : -1);
      p->leaf_weight.push_back(single ? m->weight_value[static_cast<size_t>(n.next_true)] : 0.0);
      return static_cast<int32_t>(p->nodes.size()) - 1;
    };
    todo.emplace_back(root, place(root), 0);
    while (!todo.empty()) {
      // Trees sharing subtrees are copied apart; a model that would grow past 4x is declined.
      if (p->nodes.size() > 4 * m->nodes.size() + 16) return std::make_shared<PackedForest>();
      auto [mi, slot, d] = todo.back();
      todo.pop_back();
      const TreeModel::Node& n = m->nodes[static_cast<size_t>(mi)];
      PNode& pn = p->nodes[static_cast<size_t>(slot)];
      if (n.mode == ml::kLeaf) {
        pn = {std::numeric_limits<float>::quiet_NaN(), 0, {slot - begin, slot - begin}};
        depth = std::max(depth, d);
        continue;
      }
      pn.threshold = static_cast<float>(n.threshold);
      pn.feature = n.feature;
      p->missing_true[static_cast<size_t>(slot)] = n.missing_true;
      const int32_t t = place(n.next_true), f = place(n.next_false);
      PNode& pn2 = p->nodes[static_cast<size_t>(slot)];  // place() may have moved the vector
      pn2.next[1] = t - begin;
      pn2.next[0] = f - begin;
      todo.emplace_back(n.next_true, t, d + 1);
      todo.emplace_back(n.next_false, f, d + 1);
    }
    p->tree_depth.push_back(depth);
  }
  p->ok = true;
  return p;
}

template <uint8_t Mode>
inline bool Cmp(float x, float t) {
  if constexpr (Mode == ml::kLeq) return x <= t;
  if constexpr (Mode == ml::kLt) return x < t;
  if constexpr (Mode == ml::kGte) return x >= t;
  return x > t;
}

// Scores of rows [b, e) into s (n_targets per row), tree by tree.
template <uint8_t Mode, bool Missing>
void Accumulate(const PackedForest& p, const float* x, int64_t c, int64_t b, int64_t e,
                ml::TreeScore* s) {
  const TreeModel& m = *p.model;
  const int64_t nt = m.n_targets;
  const size_t ntrees = p.tree_begin.size();
  for (size_t t = 0; t < ntrees; ++t) {
    const PNode* nodes = p.nodes.data() + p.tree_begin[t];
    const uint8_t* miss = p.missing_true.data() + p.tree_begin[t];
    const int32_t* leaf_of = p.leaf_of.data() + p.tree_begin[t];
    const int32_t* leaf_target = p.leaf_target.data() + p.tree_begin[t];
    const double* leaf_weight = p.leaf_weight.data() + p.tree_begin[t];
    const int32_t depth = p.tree_depth[t];
    for (int64_t r0 = b; r0 < e; r0 += kLanes) {
      const int lanes = static_cast<int>(std::min<int64_t>(kLanes, e - r0));
      int32_t idx[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
      const float* rows[kLanes];
      for (int k = 0; k < kLanes; ++k) rows[k] = x + (r0 + std::min(k, lanes - 1)) * c;
      for (int32_t d = 0; d < depth; ++d) {
        bool moved = false;  // some lane is not at its leaf yet (a leaf points to itself)
#pragma GCC unroll 8
        for (int k = 0; k < kLanes; ++k) {
          const PNode& n = nodes[idx[k]];
          const float v = rows[k][n.feature];
          bool go = Cmp<Mode>(v, n.threshold);
          if constexpr (Missing) go |= (miss[idx[k]] != 0) & std::isnan(v);
          const int32_t next = n.next[go];
          moved |= next != idx[k];
          idx[k] = next;
        }
        if (!moved) break;
      }
      for (int k = 0; k < lanes; ++k) {
        const int32_t target = leaf_target[idx[k]];
        if (target >= 0) {
          ml::TreeScore& sc = s[(r0 - b + k) * nt + target];
          sc.v += leaf_weight[idx[k]];
          sc.has = true;
        } else {
          ml::AddLeaf(m, leaf_of[idx[k]], s + (r0 - b + k) * nt);
        }
      }
    }
  }
}

using AccumulateFn = void (*)(const PackedForest&, const float*, int64_t, int64_t, int64_t,
                              ml::TreeScore*);

AccumulateFn PickAccumulate(const PackedForest& p) {
  switch (p.mode) {
    case ml::kLeq:
      return p.missing ? Accumulate<ml::kLeq, true> : Accumulate<ml::kLeq, false>;
    case ml::kLt:
      return p.missing ? Accumulate<ml::kLt, true> : Accumulate<ml::kLt, false>;
    case ml::kGte:
      return p.missing ? Accumulate<ml::kGte, true> : Accumulate<ml::kGte, false>;
    default:
      return p.missing ? Accumulate<ml::kGt, true> : Accumulate<ml::kGt, false>;
  }
}

struct TreeKernelState : KernelState {
  StateKey key;
  std::vector<OpContext::Declared> decl;
  std::shared_ptr<const PackedForest> forest;
};

Status PrepareTree(OpContext& ctx, NodeSlot& slot) {
  if (!ctx.input_is_tensor(0) || ctx.input(0).dtype() != DType::kFloat ||
      slot.in_layouts[0] != Layout::kPlain) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<TreeKernelState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 1));
    auto fresh = std::make_unique<TreeKernelState>();
    fresh->key = std::move(key);
    fresh->decl = std::move(decl);
    Status built = Status::Ok();
    fresh->forest = slot.packs->Get<PackedForest>(&ctx.node(), "ml_tree",
                                                  [&]() -> std::shared_ptr<const PackedForest> {
                                                    auto m = ml::BuildTreeModel(ctx);
                                                    if (!m.ok()) {
                                                      built = m.status();
                                                      return nullptr;
                                                    }
                                                    return Pack(std::move(m).value());
                                                  });
    FERRY_RETURN_IF_ERROR(built);
    slot.state = std::move(fresh);
    st = static_cast<TreeKernelState*>(slot.state.get());
  }
  if (!st->forest || !st->forest->ok) {
    slot.declined = true;
    return Status::Ok();
  }
  for (size_t k = 0; k < st->decl.size(); ++k)
    if (st->decl[k].set) ctx.set_output(k, st->decl[k].dtype, st->decl[k].shape);
  slot.out_layouts.assign(ctx.num_outputs(), Layout::kPlain);
  return Status::Ok();
}

void RunTree(OpContext& ctx, NodeSlot& slot) {
  const auto* st = static_cast<const TreeKernelState*>(slot.state.get());
  const PackedForest& p = *st->forest;
  const TreeModel& m = *p.model;
  const Tensor& x = ctx.input(0);
  const int64_t n = x.rank() == 1 ? 1 : x.dim(0), c = x.rank() == 1 ? x.dim(0) : x.dim(1);
  const int64_t nt = m.n_targets;
  const bool clf = m.classifier;
  float* z =
      clf ? (ctx.num_outputs() > 1 && ctx.has_output(1) ? ctx.output(1).data<float>() : nullptr)
          : ctx.output(0).data<float>();
  Tensor* labels = clf ? &ctx.output(0) : nullptr;
  const AccumulateFn acc = PickAccumulate(p);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // Split over threads only when the work is worth a parallel region (~1 us per 100 nodes).
  const int64_t work =
      n * static_cast<int64_t>(p.tree_begin.size()) * std::max<int32_t>(1, m.max_depth);
  auto body = [&](int64_t bb, int64_t be) {
    std::vector<ml::TreeScore> s(static_cast<size_t>(kBlock * nt));
    std::vector<float> row(static_cast<size_t>(std::max<int64_t>(nt, 2)));
    for (int64_t blk = bb; blk < be; ++blk) {
      const int64_t b = blk * kBlock, e = std::min(n, b + kBlock);
      for (int64_t i = 0; i < (e - b); ++i) ml::ResetScores(m, s.data() + i * nt);
      acc(p, x.data<float>(), c, b, e, s.data());
      for (int64_t i = b; i < e; ++i) {
        int64_t label = 0;
        ml::FinishRow(m, s.data() + (i - b) * nt, row.data(), &label);
        if (labels) ml::WriteLabel(m.labels, label, *labels, i);
        if (z) std::copy(row.begin(), row.begin() + nt, z + i * nt);
      }
    }
  };
  if (work >= (int64_t{1} << 16))
    ParallelRange(blocks, 1, body);
  else
    body(0, blocks);
}

constexpr KernelDef kKernels[] = {
    {ml::kDomain, "TreeEnsembleClassifier", 1, 1000, nullptr, 0, 0, PrepareTree, RunTree},
    {ml::kDomain, "TreeEnsembleRegressor", 1, 1000, nullptr, 0, 0, PrepareTree, RunTree},
    {ml::kDomain, "TreeEnsemble", 5, 1000, nullptr, 0, 0, PrepareTree, RunTree},
};

}  // namespace

std::span<const KernelDef> MlTreeKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
