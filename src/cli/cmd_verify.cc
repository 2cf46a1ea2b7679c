// ferry verify --reference REF --candidate CAND --data DIR [--per-layer] [--validate]
// ferry verify MODEL --golden DIR [--validate]
// ferry verify MODEL --validate --data DIR
// Common: [--atol A] [--rtol R] [--tolerance OUTPUT=ATOL,RTOL]... [--top-k K] [--labels FILE]
//         [--json] [--report FILE.md] [--threads N]
// Exit 0 when every output is within tolerance (and, with --validate, no layer produced NaN or
// Inf), 1 otherwise; 2/3/4 for usage, invalid input, unsupported.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "cli/command.h"
#include "cli/tensor_files.h"
#include "cli/weights_digest.h"
#include "core/npy.h"
#include "ir/onnx_io.h"
#include "runtime/session.h"
#include "verify/golden.h"
#include "verify/layers.h"
#include "verify/report.h"

namespace ferry::cli {

namespace {

using verify::Tolerance;

struct Options {
  std::string model, reference, candidate, data, golden, labels, report;
  double atol = 1e-4, rtol = 1e-3;
  std::vector<std::string> tolerances;
  int64_t top_k = 5;
  int threads = 0;
  bool json = false, per_layer = false, validate = false;
};

// The process's command line, shell-quoted where needed (for the report).
std::string CommandLine() {
  auto bytes = ReadFileBytes("/proc/self/cmdline");
  if (!bytes.ok()) return "ferry verify ...";
  std::string out, arg;
  auto flush = [&] {
    bool plain = !arg.empty() && arg.find_first_not_of(
                                     "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO"
                                     "PQRSTUVWXYZ0123456789-_./=,:+@%") == std::string::npos;
    if (!out.empty()) out += ' ';
    if (plain) {
      out += arg;
    } else {
      out += '\'';
      for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
    arg.clear();
  };
  for (char c : bytes.value()) {
    if (c == '\0')
      flush();
    else
      arg += c;
  }
  if (!arg.empty()) flush();
  return out;
}

Result<double> ParseNumber(const std::string& s, const std::string& what) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= 0) || v == HUGE_VAL)
    return UsageError("{}: '{}' is not a non-negative number", what, s);
  return v;
}

Result<std::map<std::string, Tolerance>> ParseTolerances(const Options& o) {
  std::map<std::string, Tolerance> out;
  for (const auto& spec : o.tolerances) {
    size_t eq = spec.rfind('=');
    size_t comma = eq == std::string::npos ? std::string::npos : spec.find(',', eq);
    if (eq == std::string::npos || eq == 0 || comma == std::string::npos)
      return UsageError("--tolerance expects OUTPUT=ATOL,RTOL, got '{}'", spec);
    Tolerance t;
    FERRY_ASSIGN_OR_RETURN(t.atol, ParseNumber(spec.substr(eq + 1, comma - eq - 1),
                                               "--tolerance " + spec + " (atol)"));
    FERRY_ASSIGN_OR_RETURN(t.rtol,
                           ParseNumber(spec.substr(comma + 1), "--tolerance " + spec + " (rtol)"));
    out[spec.substr(0, eq)] = t;
  }
  return out;
}

Result<std::vector<int64_t>> ReadLabels(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(Tensor t, ReadNpy(path));
  if (!IsInteger(t.dtype()))
    return InvalidError("--labels '{}': expected integer class ids, got dtype {}", path,
                        DTypeName(t.dtype()));
  return t.ToInt64Vector();
}

std::string TypeString(const Value& v) {
  if (v.is_tensor())
    return fmt::format("{}{}", DTypeName(v.tensor().dtype()), ShapeToString(v.tensor().shape()));
  if (v.is_sequence()) return fmt::format("sequence of {}", v.sequence().size());
  return "none";
}

struct LoadedModel {
  std::shared_ptr<const ir::Model> model;
  std::unique_ptr<runtime::Session> session;
  std::string sha256;
};

Result<LoadedModel> LoadAndPrepare(const std::string& path, const std::string& role, int threads) {
  auto m = ir::LoadModel(path);
  if (!m.ok()) return m.status().With(role);
  LoadedModel l;
  l.model = std::shared_ptr<const ir::Model>(std::move(m).value());
  l.sha256 = DigestWeights(l.model->graph).sha256;
  runtime::SessionOptions so;
  so.threads = threads;
  auto s = runtime::Session::Create(l.model, so);
  if (!s.ok()) return s.status().With(fmt::format("{} '{}'", role, path));
  l.session = std::move(s).value();
  return l;
}

// The NaN/Inf observer for one set: initializers (first set) and the set's inputs are known.
runtime::NodeObserver WatchNan(verify::NanWatch& w, const ir::Graph& g, const verify::DataSet& set,
                               bool first) {
  if (first) w.KnownInitializers(g);
  for (const auto& [n, v] : set.inputs) w.Known(n, v);
  return w.Observer(set.name);
}

void Progress(const std::string& role, size_t i, size_t n) {
  static const bool tty = isatty(2);
  if (!tty) return;
  std::fprintf(stderr, "\r%s: set %zu/%zu ", role.c_str(), i + 1, n);
  if (i + 1 == n) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// Compares one output of one set into `out` (labels consumed from *offset).
Status CompareOutput(const Value& ref, const Value& cand, const std::string& set,
                     const std::vector<int64_t>* labels, int64_t* label_offset,
                     verify::OutputResult* out) {
  if (out->type.empty()) out->type = TypeString(ref);
  if (out->state != verify::OutputResult::State::kCompared) return Status::Ok();
  if (!ref.is_tensor() || !cand.is_tensor()) {
    if (ref.is_sequence() && cand.is_sequence() &&
        ref.sequence().size() == cand.sequence().size()) {
      for (size_t i = 0; i < ref.sequence().size(); ++i) {
        std::string why = verify::Incompatibility(ref.sequence()[i], cand.sequence()[i]);
        if (!why.empty()) {
          out->state = verify::OutputResult::State::kIncomparable;
          out->note = fmt::format("{} item {}: {}", set, i, why);
          return Status::Ok();
        }
        out->stats.Add(ref.sequence()[i], cand.sequence()[i], out->tol);
      }
      return Status::Ok();
    }
    out->state = verify::OutputResult::State::kIncomparable;
    out->note = fmt::format("{}: {} vs {}", set, TypeString(ref), TypeString(cand));
    return Status::Ok();
  }
  const Tensor& r = ref.tensor();
  const Tensor& c = cand.tensor();
  std::string why = verify::Incompatibility(r, c);
  if (!why.empty()) {
    out->state = verify::OutputResult::State::kIncomparable;
    out->note = fmt::format("{}: {}", set, why);
    return Status::Ok();
  }
  out->stats.Add(r, c, out->tol);
  if (out->classifier && verify::IsClassifierOutput(r)) {
    const int64_t* lab = nullptr;
    if (labels) {
      if (*label_offset + r.dim(0) > static_cast<int64_t>(labels->size()))
        return InvalidError("holds {} labels, but output '{}' has more rows ({} so far)",
                            labels->size(), out->name, *label_offset + r.dim(0));
      lab = labels->data() + *label_offset;
      *label_offset += r.dim(0);
    }
    out->classifier->Add(r, c, lab);
  }
  return Status::Ok();
}

struct Comparison {
  const Options& o;
  std::map<std::string, Tolerance> overrides;
  std::optional<std::vector<int64_t>> labels;
  std::map<std::string, int64_t> label_offsets;

  Tolerance TolFor(const std::string& name) const {
    auto it = overrides.find(name);
    if (it != overrides.end()) return it->second;
    return Tolerance{o.atol, o.rtol};
  }

  verify::OutputResult NewOutput(const std::string& name, const Value& ref) const {
    verify::OutputResult r;
    r.name = name;
    r.tol = TolFor(name);
    r.type = TypeString(ref);
    if (ref.is_tensor() && verify::IsClassifierOutput(ref.tensor())) r.classifier.emplace(o.top_k);
    return r;
  }

  Status Add(verify::OutputResult* out, const Value& ref, const Value& cand,
             const std::string& set) {
    return CompareOutput(ref, cand, set, labels ? &*labels : nullptr, &label_offsets[out->name],
                         out)
        .With(fmt::format("--labels '{}'", o.labels));
  }

  Status FinishLabels(const std::vector<verify::OutputResult>& outs) {
    if (!labels) return Status::Ok();
    bool used = false;
    for (const auto& out : outs) {
      if (!out.classifier || out.state != verify::OutputResult::State::kCompared) continue;
      used = true;
      int64_t rows = label_offsets[out.name];
      if (rows != static_cast<int64_t>(labels->size()))
        return InvalidError("--labels '{}' holds {} labels, output '{}' has {} rows", o.labels,
                            labels->size(), out.name, rows);
    }
    if (!used)
      return InvalidError(
          "--labels '{}' given, but no output is a classifier ([N, C] float, C > 1)", o.labels);
    return Status::Ok();
  }
};

// Every --tolerance name must be an output (or, per layer, a node output) of `g`.
Status CheckOverrideNames(const Comparison& cmp, const ir::Graph& g, bool per_layer) {
  for (const auto& [name, t] : cmp.overrides) {
    bool known = std::any_of(g.outputs.begin(), g.outputs.end(),
                             [&](const ir::ValueInfo& vi) { return vi.name == name; });
    for (const auto& n : g.nodes)
      if (per_layer && std::find(n.outputs.begin(), n.outputs.end(), name) != n.outputs.end())
        known = true;
    if (!known)
      return UsageError("--tolerance names '{}', which is not an output{} of the model", name,
                        per_layer ? " or a node output" : "");
  }
  return Status::Ok();
}

Result<std::vector<verify::DataSet>> LoadSets(const std::string& dir, const ir::Graph& g,
                                              bool want_outputs) {
  verify::DataReaders readers{ReadInputFile, SanitizeFileName};
  return verify::LoadDataSets(dir, g, readers, want_outputs);
}

Status RunCompare(const Options& o, Comparison& cmp, verify::Report* rep) {
  rep->mode = "compare";
  rep->data = o.data;
  std::unique_ptr<verify::LayerCapture> capture;
  if (o.per_layer) {
    FERRY_ASSIGN_OR_RETURN(capture, verify::LayerCapture::Create(
                                        [&cmp](const std::string& n) { return cmp.TolFor(n); }));
  }
  // Reference first; its session is released before the candidate is loaded.
  std::vector<verify::DataSet> sets;
  std::vector<std::vector<Value>> ref_outs;
  std::vector<std::string> out_names;
  verify::NanWatch ref_nan, cand_nan;
  {
    FERRY_ASSIGN_OR_RETURN(LoadedModel ref, LoadAndPrepare(o.reference, "reference", o.threads));
    rep->models.push_back({"reference", o.reference, ref.sha256});
    FERRY_RETURN_IF_ERROR(CheckOverrideNames(cmp, ref.model->graph, o.per_layer));
    FERRY_ASSIGN_OR_RETURN(sets, LoadSets(o.data, ref.model->graph, false));
    for (const auto& vi : ref.model->graph.outputs) out_names.push_back(vi.name);
    for (size_t i = 0; i < sets.size(); ++i) {
      Progress("reference", i, sets.size());
      runtime::RunOptions ro;
      ro.observer = verify::Chain(
          capture ? capture->ReferenceObserver(static_cast<int>(i)) : nullptr,
          o.validate ? WatchNan(ref_nan, ref.model->graph, sets[i], i == 0) : nullptr);
      auto outs = ref.session->Run(sets[i].inputs, ro);
      if (!outs.ok())
        return outs.status().With(fmt::format("reference '{}', set {}", o.reference, sets[i].name));
      if (capture) FERRY_RETURN_IF_ERROR(capture->status());
      ref_outs.push_back(std::move(outs).value());
    }
  }
  rep->sets = static_cast<int64_t>(sets.size());
  FERRY_ASSIGN_OR_RETURN(LoadedModel cand, LoadAndPrepare(o.candidate, "candidate", o.threads));
  rep->models.push_back({"candidate", o.candidate, cand.sha256});
  const ir::Graph& cg = cand.model->graph;
  // Candidate inputs must be a subset of the reference's (fed by name).
  std::set<std::string> fed;
  for (const auto& [n, v] : sets.front().inputs) fed.insert(n);
  for (const auto* vi : cg.RealInputs())
    if (!fed.count(vi->name)) {
      std::string names;
      for (const auto& n : fed) names += (names.empty() ? "" : ", ") + n;
      return InvalidError(
          "candidate '{}' has input '{}', which the reference does not have (the "
          "reference's inputs: {})",
          o.candidate, vi->name, names);
    }
  std::vector<int> cand_index;  // reference output k -> candidate output index or -1
  std::set<std::string> ref_names(out_names.begin(), out_names.end());
  for (size_t k = 0; k < out_names.size(); ++k) {
    int idx = -1;
    for (size_t j = 0; j < cg.outputs.size(); ++j)
      if (cg.outputs[j].name == out_names[k]) idx = static_cast<int>(j);
    cand_index.push_back(idx);
    rep->outputs.push_back(cmp.NewOutput(out_names[k], ref_outs.front()[k]));
    if (idx < 0) {
      std::string names;
      for (const auto& vi : cg.outputs) names += (names.empty() ? "" : ", ") + vi.name;
      rep->outputs.back().state = verify::OutputResult::State::kUnmatched;
      rep->outputs.back().note = fmt::format(
          "the candidate has no output of that name (its "
          "outputs: {})",
          names);
    }
  }
  for (const auto& vi : cg.outputs)
    if (!ref_names.count(vi.name)) rep->candidate_only_outputs.push_back(vi.name);
  for (size_t i = 0; i < sets.size(); ++i) {
    Progress("candidate", i, sets.size());
    verify::NamedValues feeds;
    for (const auto& [n, v] : sets[i].inputs)
      for (const auto* vi : cg.RealInputs())
        if (vi->name == n) feeds.emplace_back(n, v);
    runtime::RunOptions ro;
    ro.observer = verify::Chain(capture ? capture->CandidateObserver(static_cast<int>(i)) : nullptr,
                                o.validate ? WatchNan(cand_nan, cg, sets[i], i == 0) : nullptr);
    auto outs = cand.session->Run(feeds, ro);
    if (!outs.ok())
      return outs.status().With(fmt::format("candidate '{}', set {}", o.candidate, sets[i].name));
    if (capture) FERRY_RETURN_IF_ERROR(capture->status());
    for (size_t k = 0; k < out_names.size(); ++k)
      if (cand_index[k] >= 0)
        FERRY_RETURN_IF_ERROR(cmp.Add(&rep->outputs[k], ref_outs[i][k],
                                      (*outs)[static_cast<size_t>(cand_index[k])], sets[i].name));
    ref_outs[i].clear();
    sets[i].inputs.clear();
  }
  FERRY_RETURN_IF_ERROR(cmp.FinishLabels(rep->outputs));
  if (capture) {
    rep->per_layer = true;
    rep->layers = capture->Finish();
    rep->first_failed_layer = verify::FirstFailedLayer(rep->layers);
    rep->candidate_only_tensors = capture->candidate_only();
  }
  if (o.validate) {
    rep->validate = true;
    rep->nan.push_back({"reference", ref_nan.finding()});
    rep->nan.push_back({"candidate", cand_nan.finding()});
  }
  return Status::Ok();
}

Status RunGolden(const Options& o, Comparison& cmp, verify::Report* rep) {
  rep->mode = "golden";
  rep->data = o.golden;
  FERRY_ASSIGN_OR_RETURN(LoadedModel m, LoadAndPrepare(o.model, "model", o.threads));
  rep->models.push_back({"golden", o.golden, ""});
  rep->models.push_back({"model", o.model, m.sha256});
  const ir::Graph& g = m.model->graph;
  FERRY_RETURN_IF_ERROR(CheckOverrideNames(cmp, g, false));
  FERRY_ASSIGN_OR_RETURN(auto sets, LoadSets(o.golden, g, true));
  rep->sets = static_cast<int64_t>(sets.size());
  verify::NanWatch nan;
  for (size_t i = 0; i < sets.size(); ++i) {
    Progress("model", i, sets.size());
    runtime::RunOptions ro;
    if (o.validate) ro.observer = WatchNan(nan, g, sets[i], i == 0);
    auto outs = m.session->Run(sets[i].inputs, ro);
    if (!outs.ok())
      return outs.status().With(fmt::format("model '{}', set {}", o.model, sets[i].name));
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      // LoadDataSets maps every expected output to a model output, one each.
      const Value* want = nullptr;
      for (const auto& [n, v] : sets[i].expected)
        if (n == g.outputs[k].name) want = &v;
      if (!want)
        return InvalidError("'{}': no expected value for output '{}'", sets[i].name,
                            g.outputs[k].name);
      if (rep->outputs.size() == k) rep->outputs.push_back(cmp.NewOutput(g.outputs[k].name, *want));
      FERRY_RETURN_IF_ERROR(cmp.Add(&rep->outputs[k], *want, (*outs)[k], sets[i].name));
    }
    sets[i] = verify::DataSet{};
  }
  FERRY_RETURN_IF_ERROR(cmp.FinishLabels(rep->outputs));
  if (o.validate) {
    rep->validate = true;
    rep->nan.push_back({"model", nan.finding()});
  }
  return Status::Ok();
}

Status RunValidate(const Options& o, verify::Report* rep) {
  rep->mode = "validate";
  rep->data = o.data;
  rep->validate = true;
  FERRY_ASSIGN_OR_RETURN(LoadedModel m, LoadAndPrepare(o.model, "model", o.threads));
  rep->models.push_back({"model", o.model, m.sha256});
  FERRY_ASSIGN_OR_RETURN(auto sets, LoadSets(o.data, m.model->graph, false));
  rep->sets = static_cast<int64_t>(sets.size());
  verify::NanWatch nan;
  for (size_t i = 0; i < sets.size(); ++i) {
    Progress("model", i, sets.size());
    runtime::RunOptions ro;
    ro.observer = WatchNan(nan, m.model->graph, sets[i], i == 0);
    auto outs = m.session->Run(sets[i].inputs, ro);
    if (!outs.ok())
      return outs.status().With(fmt::format("model '{}', set {}", o.model, sets[i].name));
    if (nan.finding().found) break;
  }
  rep->nan.push_back({"model", nan.finding()});
  return Status::Ok();
}

Status CheckUsage(const Options& o) {
  bool pair = !o.reference.empty() || !o.candidate.empty();
  if (!o.model.empty() && pair)
    return UsageError(
        "give either MODEL (with --golden or --validate) or --reference and "
        "--candidate, not both");
  if (pair) {
    if (o.reference.empty() || o.candidate.empty())
      return UsageError("--reference and --candidate go together");
    if (o.data.empty()) return UsageError("--data DIR is required with --reference/--candidate");
    if (!o.golden.empty())
      return UsageError("--golden checks one MODEL; with --reference/--candidate use --data");
    return Status::Ok();
  }
  if (o.model.empty())
    return UsageError(
        "nothing to verify: give --reference A --candidate B --data DIR, or MODEL "
        "--golden DIR, or MODEL --validate --data DIR");
  if (o.per_layer) return UsageError("--per-layer needs two models (--reference and --candidate)");
  if (!o.golden.empty()) {
    if (!o.data.empty()) return UsageError("--golden DIR holds the inputs; drop --data");
    return Status::Ok();
  }
  if (!o.validate) return UsageError("with one MODEL, give --golden DIR or --validate --data DIR");
  if (o.data.empty()) return UsageError("--validate with one MODEL needs --data DIR");
  if (!o.labels.empty())
    return UsageError("--labels needs outputs to compare (--golden or two models)");
  return Status::Ok();
}

int RunVerify(const Options& o) {
  if (Status st = CheckUsage(o); !st.ok()) return ReportError(st);
  if (o.threads < 0) return ReportError(UsageError("--threads must be >= 0, got {}", o.threads));
  if (o.top_k < 1) return ReportError(UsageError("--top-k must be >= 1, got {}", o.top_k));
  if (!(o.atol >= 0) || !(o.rtol >= 0))
    return ReportError(
        UsageError("--atol and --rtol must be >= 0 (got {} and {})", o.atol, o.rtol));
  Comparison cmp{o, {}, std::nullopt, {}};
  auto tols = ParseTolerances(o);
  if (!tols.ok()) return ReportError(tols.status());
  cmp.overrides = std::move(tols).value();
  if (!o.labels.empty()) {
    auto labels = ReadLabels(o.labels);
    if (!labels.ok()) return ReportError(labels.status());
    cmp.labels = std::move(labels).value();
  }
  verify::Report rep;
  rep.command_line = CommandLine();
  rep.tol = Tolerance{o.atol, o.rtol};
  Status st = !o.reference.empty() ? RunCompare(o, cmp, &rep)
              : !o.golden.empty()  ? RunGolden(o, cmp, &rep)
                                   : RunValidate(o, &rep);
  if (!st.ok()) return ReportError(st);
  if (!o.report.empty()) {
    Status w = WriteFileAtomic(o.report, verify::FormatMarkdown(rep));
    if (!w.ok()) return ReportError(w.With("--report"));
  }
  std::string text = o.json ? verify::FormatJson(rep) : verify::FormatText(rep);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return rep.pass() ? 0 : 1;
}

}  // namespace

void SetupVerify(CLI::App& sub, Action* action) {
  auto o = std::make_shared<Options>();
  sub.add_option("model", o->model, "Model to check against --golden data, or to --validate");
  sub.add_option("--reference", o->reference, "Reference ONNX model");
  sub.add_option("--candidate", o->candidate, "Candidate ONNX model (compared to the reference)");
  sub.add_option("--data", o->data,
                 "Input sets: test_data_set_*/input_N.pb, or one .npy per input named after it "
                 "(a leading extra dim holds several sets)");
  sub.add_option("--golden", o->golden, "Expected outputs: test_data_set_*/{input,output}_N.pb");
  sub.add_option("--atol", o->atol, "Absolute tolerance (default 1e-4)");
  sub.add_option("--rtol", o->rtol, "Relative tolerance (default 1e-3)");
  sub.add_option("--tolerance", o->tolerances, "OUTPUT=ATOL,RTOL for one output; repeatable");
  sub.add_option("--top-k", o->top_k, "K for top-k agreement of classifier outputs (default 5)");
  sub.add_option("--labels", o->labels, ".npy of class ids, one per classifier row over all sets");
  sub.add_flag("--per-layer", o->per_layer,
               "Compare every intermediate tensor by name; name the first layer out of tolerance");
  sub.add_flag("--validate", o->validate, "Report the first layer producing NaN or Inf");
  sub.add_option("--report", o->report, "Write a Markdown report to this file");
  sub.add_option("--threads", o->threads, "Threads (default: one per core)");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunVerify(*o); }; });
}

}  // namespace ferry::cli
