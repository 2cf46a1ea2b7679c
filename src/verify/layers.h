// Per-layer localisation with bounded memory. The reference runs first with an observer that
// spills every intermediate tensor to a private temp folder; the candidate then runs with an
// observer that compares each tensor it produces against the spilled one of the same name and
// deletes the file. At most one spilled tensor is in memory at a time. Also: NanWatch, which
// finds the first node (in execution order) whose output holds NaN or Inf.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runtime/session.h"
#include "verify/compare.h"

namespace ferry::verify {

struct LayerRow {
  enum class State {
    kCompared,      // compared: see stats
    kIncomparable,  // produced by both, but shape/kind differ (note says how)
    kUnmatched,     // not produced by the candidate (fused or renamed away)
    kNotCompared,   // not a numeric tensor in the reference (note says what)
  };
  int64_t index = 0;  // position in the reference's execution (topological) order
  std::string tensor, node, op_type;
  State state = State::kUnmatched;
  std::string note;
  Tolerance tol;
  Stats stats;
  bool failed() const {
    return state == State::kIncomparable || (state == State::kCompared && !stats.pass());
  }
};

class LayerCapture {
 public:
  using ToleranceFn = std::function<Tolerance(const std::string& tensor)>;
  // Creates an empty spill folder under the system temp folder ($TMPDIR). Errors: kInvalid
  // when it cannot be created.
  static Result<std::unique_ptr<LayerCapture>> Create(ToleranceFn tol);
  // Removes the spill folder and everything left in it.
  ~LayerCapture();
  LayerCapture(const LayerCapture&) = delete;
  LayerCapture& operator=(const LayerCapture&) = delete;

  // Observers for input set `set`: run the reference with the first, then the candidate with
  // the second. Observers cannot fail a run: check status() after each run.
  runtime::NodeObserver ReferenceObserver(int set);
  runtime::NodeObserver CandidateObserver(int set);
  // The first spill I/O error, if any.
  const Status& status() const { return status_; }

  // Rows in reference order, unmatched ones marked. Call after all runs.
  std::vector<LayerRow> Finish();
  // Tensors produced by the candidate under names the reference does not have.
  int64_t candidate_only() const { return static_cast<int64_t>(candidate_only_.size()); }
  const std::string& dir() const { return dir_; }

 private:
  LayerCapture() = default;
  struct Spilled {
    DType dtype;
    Shape shape;
    std::string path;
  };
  std::string dir_;
  ToleranceFn tol_;
  Status status_;
  std::vector<LayerRow> rows_;
  std::vector<bool> seen_in_candidate_;
  std::map<std::string, size_t> by_name_;
  std::map<std::pair<int, size_t>, Spilled> spilled_;
  std::set<std::string> candidate_only_;
};

// Index of the first failed row (reference order), or -1.
int64_t FirstFailedLayer(const std::vector<LayerRow>& rows);

// Finds the first node (execution order) that introduces NaN or Inf: an output with NaN while
// no input holds NaN, or with Inf while every input is finite. Values that are model data are
// not "produced": initializers, and the outputs of Constant and ConstantOfShape (a -inf mask
// constant is normal; the NaN a later node makes from it is reported).
class NanWatch {
 public:
  struct Finding {
    bool found = false;
    int64_t index = -1;  // node output position in execution order
    std::string node, op_type, tensor, set;
    NonFinite counts;
  };
  // Declares the non-finite state of a value not produced by a node (initializers, inputs).
  void Known(const std::string& name, const Value& value);
  void KnownInitializers(const ir::Graph& graph);
  // `set` names the input set in the finding.
  runtime::NodeObserver Observer(const std::string& set);
  const Finding& finding() const { return finding_; }

 private:
  Finding finding_;
  int64_t counter_ = 0;
  std::map<std::string, NonFinite> state_;
};

// Calls both observers (either may be empty).
runtime::NodeObserver Chain(runtime::NodeObserver a, runtime::NodeObserver b);

}  // namespace ferry::verify
