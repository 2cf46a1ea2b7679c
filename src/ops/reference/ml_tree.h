// Tree ensembles of ai.onnx.ml (TreeEnsembleClassifier, TreeEnsembleRegressor: opsets 1 and 3;
// TreeEnsemble: opset 5) as one validated model, shared by the reference kernels (ml_tree.cc)
// and the cpu kernel (ops/cpu/ml_tree.cc), which lays the same model out for batched traversal.
//
// Semantics follow the spec and, where it is vague (binary classifiers, base values, which
// post-transforms apply to one target), ONNX Runtime, the peer converters are tested against.
// Scores are accumulated in double (ONNX Runtime: in the threshold type, float for float
// models), post-transforms computed in float.
#pragma once

#include <memory>
#include <vector>

#include "ops/reference/ml_common.h"

namespace ferry::ops::ml {

enum class Aggregate : uint8_t { kAverage, kSum, kMin, kMax };

// Comparison of a node: true branch when x <mode> threshold (or x is NaN and missing_true).
enum NodeMode : uint8_t { kLeq, kLt, kGte, kGt, kEq, kNeq, kMember, kLeaf };

struct TreeModel {
  struct Node {
    double threshold = 0;  // kMember: the index of its set in member_sets
    int32_t feature = 0;
    uint8_t mode = kLeaf;
    bool missing_true = false;
    // Branch nodes: the node indices of the two children. Leaves: next_true is the first of
    // their weights, next_false the count.
    int32_t next_true = 0, next_false = 0;
  };
  std::vector<Node> nodes;
  std::vector<int32_t> roots;  // one per tree, in order of first appearance
  std::vector<int32_t> weight_target;
  std::vector<double> weight_value;
  std::vector<std::vector<double>> member_sets;
  int64_t n_targets = 0;     // targets, or classes for the classifier
  int64_t max_feature = -1;  // the largest feature a branch reads
  int32_t max_depth = 0;     // branches on the longest root-to-leaf path
  bool has_member = false;   // some node is kMember
  bool has_missing = false;  // some node sends NaN to its true branch
  Aggregate aggregate = Aggregate::kSum;
  PostTransform post = PostTransform::kNone;
  std::vector<double> base_values;
  // TreeEnsembleClassifier only.
  bool classifier = false;
  bool binary_case = false;  // two classes and every weight on the same class
  bool weights_all_positive = true;
  ClassLabels labels;

  int64_t num_trees() const { return static_cast<int64_t>(roots.size()); }
};

// Builds and validates the model of a TreeEnsembleClassifier / TreeEnsembleRegressor /
// TreeEnsemble node from its attributes. Errors name the node, the attribute, the index and the
// value seen and expected (`nodes_truenodeids[12] = 40, expected a node of tree 3`).
Result<std::shared_ptr<const TreeModel>> BuildTreeModel(const OpContext& ctx);

// The leaf that row `x` reaches from node `root`.
template <typename T>
inline int32_t Descend(const TreeModel& m, int32_t root, const T* x) {
  const TreeModel::Node* nodes = m.nodes.data();
  int32_t i = root;
  while (nodes[i].mode != kLeaf) {
    const TreeModel::Node& n = nodes[i];
    const double v = static_cast<double>(x[n.feature]);
    bool t;
    switch (n.mode) {
      case kLeq:
        t = v <= n.threshold;
        break;
      case kLt:
        t = v < n.threshold;
        break;
      case kGte:
        t = v >= n.threshold;
        break;
      case kGt:
        t = v > n.threshold;
        break;
      case kEq:
        t = v == n.threshold;
        break;
      case kNeq:
        t = v != n.threshold;
        break;
      default: {
        const auto& set = m.member_sets[static_cast<size_t>(n.threshold)];
        t = std::find(set.begin(), set.end(), v) != set.end();
      }
    }
    if (!t && n.missing_true && std::isnan(v)) t = true;
    i = t ? n.next_true : n.next_false;
  }
  return i;
}

// A target's running score: `has` once some leaf voted for it.
struct TreeScore {
  double v = 0;
  bool has = false;
};

// Resets n_targets scores before a row's trees.
void ResetScores(const TreeModel& m, TreeScore* s);
// Adds leaf `leaf`'s weights to the row's scores with the model's aggregate function.
inline void AddLeaf(const TreeModel& m, int32_t leaf, TreeScore* s) {
  const TreeModel::Node& n = m.nodes[static_cast<size_t>(leaf)];
  for (int32_t k = n.next_true, e = n.next_true + n.next_false; k < e; ++k) {
    TreeScore& t = s[m.weight_target[static_cast<size_t>(k)]];
    const double w = m.weight_value[static_cast<size_t>(k)];
    switch (m.aggregate) {
      case Aggregate::kMin:
        t.v = t.has ? std::min(t.v, w) : w;
        break;
      case Aggregate::kMax:
        t.v = t.has ? std::max(t.v, w) : w;
        break;
      default:
        t.v += w;
    }
    t.has = true;
  }
}
// Finishes a row: base values, averaging, the post-transform; writes n_targets scores to `z`
// (the classifier: n_classes, 2 for a binary one) and, for the classifier, the winning label's
// index to *label. Modifies `s`.
void FinishRow(const TreeModel& m, TreeScore* s, float* z, int64_t* label);
// The regressor's FinishRow in double (TreeEnsemble on double X).
void FinishRegression(const TreeModel& m, const TreeScore* s, double* z);

}  // namespace ferry::ops::ml
