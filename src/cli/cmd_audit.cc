// ferry audit MODEL [--target ferry|opset:N|ops:FILE]... [--json] [--strict]
//
// What would run where, before deployment: per target, which nodes are supported and why not
// (grouped by reason), which need an equivalent rewrite (named) and which must move to
// application code; dynamic axes and how far they propagate; data-dependent control flow;
// custom domains; preprocessing at the graph's head and post-processing at its tail.
#include <google/protobuf/io/coded_stream.h>
// onnx_pb.h defines ONNX_API and must precede the other onnx headers.
#include <onnx/onnx_pb.h>

#include <onnx/defs/schema.h>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "ir/onnx_io.h"
#include "ops/registry.h"
#include "passes/convert.h"
#include "passes/pass_manager.h"
#include "runtime/session.h"

namespace ferry::cli {

namespace {

struct Options {
  std::string model;
  std::vector<std::string> targets;
  bool json = false, strict = false;
};

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
enum class Scope { kAsIs, kRewrite, kApplication };
struct Verdict {
  Scope scope = Scope::kAsIs;
  std::string reason;   // grouping key: "op not in opset 11", "custom domain 'com.x'"...
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
        return {Scope::kApplication, fmt::format("custom domain '{}'", n.domain), ""};
      return {Scope::kApplication, fmt::format("op {} not implemented", OpKey(n)), ""};
    }
    return {Scope::kRewrite, fmt::format("{} not at opset {}", OpKey(n), opset.value_or(0)),
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
    if (!n.domain.empty() && n.domain != "ai.onnx")
      return {Scope::kApplication, fmt::format("custom domain '{}'", n.domain), ""};
    int64_t from = m.OpsetFor("").value_or(0);
    const onnx::OpSchema* now = onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(from));
    const onnx::OpSchema* there =
        onnx::OpSchemaRegistry::Schema(n.op_type, static_cast<int>(version_));
    if (!now)
      return {Scope::kApplication,
              fmt::format("{} unknown at the model's opset {}", n.op_type, from), ""};
    if (!there) {
      auto it = kDecompositions.find(n.op_type);
      if (it != kDecompositions.end())
        return {Scope::kRewrite, fmt::format("{} not in opset {}", n.op_type, version_),
                it->second};
      return {Scope::kApplication,
              fmt::format("{} not in opset {} (no equivalent rewrite known)", n.op_type, version_),
              ""};
    }
    if (now->since_version() != there->since_version() &&
        !passes::IsTypeOnlyChange(n.op_type, from, version_))
      return {Scope::kRewrite,
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
      return {Scope::kRewrite,
              fmt::format("{} v{} not in the list (another version is)", OpKey(n), since),
              "convert the model's opset to one whose version of the op is listed"};
    return {Scope::kApplication, fmt::format("{} not in the list", OpKey(n)), ""};
  }

 private:
  std::string path_;
  std::set<std::tuple<std::string, std::string, int64_t>> allowed_;
};

const char* ScopeName(Scope s) {
  return s == Scope::kAsIs ? "as_is" : s == Scope::kRewrite ? "rewrite" : "application";
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

int RunAudit(const Options& o) {
  auto loaded = ir::LoadModel(o.model);
  if (!loaded.ok()) return ReportError(loaded.status());
  ir::Model& m = *loaded.value();
  // libonnx shape inference, so dynamic axes can be followed through the graph.
  {
    passes::OptimizeOptions so;
    so.only = {"shape_inference"};
    auto r = passes::Optimize(m, so);
    if (!r.ok()) return ReportError(r.status());
  }
  std::vector<std::unique_ptr<Target>> targets;
  std::vector<std::string> names =
      o.targets.empty() ? std::vector<std::string>{"ferry"} : o.targets;
  for (const auto& t : names) {
    if (t == "ferry" || t == "ferry-cpu") {
      targets.push_back(std::make_unique<FerryTarget>(t));
    } else if (t.rfind("opset:", 0) == 0) {
      char* end = nullptr;
      long v = std::strtol(t.c_str() + 6, &end, 10);
      if (*end != '\0' || v < 1 ||
          v > onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second)
        return ReportError(UsageError(
            "--target {}: expected opset:N with N between 1 and {}", t,
            onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second));
      targets.push_back(std::make_unique<OpsetTarget>(v));
    } else if (t.rfind("ops:", 0) == 0) {
      auto l = OpsListTarget::Load(t.substr(4));
      if (!l.ok()) return ReportError(l.status());
      targets.push_back(std::move(l).value());
    } else {
      return ReportError(
          UsageError("--target {}: expected ferry, ferry-cpu, opset:N or ops:FILE", t));
    }
  }
  std::vector<Site> sites;
  Walk(m.graph, "", &sites);

  nlohmann::json j;
  j["model"] = o.model;
  j["nodes"] = sites.size();
  bool anything_unsupported = false;
  nlohmann::json jt = nlohmann::json::array();
  for (const auto& t : targets) {
    std::map<std::string, std::vector<std::string>> groups;  // reason -> node descriptions
    std::map<std::string, std::string> group_rewrite;
    std::map<std::string, Scope> group_scope;
    int64_t as_is = 0, rewrite = 0, app = 0;
    for (const auto& s : sites) {
      Verdict v = t->Judge(m, *s.node);
      if (v.scope == Scope::kAsIs) {
        ++as_is;
        continue;
      }
      (v.scope == Scope::kRewrite ? rewrite : app)++;
      groups[v.reason].push_back((s.where.empty() ? "" : s.where + " > ") + s.node->Describe());
      group_rewrite[v.reason] = v.rewrite;
      group_scope[v.reason] = v.scope;
    }
    anything_unsupported = anything_unsupported || rewrite || app;
    nlohmann::json jg = nlohmann::json::array();
    for (const auto& [reason, nodes] : groups)
      jg.push_back({{"reason", reason},
                    {"scope", ScopeName(group_scope[reason])},
                    {"count", nodes.size()},
                    {"rewrite", group_rewrite[reason]},
                    {"nodes", nodes}});
    nlohmann::json entry = {
        {"target", t->name()},
        {"conversion_scope", {{"as_is", as_is}, {"rewrite", rewrite}, {"application", app}}},
        {"unsupported", jg}};
    if (t->name() == "ferry-cpu") {
      // Which provider runs each top-level node (a session plans it without running).
      runtime::SessionOptions so;
      so.threads = 1;
      auto session = runtime::Session::Create(
          std::shared_ptr<const ir::Model>(&m, [](const ir::Model*) {}), so);
      if (session.ok()) {
        std::map<std::string, int64_t> count;
        std::map<std::string, std::vector<std::string>> reference_ops;
        for (const auto& r : session.value()->node_report()) {
          count[r.planned]++;
          if (r.planned != "cpu") reference_ops[r.op_type].push_back(r.name);
        }
        entry["providers"] = count;
        entry["reference_ops"] = reference_ops;
      }
    }
    jt.push_back(entry);
  }
  j["targets"] = jt;

  // Dynamic axes and how far each symbol reaches.
  nlohmann::json jd = nlohmann::json::array();
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
  for (const auto& v : m.graph.value_info) scan(v, false);
  for (const auto& v : m.graph.outputs) scan(v, true);
  for (const ir::ValueInfo* in : m.graph.RealInputs()) {
    if (in->type.kind != ir::TypeInfo::Kind::kTensor) continue;
    if (!in->type.shape) {
      jd.push_back({{"input", in->name}, {"axis", nullptr}, {"symbol", "rank unknown"}});
      continue;
    }
    for (size_t a = 0; a < in->type.shape->size(); ++a) {
      const ir::Dim& d = (*in->type.shape)[a];
      if (d.value) continue;
      jd.push_back(
          {{"input", in->name},
           {"axis", a},
           {"symbol", d.symbol.empty() ? "?" : d.symbol},
           {"values_carrying_it", d.symbol.empty() ? 0 : reach[d.symbol]},
           {"outputs", d.symbol.empty() ? std::set<std::string>{} : reach_outputs[d.symbol]}});
    }
  }
  j["dynamic_axes"] = jd;

  nlohmann::json jc = nlohmann::json::array();
  std::map<std::string, int64_t> domains;
  for (const auto& s : sites) {
    const ir::Node& n = *s.node;
    if (!n.domain.empty() && n.domain != "ai.onnx") domains[n.domain]++;
    if (n.domain.empty() && (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan")) {
      std::string kind = "data-dependent";
      if (n.op_type == "If" && !n.inputs.empty() && m.graph.IsInitializer(n.inputs[0]))
        kind = "constant condition";
      if (n.op_type == "If" && !n.inputs.empty() && s.where.empty() &&
          DependsOnShape(m.graph, n.inputs[0]))
        kind = "shape-dependent";
      if (n.op_type == "Scan") kind = "fixed iteration over a sequence axis";
      jc.push_back(
          {{"node", (s.where.empty() ? "" : s.where + " > ") + n.Describe()}, {"kind", kind}});
    }
  }
  j["control_flow"] = jc;
  j["custom_domains"] = domains;

  // Preprocessing: elementwise/resize/cast nodes that read graph inputs directly.
  static const std::set<std::string, std::less<>> kPre = {
      "Resize", "Cast", "Sub", "Div", "Mul", "Add", "Transpose", "Upsample"};
  static const std::set<std::string, std::less<>> kPost = {"ArgMax", "TopK", "NonMaxSuppression",
                                                           "Softmax", "ArgMin"};
  std::set<std::string> real_inputs, outputs;
  for (const ir::ValueInfo* in : m.graph.RealInputs()) real_inputs.insert(in->name);
  for (const auto& out : m.graph.outputs) outputs.insert(out.name);
  nlohmann::json jpre = nlohmann::json::array(), jpost = nlohmann::json::array();
  for (const auto& n : m.graph.nodes) {
    bool head = std::any_of(n.inputs.begin(), n.inputs.end(),
                            [&](const std::string& i) { return real_inputs.count(i); });
    bool tail = std::any_of(n.outputs.begin(), n.outputs.end(),
                            [&](const std::string& o) { return outputs.count(o); });
    if (head && kPre.count(n.op_type)) jpre.push_back(n.Describe());
    if (tail && kPost.count(n.op_type)) jpost.push_back(n.Describe());
  }
  j["preprocessing"] = jpre;
  j["postprocessing"] = jpost;

  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    fmt::print("{}: {} nodes\n", o.model, sites.size());
    for (const auto& t : j["targets"]) {
      const auto& cs = t["conversion_scope"];
      fmt::print("\ntarget {}: {} as is, {} need a rewrite, {} must move to application code\n",
                 t["target"].get<std::string>(), cs["as_is"].get<int64_t>(),
                 cs["rewrite"].get<int64_t>(), cs["application"].get<int64_t>());
      if (t.contains("providers")) {
        fmt::print("  providers (top-level nodes): {}\n", t["providers"].dump());
        for (const auto& [op, nodes] : t["reference_ops"].items())
          fmt::print("    on the reference kernel: {} x{}\n", op, nodes.size());
      }
      for (const auto& g : t["unsupported"]) {
        fmt::print("  [{}] {} x{}", g["scope"].get<std::string>(), g["reason"].get<std::string>(),
                   g["count"].get<int64_t>());
        if (!g["rewrite"].get<std::string>().empty())
          fmt::print("  -> {}", g["rewrite"].get<std::string>());
        fmt::print("\n");
        size_t shown = 0;
        for (const auto& nd : g["nodes"]) {
          if (shown++ == 5) {
            fmt::print("      ... {} more\n", g["nodes"].size() - 5);
            break;
          }
          fmt::print("      {}\n", nd.get<std::string>());
        }
      }
    }
    fmt::print("\ndynamic axes:{}\n", jd.empty() ? " none" : "");
    for (const auto& d : jd)
      fmt::print("  {} axis {} '{}' -> carried by {} values, outputs {}\n",
                 d["input"].get<std::string>(),
                 d["axis"].is_null() ? std::string("?") : std::to_string(d["axis"].get<int64_t>()),
                 d["symbol"].get<std::string>(), d.value("values_carrying_it", 0),
                 d.contains("outputs") ? d["outputs"].dump() : "[]");
    fmt::print("control flow:{}\n", jc.empty() ? " none" : "");
    for (const auto& c : jc)
      fmt::print("  {} ({})\n", c["node"].get<std::string>(), c["kind"].get<std::string>());
    fmt::print("custom domains:{}\n", domains.empty() ? " none" : "");
    for (const auto& [d, c] : domains) fmt::print("  {} x{}\n", d, c);
    fmt::print("preprocessing at the head: {}\n", jpre.empty() ? "none" : jpre.dump());
    fmt::print("post-processing at the tail: {}\n", jpost.empty() ? "none" : jpost.dump());
  }
  if (o.strict && anything_unsupported) {
    std::fprintf(stderr,
                 "ferry: error: --strict: some nodes are not supported as is by the target(s)\n");
    return static_cast<int>(StatusCode::kUnsupported);
  }
  return 0;
}

}  // namespace

void SetupAudit(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "ONNX model")->required();
  sub.add_option(
      "--target", o->targets,
      "ferry | ferry-cpu | opset:N | ops:FILE (domain:Op:since_version per line); repeatable");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.add_flag("--strict", o->strict, "Exit 4 when any node is not supported as is");
  sub.callback([o, action] { *action = [o] { return RunAudit(*o); }; });
}

}  // namespace ferry::cli
