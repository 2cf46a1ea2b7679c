#include "artifact/build.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/lines.h"
#include "core/npy.h"
#include "core/sha256.h"
#include "ir/onnx_io.h"
#include "passes/optimize_file.h"
#include "prep/check.h"
#include "prep/pipeline.h"
#include "prep/spec.h"
#include "quant/quantize_file.h"
#include "runtime/session.h"
#include "verify/golden.h"
#include "verify/verify.h"

namespace ferry::artifact {

namespace fs = std::filesystem;

Status BuildResult::verdict() const {
  if (written || failures.empty()) return Status::Ok();
  return Status(
      StatusCode::kCheckFailed,
      fmt::format("gate failed: {}{}; nothing written at {}", failures.front(),
                  failures.size() > 1 ? fmt::format(" ({} gate failures in all, see {})",
                                                    failures.size(), report_dir + "/report.md")
                                      : "",
                  out));
}

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A temp folder removed (with everything in it) unless released.
struct TempDir {
  std::string path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

std::string Where(const Config& c, const std::string& key) {
  return fmt::format("{}:{}: {}", c.path, c.Line(key), key);
}

// Folders 0755, files 0644 (mkdtemp made the folder 0700).
void NormalizeModes(const fs::path& dir) {
  ::chmod(dir.c_str(), 0755);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    ::chmod(it->path().c_str(), it->is_directory(ec) ? 0755 : 0644);
  }
}

Status CopyFile(const std::string& from, const std::string& to) {
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(from));
  return WriteFileAtomic(to, bytes);
}

std::string Plural(int64_t n, const char* what) {
  return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
}

// ---- the golden set ----

struct Golden {
  std::string data_dir, edge_dir, labels_path, tolerances_path;
  int64_t sets = 0, rows = 0, edge_sets = 0;
  std::vector<std::string> edge_kinds;
  std::vector<std::string> outputs;  // the source's output names
};

nlohmann::json ShapesJson(const verify::NamedValues& vals) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [n, v] : vals)
    if (v.is_tensor()) j[n] = v.tensor().shape();
  return j;
}

// reference.files: each file through the prep spec (the same code as `ferry prep run`), one set
// per file, in sorted order; the set's name is the file's name (not its path: nothing in the
// artifact depends on where the project sits).
Result<std::vector<ir::DataSet>> RawReferenceSets(const Config& c) {
  FERRY_ASSIGN_OR_RETURN(prep::Spec spec, prep::LoadSpec(c.prep));
  FERRY_ASSIGN_OR_RETURN(std::vector<std::string> files, prep::ExpandImages({c.reference_files}));
  std::vector<ir::DataSet> sets;
  for (const auto& f : files) {
    FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(f));
    ir::DataSet ds;
    ds.name = fs::path(f).filename().string();
    for (const auto& in : spec.inputs) {
      FERRY_ASSIGN_OR_RETURN(Tensor t, prep::PreprocessInput(in, bytes, ds.name));
      ds.inputs.emplace_back(in.name, Value(std::move(t)));
    }
    sets.push_back(std::move(ds));
  }
  return sets;
}

Status CaptureGoldenSet(const Config& c, const std::string& art, Golden* g, ProgressFn progress) {
  FERRY_ASSIGN_OR_RETURN(auto loaded, ir::LoadModel(c.source));
  std::shared_ptr<const ir::Model> model(std::move(loaded));
  const ir::Graph& graph = model->graph;
  for (const auto& vi : graph.outputs) g->outputs.push_back(vi.name);
  // Names the config gives outputs must be the source's.
  auto is_output = [&](const std::string& n) {
    return std::find(g->outputs.begin(), g->outputs.end(), n) != g->outputs.end();
  };
  std::string names;
  for (const auto& n : g->outputs) names += (names.empty() ? "" : ", ") + n;
  auto check_names = [&](const std::map<std::string, ToleranceSpec>& tols,
                         const std::string& prefix) -> Status {
    for (const auto& [n, t] : tols)
      if (!is_output(n))
        return InvalidError("{}: not an output of the source (its outputs: {})",
                            Where(c, prefix + "." + n), names);
    return Status::Ok();
  };
  FERRY_RETURN_IF_ERROR(check_names(c.tolerances, "tolerances"));
  for (size_t i = 0; i < c.variants.size(); ++i)
    FERRY_RETURN_IF_ERROR(
        check_names(c.variants[i].tolerances, fmt::format("variants[{}].tolerances", i)));
  if (c.task && !is_output(c.task->output))
    return InvalidError("{}: '{}' is not an output of the source (its outputs: {})",
                        Where(c, "task.output"), c.task->output, names);

  runtime::SessionOptions so;
  so.threads = kArtifactThreads;
  FERRY_ASSIGN_OR_RETURN(auto session, runtime::Session::Create(model, so));
  const bool raw = !c.reference_files.empty();
  const std::string ref_key = raw ? "reference.files" : "reference.data";
  auto sets = raw ? RawReferenceSets(c) : ir::LoadDataSets(c.reference_data, graph, false);
  if (!sets.ok()) return sets.status().With(Where(c, ref_key));
  if (c.samples > static_cast<int64_t>(sets->size()))
    return InvalidError("{}: {} sets asked for, but '{}' holds {}", Where(c, "reference.samples"),
                        c.samples, raw ? c.reference_files : c.reference_data, sets->size());
  size_t take = c.samples > 0 ? static_cast<size_t>(c.samples) : sets->size();
  std::vector<verify::CapturedSet> captured;
  nlohmann::json manifest_sets = nlohmann::json::array();
  for (size_t i = 0; i < take; ++i) {
    if (progress) progress("golden", i, take);
    ir::DataSet& ds = (*sets)[i];
    auto outs = session->Run(ds.inputs);
    if (!outs.ok())
      return outs.status().With(fmt::format("{}: source on set {}", Where(c, ref_key), ds.name));
    verify::CapturedSet cs{"reference", std::move(ds.inputs), {}};
    for (size_t k = 0; k < graph.outputs.size(); ++k)
      cs.outputs.emplace_back(graph.outputs[k].name, std::move((*outs)[k]));
    manifest_sets.push_back(
        {{"set", fmt::format("test_data_set_{}", i)}, {"inputs", ShapesJson(cs.inputs)}});
    captured.push_back(std::move(cs));
  }
  g->sets = static_cast<int64_t>(captured.size());

  // Labels: one per row of the task output over the golden sets, in order.
  if (c.task) {
    int64_t rows = 0;
    size_t k = std::find(g->outputs.begin(), g->outputs.end(), c.task->output) - g->outputs.begin();
    for (const auto& cs : captured) {
      const Value& v = cs.outputs[k].second;
      if (!v.is_tensor() || !verify::IsClassifierOutput(v.tensor()))
        return InvalidError(
            "{}: '{}' is not a classifier output ([N, C] float with C > 1) on set {}",
            Where(c, "task.output"), c.task->output, cs.kind);
      rows += v.tensor().dim(0);
    }
    auto labels = ReadNpy(c.task->labels);
    if (!labels.ok()) return labels.status().With(Where(c, "task.labels"));
    if (!IsInteger(labels->dtype()) || labels->rank() != 1)
      return InvalidError("{}: expected a 1-D array of integer class ids, got {}{}",
                          Where(c, "task.labels"), DTypeName(labels->dtype()),
                          ShapeToString(labels->shape()));
    if (labels->size() < rows || (c.samples == 0 && labels->size() != rows))
      return InvalidError("{}: '{}' holds {} labels, the golden sets have {} rows of '{}'",
                          Where(c, "task.labels"), c.task->labels, labels->size(), rows,
                          c.task->output);
    std::vector<int64_t> ids = labels->ToInt64Vector();
    ids.resize(static_cast<size_t>(rows));
    g->rows = rows;
    g->labels_path = (fs::path(art) / "golden" / "labels.npy").string();
    fs::create_directories(fs::path(art) / "golden");
    FERRY_RETURN_IF_ERROR(
        WriteFileAtomic(g->labels_path, SerializeNpy(Tensor::FromVector(ids, {rows}))));
  }
  nlohmann::json dm = {
      {"kind", "reference"}, {"source_sha256", c.source_sha256}, {"sets", manifest_sets}};
  g->data_dir = (fs::path(art) / "golden" / "data").string();
  fs::create_directories(fs::path(art) / "golden");
  FERRY_RETURN_IF_ERROR(
      verify::WriteGoldenDir(g->data_dir, captured, JsonText(dm, 2) + "\n", false));

  // Seeded edge cases: random sets, then zeros and large, with the first set's dims.
  if (c.random_sets > 0 || !c.edge_cases.empty()) {
    verify::CaptureOptions co;
    co.count = static_cast<int>(c.random_sets);
    co.seed = c.seed;
    for (const auto& [n, v] : captured.front().inputs)
      if (v.is_tensor()) co.shapes[n] = v.tensor().shape();
    auto plan = verify::PlanCapture(graph, co);
    if (!plan.ok()) return plan.status().With(Where(c, "reference.edge_cases"));
    std::vector<std::string> kinds(static_cast<size_t>(c.random_sets), "random");
    kinds.insert(kinds.end(), c.edge_cases.begin(), c.edge_cases.end());
    std::vector<verify::CapturedSet> edge;
    nlohmann::json em = nlohmann::json::array();
    for (size_t i = 0; i < kinds.size(); ++i) {
      if (progress) progress("golden edge cases", i, kinds.size());
      verify::GeneratedSet gs = verify::GenerateSet(*plan, co, static_cast<int>(i), kinds[i], 0);
      auto outs = session->Run(gs.inputs);
      if (!outs.ok())
        return outs.status().With(
            fmt::format("{}: source on the {} set", Where(c, "reference.edge_cases"), kinds[i]));
      verify::CapturedSet cs{gs.kind, std::move(gs.inputs), {}};
      for (size_t k = 0; k < graph.outputs.size(); ++k)
        cs.outputs.emplace_back(graph.outputs[k].name, std::move((*outs)[k]));
      em.push_back({{"set", fmt::format("test_data_set_{}", i)},
                    {"kind", kinds[i]},
                    {"inputs", ShapesJson(cs.inputs)}});
      edge.push_back(std::move(cs));
    }
    g->edge_kinds = kinds;
    g->edge_sets = static_cast<int64_t>(edge.size());
    g->edge_dir = (fs::path(art) / "golden" / "edge_cases").string();
    nlohmann::json m = {
        {"kind", "edge_cases"}, {"seed", c.seed}, {"source_sha256", c.source_sha256}, {"sets", em}};
    FERRY_RETURN_IF_ERROR(verify::WriteGoldenDir(g->edge_dir, edge, JsonText(m, 2) + "\n", false));
  }
  return Status::Ok();
}

nlohmann::json TolJson(const ToleranceSpec& t) {
  return {{"atol", t.atol}, {"rtol", t.rtol}};
}

// golden/tolerances.json: what `ferry artifact verify --golden` checks each variant with.
std::string TolerancesJson(const Config& c) {
  nlohmann::json j;
  j["default"] = TolJson(c.tolerance);
  j["outputs"] = nlohmann::json::object();
  for (const auto& [n, t] : c.tolerances) j["outputs"][n] = TolJson(t);
  j["variants"] = nlohmann::json::object();
  for (const auto& v : c.variants) {
    nlohmann::json vj;
    vj["default"] = TolJson(v.tolerance.value_or(c.tolerance));
    vj["edge_cases"] = v.edge_cases;
    vj["outputs"] = nlohmann::json::object();
    std::map<std::string, ToleranceSpec> merged = c.tolerances;
    for (const auto& [n, t] : v.tolerances) merged[n] = t;
    for (const auto& [n, t] : merged) vj["outputs"][n] = TolJson(t);
    if (c.task) {
      auto acc = v.max_accuracy_drop ? v.max_accuracy_drop : c.task->max_accuracy_drop;
      auto cls = v.max_class_drop ? v.max_class_drop : c.task->max_class_drop;
      vj["max_accuracy_drop_pp"] = acc ? nlohmann::json(*acc) : nlohmann::json(nullptr);
      vj["max_class_drop_pp"] = cls ? nlohmann::json(*cls) : nlohmann::json(nullptr);
    }
    j["variants"][v.name] = vj;
  }
  if (c.task)
    j["task"] = {{"output", c.task->output}, {"metric", "top1"}, {"top_k", c.task->top_k}};
  return JsonText(j, 2) + "\n";
}

// ---- the steps ----

std::string NodesText(int64_t before, int64_t after) {
  return fmt::format("{} -> {} nodes", before, after);
}

Result<StepResult> RunStep(const Step& s, const std::string& in, const std::string& out,
                           const Golden& g, std::vector<std::string>* failures) {
  StepResult r;
  r.kind = StepKindName(s.kind);
  auto t0 = Clock::now();
  if (s.kind == Step::Kind::kOptimize) {
    passes::OptimizeFileOptions o;
    o.input = in;
    o.output = out;
    o.passes.level = s.optimize.level;
    o.passes.only = s.optimize.passes;
    o.passes.skip = std::set<std::string>(s.optimize.skip.begin(), s.optimize.skip.end());
    o.fix_shapes = s.optimize.fix_shape;
    o.check.count = s.optimize.check;
    FERRY_ASSIGN_OR_RETURN(auto res, passes::OptimizeFile(o));
    r.summary =
        fmt::format("level {}: {}", s.optimize.level, NodesText(res.nodes_before, res.nodes_after));
    std::string changed;
    for (const auto& p : res.passes)
      if (p.changes)
        changed += fmt::format("{}{} x{}", changed.empty() ? "" : ", ", p.name, p.changes);
    if (!changed.empty()) r.summary += " (" + changed + ")";
  } else if (s.kind == Step::Kind::kConvert) {
    passes::ConvertFileOptions o;
    o.input = in;
    o.output = out;
    o.opset = s.convert.opset;
    o.fp16 = s.convert.fp16;
    o.fp16_options.keep_fp32 =
        std::set<std::string>(s.convert.keep_fp32.begin(), s.convert.keep_fp32.end());
    o.fp16_options.keep_io_types = s.convert.keep_io_types;
    o.check.count = s.convert.check;
    FERRY_ASSIGN_OR_RETURN(auto res, passes::ConvertFile(o));
    r.summary = res.fp16 ? fmt::format("fp16: {} initializers, {} casts, {} nodes kept fp32",
                                       res.fp16_report.converted_initializers,
                                       res.fp16_report.casts_inserted, res.fp16_report.fp32_nodes)
                         : fmt::format("opset {} -> {}", res.opset_from, res.opset_to);
  } else {
    const QuantizeStep& q = s.quantize;
    quant::QuantizeFileOptions o;
    o.input = in;
    o.output = out;
    FERRY_ASSIGN_OR_RETURN(o.mode, quant::ParseQuantMode(q.mode));
    o.calibration = q.calibration;
    FERRY_ASSIGN_OR_RETURN(o.calibrate.method, quant::ParseMethod(q.method));
    o.calibrate.max_samples = q.max_samples;
    FERRY_ASSIGN_OR_RETURN(o.quantize.activation_type,
                           quant::ParseActivationType(q.activation_type));
    o.quantize.per_channel = q.per_channel;
    o.quantize.symmetric = q.symmetric;
    o.quantize.reduce_range = q.reduce_range;
    o.quantize.exclude = std::set<std::string>(q.exclude.begin(), q.exclude.end());
    o.threads = kArtifactThreads;  // calibration ranges must not depend on --threads
    o.latency_runs = 0;
    if (q.accuracy_budget) {
      o.eval = g.data_dir;
      o.labels = g.labels_path;
      o.accuracy_budget = q.accuracy_budget;
    }
    FERRY_ASSIGN_OR_RETURN(auto res, quant::QuantizeFile(o));
    if (!res.written) {
      failures->push_back(res.verdict().message());
      return r;
    }
    r.summary =
        fmt::format("{} {}{}: {} quantized, {} int8 weights", q.mode,
                    q.mode == "static" ? q.method : "", q.per_channel ? " per-channel" : "",
                    Plural(static_cast<int64_t>(res.summary.quantized_nodes.size()), "node"),
                    res.summary.weights);
    if (res.selection)
      r.summary +=
          fmt::format(", {} kept float for the accuracy budget",
                      Plural(static_cast<int64_t>(res.selection->sel.kept_float.size()), "layer"));
  }
  r.seconds = Since(t0);
  return r;
}

// ---- verification ----

std::map<std::string, verify::Tolerance> ToVerify(const std::map<std::string, ToleranceSpec>& m) {
  std::map<std::string, verify::Tolerance> out;
  for (const auto& [n, t] : m) out[n] = verify::Tolerance{t.atol, t.rtol};
  return out;
}

Status VerifyVariant(const Config& c, const Variant& v, const Golden& g, const std::string& model,
                     VariantResult* vr, int threads, ProgressFn progress) {
  GateSpec spec;
  spec.tolerance = vr->tolerance = v.tolerance.value_or(c.tolerance);
  vr->tolerances = c.tolerances;
  for (const auto& [n, t] : v.tolerances) vr->tolerances[n] = t;
  spec.tolerances = vr->tolerances;
  if (c.task) {
    spec.task_output = c.task->output;
    spec.top_k = c.task->top_k;
    spec.max_accuracy_drop = v.max_accuracy_drop ? v.max_accuracy_drop : c.task->max_accuracy_drop;
    spec.max_class_drop = v.max_class_drop ? v.max_class_drop : c.task->max_class_drop;
  }
  FERRY_ASSIGN_OR_RETURN(GateResult gate,
                         RunGate(v.name, model, g.data_dir, v.edge_cases ? g.edge_dir : "",
                                 g.labels_path, spec, progress));
  vr->golden = std::move(gate.golden);
  vr->edge = std::move(gate.edge);
  vr->task = std::move(gate.task);
  vr->failures.insert(vr->failures.end(), gate.failures.begin(), gate.failures.end());
  if (vr->failures.empty()) return Status::Ok();
  // Localise: every intermediate tensor against the source's, the first out of tolerance named.
  verify::VerifyOptions lo;
  lo.reference = c.source;
  lo.candidate = model;
  lo.data = g.data_dir;
  lo.per_layer = true;
  lo.tol = verify::Tolerance{spec.tolerance.atol, spec.tolerance.rtol};
  lo.tolerances = ToVerify(spec.tolerances);
  lo.threads = threads;
  auto layers = verify::Verify(lo);
  if (!layers.ok()) {
    vr->failures.push_back(fmt::format("variant '{}': per-layer localisation failed: {}", v.name,
                                       layers.status().message()));
    return Status::Ok();
  }
  vr->layers = std::move(layers).value();
  std::string where;
  if (vr->layers->first_failed_layer >= 0) {
    const verify::LayerRow& row =
        vr->layers->layers[static_cast<size_t>(vr->layers->first_failed_layer)];
    where = fmt::format(
        "first layer out of tolerance: '{}' ({} '{}'), max abs {:.6g} (atol {:g}, rtol {:g})",
        row.tensor, row.op_type, row.node, row.stats.max_abs, row.tol.atol, row.tol.rtol);
  } else {
    where = "no intermediate tensor of the source is out of tolerance";
  }
  for (auto& f : vr->failures) f += "; " + where;
  return Status::Ok();
}

Status AuditVariant(const Config& c, const std::string& model, VariantResult* vr) {
  if (c.audit_targets.empty()) return Status::Ok();
  passes::AuditOptions ao;
  ao.targets = c.audit_targets;
  auto r = passes::AuditFile(model, ao);
  if (!r.ok()) return r.status().With(fmt::format("auditing variant '{}'", vr->name));
  vr->audit = std::move(r).value();
  if (!c.audit_strict) return Status::Ok();
  for (const auto& t : vr->audit->targets)
    for (const auto& grp : t.unsupported)
      if (grp.scope != passes::AuditScope::kAsIs)
        vr->failures.push_back(fmt::format(
            "variant '{}': audit target '{}': {} ({} node{}, first '{}'; audit.strict is on)",
            vr->name, t.name, grp.reason, grp.nodes.size(), grp.nodes.size() == 1 ? "" : "s",
            grp.nodes.empty() ? "" : grp.nodes.front()));
  return Status::Ok();
}

// Moves `from` to `to`, replacing `to` (a folder) only once `from` is in place.
// The preprocessing spec and the class names, checked against the source's interface.
Status LoadPrepAndClassNames(const Config& c, const ops::InspectResult& src, BuildResult* r) {
  if (!c.prep.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(c.prep, ec))
      return InvalidError("{}: '{}' is not a file", Where(c, "prep"), c.prep);
    auto spec = prep::LoadSpec(c.prep);
    if (!spec.ok()) return spec.status().With(Where(c, "prep"));
    for (const auto& in : spec->inputs) {
      const ir::ValueInfo* target = nullptr;
      for (const auto& si : src.inputs) target = si.name == in.name ? &si : target;
      if (!target)
        return InvalidError("{}: the spec's input '{}' is not an input of the source model",
                            Where(c, "prep"), in.name);
      std::vector<int64_t> want =
          in.is_table() ? std::vector<int64_t>{-1, in.table.width()} : prep::OutputShape(in.image);
      const DType made = in.is_table() ? in.table.dtype : in.image.dtype;
      const auto& t = target->type;
      if (t.kind == ir::TypeInfo::Kind::kTensor && t.elem_type != made)
        return InvalidError("{}: input '{}': the spec makes {} but the model takes {}",
                            Where(c, "prep"), in.name, DTypeName(made), DTypeName(t.elem_type));
      if (t.kind != ir::TypeInfo::Kind::kTensor || !t.shape) continue;
      bool fits = t.shape->size() == want.size();
      for (size_t d = 0; fits && d < want.size(); ++d) {
        const auto& dim = (*t.shape)[d];
        bool batch_axis = (in.is_table() || in.image.batch) && d == 0;  // requests stack on it
        fits = batch_axis || want[d] < 0 || !dim.value || *dim.value == want[d];
      }
      if (!fits)
        return InvalidError(
            "{}: input '{}': the spec makes dims [{}] (-1: the image's) but the model declares {}",
            Where(c, "prep"), in.name, fmt::join(want, ", "), t.ToString());
    }
    FERRY_ASSIGN_OR_RETURN(r->prep_sha256, FileSha256(c.prep));
    r->prep_json = prep::SpecToJson(*spec);
  }
  if (!c.class_names.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(c.class_names, ec))
      return InvalidError("{}: '{}' is not a file", Where(c, "class_names"), c.class_names);
    FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(c.class_names));
    r->class_names = SplitLines(bytes);
    for (size_t i = 0; i < r->class_names.size(); ++i)
      if (r->class_names[i].empty())
        return InvalidError("{}: line {} of '{}' is empty (one class name per line)",
                            Where(c, "class_names"), i + 1, c.class_names);
    if (r->class_names.empty())
      return InvalidError("{}: '{}' holds no class names", Where(c, "class_names"), c.class_names);
    if (c.task) {
      for (const auto& o : src.outputs) {
        if (o.name != c.task->output || !o.type.shape || o.type.shape->empty()) continue;
        const auto& last = o.type.shape->back();
        if (last.value && *last.value != static_cast<int64_t>(r->class_names.size()))
          return InvalidError("{}: '{}' names {} classes but the task output '{}' has {}",
                              Where(c, "class_names"), c.class_names, r->class_names.size(), o.name,
                              *last.value);
      }
    }
    FERRY_ASSIGN_OR_RETURN(r->class_names_sha256, FileSha256(c.class_names));
  }
  return Status::Ok();
}

Status Install(const fs::path& from, const fs::path& to, bool replace) {
  std::error_code ec;
  if (replace && fs::exists(to, ec)) {
    fs::path old = to;
    old += ".old-" + std::to_string(::getpid());
    fs::rename(to, old, ec);
    if (ec)
      return InvalidError("cannot move the existing '{}' aside: {}", to.string(), ec.message());
    fs::rename(from, to, ec);
    if (ec) {
      std::error_code e2;
      fs::rename(old, to, e2);
      return InvalidError("cannot rename '{}' to '{}': {}", from.string(), to.string(),
                          ec.message());
    }
    fs::remove_all(old, ec);
    return Status::Ok();
  }
  fs::rename(from, to, ec);
  if (ec)
    return InvalidError("cannot rename '{}' to '{}': {}", from.string(), to.string(), ec.message());
  return Status::Ok();
}

Status WriteReport(const BuildResult& r) {
  std::error_code ec;
  fs::create_directories(r.report_dir, ec);
  if (ec) return InvalidError("cannot create '{}': {}", r.report_dir, ec.message());
  FERRY_RETURN_IF_ERROR(
      WriteFileAtomic((fs::path(r.report_dir) / "report.md").string(), FormatMarkdown(r)));
  return WriteFileAtomic((fs::path(r.report_dir) / "report.html").string(), FormatHtml(r));
}

}  // namespace

Result<BuildResult> Build(const BuildOptions& o) {
  auto t_all = Clock::now();
  if (o.threads < 0) return UsageError("--threads must be >= 0, got {}", o.threads);
  if (o.bench_runs < 0) return UsageError("--bench-runs must be >= 0, got {}", o.bench_runs);
  if (o.out.empty()) return UsageError("-o OUT is required");
  FERRY_ASSIGN_OR_RETURN(Config c, LoadConfig(o.config));
  BuildResult r;
  r.config = o.config;
  r.command_line = o.command_line;
  fs::path out = fs::path(o.out);
  if (out.filename().empty()) out = out.parent_path();
  r.out = out.string();
  r.archive = o.archive ? r.out + ".ferry" : "";
  r.report_dir = r.out + ".report";
  r.threads = o.threads;
  r.name = c.name;
  r.version = c.version;
  r.source = c.source;
  r.source_sha256 = c.source_sha256;
  r.config_sha256 = c.sha256;
  r.fallback = c.fallback;
  std::error_code ec;
  if (fs::exists(out, ec) && !o.force)
    return InvalidError("'{}' already exists (pass --force to replace it)", r.out);
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    return InvalidError("'{}' exists and is not a folder", r.out);
  if (o.archive && fs::exists(r.archive, ec) && !o.force)
    return InvalidError("'{}' already exists (pass --force to replace it)", r.archive);
  FERRY_RETURN_IF_ERROR(CheckInputs(c));
  {
    FERRY_ASSIGN_OR_RETURN(auto src, ir::LoadModel(c.source));
    r.source_inspect = ops::Inspect(*src, c.source_name);
  }
  FERRY_RETURN_IF_ERROR(LoadPrepAndClassNames(c, r.source_inspect, &r));

  fs::path parent = out.parent_path();
  if (parent.empty()) parent = ".";
  if (!fs::is_directory(parent, ec))
    return InvalidError("-o {}: the folder '{}' does not exist", r.out, parent.string());
  std::string tmpl = (parent / ("." + out.filename().string() + ".build-XXXXXX")).string();
  if (!mkdtemp(tmpl.data()))
    return InvalidError("cannot create a temporary folder in '{}'", parent.string());
  TempDir tmp{tmpl};
  const fs::path art = fs::path(tmpl) / "artifact";
  const fs::path work = fs::path(tmpl) / "work";
  fs::create_directories(art / "models");
  fs::create_directories(work);

  // 1. Golden outputs from the source, before any step.
  auto t0 = Clock::now();
  Golden g;
  FERRY_RETURN_IF_ERROR(CaptureGoldenSet(c, art.string(), &g, o.progress));
  g.tolerances_path = (art / "golden" / "tolerances.json").string();
  FERRY_RETURN_IF_ERROR(WriteFileAtomic(g.tolerances_path, TolerancesJson(c)));
  r.golden_sets = g.sets;
  r.golden_rows = g.rows;
  r.edge_sets = g.edge_sets;
  r.edge_kinds = g.edge_kinds;
  r.labels = !g.labels_path.empty();
  r.timings.emplace_back("golden set", Since(t0));

  // 2. Each variant's steps, then 3. its gate.
  for (size_t vi = 0; vi < c.variants.size(); ++vi) {
    const Variant& v = c.variants[vi];
    VariantResult vr;
    vr.name = v.name;
    vr.file = "models/" + v.name + ".onnx";
    std::string cur = c.source;
    auto tv = Clock::now();
    for (size_t si = 0; si < v.steps.size(); ++si) {
      const Step& s = v.steps[si];
      std::string key = fmt::format("variants[{}].steps[{}]", vi, si);
      if (o.progress)
        o.progress(fmt::format("{}: {}", v.name, StepKindName(s.kind)), si, v.steps.size());
      std::string next =
          (work / fmt::format("{}.{}.{}.onnx", v.name, si, StepKindName(s.kind))).string();
      size_t before = vr.failures.size();
      auto sr = RunStep(s, cur, next, g, &vr.failures);
      if (!sr.ok()) {
        // A calibration folder that does not fit the model is named by its key.
        const std::string& msg = sr.status().message();
        bool calib = s.kind == Step::Kind::kQuantize &&
                     (msg.rfind("--calibration", 0) == 0 || msg.rfind("calibration", 0) == 0);
        std::string at = key + "." + StepKindName(s.kind) + (calib ? ".calibration" : "");
        return sr.status().With(fmt::format("{}: variant '{}'", Where(c, at), v.name));
      }
      vr.steps.push_back(std::move(sr).value());
      if (vr.failures.size() > before) {
        for (size_t f = before; f < vr.failures.size(); ++f)
          vr.failures[f] = fmt::format("variant '{}', step {} ({}): {}", v.name, si,
                                       StepKindName(s.kind), vr.failures[f]);
        break;
      }
      cur = next;
    }
    r.timings.emplace_back(fmt::format("{}: steps", v.name), Since(tv));
    if (!vr.failures.empty()) {
      r.failures.insert(r.failures.end(), vr.failures.begin(), vr.failures.end());
      r.variants.push_back(std::move(vr));
      continue;
    }
    const std::string model = (art / vr.file).string();
    FERRY_RETURN_IF_ERROR(CopyFile(cur, model));
    vr.bytes = fs::file_size(model, ec);
    FERRY_ASSIGN_OR_RETURN(vr.sha256, FileSha256(model));
    {
      FERRY_ASSIGN_OR_RETURN(auto m, ir::LoadModel(model));
      vr.inspect = ops::Inspect(*m, vr.file);
    }
    tv = Clock::now();
    FERRY_RETURN_IF_ERROR(VerifyVariant(c, v, g, model, &vr, o.threads, o.progress));
    r.timings.emplace_back(fmt::format("{}: verify", v.name), Since(tv));
    tv = Clock::now();
    FERRY_RETURN_IF_ERROR(AuditVariant(c, model, &vr));
    if (!c.audit_targets.empty())
      r.timings.emplace_back(fmt::format("{}: audit", v.name), Since(tv));
    if (o.bench_runs > 0 && vr.failures.empty()) {
      tv = Clock::now();
      if (o.progress) o.progress("bench " + v.name, 0, 1);
      runtime::BenchOptions bo;
      bo.model = model;
      bo.session.threads = o.threads;
      bo.runs = o.bench_runs;
      bo.warmup = 3;
      auto b = runtime::Bench(bo);
      if (!b.ok()) return b.status().With(fmt::format("benchmarking variant '{}'", v.name));
      vr.bench = std::move(b).value();
      vr.bench->model = vr.file;
      r.timings.emplace_back(fmt::format("{}: bench", v.name), Since(tv));
    }
    r.failures.insert(r.failures.end(), vr.failures.begin(), vr.failures.end());
    r.variants.push_back(std::move(vr));
  }

  if (!r.failures.empty()) {
    r.timings.emplace_back("total", Since(t_all));
    FERRY_RETURN_IF_ERROR(WriteReport(r));
    return r;
  }

  // 4. The artifact's own files, then the manifest over all of them.
  FERRY_RETURN_IF_ERROR(WriteFileAtomic((art / "ferry.yaml").string(), c.text));
  if (!c.prep.empty()) FERRY_RETURN_IF_ERROR(CopyFile(c.prep, (art / kPrepFile).string()));
  if (!c.class_names.empty())
    FERRY_RETURN_IF_ERROR(CopyFile(c.class_names, (art / kClassNamesFile).string()));
  FERRY_RETURN_IF_ERROR(WriteFileAtomic((art / "RUNBOOK.md").string(), Runbook(r, c)));
  FERRY_ASSIGN_OR_RETURN(r.files, DigestFiles(art.string(), {"manifest.json"}));
  std::string manifest = ManifestJson(r, c);
  FERRY_RETURN_IF_ERROR(WriteFileAtomic((art / "manifest.json").string(), manifest));
  {
    Sha256 h;
    h.Update(manifest.data(), manifest.size());
    r.manifest_sha256 = h.HexDigest();
  }
  r.files.push_back(FileEntry{"manifest.json", manifest.size(), r.manifest_sha256});
  NormalizeModes(art);

  // 5. Into place: the archive first (from the finished folder), then the folder.
  if (o.archive) {
    auto ta = Clock::now();
    FERRY_RETURN_IF_ERROR(WriteTar(art.string(), r.archive));
    ::chmod(r.archive.c_str(), 0644);
    r.timings.emplace_back("archive", Since(ta));
  }
  FERRY_RETURN_IF_ERROR(Install(art, out, o.force));
  r.written = true;
  r.timings.emplace_back("total", Since(t_all));
  FERRY_RETURN_IF_ERROR(WriteReport(r));
  return r;
}

}  // namespace ferry::artifact
