#include "artifact/gate.h"

#include "artifact/build.h"
#include "verify/verify.h"

namespace ferry::artifact {

namespace {

std::string OutputFailure(const std::string& variant, const verify::OutputResult& o,
                          const std::string& which) {
  if (o.state != verify::OutputResult::State::kCompared)
    return fmt::format("variant '{}': output '{}' ({}): {}", variant, o.name, which, o.note);
  const verify::Stats& s = o.stats;
  return fmt::format(
      "variant '{}': output '{}' out of tolerance on the {}: {} of {} elements ({:.2f}%), max abs "
      "{:.6g}, max rel {:.6g} (atol {:g}, rtol {:g}; it would pass at atol {:.3g})",
      variant, o.name, which, s.out_of_tolerance, s.elements, 100.0 * s.out_share(), s.max_abs,
      s.max_rel, o.tol.atol, o.tol.rtol, s.min_atol);
}

TaskResult Task(const std::string& variant, const verify::OutputResult& o, const GateSpec& spec,
                std::vector<std::string>* failures) {
  TaskResult t;
  t.output = o.name;
  t.max_accuracy_drop = spec.max_accuracy_drop;
  t.max_class_drop = spec.max_class_drop;
  const verify::ClassifierStats& cs = *o.classifier;
  t.rows = cs.labeled;
  t.golden_accuracy = cs.ref_accuracy();
  t.variant_accuracy = cs.cand_accuracy();
  t.drop_pp = 100.0 * (t.golden_accuracy - t.variant_accuracy);
  t.top1_agreement = cs.top1();
  for (const auto& [label, pc] : cs.per_class) {
    ClassResult cr{label, pc.rows, pc.ref_correct, pc.cand_correct, 0, false};
    if (pc.rows)
      cr.drop_pp = 100.0 * static_cast<double>(pc.ref_correct - pc.cand_correct) /
                   static_cast<double>(pc.rows);
    cr.failed = t.max_class_drop && cr.drop_pp > *t.max_class_drop + 1e-9;
    t.classes.push_back(cr);
  }
  // Per class first (the most specific), then overall.
  for (const auto& cr : t.classes)
    if (cr.failed) {
      t.failed = true;
      failures->push_back(fmt::format(
          "variant '{}': class {} top-1 accuracy {:.2f}% -> {:.2f}% ({} rows; drop {:.2f} pp > "
          "max_class_drop {:g} pp)",
          variant, cr.label, 100.0 * static_cast<double>(cr.golden_correct) / cr.rows,
          100.0 * static_cast<double>(cr.variant_correct) / cr.rows, cr.rows, cr.drop_pp,
          *t.max_class_drop));
    }
  if (t.max_accuracy_drop && t.drop_pp > *t.max_accuracy_drop + 1e-9) {
    t.failed = true;
    failures->push_back(fmt::format(
        "variant '{}': top-1 accuracy on '{}' {:.2f}% -> {:.2f}% over {} rows (drop {:.2f} pp > "
        "max_accuracy_drop {:g} pp)",
        variant, t.output, 100 * t.golden_accuracy, 100 * t.variant_accuracy, t.rows, t.drop_pp,
        *t.max_accuracy_drop));
  }
  return t;
}

}  // namespace

Result<GateResult> RunGate(const std::string& variant, const std::string& model,
                           const std::string& data_dir, const std::string& edge_dir,
                           const std::string& labels, const GateSpec& spec, ProgressFn progress) {
  GateResult g;
  verify::VerifyOptions vo;
  vo.model = model;
  vo.golden = data_dir;
  vo.labels = spec.task_output.empty() ? "" : labels;
  vo.tol = verify::Tolerance{spec.tolerance.atol, spec.tolerance.rtol};
  for (const auto& [n, t] : spec.tolerances) vo.tolerances[n] = verify::Tolerance{t.atol, t.rtol};
  vo.top_k = spec.top_k;
  vo.threads = kArtifactThreads;
  vo.progress = progress;
  auto rep = verify::Verify(vo);
  if (!rep.ok()) return rep.status().With(fmt::format("verifying variant '{}'", variant));
  g.golden = std::move(rep).value();
  for (const auto& o : g.golden.outputs)
    if (o.failed()) g.failures.push_back(OutputFailure(variant, o, "golden set"));
  if (!edge_dir.empty()) {
    vo.golden = edge_dir;
    vo.labels.clear();
    auto edge = verify::Verify(vo);
    if (!edge.ok())
      return edge.status().With(fmt::format("verifying variant '{}' (edge cases)", variant));
    g.edge = std::move(edge).value();
    for (const auto& o : g.edge->outputs)
      if (o.failed()) g.failures.push_back(OutputFailure(variant, o, "edge cases"));
  }
  // The task metric's failures (overall, per class) lead: they are what the release is judged
  // on, and `ferry build`'s error line names the first failure.
  if (!spec.task_output.empty() && !labels.empty()) {
    std::vector<std::string> task_failures;
    for (const auto& o : g.golden.outputs)
      if (o.name == spec.task_output && o.classifier)
        g.task = Task(variant, o, spec, &task_failures);
    g.failures.insert(g.failures.begin(), task_failures.begin(), task_failures.end());
  }
  return g;
}

}  // namespace ferry::artifact
