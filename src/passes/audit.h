// `ferry audit` as a library call: what would run where before deployment. Per target, which
// nodes are supported as is, which need an equivalent rewrite (named) and which must move to
// application code, grouped by reason; for target "ferry-cpu" also which provider each
// top-level node is planned on; dynamic axes and how far each symbol reaches; data-dependent
// control flow; custom domains; preprocessing at the graph's head and post-processing at its
// tail. The result renders as text, JSON or Markdown.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace ferry::passes {

struct AuditOptions {
  // "ferry", "ferry-cpu", "opset:N" or "ops:FILE" (lines domain:Op:since_version); empty means
  // {"ferry"}. Anything else is kUsage naming the target.
  std::vector<std::string> targets;
};

enum class AuditScope { kAsIs, kRewrite, kApplication };
const char* AuditScopeName(AuditScope s);  // "as_is", "rewrite", "application"

struct AuditGroup {
  std::string reason;  // "Gelu not in opset 11", "custom domain 'com.x'"...
  AuditScope scope = AuditScope::kRewrite;
  std::string rewrite;             // for kRewrite: the rewrite, named
  std::vector<std::string> nodes;  // "If 'cond' > then_branch > Relu 'r'" for subgraph nodes
};

struct AuditTarget {
  std::string name;
  int64_t as_is = 0, rewrite = 0, application = 0;  // node counts (subgraphs included)
  std::vector<AuditGroup> unsupported;              // by reason (sorted)
  // Target "ferry-cpu", when a session could be planned: top-level nodes per planned provider,
  // and the nodes of each op type planned on its reference kernel.
  bool has_providers = false;
  std::map<std::string, int64_t> providers;
  std::map<std::string, std::vector<std::string>> reference_ops;
};

struct AuditDynamicAxis {
  std::string input;
  std::optional<int64_t> axis;     // nullopt: the input's rank is unknown
  std::string symbol;              // "?" for an unnamed dynamic dim, "rank unknown"
  int64_t values_carrying_it = 0;  // value_info and outputs with the symbol
  std::set<std::string> outputs;   // graph outputs carrying the symbol
};

struct AuditControlFlow {
  std::string node;  // with where it sits
  std::string kind;  // "data-dependent", "constant condition", "shape-dependent", "fixed
                     // iteration over a sequence axis"
};

struct AuditResult {
  std::string model;  // the path audited
  int64_t nodes = 0;  // subgraphs included
  std::vector<AuditTarget> targets;
  std::vector<AuditDynamicAxis> dynamic_axes;
  std::vector<AuditControlFlow> control_flow;
  std::map<std::string, int64_t> custom_domains;  // domain -> nodes (not com.microsoft)
  // ONNX Runtime contrib ops: com.microsoft nodes, and its LayerNormalization /
  // SimplifiedLayerNormalization in the default domain below opset 17 -> nodes. Ferry and
  // ONNX Runtime run them; other ONNX runtimes need them rewritten.
  std::map<std::string, int64_t> contrib_ops;
  std::vector<std::string> preprocessing;   // head nodes (Resize, Cast, Sub...) as described
  std::vector<std::string> postprocessing;  // tail nodes (ArgMax, TopK, Softmax...)

  // Whether any target has a node that is not supported as is (`--strict` fails on it).
  bool anything_unsupported() const;
};

// Audits `model`, first filling its value_info with libonnx's shape inference (the only change
// made to it). `path` is echoed in the result. Errors: kUsage for a malformed target, kInvalid
// for an unreadable ops list, shape inference's errors.
Result<AuditResult> Audit(ir::Model& model, const std::string& path, const AuditOptions& options);
// Loads `path` (ir::LoadModel's errors) and audits it.
Result<AuditResult> AuditFile(const std::string& path, const AuditOptions& options);

std::string FormatText(const AuditResult& r);
std::string FormatJson(const AuditResult& r);
std::string FormatMarkdown(const AuditResult& r);

}  // namespace ferry::passes
