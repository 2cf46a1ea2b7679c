// Reference kernels: ai.onnx.ml tree ensembles — TreeEnsembleClassifier and
// TreeEnsembleRegressor (opsets 1 and 3: `*_as_tensor` double attributes), TreeEnsemble
// (opset 5: tensor attributes, leaves apart from branch nodes, set membership). The validated
// model (ml_tree.h) is built once per prepare and kept as the node's state; run walks each row
// down every tree.
#include "ops/reference/ml_tree.h"

#include <unordered_map>

namespace ferry::ops {
namespace ml {

namespace {

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const {
    return std::hash<int64_t>()(p.first) * 1000003u ^ std::hash<int64_t>()(p.second);
  }
};

Result<NodeMode> ParseMode(const OpContext& ctx, const std::string& s, size_t i) {
  if (s == "BRANCH_LEQ") return kLeq;
  if (s == "BRANCH_LT") return kLt;
  if (s == "BRANCH_GTE") return kGte;
  if (s == "BRANCH_GT") return kGt;
  if (s == "BRANCH_EQ") return kEq;
  if (s == "BRANCH_NEQ") return kNeq;
  if (s == "LEAF") return kLeaf;
  return NodeError(ctx,
                   "nodes_modes[{}] = '{}', expected BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, "
                   "BRANCH_EQ, BRANCH_NEQ or LEAF",
                   i, s);
}

Result<Aggregate> ParseAggregate(const OpContext& ctx) {
  const std::string s = ctx.attr_string("aggregate_function", "SUM");
  if (s == "SUM") return Aggregate::kSum;
  if (s == "AVERAGE") return Aggregate::kAverage;
  if (s == "MIN") return Aggregate::kMin;
  if (s == "MAX") return Aggregate::kMax;
  return NodeError(ctx, "aggregate_function '{}' is not one of AVERAGE, SUM, MIN, MAX", s);
}

// Checks every tree is acyclic (each root's descendants) and records the longest path.
Status CheckAcyclic(const OpContext& ctx, TreeModel* m) {
  const size_t n = m->nodes.size();
  std::vector<uint8_t> color(n, 0);  // 0 unseen, 1 on the current path, 2 done
  std::vector<int32_t> depth(n, 0);  // branches below the node (done nodes)
  std::vector<std::pair<int32_t, int>> stack;
  for (int32_t r : m->roots) {
    if (color[static_cast<size_t>(r)] == 2) continue;
    stack.push_back({r, 0});
    color[static_cast<size_t>(r)] = 1;
    while (!stack.empty()) {
      auto& [i, step] = stack.back();
      const TreeModel::Node& nd = m->nodes[static_cast<size_t>(i)];
      if (nd.mode == kLeaf || step == 2) {
        if (nd.mode != kLeaf)
          depth[static_cast<size_t>(i)] = 1 + std::max(depth[static_cast<size_t>(nd.next_true)],
                                                       depth[static_cast<size_t>(nd.next_false)]);
        color[static_cast<size_t>(i)] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t c = step == 0 ? nd.next_true : nd.next_false;
      ++step;
      if (color[static_cast<size_t>(c)] == 1)
        return NodeError(
            ctx, "the trees have a cycle through node index {} (a branch leads back to it)", c);
      if (color[static_cast<size_t>(c)] == 0) {
        color[static_cast<size_t>(c)] = 1;
        stack.push_back({c, 0});
      }
    }
  }
  for (int32_t r : m->roots) m->max_depth = std::max(m->max_depth, depth[static_cast<size_t>(r)]);
  return Status::Ok();
}

void Finalize(TreeModel* m) {
  for (const auto& nd : m->nodes) {
    if (nd.mode == kLeaf) continue;
    m->max_feature = std::max<int64_t>(m->max_feature, nd.feature);
    m->has_member |= nd.mode == kMember;
    m->has_missing |= nd.missing_true;
  }
}

// TreeEnsembleClassifier / TreeEnsembleRegressor (opsets 1 and 3).
Result<std::shared_ptr<const TreeModel>> BuildV3(const OpContext& ctx) {
  auto m = std::make_shared<TreeModel>();
  const bool clf = ctx.node().op_type == "TreeEnsembleClassifier";
  m->classifier = clf;
  FERRY_ASSIGN_OR_RETURN(m->post, ReadPostTransform(ctx));
  if (!clf) {
    FERRY_ASSIGN_OR_RETURN(m->aggregate, ParseAggregate(ctx));
  }

  const auto tree_ids = ctx.attr_ints("nodes_treeids");
  const auto node_ids = ctx.attr_ints("nodes_nodeids");
  const auto features = ctx.attr_ints("nodes_featureids");
  const auto true_ids = ctx.attr_ints("nodes_truenodeids");
  const auto false_ids = ctx.attr_ints("nodes_falsenodeids");
  const auto missing = ctx.attr_ints("nodes_missing_value_tracks_true");
  const auto modes = ctx.node().attr_strings("nodes_modes");
  FERRY_ASSIGN_OR_RETURN(auto values, ReadFloatsOrTensor(ctx, "nodes_values"));
  const size_t n = tree_ids.size();
  if (n >= static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2))
    return NodeUnsupported(ctx, "{} tree nodes are too many", n);
  auto same = [&](std::string_view name, size_t got, bool optional) -> Status {
    if (got == n || (optional && got == 0)) return Status::Ok();
    return NodeError(ctx, "{} has {} entries, expected {} (one per node, as nodes_treeids)", name,
                     got, n);
  };
  FERRY_RETURN_IF_ERROR(same("nodes_nodeids", node_ids.size(), false));
  FERRY_RETURN_IF_ERROR(same("nodes_featureids", features.size(), false));
  FERRY_RETURN_IF_ERROR(same("nodes_truenodeids", true_ids.size(), false));
  FERRY_RETURN_IF_ERROR(same("nodes_falsenodeids", false_ids.size(), false));
  FERRY_RETURN_IF_ERROR(same("nodes_missing_value_tracks_true", missing.size(), true));
  FERRY_RETURN_IF_ERROR(same("nodes_modes", modes.size(), false));
  FERRY_RETURN_IF_ERROR(same("nodes_values", values ? values->size() : 0, false));

  std::unordered_map<std::pair<int64_t, int64_t>, int32_t, PairHash> index;
  index.reserve(n);
  std::unordered_map<int64_t, bool> seen_tree;
  m->nodes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!index.emplace(std::make_pair(tree_ids[i], node_ids[i]), static_cast<int32_t>(i)).second)
      return NodeError(ctx, "node {} of tree {} appears twice (nodes_nodeids[{}])", node_ids[i],
                       tree_ids[i], i);
    if (seen_tree.emplace(tree_ids[i], true).second) m->roots.push_back(static_cast<int32_t>(i));
    TreeModel::Node& nd = m->nodes[i];
    FERRY_ASSIGN_OR_RETURN(NodeMode mode, ParseMode(ctx, modes[i], i));
    nd.mode = mode;
    nd.threshold = (*values)[i];
    nd.missing_true = !missing.empty() && missing[i] != 0;
    if (mode != kLeaf) {
      if (features[i] < 0 || features[i] >= std::numeric_limits<int32_t>::max())
        return NodeError(ctx, "nodes_featureids[{}] = {}, expected >= 0", i, features[i]);
      nd.feature = static_cast<int32_t>(features[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    TreeModel::Node& nd = m->nodes[i];
    if (nd.mode == kLeaf) continue;
    for (int side = 0; side < 2; ++side) {
      const int64_t id = side == 0 ? true_ids[i] : false_ids[i];
      auto it = index.find({tree_ids[i], id});
      if (it == index.end())
        return NodeError(ctx, "{}[{}] = {}, expected a node id of tree {}",
                         side == 0 ? "nodes_truenodeids" : "nodes_falsenodeids", i, id,
                         tree_ids[i]);
      if (it->second == static_cast<int32_t>(i))
        return NodeError(ctx, "{}[{}] = {}: node {} of tree {} branches to itself",
                         side == 0 ? "nodes_truenodeids" : "nodes_falsenodeids", i, id, node_ids[i],
                         tree_ids[i]);
      (side == 0 ? nd.next_true : nd.next_false) = it->second;
    }
  }

  // Targets / class votes.
  const std::string p = clf ? "class_" : "target_";
  const auto t_ids = ctx.attr_ints(p + "ids");
  const auto t_nodes = ctx.attr_ints(p + "nodeids");
  const auto t_trees = ctx.attr_ints(p + "treeids");
  FERRY_ASSIGN_OR_RETURN(auto t_weights, ReadFloatsOrTensor(ctx, p + "weights"));
  const size_t nw = t_ids.size();
  if (t_nodes.size() != nw || t_trees.size() != nw || (t_weights ? t_weights->size() : 0) != nw)
    return NodeError(ctx,
                     "{}ids, {}nodeids, {}treeids and {}weights have {}, {}, {} and {} entries, "
                     "expected the same count",
                     p, p, p, p, nw, t_nodes.size(), t_trees.size(),
                     t_weights ? t_weights->size() : 0);
  if (clf) {
    FERRY_ASSIGN_OR_RETURN(m->labels, ReadClassLabels(ctx, "classlabels_int64s"));
    m->n_targets = m->labels.size();
  } else {
    m->n_targets = ctx.attr_int("n_targets", 1);
    if (m->n_targets <= 0 || m->n_targets > (int64_t{1} << 24))
      return NodeError(ctx, "n_targets = {}, expected 1 to 2^24", m->n_targets);
  }
  if (clf && m->n_targets < 2)
    return NodeUnsupported(ctx, "{} class label, expected at least 2", m->n_targets);
  std::vector<int32_t> count(n, 0), leaf_of(nw, -1);
  std::vector<bool> classes_used(static_cast<size_t>(m->n_targets), false);
  int64_t n_used = 0;
  for (size_t k = 0; k < nw; ++k) {
    if (t_ids[k] < 0 || t_ids[k] >= m->n_targets)
      return NodeError(ctx, "{}ids[{}] = {}, expected 0 to {}", p, k, t_ids[k], m->n_targets - 1);
    auto it = index.find({t_trees[k], t_nodes[k]});
    if (it == index.end())
      return NodeError(ctx, "{}nodeids[{}] = {} with {}treeids[{}] = {} names no node", p, k,
                       t_nodes[k], p, k, t_trees[k]);
    // A weight on a branch node is ignored, as ONNX Runtime does (old onnxmltools wrote some).
    if (m->nodes[static_cast<size_t>(it->second)].mode != kLeaf) continue;
    leaf_of[k] = it->second;
    ++count[static_cast<size_t>(it->second)];
    if (!classes_used[static_cast<size_t>(t_ids[k])]) {
      classes_used[static_cast<size_t>(t_ids[k])] = true;
      ++n_used;
    }
    if ((*t_weights)[k] < 0) m->weights_all_positive = false;
  }
  int32_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    if (m->nodes[i].mode != kLeaf) continue;
    m->nodes[i].next_true = next;
    m->nodes[i].next_false = 0;
    next += count[i];
  }
  m->weight_target.resize(static_cast<size_t>(next));
  m->weight_value.resize(static_cast<size_t>(next));
  for (size_t k = 0; k < nw; ++k) {
    if (leaf_of[k] < 0) continue;
    TreeModel::Node& leaf = m->nodes[static_cast<size_t>(leaf_of[k])];
    const size_t at = static_cast<size_t>(leaf.next_true + leaf.next_false++);
    m->weight_target[at] = static_cast<int32_t>(t_ids[k]);
    m->weight_value[at] = (*t_weights)[k];
  }
  m->binary_case = clf && m->n_targets == 2 && n_used == 1;

  FERRY_ASSIGN_OR_RETURN(auto base, ReadFloatsOrTensor(ctx, "base_values"));
  if (base) m->base_values = std::move(*base);
  const size_t nb = m->base_values.size();
  if (nb != 0 && nb != static_cast<size_t>(m->n_targets) && !(nb == 1 && m->n_targets <= 2))
    return NodeError(ctx, "base_values has {} entries, expected 0 or {}", nb, m->n_targets);
  FERRY_RETURN_IF_ERROR(CheckAcyclic(ctx, m.get()));
  Finalize(m.get());
  return std::shared_ptr<const TreeModel>(std::move(m));
}

// TreeEnsemble (opset 5).
Result<std::shared_ptr<const TreeModel>> BuildV5(const OpContext& ctx) {
  auto m = std::make_shared<TreeModel>();
  const int64_t agg = ctx.attr_int("aggregate_function", 1);
  const int64_t post = ctx.attr_int("post_transform", 0);
  if (agg < 0 || agg > 3)
    return NodeError(ctx, "aggregate_function = {}, expected 0 (AVERAGE) to 3 (MAX)", agg);
  if (post < 0 || post > 4)
    return NodeError(ctx, "post_transform = {}, expected 0 (NONE) to 4 (PROBIT)", post);
  constexpr Aggregate kAgg[] = {Aggregate::kAverage, Aggregate::kSum, Aggregate::kMin,
                                Aggregate::kMax};
  constexpr PostTransform kPost[] = {PostTransform::kNone, PostTransform::kSoftmax,
                                     PostTransform::kLogistic, PostTransform::kSoftmaxZero,
                                     PostTransform::kProbit};
  m->aggregate = kAgg[agg];
  m->post = kPost[post];
  m->n_targets = ctx.attr_int("n_targets", 0);
  if (m->n_targets <= 0 || m->n_targets > (int64_t{1} << 24))
    return NodeError(ctx, "n_targets = {}, expected 1 to 2^24", m->n_targets);

  auto tensor_attr = [&](std::string_view name, bool required) -> Result<const Tensor*> {
    const ir::Attribute* a = ctx.node().attr(name);
    if (!a) {
      if (required) return NodeError(ctx, "attribute {} is missing", name);
      return static_cast<const Tensor*>(nullptr);
    }
    if (a->type != ir::AttrType::kTensor)
      return NodeError(ctx, "attribute {} must be a tensor", name);
    return &a->t;
  };
  FERRY_ASSIGN_OR_RETURN(const Tensor* splits, tensor_attr("nodes_splits", true));
  FERRY_ASSIGN_OR_RETURN(const Tensor* modes, tensor_attr("nodes_modes", true));
  FERRY_ASSIGN_OR_RETURN(const Tensor* weights, tensor_attr("leaf_weights", true));
  FERRY_ASSIGN_OR_RETURN(const Tensor* members, tensor_attr("membership_values", false));
  for (const Tensor* t : {splits, weights, members})
    if (t && t->dtype() != DType::kFloat && t->dtype() != DType::kDouble)
      return NodeUnsupported(ctx, "a tensor attribute has dtype {}, expected float or double",
                             DTypeName(t->dtype()));
  if (modes->dtype() != DType::kUint8)
    return NodeError(ctx, "nodes_modes has dtype {}, expected uint8", DTypeName(modes->dtype()));
  const auto features = ctx.attr_ints("nodes_featureids");
  const auto true_ids = ctx.attr_ints("nodes_truenodeids");
  const auto false_ids = ctx.attr_ints("nodes_falsenodeids");
  const auto true_leafs = ctx.attr_ints("nodes_trueleafs");
  const auto false_leafs = ctx.attr_ints("nodes_falseleafs");
  const auto missing = ctx.attr_ints("nodes_missing_value_tracks_true");
  const auto targets = ctx.attr_ints("leaf_targetids");
  const auto roots = ctx.attr_ints("tree_roots");
  const size_t n = features.size(), nl = targets.size();
  if (n + nl >= static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2))
    return NodeUnsupported(ctx, "{} tree nodes are too many", n + nl);
  auto same = [&](std::string_view name, size_t got, size_t want, bool optional) -> Status {
    if (got == want || (optional && got == 0)) return Status::Ok();
    return NodeError(ctx, "{} has {} entries, expected {}", name, got, want);
  };
  FERRY_RETURN_IF_ERROR(same("nodes_splits", static_cast<size_t>(splits->size()), n, false));
  FERRY_RETURN_IF_ERROR(same("nodes_modes", static_cast<size_t>(modes->size()), n, false));
  FERRY_RETURN_IF_ERROR(same("nodes_truenodeids", true_ids.size(), n, false));
  FERRY_RETURN_IF_ERROR(same("nodes_falsenodeids", false_ids.size(), n, false));
  FERRY_RETURN_IF_ERROR(same("nodes_trueleafs", true_leafs.size(), n, false));
  FERRY_RETURN_IF_ERROR(same("nodes_falseleafs", false_leafs.size(), n, false));
  FERRY_RETURN_IF_ERROR(same("nodes_missing_value_tracks_true", missing.size(), n, true));
  FERRY_RETURN_IF_ERROR(same("leaf_weights", static_cast<size_t>(weights->size()), nl, false));

  m->nodes.resize(n + nl);
  m->weight_target.resize(nl);
  m->weight_value.resize(nl);
  for (size_t l = 0; l < nl; ++l) {
    if (targets[l] < 0 || targets[l] >= m->n_targets)
      return NodeError(ctx, "leaf_targetids[{}] = {}, expected 0 to {}", l, targets[l],
                       m->n_targets - 1);
    m->weight_target[l] = static_cast<int32_t>(targets[l]);
    m->weight_value[l] = NumberAt(*weights, static_cast<int64_t>(l));
    m->weights_all_positive &= m->weight_value[l] >= 0;
    m->nodes[n + l] = TreeModel::Node{0, 0, kLeaf, false, static_cast<int32_t>(l), 1};
  }
  size_t member_pos = 0;
  for (size_t i = 0; i < n; ++i) {
    TreeModel::Node& nd = m->nodes[i];
    const uint8_t mode = modes->data<uint8_t>()[i];
    if (mode > kMember)
      return NodeError(ctx, "nodes_modes[{}] = {}, expected 0 (BRANCH_LEQ) to 6 (BRANCH_MEMBER)", i,
                       mode);
    nd.mode = mode;
    if (features[i] < 0 || features[i] >= std::numeric_limits<int32_t>::max())
      return NodeError(ctx, "nodes_featureids[{}] = {}, expected >= 0", i, features[i]);
    nd.feature = static_cast<int32_t>(features[i]);
    nd.threshold = NumberAt(*splits, static_cast<int64_t>(i));
    nd.missing_true = !missing.empty() && missing[i] != 0;
    if (mode == kMember) {
      // The members of the k-th set-membership node: the k-th NaN-delimited run.
      if (!members)
        return NodeError(ctx, "nodes_modes[{}] is BRANCH_MEMBER but membership_values is missing",
                         i);
      std::vector<double> set;
      while (member_pos < static_cast<size_t>(members->size())) {
        const double v = NumberAt(*members, static_cast<int64_t>(member_pos++));
        if (std::isnan(v)) break;
        set.push_back(v);
      }
      nd.threshold = static_cast<double>(m->member_sets.size());
      m->member_sets.push_back(std::move(set));
    }
    for (int side = 0; side < 2; ++side) {
      const int64_t id = side == 0 ? true_ids[i] : false_ids[i];
      const bool leaf = (side == 0 ? true_leafs[i] : false_leafs[i]) != 0;
      const size_t limit = leaf ? nl : n;
      if (id < 0 || static_cast<size_t>(id) >= limit)
        return NodeError(ctx, "{}[{}] = {}, expected a {} index below {}",
                         side == 0 ? "nodes_truenodeids" : "nodes_falsenodeids", i, id,
                         leaf ? "leaf" : "node", limit);
      if (!leaf && static_cast<size_t>(id) == i)
        return NodeError(ctx, "{}[{}] = {}: the node branches to itself",
                         side == 0 ? "nodes_truenodeids" : "nodes_falsenodeids", i, id);
      (side == 0 ? nd.next_true : nd.next_false) =
          static_cast<int32_t>(leaf ? n + static_cast<size_t>(id) : static_cast<size_t>(id));
    }
  }
  for (size_t k = 0; k < roots.size(); ++k) {
    const int64_t r = roots[k];
    if (r < 0 || static_cast<size_t>(r) >= n)
      return NodeError(ctx, "tree_roots[{}] = {}, expected a node index below {}", k, r, n);
    // A tree that is a single leaf: its root's two branches name that same leaf.
    const size_t ri = static_cast<size_t>(r);
    const bool single = true_leafs[ri] && false_leafs[ri] && true_ids[ri] == false_ids[ri];
    m->roots.push_back(single ? m->nodes[ri].next_true : static_cast<int32_t>(r));
  }
  FERRY_RETURN_IF_ERROR(CheckAcyclic(ctx, m.get()));
  Finalize(m.get());
  return std::shared_ptr<const TreeModel>(std::move(m));
}

}  // namespace

Result<std::shared_ptr<const TreeModel>> BuildTreeModel(const OpContext& ctx) {
  if (ctx.node().op_type == "TreeEnsemble") return BuildV5(ctx);
  return BuildV3(ctx);
}

void ResetScores(const TreeModel& m, TreeScore* s) {
  for (int64_t k = 0; k < m.n_targets; ++k) s[k] = TreeScore{};
}

namespace {

void FinishClassifier(const TreeModel& m, TreeScore* s, float* z, int64_t* label) {
  const auto& base = m.base_values;
  const int64_t n = m.n_targets;
  auto val = [&](int64_t k) { return s[k].has ? static_cast<float>(s[k].v) : 0.f; };
  if (n > 2) {
    for (size_t k = 0; k < base.size(); ++k) {
      s[k].v = s[k].has ? s[k].v + base[k] : base[k];
      s[k].has = true;
    }
    int64_t best = -1;
    double bw = 0;
    for (int64_t k = 0; k < n; ++k)
      if (s[k].has && (best < 0 || s[k].v > bw)) {
        best = k;
        bw = s[k].v;
      }
    *label = best < 0 ? 0 : best;
    for (int64_t k = 0; k < n; ++k) z[k] = val(k);
    ApplyPostTransform(m.post, z, n);
    return;
  }
  // Two classes, as ONNX Runtime: a single score (one class voted for) becomes two columns.
  int add = -1;
  int size = 2;
  if (base.size() == 2) {
    if (s[1].has) {
      s[1].v = base[1] + s[0].v;
      s[0].v = -s[1].v;
    } else {
      s[1].v += base[1];
      s[0].v += base[0];
    }
  } else if (base.size() == 1) {
    s[0].v += base[0];
    if (!s[1].has) size = 1;
  } else {
    add = 3;
    if (!s[1].has) size = 1;
  }
  const double pos = size == 2 && s[1].has ? s[1].v : (s[0].has ? s[0].v : 0);
  if (m.binary_case) {
    if (m.weights_all_positive) {
      *label = pos > 0.5 ? 1 : 0;
      add = pos > 0.5 ? 0 : 1;
    } else {
      *label = pos > 0 ? 1 : 0;
      add = pos > 0 ? 2 : 3;
    }
  } else {
    *label = pos > 0 ? 1 : 0;
  }
  if (size == 2) {
    z[0] = val(0);
    z[1] = val(1);
    ApplyPostTransform(m.post, z, 2);
    return;
  }
  const float v = val(0);
  if (m.post == PostTransform::kProbit) {
    z[0] = Probit(v);
    z[1] = 0;
    return;
  }
  switch (add) {
    case 0:
    case 1:
      z[0] = 1 - v;
      z[1] = v;
      break;
    case 2:
    case 3:
      if (m.post == PostTransform::kLogistic) {
        z[0] = Logistic(-v);
        z[1] = Logistic(v);
      } else {
        z[0] = -v;
        z[1] = v;
      }
      break;
    default:
      z[0] = v;
      z[1] = 0;
  }
}

template <typename T>
void FinishRegressionT(const TreeModel& m, const TreeScore* s, T* z) {
  const auto& base = m.base_values;
  const int64_t n = m.n_targets;
  const double trees = static_cast<double>(std::max<int64_t>(1, m.num_trees()));
  // One target: only PROBIT applies (ONNX Runtime); several: every post-transform, in float.
  if (n == 1) {
    double v = s[0].has ? s[0].v : 0;
    if (m.aggregate == Aggregate::kAverage) v /= trees;
    v += base.size() == 1 ? base[0] : 0;
    z[0] = m.post == PostTransform::kProbit ? static_cast<T>(Probit(static_cast<float>(v)))
                                            : static_cast<T>(v);
    return;
  }
  const bool use_base = base.size() == static_cast<size_t>(n);
  for (int64_t k = 0; k < n; ++k) {
    double v = s[k].has ? s[k].v : 0;
    if (m.aggregate == Aggregate::kAverage) v /= trees;
    if (use_base) v += base[static_cast<size_t>(k)];
    z[k] = static_cast<T>(v);
  }
  if (m.post == PostTransform::kNone) return;
  std::vector<float> f(z, z + n);
  ApplyPostTransform(m.post, f.data(), n);
  std::copy(f.begin(), f.end(), z);
}

}  // namespace

void FinishRow(const TreeModel& m, TreeScore* s, float* z, int64_t* label) {
  if (m.classifier) return FinishClassifier(m, s, z, label);
  FinishRegressionT(m, s, z);
}

void FinishRegression(const TreeModel& m, const TreeScore* s, double* z) {
  FinishRegressionT(m, s, z);
}

namespace {

struct TreeState : OpState {
  std::shared_ptr<const TreeModel> model;
};

Status PrepareTree(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "X"));
  const bool v5 = ctx.node().op_type == "TreeEnsemble";
  if (v5)
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, 0, {DType::kFloat, DType::kDouble}));
  else
    FERRY_RETURN_IF_ERROR(
        RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kInt64, DType::kInt32}));
  FERRY_ASSIGN_OR_RETURN(Rows rows, ReadRows(ctx, 0));
  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<const TreeModel> model, BuildTreeModel(ctx));
  if (model->max_feature >= rows.c)
    return NodeError(ctx, "a branch reads feature {}, but X has {} columns (shape {})",
                     model->max_feature, rows.c, ShapeToString(ctx.input(0).shape()));
  if (model->classifier) {
    ctx.set_output(0, model->labels.strings ? DType::kString : DType::kInt64, {rows.n});
    if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kFloat, {rows.n, model->n_targets});
  } else {
    ctx.set_output(0, v5 ? ctx.input(0).dtype() : DType::kFloat, {rows.n, model->n_targets});
  }
  auto st = std::make_unique<TreeState>();
  st->model = std::move(model);
  ctx.set_state(std::move(st));
  return Status::Ok();
}

template <typename T>
void RunTreeTyped(OpContext& ctx, const TreeModel& m) {
  const Tensor& x = ctx.input(0);
  const int64_t n = x.rank() == 1 ? 1 : x.dim(0);
  const int64_t c = x.rank() == 1 ? x.dim(0) : x.dim(1);
  const T* xd = x.data<T>();
  const int64_t nt = m.n_targets;
  const bool clf = m.classifier;
  const bool double_out = !clf && ctx.output(0).dtype() == DType::kDouble;
  float* z =
      clf ? (ctx.num_outputs() > 1 && ctx.has_output(1) ? ctx.output(1).data<float>() : nullptr)
          : (double_out ? nullptr : ctx.output(0).data<float>());
  ParallelFor(ctx, n, 16, [&](int64_t b, int64_t e) {
    std::vector<TreeScore> s(static_cast<size_t>(nt));
    std::vector<float> row(static_cast<size_t>(std::max<int64_t>(nt, 2)));
    for (int64_t i = b; i < e; ++i) {
      ResetScores(m, s.data());
      const T* xi = xd + i * c;
      for (int32_t r : m.roots) AddLeaf(m, Descend(m, r, xi), s.data());
      if (double_out) {
        FinishRegression(m, s.data(), ctx.output(0).data<double>() + i * nt);
        continue;
      }
      int64_t label = 0;
      FinishRow(m, s.data(), row.data(), &label);
      if (clf) WriteLabel(m.labels, label, ctx.output(0), i);
      if (z) std::copy(row.begin(), row.begin() + nt, z + i * nt);
    }
  });
}

void RunTree(OpContext& ctx) {
  const TreeModel& m = *ctx.state<TreeState>()->model;
  switch (ctx.input(0).dtype()) {
    case DType::kFloat:
      return RunTreeTyped<float>(ctx, m);
    case DType::kDouble:
      return RunTreeTyped<double>(ctx, m);
    case DType::kInt64:
      return RunTreeTyped<int64_t>(ctx, m);
    default:
      return RunTreeTyped<int32_t>(ctx, m);
  }
}

constexpr OpDef kOps[] = {
    {kDomain, "TreeEnsembleClassifier", 1, nullptr, PrepareTree, RunTree},
    {kDomain, "TreeEnsembleRegressor", 1, nullptr, PrepareTree, RunTree},
    {kDomain, "TreeEnsemble", 5, nullptr, PrepareTree, RunTree},
};

}  // namespace

}  // namespace ml

std::span<const OpDef> MlTreeOps() {
  return ml::kOps;
}

}  // namespace ferry::ops
