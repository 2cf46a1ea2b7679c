#include "verify/verify.h"

#include <algorithm>
#include <set>

#include "core/npy.h"
#include "ir/onnx_io.h"
#include "ir/weights_digest.h"
#include "runtime/session.h"
#include "verify/golden.h"
#include "verify/layers.h"

namespace ferry::verify {

namespace {

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
  l.sha256 = ir::DigestWeights(l.model->graph).sha256;
  runtime::SessionOptions so;
  so.threads = threads;
  auto s = runtime::Session::Create(l.model, so);
  if (!s.ok()) return s.status().With(fmt::format("{} '{}'", role, path));
  l.session = std::move(s).value();
  return l;
}

// The NaN/Inf observer for one set: initializers (first set) and the set's inputs are known.
runtime::NodeObserver WatchNan(NanWatch& w, const ir::Graph& g, const DataSet& set, bool first) {
  if (first) w.KnownInitializers(g);
  for (const auto& [n, v] : set.inputs) w.Known(n, v);
  return w.Observer(set.name);
}

// Compares one output of one set into `out` (labels consumed from *offset).
Status CompareOutput(const Value& ref, const Value& cand, const std::string& set,
                     const std::vector<int64_t>* labels, int64_t* label_offset, OutputResult* out) {
  if (out->type.empty()) out->type = TypeString(ref);
  if (out->state != OutputResult::State::kCompared) return Status::Ok();
  if (!ref.is_tensor() || !cand.is_tensor()) {
    if (ref.is_sequence() && cand.is_sequence() &&
        ref.sequence().size() == cand.sequence().size()) {
      for (size_t i = 0; i < ref.sequence().size(); ++i) {
        std::string why = Incompatibility(ref.sequence()[i], cand.sequence()[i]);
        if (!why.empty()) {
          out->state = OutputResult::State::kIncomparable;
          out->note = fmt::format("{} item {}: {}", set, i, why);
          return Status::Ok();
        }
        out->stats.Add(ref.sequence()[i], cand.sequence()[i], out->tol);
      }
      return Status::Ok();
    }
    out->state = OutputResult::State::kIncomparable;
    out->note = fmt::format("{}: {} vs {}", set, TypeString(ref), TypeString(cand));
    return Status::Ok();
  }
  const Tensor& r = ref.tensor();
  const Tensor& c = cand.tensor();
  std::string why = Incompatibility(r, c);
  if (!why.empty()) {
    out->state = OutputResult::State::kIncomparable;
    out->note = fmt::format("{}: {}", set, why);
    return Status::Ok();
  }
  out->stats.Add(r, c, out->tol);
  if (out->classifier && IsClassifierOutput(r)) {
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
  const VerifyOptions& o;
  std::optional<std::vector<int64_t>> labels;
  std::map<std::string, int64_t> label_offsets;

  Tolerance TolFor(const std::string& name) const {
    auto it = o.tolerances.find(name);
    if (it != o.tolerances.end()) return it->second;
    return o.tol;
  }

  OutputResult NewOutput(const std::string& name, const Value& ref) const {
    OutputResult r;
    r.name = name;
    r.tol = TolFor(name);
    r.type = TypeString(ref);
    if (ref.is_tensor() && IsClassifierOutput(ref.tensor())) r.classifier.emplace(o.top_k);
    return r;
  }

  Status Add(OutputResult* out, const Value& ref, const Value& cand, const std::string& set) {
    return CompareOutput(ref, cand, set, labels ? &*labels : nullptr, &label_offsets[out->name],
                         out)
        .With(fmt::format("--labels '{}'", o.labels));
  }

  Status FinishLabels(const std::vector<OutputResult>& outs) {
    if (!labels) return Status::Ok();
    bool used = false;
    for (const auto& out : outs) {
      if (!out.classifier || out.state != OutputResult::State::kCompared) continue;
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
  for (const auto& entry : cmp.o.tolerances) {
    const std::string& name = entry.first;  // not a binding: clang 14 cannot capture those
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

Result<std::vector<DataSet>> LoadSets(const std::string& dir, const ir::Graph& g,
                                      bool want_outputs) {
  return LoadDataSets(dir, g, FileReaders(), want_outputs);
}

// The input sets: given in memory, else read from `data`.
Result<std::vector<DataSet>> InputSets(const VerifyOptions& o, const ir::Graph& g) {
  if (!o.sets.empty()) return o.sets;
  return LoadSets(o.data, g, false);
}

Status RunCompare(const VerifyOptions& o, Comparison& cmp, Report* rep) {
  rep->mode = "compare";
  rep->data = o.data;
  std::unique_ptr<LayerCapture> capture;
  if (o.per_layer) {
    FERRY_ASSIGN_OR_RETURN(
        capture, LayerCapture::Create([&cmp](const std::string& n) { return cmp.TolFor(n); }));
  }
  // Reference first; its session is released before the candidate is loaded.
  std::vector<DataSet> sets;
  std::vector<std::vector<Value>> ref_outs;
  std::vector<std::string> out_names;
  NanWatch ref_nan, cand_nan;
  {
    FERRY_ASSIGN_OR_RETURN(LoadedModel ref, LoadAndPrepare(o.reference, "reference", o.threads));
    rep->models.push_back({"reference", o.reference, ref.sha256});
    FERRY_RETURN_IF_ERROR(CheckOverrideNames(cmp, ref.model->graph, o.per_layer));
    FERRY_ASSIGN_OR_RETURN(sets, InputSets(o, ref.model->graph));
    for (const auto& vi : ref.model->graph.outputs) out_names.push_back(vi.name);
    for (size_t i = 0; i < sets.size(); ++i) {
      if (o.progress) o.progress("reference", i, sets.size());
      runtime::RunOptions ro;
      ro.observer =
          Chain(capture ? capture->ReferenceObserver(static_cast<int>(i)) : nullptr,
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
      rep->outputs.back().state = OutputResult::State::kUnmatched;
      rep->outputs.back().note = fmt::format(
          "the candidate has no output of that name (its "
          "outputs: {})",
          names);
    }
  }
  for (const auto& vi : cg.outputs)
    if (!ref_names.count(vi.name)) rep->candidate_only_outputs.push_back(vi.name);
  for (size_t i = 0; i < sets.size(); ++i) {
    if (o.progress) o.progress("candidate", i, sets.size());
    NamedValues feeds;
    for (const auto& [n, v] : sets[i].inputs)
      for (const auto* vi : cg.RealInputs())
        if (vi->name == n) feeds.emplace_back(n, v);
    runtime::RunOptions ro;
    ro.observer = Chain(capture ? capture->CandidateObserver(static_cast<int>(i)) : nullptr,
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
    rep->first_failed_layer = FirstFailedLayer(rep->layers);
    rep->candidate_only_tensors = capture->candidate_only();
  }
  if (o.validate) {
    rep->validate = true;
    rep->nan.push_back({"reference", ref_nan.finding()});
    rep->nan.push_back({"candidate", cand_nan.finding()});
  }
  return Status::Ok();
}

Status RunGolden(const VerifyOptions& o, Comparison& cmp, Report* rep) {
  rep->mode = "golden";
  rep->data = o.golden;
  FERRY_ASSIGN_OR_RETURN(LoadedModel m, LoadAndPrepare(o.model, "model", o.threads));
  rep->models.push_back({"golden", o.golden, ""});
  rep->models.push_back({"model", o.model, m.sha256});
  const ir::Graph& g = m.model->graph;
  FERRY_RETURN_IF_ERROR(CheckOverrideNames(cmp, g, false));
  FERRY_ASSIGN_OR_RETURN(auto sets, LoadSets(o.golden, g, true));
  rep->sets = static_cast<int64_t>(sets.size());
  NanWatch nan;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (o.progress) o.progress("model", i, sets.size());
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
    sets[i] = DataSet{};
  }
  FERRY_RETURN_IF_ERROR(cmp.FinishLabels(rep->outputs));
  if (o.validate) {
    rep->validate = true;
    rep->nan.push_back({"model", nan.finding()});
  }
  return Status::Ok();
}

Status RunValidate(const VerifyOptions& o, Report* rep) {
  rep->mode = "validate";
  rep->data = o.data;
  rep->validate = true;
  FERRY_ASSIGN_OR_RETURN(LoadedModel m, LoadAndPrepare(o.model, "model", o.threads));
  rep->models.push_back({"model", o.model, m.sha256});
  FERRY_ASSIGN_OR_RETURN(auto sets, InputSets(o, m.model->graph));
  rep->sets = static_cast<int64_t>(sets.size());
  NanWatch nan;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (o.progress) o.progress("model", i, sets.size());
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

Status CheckUsage(const VerifyOptions& o) {
  bool pair = !o.reference.empty() || !o.candidate.empty();
  if (!o.model.empty() && pair)
    return UsageError(
        "give either MODEL (with --golden or --validate) or --reference and "
        "--candidate, not both");
  if (pair) {
    if (o.reference.empty() || o.candidate.empty())
      return UsageError("--reference and --candidate go together");
    if (o.data.empty() && o.sets.empty())
      return UsageError("--data DIR is required with --reference/--candidate");
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
  if (o.data.empty() && o.sets.empty())
    return UsageError("--validate with one MODEL needs --data DIR");
  if (!o.labels.empty())
    return UsageError("--labels needs outputs to compare (--golden or two models)");
  return Status::Ok();
}

}  // namespace

Result<Report> Verify(const VerifyOptions& o) {
  FERRY_RETURN_IF_ERROR(CheckUsage(o));
  if (o.threads < 0) return UsageError("--threads must be >= 0, got {}", o.threads);
  if (o.top_k < 1) return UsageError("--top-k must be >= 1, got {}", o.top_k);
  if (!(o.tol.atol >= 0) || !(o.tol.rtol >= 0))
    return UsageError("--atol and --rtol must be >= 0 (got {} and {})", o.tol.atol, o.tol.rtol);
  Comparison cmp{o, std::nullopt, {}};
  if (!o.labels.empty()) {
    FERRY_ASSIGN_OR_RETURN(cmp.labels, ReadLabels(o.labels));
  }
  Report rep;
  rep.command_line = o.command_line;
  rep.tol = o.tol;
  Status st = !o.reference.empty() ? RunCompare(o, cmp, &rep)
              : !o.golden.empty()  ? RunGolden(o, cmp, &rep)
                                   : RunValidate(o, &rep);
  if (!st.ok()) return st;
  return rep;
}

}  // namespace ferry::verify
