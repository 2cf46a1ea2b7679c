#include "passes/audit.h"

#include <google/protobuf/io/coded_stream.h>
// onnx_pb.h defines ONNX_API and must precede the other onnx headers.
#include <onnx/onnx_pb.h>

#include <onnx/defs/schema.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <memory>
#include <tuple>

#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "passes/convert.h"
#include "passes/pass_manager.h"
#include "runtime/session.h"

namespace ferry::passes {

namespace {

// A node with where it sits ("If 'cond' > then_branch" for nodes inside subgraphs).
struct Site {
  const ir::Node* node;
  std::string where;
};

void Walk(const ir::Graph& g, const std::string& where, std::vector<Site>* out) {
  for (const auto& n : g.nodes) {
    out->push_back({&n, where});
    for (const auto& a : n.attributes) {
      std::string inner = (where.empty() ? "" : where + " > ") + n.Describe() + "." + a.name;
      if (a.g) Walk(*a.g, inner, out);
      for (size_t k = 0; k < a.graphs.size(); ++k)
        Walk(*a.graphs[k], inner + "[" + std::to_string(k) + "]", out);
    }
  }
}

std::string OpKey(const ir::Node& n) {
  return n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
}

// Verdict of one target for one node.
struct Verdict {
  AuditScope scope = AuditScope::kAsIs;
  std::string reason;   // grouping key
  std::string rewrite;  // for kRewrite: the rewrite, named
};

// Known equivalent decompositions for ops newer than a target opset.
const std::map<std::string, std::string, std::less<>> kDecompositions = {
    {"LayerNormalization",
     "decompose into ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div, Mul, Add"},
    {"Gelu", "decompose into Div, Erf, Add, Mul, Mul"},
    {"HardSwish", "decompose into HardSigmoid, Mul"},
    {"Mish", "decompose into Softplus, Tanh, Mul"},
    {"Celu", "decompose into Div, Elu, Mul"},
    {"GroupNormalization", "decompose into Reshape, InstanceNormalization, Reshape, Mul, Add"},
    {"Trilu", "rewrite as Mul by a constant triangular mask (static shapes)"},
    {"Range", "fold to a constant (static bounds) or rewrite with a Loop"},
    {"Einsum", "rewrite as Transpose/Reshape/MatMul for the given equation"},
    {"Shrink", "decompose into Abs, Less, Sign, Sub, Mul, Where"},
    {"GridSample", "no ONNX equivalent before opset 16: application code or a custom op"},
    {"ScatterElements", "ScatterElements/Scatter rename (opset 9-10: Scatter)"},
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string name() const = 0;
  virtual Verdict Judge(const ir::Model& m, const ir::Node& n) const = 0;
};

class FerryTarget final : public Target {
 public:
  explicit FerryTarget(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Verdict Judge(const ir::Model& m, const ir::Node& n) const override {
    auto opset = m.OpsetFor(n.domain);
    const auto& reg = ops::Registry::Get();
    if (opset && reg.Find(n.domain, n.op_type, *opset)) return {};
    if (!reg.Knows(n.domain, n.op_type)) {
      if (!n.domain.empty() && n.domain != "ai.onnx.ml" && n.domain != "com.microsoft")
        return {AuditScope::kApplication, fmt::format("custom domain '{}'", n.domain), ""};
      return {AuditScope::kApplication, fmt::format("op {} not implemented", OpKey(n)), ""};
    }
    return {AuditScope::kRewrite, fmt::format("{} not at opset {}", OpKey(n), opset.value_or(0)),
            "convert the model's opset (ferry convert --opset N)"};
  }

 private:
  std::string name_;
};

class OpsetTarget final : public Target {
 public:
  explicit OpsetTarget(int64_t v) : version_(v) {}
  std::string name() const override { return "opset:" + std::to_string(version_); }
  Verdict Judge(const ir::Model& m, const ir::Node& n) const override {
    // ai.onnx.ml has its own opset: converting the default domain's leaves its nodes as they are.
    if (n.domain == "ai.onnx.ml") return {};
    if (!n.domain.empty() && n.domain != "ai.onnx")
      return {AuditScope::kApplication, fmt::format("custom domain '{}'", n.domain), ""};
    int64_t from = m.OpsetFor("").value_or(0);
    const onnx::OpSchema* now = onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(from));
    const onnx::OpSchema* there =
        onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(version_));
    if (!now)
      return {AuditScope::kApplication,
              fmt::format("{} unknown at the model's opset {}", n.op_type, from), ""};
    if (!there) {
      auto it = kDecompositions.find(n.op_type);
      if (it != kDecompositions.end())
        return {AuditScope::kRewrite, fmt::format("{} not in opset {}", n.op_type, version_),
                it->second};
      return {AuditScope::kApplication,
              fmt::format("{} not in opset {} (no equivalent rewrite known)", n.op_type, version_),
              ""};
    }
    if (now->since_version() != there->since_version() &&
        !IsTypeOnlyChange(n.op_type, from, version_))
      return {AuditScope::kRewrite,
              fmt::format("{} changes between opset {} (v{}) and {} (v{})", n.op_type, from,
                          now->since_version(), version_, there->since_version()),
              fmt::format("version adapter {} v{} -> v{} (ferry convert --opset {})", n.op_type,
                          now->since_version(), there->since_version(), version_)};
    return {};
  }

 private:
  int64_t version_;
};

// A build config's supported-operator list: lines `domain:Op:since_version`.
class OpsListTarget final : public Target {
 public:
  static Result<std::unique_ptr<OpsListTarget>> Load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return InvalidError("--target ops:{}: cannot read the file", path);
    auto t = std::make_unique<OpsListTarget>();
    t->path_ = path;
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      size_t hash = line.find('#');
      if (hash != std::string::npos) line.resize(hash);
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.pop_back();
      size_t b = line.find_first_not_of(" \t");
      if (b == std::string::npos) continue;
      line = line.substr(b);
      size_t c1 = line.find(':'), c2 = line.rfind(':');
      if (c1 == std::string::npos || c1 == c2)
        return InvalidError("{}:{}: expected domain:Op:since_version, got '{}'", path, lineno,
                            line);
      std::string domain = line.substr(0, c1), op = line.substr(c1 + 1, c2 - c1 - 1);
      char* end = nullptr;
      long v = std::strtol(line.c_str() + c2 + 1, &end, 10);
      if (*end != '\0' || v <= 0 || op.empty())
        return InvalidError("{}:{}: expected domain:Op:since_version, got '{}'", path, lineno,
                            line);
      if (domain == "ai.onnx") domain.clear();
      t->allowed_.insert({domain, op, v});
    }
    return t;
  }
  std::string name() const override { return "ops:" + path_; }
  Verdict Judge(const ir::Model& m, const ir::Node& n) const override {
    int64_t opset = m.OpsetFor(n.domain).value_or(0);
    int64_t since = opset;
    if (const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(opset),
                                                                 n.domain.empty() ? "" : n.domain))
      since = s->since_version();
    if (allowed_.count({n.domain, n.op_type, since})) return {};
    bool other_version = false;
    for (const auto& [d, o, v] : allowed_)
      other_version = other_version || (d == n.domain && o == n.op_type);
    if (other_version)
      return {AuditScope::kRewrite,
              fmt::format("{} v{} not in the list (another version is)", OpKey(n), since),
              "convert the model's opset to one whose version of the op is listed"};
    return {AuditScope::kApplication, fmt::format("{} not in the list", OpKey(n)), ""};
  }

 private:
  std::string path_;
  std::set<std::tuple<std::string, std::string, int64_t>> allowed_;
};

Result<std::vector<std::unique_ptr<Target>>> ParseTargets(const std::vector<std::string>& given) {
  std::vector<std::unique_ptr<Target>> targets;
  std::vector<std::string> names = given.empty() ? std::vector<std::string>{"ferry"} : given;
  const int64_t max_opset =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
  for (const auto& t : names) {
    if (t == "ferry" || t == "ferry-cpu") {
      targets.push_back(std::make_unique<FerryTarget>(t));
    } else if (t.rfind("opset:", 0) == 0) {
      char* end = nullptr;
      long v = std::strtol(t.c_str() + 6, &end, 10);
      if (*end != '\0' || v < 1 || v > max_opset)
        return UsageError("--target {}: expected opset:N with N between 1 and {}", t, max_opset);
      targets.push_back(std::make_unique<OpsetTarget>(v));
    } else if (t.rfind("ops:", 0) == 0) {
      FERRY_ASSIGN_OR_RETURN(auto l, OpsListTarget::Load(t.substr(4)));
      targets.push_back(std::move(l));
    } else {
      return UsageError("--target {}: expected ferry, ferry-cpu, opset:N or ops:FILE", t);
    }
  }
  return targets;
}

// Whether `value`'s computation reads a Shape/Size (a shape-dependent branch condition).
bool DependsOnShape(const ir::Graph& g, const std::string& value, int depth = 0) {
  if (depth > 64) return false;
  for (const auto& n : g.nodes) {
    if (std::find(n.outputs.begin(), n.outputs.end(), value) == n.outputs.end()) continue;
    if (n.op_type == "Shape" || n.op_type == "Size") return true;
    for (const auto& in : n.inputs)
      if (!in.empty() && DependsOnShape(g, in, depth + 1)) return true;
  }
  return false;
}

AuditTarget JudgeAll(const Target& t, const ir::Model& m, const std::vector<Site>& sites) {
  AuditTarget at;
  at.name = t.name();
  std::map<std::string, AuditGroup> groups;
  for (const auto& s : sites) {
    Verdict v = t.Judge(m, *s.node);
    if (v.scope == AuditScope::kAsIs) {
      ++at.as_is;
      continue;
    }
    (v.scope == AuditScope::kRewrite ? at.rewrite : at.application)++;
    AuditGroup& g = groups[v.reason];
    g.reason = v.reason;
    g.nodes.push_back((s.where.empty() ? "" : s.where + " > ") + s.node->Describe());
    g.rewrite = v.rewrite;
    g.scope = v.scope;
  }
  for (auto& [reason, g] : groups) at.unsupported.push_back(std::move(g));
  if (at.name == "ferry-cpu") {
    // Which provider runs each top-level node (a session plans it without running).
    runtime::SessionOptions so;
    so.threads = 1;
    auto session =
        runtime::Session::Create(std::shared_ptr<const ir::Model>(&m, [](const ir::Model*) {}), so);
    if (session.ok()) {
      at.has_providers = true;
      for (const auto& r : session.value()->node_report()) {
        at.providers[r.planned]++;
        if (r.planned != "cpu") at.reference_ops[r.op_type].push_back(r.name);
      }
    }
  }
  return at;
}

void FindDynamicAxes(const ir::Graph& g, AuditResult* r) {
  std::map<std::string, int64_t> reach;
  std::map<std::string, std::set<std::string>> reach_outputs;
  auto scan = [&](const ir::ValueInfo& v, bool is_output) {
    if (v.type.kind != ir::TypeInfo::Kind::kTensor || !v.type.shape) return;
    for (const auto& d : *v.type.shape)
      if (!d.value && !d.symbol.empty()) {
        reach[d.symbol]++;
        if (is_output) reach_outputs[d.symbol].insert(v.name);
      }
  };
  for (const auto& v : g.value_info) scan(v, false);
  for (const auto& v : g.outputs) scan(v, true);
  for (const ir::ValueInfo* in : g.RealInputs()) {
    if (in->type.kind != ir::TypeInfo::Kind::kTensor) continue;
    if (!in->type.shape) {
      r->dynamic_axes.push_back({in->name, std::nullopt, "rank unknown", 0, {}});
      continue;
    }
    for (size_t a = 0; a < in->type.shape->size(); ++a) {
      const ir::Dim& d = (*in->type.shape)[a];
      if (d.value) continue;
      AuditDynamicAxis ax{
          in->name, static_cast<int64_t>(a), d.symbol.empty() ? "?" : d.symbol, 0, {}};
      if (!d.symbol.empty()) {
        ax.values_carrying_it = reach[d.symbol];
        ax.outputs = reach_outputs[d.symbol];
      }
      r->dynamic_axes.push_back(std::move(ax));
    }
  }
}

void FindControlFlow(const ir::Model& m, const std::vector<Site>& sites, AuditResult* r) {
  for (const auto& s : sites) {
    const ir::Node& n = *s.node;
    const bool ort_layer_norm =
        (n.domain.empty() || n.domain == "ai.onnx") &&
        ((n.op_type == "LayerNormalization" && m.OpsetFor("").value_or(0) < 17) ||
         n.op_type == "SimplifiedLayerNormalization");
    if (n.domain == "com.microsoft" || ort_layer_norm)
      r->contrib_ops[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type]++;
    else if (!n.domain.empty() && n.domain != "ai.onnx" && n.domain != "ai.onnx.ml")
      r->custom_domains[n.domain]++;
    if (n.domain.empty() && (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan")) {
      std::string kind = "data-dependent";
      if (n.op_type == "If" && !n.inputs.empty() && m.graph.IsInitializer(n.inputs[0]))
        kind = "constant condition";
      if (n.op_type == "If" && !n.inputs.empty() && s.where.empty() &&
          DependsOnShape(m.graph, n.inputs[0]))
        kind = "shape-dependent";
      if (n.op_type == "Scan") kind = "fixed iteration over a sequence axis";
      r->control_flow.push_back({(s.where.empty() ? "" : s.where + " > ") + n.Describe(), kind});
    }
  }
}

// Preprocessing: elementwise/resize/cast nodes that read graph inputs directly; post-processing:
// decoding ops that write graph outputs.
void FindPrePost(const ir::Graph& g, AuditResult* r) {
  static const std::set<std::string, std::less<>> kPre = {
      "Resize", "Cast", "Sub", "Div", "Mul", "Add", "Transpose", "Upsample"};
  static const std::set<std::string, std::less<>> kPost = {"ArgMax", "TopK", "NonMaxSuppression",
                                                           "Softmax", "ArgMin"};
  std::set<std::string> real_inputs, outputs;
  for (const ir::ValueInfo* in : g.RealInputs()) real_inputs.insert(in->name);
  for (const auto& out : g.outputs) outputs.insert(out.name);
  for (const auto& n : g.nodes) {
    bool head = std::any_of(n.inputs.begin(), n.inputs.end(),
                            [&](const std::string& i) { return real_inputs.count(i); });
    bool tail = std::any_of(n.outputs.begin(), n.outputs.end(),
                            [&](const std::string& o) { return outputs.count(o); });
    if (head && kPre.count(n.op_type)) r->preprocessing.push_back(n.Describe());
    if (tail && kPost.count(n.op_type)) r->postprocessing.push_back(n.Describe());
  }
}

}  // namespace

const char* AuditScopeName(AuditScope s) {
  return s == AuditScope::kAsIs ? "as_is" : s == AuditScope::kRewrite ? "rewrite" : "application";
}

bool AuditResult::anything_unsupported() const {
  return std::any_of(targets.begin(), targets.end(),
                     [](const AuditTarget& t) { return t.rewrite || t.application; });
}

Result<AuditResult> Audit(ir::Model& m, const std::string& path, const AuditOptions& options) {
  // libonnx shape inference, so dynamic axes can be followed through the graph.
  OptimizeOptions so;
  so.only = {"shape_inference"};
  FERRY_RETURN_IF_ERROR(Optimize(m, so).status());
  FERRY_ASSIGN_OR_RETURN(auto targets, ParseTargets(options.targets));
  std::vector<Site> sites;
  Walk(m.graph, "", &sites);
  AuditResult r;
  r.model = path;
  r.nodes = static_cast<int64_t>(sites.size());
  for (const auto& t : targets) r.targets.push_back(JudgeAll(*t, m, sites));
  FindDynamicAxes(m.graph, &r);
  FindControlFlow(m, sites, &r);
  FindPrePost(m.graph, &r);
  return r;
}

Result<AuditResult> AuditFile(const std::string& path, const AuditOptions& options) {
  FERRY_ASSIGN_OR_RETURN(auto model, ir::LoadModel(path));
  return Audit(*model, path, options);
}

}  // namespace ferry::passes
