// The build report as one self-contained HTML file (report.html, beside report.md in
// OUT.report/): the tables of report.md plus figures drawn here as inline SVG. Nothing in it
// refers outside the file: no script, no stylesheet, font or image link, no URL; every string
// that comes from the model or the config is HTML-escaped.
//
// Figures (each a <figure id="..."> holding one <svg>, a title and a caption; the ids are
// stable, tests look them up):
//   fig-error-K         per source output K (0-based, the source's output order): how much of
//                       its tolerance each element used on the golden set, per variant
//                       (verify::Stats::error_buckets);
//   fig-classes         with a task: top-1 accuracy per class, the source and each variant;
//   fig-layers-VARIANT  per variant: the max abs error of each intermediate tensor along the
//                       source's execution order, the first out of tolerance marked; per-layer
//                       localisation runs only when a gate failed, otherwise the figure says so;
//   fig-latency         the per-run latencies of each benchmarked variant, p50/p90/p99 marked
//                       (or why there are none).
#include <algorithm>
#include <cmath>
#include <string_view>
#include <tuple>

#include "artifact/build.h"
#include "artifact/html.h"

namespace ferry::artifact {

namespace {

using namespace html;  // NOLINT: the page's building blocks

// ---- escaping and small formatting ----

std::string Code(std::string_view s) {
  return "<code>" + Esc(s) + "</code>";
}

// At most n bytes of s (on a UTF-8 boundary), "…" appended when cut: long tensor names in labels.
std::string Clip(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t cut = n;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\u2026";
}

std::string Pct(double f) {
  return fmt::format("{:.2f}%", 100 * f);
}

std::string Role(const BuildResult& r, size_t i) {
  if (i == 0) return "default";
  return r.variants[i].name == r.fallback ? "fallback" : "variant";
}

// Variant colours (colour-blind safe, Okabe-Ito), by variant index; the source is grey.
const char* Colour(size_t i) {
  static const char* kColours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                   "#56B4E9", "#D55E00", "#F0E442", "#000000"};
  return kColours[i % (sizeof(kColours) / sizeof(kColours[0]))];
}
constexpr const char* kSourceColour = "#888888";
constexpr const char* kFailColour = "#C62828";

// ---- the figures ----

// fig-error-K: per output, the decade buckets of q = |variant - golden| / tolerance, per variant.
std::string ErrorFigure(const BuildResult& r, size_t k, const std::string& output) {
  const std::string id = fmt::format("fig-error-{}", k);
  const std::string title =
      fmt::format("Error distribution of output '{}' on the golden set", Clip(output, 60));
  struct Series {
    size_t variant;
    const verify::Stats* stats;
  };
  std::vector<Series> series;
  int64_t max_count = 1;
  for (size_t i = 0; i < r.variants.size(); ++i)
    for (const auto& o : r.variants[i].golden.outputs)
      if (o.name == output && o.state == verify::OutputResult::State::kCompared) {
        series.push_back({i, &o.stats});
        for (int64_t c : o.stats.error_buckets) max_count = std::max(max_count, c);
      }
  if (series.empty())
    return EmptyFigure(id, title, "no data: no variant was compared on this output",
                       "No variant was compared on this output (a step failed before "
                       "verification, or the output could not be compared: see the tables).");
  Frame f;
  f.log_y = true;
  f.y_lo = std::log10(0.5);  // a count of 1 still shows as a bar
  f.y_hi = std::ceil(std::log10(static_cast<double>(max_count)) + 0.05);
  f.x_lo = 0;
  f.x_hi = verify::Stats::kErrorBuckets;
  std::string s = SvgOpen(f.bottom() + 70, title);
  // The failing buckets (q > 1) shaded, the tolerance line between them and the passing ones.
  s += fmt::format(
      "<rect class=\"fail-zone\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>out of "
      "tolerance</title></rect>",
      Num(f.X(verify::Stats::kUpTo10)), Num(f.top),
      Num(f.X(verify::Stats::kErrorBuckets) - f.X(verify::Stats::kUpTo10)), Num(f.height));
  s += YAxis(f, "elements (log scale)");
  double tx = f.X(verify::Stats::kUpTo10);
  s += SvgLine(tx, f.top - 4, tx, f.bottom(), "class=\"limit\"");
  s += SvgText(tx + 4, f.top + 10, "tolerance (q = 1)", "class=\"tick limit-label\"");
  const double group = f.width / static_cast<double>(verify::Stats::kErrorBuckets);
  const double bar = std::min(28.0, (group - 8) / static_cast<double>(series.size()));
  for (int b = 0; b < verify::Stats::kErrorBuckets; ++b) {
    double gx = f.X(b) + (group - bar * static_cast<double>(series.size())) / 2;
    for (size_t j = 0; j < series.size(); ++j) {
      const verify::Stats& st = *series[j].stats;
      int64_t c = st.error_buckets[static_cast<size_t>(b)];
      if (c == 0) continue;
      double x = gx + bar * static_cast<double>(j), y = f.Y(static_cast<double>(c));
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {} of {} "
          "elements ({}) with q {}</title></rect>",
          Num(x), Num(y), Num(bar - 1), Num(f.bottom() - y), Colour(series[j].variant),
          Esc(r.variants[series[j].variant].name), c, st.elements,
          Pct(static_cast<double>(c) / static_cast<double>(std::max<int64_t>(st.elements, 1))),
          Esc(verify::kErrorBucketNames[static_cast<size_t>(b)]));
      s += SvgText(x + bar / 2, y - 3, fmt::format("{}", c),
                   "class=\"count\" text-anchor=\"middle\"");
    }
    s += SvgText(f.X(b) + group / 2, f.bottom() + 16,
                 std::string(verify::kErrorBucketNames[static_cast<size_t>(b)]),
                 "class=\"tick\" text-anchor=\"middle\"");
  }
  s += XTitle(f, "q = |variant - golden| / (atol + rtol * |golden|), decade buckets",
              f.bottom() + 36);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const auto& se : series)
    legend.emplace_back(Colour(se.variant), r.variants[se.variant].name);
  s += Legend(legend, f.left, f.bottom() + 60);
  std::string caption = fmt::format(
      "Output {} over the golden set (not the edge cases): for every element, how much of its "
      "tolerance the variant's difference from the source's output used. q = 0: equal; q &le; 1 "
      "passes; the shaded buckets (q &gt; 1) and NaN/Inf mismatches are out of tolerance. Counts "
      "on a log scale; each variant's own atol/rtol (see its table).",
      Code(output));
  return Figure(id, s, caption);
}

// fig-classes: top-1 accuracy per class, the source's and each variant's (dots, joined).
std::string ClassFigure(const BuildResult& r) {
  const std::string id = "fig-classes";
  const std::string title = "Top-1 accuracy per class, source and variants";
  const TaskResult* first = nullptr;
  for (const auto& v : r.variants)
    if (v.task && !first) first = &*v.task;
  if (!first || first->classes.empty())
    return EmptyFigure(id, title, "no data: no variant reached the task metric",
                       "No variant reached the task metric (a step failed before verification).");
  const auto& classes = first->classes;
  auto acc = [](int64_t correct, int64_t rows) {
    return rows ? 100.0 * static_cast<double>(correct) / static_cast<double>(rows) : 0.0;
  };
  double lo = 100;
  for (const auto& v : r.variants)
    if (v.task)
      for (const auto& c : v.task->classes)
        lo = std::min({lo, acc(c.golden_correct, c.rows), acc(c.variant_correct, c.rows)});
  Frame f;
  f.y_lo = std::max(0.0, std::floor((lo - 5) / 10) * 10);
  f.y_hi = 100;
  f.x_lo = 0;
  f.x_hi = static_cast<double>(classes.size());
  std::string s = SvgOpen(f.bottom() + 70, title);
  s += YAxis(f, "top-1 accuracy (%)");
  const double group = f.width / static_cast<double>(classes.size());
  size_t nv = 0;
  for (const auto& v : r.variants) nv += v.task.has_value();
  for (size_t ci = 0; ci < classes.size(); ++ci) {
    const ClassResult& c = classes[ci];
    double cx = f.X(static_cast<double>(ci)) + group / 2;
    double sy = f.Y(acc(c.golden_correct, c.rows));
    bool failed = false;
    size_t j = 0;
    for (size_t i = 0; i < r.variants.size(); ++i) {
      const auto& v = r.variants[i];
      if (!v.task) continue;
      const ClassResult* vc = nullptr;
      for (const auto& x : v.task->classes)
        if (x.label == c.label) vc = &x;
      if (!vc) continue;
      failed = failed || vc->failed;
      double x = cx + (static_cast<double>(j++) - (static_cast<double>(nv) - 1) / 2) *
                          std::min(14.0, group / (static_cast<double>(nv) + 1));
      double y = f.Y(acc(vc->variant_correct, vc->rows));
      s += SvgLine(cx, sy, x, y, fmt::format("stroke=\"{}\" stroke-width=\"1\"", Colour(i)));
      s += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"{}\"{}><title>class {}, {}: {} of {} "
          "({:.2f}%), drop {:.2f} pp{}</title></circle>",
          Num(x), Num(y), Colour(i), vc->failed ? " stroke=\"#C62828\" stroke-width=\"2.5\"" : "",
          c.label, Esc(v.name), vc->variant_correct, vc->rows, acc(vc->variant_correct, vc->rows),
          vc->drop_pp, vc->failed ? " FAIL" : "");
    }
    s += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"white\" stroke=\"{}\" "
        "stroke-width=\"2\"><title>"
        "class {}, source: {} of {} ({:.2f}%)</title></circle>",
        Num(cx), Num(sy), kSourceColour, c.label, c.golden_correct, c.rows,
        acc(c.golden_correct, c.rows));
    std::string label = fmt::format("{}", c.label);
    if (c.label >= 0 && static_cast<size_t>(c.label) < r.class_names.size())
      label += " " + Clip(r.class_names[static_cast<size_t>(c.label)], 12);
    s += SvgText(cx, f.bottom() + 16, label + (failed ? " \u2717" : ""),
                 failed ? "class=\"tick fail\" text-anchor=\"middle\""
                        : "class=\"tick\" text-anchor=\"middle\"");
  }
  s += XTitle(f, "class (\u2717: beyond max_class_drop)", f.bottom() + 36);
  std::vector<std::pair<std::string, std::string>> legend = {{kSourceColour, "source"}};
  for (size_t i = 0; i < r.variants.size(); ++i)
    if (r.variants[i].task) legend.emplace_back(Colour(i), r.variants[i].name);
  s += Legend(legend, f.left, f.bottom() + 60);
  std::string caption = fmt::format(
      "Top-1 accuracy on {} per class over {} labeled rows: the source (hollow) and each variant "
      "(filled, joined to the source's dot); a red ring marks a class whose drop exceeds the "
      "variant's max_class_drop. The axis starts at {:g}%.",
      Code(first->output), first->rows, f.y_lo);
  return Figure(id, s, caption);
}

// fig-layers-VARIANT: max abs error per intermediate tensor along the source's execution order.
std::string LayerFigure(const VariantResult& v, size_t vi) {
  const std::string id = "fig-layers-" + Esc(v.name);  // variant names are [A-Za-z0-9_-]
  const std::string title = fmt::format("Per-layer error of '{}' against the source", v.name);
  if (!v.layers || v.layers->layers.empty()) {
    std::string note = v.failures.empty() ? "no per-layer data: the gate passed"
                                          : "no per-layer data for this variant";
    std::string why =
        v.failures.empty()
            ? "The gate passed: per-layer localisation runs only when a gate fails, so there is "
              "no per-layer error to show for this variant."
        : v.sha256.empty()
            ? "A step of this variant failed before verification: there is no model to compare "
              "layer by layer."
            : "The gate failed but per-layer localisation did not run (see the gate failures).";
    return EmptyFigure(id, title, note, why);
  }
  const auto& rows = v.layers->layers;
  const int64_t first = v.layers->first_failed_layer;
  double lo = 1e300, hi = 0;
  for (const auto& row : rows)
    if (row.state == verify::LayerRow::State::kCompared && row.stats.max_abs > 0) {
      lo = std::min(lo, row.stats.max_abs);
      hi = std::max(hi, row.stats.max_abs);
    }
  Frame f;
  f.log_y = true;
  if (hi == 0) lo = hi = 1;
  f.y_hi = std::ceil(std::log10(hi) + 0.05);
  f.y_lo = std::max(std::floor(std::log10(lo)) - 1, f.y_hi - 12);  // zeros sit on the bottom
  int64_t last = 0;
  for (const auto& row : rows) last = std::max(last, row.index);
  f.x_lo = -0.5;
  f.x_hi = static_cast<double>(last) + 0.5;
  std::string s = SvgOpen(f.bottom() + 70, title);
  s += YAxis(f, "max abs error (log scale)");
  for (double t : NiceTicks(0, static_cast<double>(last), 10)) {
    if (t != std::floor(t)) continue;
    s += SvgLine(f.X(t), f.bottom(), f.X(t), f.bottom() + 4, "class=\"axis\"");
    s += SvgText(f.X(t), f.bottom() + 16, TickLabel(t), "class=\"tick\" text-anchor=\"middle\"");
  }
  if (first >= 0) {
    // The mark, and its label inside the plot beside it (left of it in the right part).
    const auto& row = rows[static_cast<size_t>(first)];
    double x = f.X(static_cast<double>(first));
    bool right_part = x > f.left + f.width * 0.6;
    s += SvgLine(x, f.top, x, f.bottom(), "class=\"first\"");
    s += SvgText(x + (right_part ? -6 : 6), f.top + 12,
                 fmt::format("first out of tolerance: #{} {} ({})", first, Clip(row.tensor, 40),
                             Clip(row.op_type, 20)),
                 right_part ? "class=\"tick fail\" text-anchor=\"end\"" : "class=\"tick fail\"");
  }
  std::string path, dots;
  for (const auto& row : rows) {
    double x = f.X(static_cast<double>(row.index));
    if (row.state != verify::LayerRow::State::kCompared) {
      dots += fmt::format(
          "<rect class=\"uncompared\" x=\"{}\" y=\"{}\" width=\"2\" height=\"6\"><title>#{} {} "
          "({} '{}'): {}</title></rect>",
          Num(x - 1), Num(f.bottom() - 6), row.index, Esc(row.tensor), Esc(row.op_type),
          Esc(row.node),
          row.state == verify::LayerRow::State::kUnmatched ? "not in the variant (fused or renamed)"
                                                           : Esc(row.note));
      continue;
    }
    double y = f.Y(std::max(row.stats.max_abs, std::pow(10, f.y_lo)));
    path += fmt::format("{}{},{}", path.empty() ? "M" : " L", Num(x), Num(y));
    dots += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"><title>#{} {} ({} '{}'): max abs {:.3g}, "
        "{} of {} out of tolerance (atol {:g}, rtol {:g})</title></circle>",
        Num(x), Num(y), row.index == first ? "5" : "3", row.failed() ? kFailColour : Colour(vi),
        row.index, Esc(row.tensor), Esc(row.op_type), Esc(row.node), row.stats.max_abs,
        row.stats.out_of_tolerance, row.stats.elements, row.tol.atol, row.tol.rtol);
  }
  if (!path.empty())
    s += fmt::format(
        "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1\" opacity=\"0.5\"/>", path,
        Colour(vi));
  s += dots;
  s += XTitle(f, "layer (position in the source's execution order)", f.bottom() + 36);
  s += Legend({{Colour(vi), "within tolerance"},
               {kFailColour, "out of tolerance"},
               {"#bbbbbb", "not compared (tick at the bottom)"}},
              f.left, f.bottom() + 60);
  std::string caption = fmt::format(
      "Variant {}: every intermediate tensor of the source against the variant's tensor of the "
      "same name on the golden set, max abs error on a log scale (zero at the bottom). {}",
      Code(v.name),
      first >= 0 ? fmt::format("The red line marks the first layer out of tolerance, #{} {} ({} "
                               "{}).",
                               first, Code(rows[static_cast<size_t>(first)].tensor),
                               Esc(rows[static_cast<size_t>(first)].op_type),
                               Code(rows[static_cast<size_t>(first)].node))
                 : std::string("No intermediate tensor is out of tolerance."));
  return Figure(id, s, caption);
}

// fig-latency: one row per benchmarked variant, a dot per timed run, p50/p90/p99 marked.
std::string LatencyFigure(const BuildResult& r) {
  const std::string id = "fig-latency";
  const std::string title = "Latency per run";
  std::vector<size_t> benched;
  double lo = 1e300, hi = 0;
  for (size_t i = 0; i < r.variants.size(); ++i)
    if (r.variants[i].bench && !r.variants[i].bench->run_ms.empty()) {
      benched.push_back(i);
      for (double t : r.variants[i].bench->run_ms) {
        lo = std::min(lo, t);
        hi = std::max(hi, t);
      }
    }
  if (benched.empty())
    return EmptyFigure(id, title, "no data: no variant was benchmarked",
                       "No variant was benchmarked (--bench-runs 0, or every variant failed its "
                       "gate: only variants that pass are benchmarked).");
  Frame f;
  f.left = 120;
  f.width = kWidth - f.left - 30;
  f.height = 50.0 * static_cast<double>(benched.size());
  // From a little below the fastest run to a little above the slowest (not from 0: the spread
  // is what the figure shows; the tick labels give the scale).
  const double pad = std::max((hi - lo) * 0.08, hi * 0.02 + 1e-6);
  f.x_lo = std::max(0.0, lo - pad);
  f.x_hi = hi + pad;
  std::string s = SvgOpen(f.bottom() + 70, title);
  for (double t : NiceTicks(f.x_lo, f.x_hi, 8)) {
    s += SvgLine(f.X(t), f.top, f.X(t), f.bottom(), "class=\"grid\"");
    s += SvgText(f.X(t), f.bottom() + 16, TickLabel(t), "class=\"tick\" text-anchor=\"middle\"");
  }
  s += SvgLine(f.left, f.top, f.left, f.bottom(), "class=\"axis\"");
  s += SvgLine(f.left, f.bottom(), f.right(), f.bottom(), "class=\"axis\"");
  for (size_t row = 0; row < benched.size(); ++row) {
    const VariantResult& v = r.variants[benched[row]];
    const runtime::BenchResult& b = *v.bench;
    double cy = f.top + 25 + 50.0 * static_cast<double>(row);
    s += SvgText(f.left - 8, cy + 4, Clip(v.name, 16), "class=\"tick\" text-anchor=\"end\"");
    for (size_t k = 0; k < b.run_ms.size(); ++k) {
      double jitter = static_cast<double>((k * 7) % 13) - 6;  // deterministic spread
      s += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\" opacity=\"0.6\"><title>run {}: {:.3f} "
          "ms</title></circle>",
          Num(f.X(b.run_ms[k])), Num(cy + jitter * 1.4), Colour(benched[row]), k + 1, b.run_ms[k]);
    }
    // p50 and p99 labelled above the row, p90 below, so that close quantiles stay legible.
    for (auto [q, ms, above] : {std::tuple<const char*, double, bool>{"p50", b.p50_ms, true},
                                {"p90", b.p90_ms, false},
                                {"p99", b.p99_ms, true}}) {
      double x = f.X(ms);
      s += SvgLine(x, cy - 14, x, cy + 14, "class=\"quantile\"");
      s += SvgText(x, above ? cy - 16 : cy + 23, q, "class=\"count\" text-anchor=\"middle\"");
    }
  }
  s += XTitle(f, "ms per run (timed runs after warm-up)", f.bottom() + 36);
  const runtime::BenchResult& b0 = *r.variants[benched.front()].bench;
  std::string caption = fmt::format(
      "Each dot is one timed run of the variant on seeded random inputs ({} runs after {} "
      "warm-up runs, {} engine thread{}), spread vertically only for legibility; the ticks "
      "mark p50, p90 and p99; the axis spans the runs, not from 0. Timings vary from run to run "
      "and are not part of the artifact.",
      b0.runs, b0.warmup, b0.threads, b0.threads == 1 ? "" : "s");
  return Figure(id, s, caption);
}

// ---- the page ----

constexpr const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:24px auto;max-width:1000px;color:#222;line-height:1.4}
h1{font-size:1.6em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:4px}
code{font-family:"DejaVu Sans Mono",monospace;font-size:0.92em;background:#f4f4f4;padding:0 3px;word-break:break-all}
table{border-collapse:collapse;margin:10px 0 18px;font-size:0.88em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0}caption{text-align:left;font-weight:600;padding:4px 0}
.pass{color:#1b7a1b;font-weight:700}.fail,.FAIL{color:#C62828;font-weight:700}
figure{margin:18px 0;padding:8px;border:1px solid #e3e3e3;background:#fff}
figcaption{font-size:0.88em;color:#444;margin-top:4px}
svg text{font-family:"DejaVu Sans",sans-serif}
svg .title{font-size:15px;font-weight:600}svg .tick{font-size:11px;fill:#333}
svg .tick.fail{fill:#C62828;font-weight:600}svg .label{font-size:12px;fill:#222}
svg .count{font-size:9px;fill:#555}svg .note{font-size:13px;fill:#555}
svg .axis{stroke:#333;stroke-width:1}svg .grid{stroke:#e6e6e6;stroke-width:1}
svg .limit{stroke:#C62828;stroke-width:1.5;stroke-dasharray:5 3}svg .limit-label{fill:#C62828}
svg .first{stroke:#C62828;stroke-width:2}svg .fail-zone{fill:#fdecea}
svg .uncompared{fill:#bbbbbb}svg .quantile{stroke:#222;stroke-width:2}
)";

std::string Verdict(bool pass) {
  return pass ? "<span class=\"pass\">pass</span>" : "<span class=\"fail\">FAIL</span>";
}

std::string OutputsTable(const verify::Report& rep, const std::string& title) {
  Table t;
  t.caption = fmt::format("{} ({} sets)", title, rep.sets);
  t.header = {"output",           "atol",     "rtol",   "max abs",
              "max rel",          "mean abs", "cosine", "out of tolerance",
              "min passing atol", "verdict"};
  for (const auto& o : rep.outputs) {
    if (o.state != verify::OutputResult::State::kCompared) {
      t.rows.push_back({Code(o.name), fmt::format("{:g}", o.tol.atol),
                        fmt::format("{:g}", o.tol.rtol), "-", "-", "-", "-", Esc(o.note), "-",
                        Verdict(false)});
      continue;
    }
    t.rows.push_back(
        {Code(o.name), fmt::format("{:g}", o.tol.atol), fmt::format("{:g}", o.tol.rtol),
         fmt::format("{:.3g}", o.stats.max_abs), fmt::format("{:.3g}", o.stats.max_rel),
         fmt::format("{:.3g}", o.stats.mean_abs()), fmt::format("{:.6f}", o.stats.cosine()),
         fmt::format("{} of {}", o.stats.out_of_tolerance, o.stats.elements),
         fmt::format("{:.3g}", o.stats.min_atol), Verdict(!o.failed())});
  }
  return RenderTable(t);
}

std::string VariantSection(const BuildResult& r, size_t i) {
  const VariantResult& v = r.variants[i];
  std::string s =
      fmt::format("<h2 id=\"variant-{0}\">Variant {1}</h2>\n", Esc(v.name), Code(v.name));
  if (!v.steps.empty()) {
    Table t;
    t.caption = "Steps";
    t.header = {"step", "result", "seconds"};
    for (const auto& st : v.steps)
      t.rows.push_back({Esc(st.kind), Esc(st.summary), fmt::format("{:.2f}", st.seconds)});
    s += RenderTable(t);
  }
  if (!v.golden.outputs.empty()) s += OutputsTable(v.golden, "Against the golden set");
  if (v.edge && !v.edge->outputs.empty()) s += OutputsTable(*v.edge, "Against the edge cases");
  if (v.task) {
    const TaskResult& t = *v.task;
    s += fmt::format(
        "<p>Top-1 on {} over {} labeled rows: source {}, variant {} (drop {:.2f} pp, limit {}); "
        "top-1 agreement {}.</p>\n",
        Code(t.output), t.rows, Pct(t.golden_accuracy), Pct(t.variant_accuracy), t.drop_pp,
        t.max_accuracy_drop ? fmt::format("{:g} pp", *t.max_accuracy_drop) : "none",
        Pct(t.top1_agreement));
    Table ct;
    ct.caption = "Per class";
    ct.header = {"class", "rows", "source", "variant", "drop (pp)", "limit", "verdict"};
    for (const auto& c : t.classes) {
      std::string label = fmt::format("{}", c.label);
      if (c.label >= 0 && static_cast<size_t>(c.label) < r.class_names.size())
        label += " " + Esc(r.class_names[static_cast<size_t>(c.label)]);
      ct.rows.push_back(
          {label, fmt::format("{}", c.rows), Pct(c.rows ? double(c.golden_correct) / c.rows : 0),
           Pct(c.rows ? double(c.variant_correct) / c.rows : 0), fmt::format("{:.2f}", c.drop_pp),
           t.max_class_drop ? fmt::format("{:g}", *t.max_class_drop) : "none", Verdict(!c.failed)});
    }
    s += RenderTable(ct);
  }
  if (v.layers && !v.layers->layers.empty()) {
    const auto& rows = v.layers->layers;
    int64_t first = v.layers->first_failed_layer;
    Table lt;
    lt.caption =
        fmt::format("Per layer against the source (first out of tolerance: {})",
                    first >= 0 ? rows[static_cast<size_t>(first)].tensor : std::string("none"));
    lt.header = {"#", "tensor", "node", "op", "max abs", "cosine", "state"};
    for (const auto& row : rows) {
      std::string state =
          row.state == verify::LayerRow::State::kCompared
              ? (row.stats.pass() ? "ok" : "<span class=\"fail\">out of tolerance</span>")
              : (row.state == verify::LayerRow::State::kUnmatched ? "unmatched" : Esc(row.note));
      lt.rows.push_back(
          {fmt::format("{}{}", row.index,
                       row.index == first ? " <span class=\"fail\">first</span>" : ""),
           Code(row.tensor), Code(row.node), Esc(row.op_type),
           fmt::format("{:.3g}", row.stats.max_abs), fmt::format("{:.6f}", row.stats.cosine()),
           state});
    }
    s += RenderTable(lt);
  }
  if (v.audit) {
    Table at;
    at.caption = "Audit";
    at.header = {"target", "as is", "rewrite", "application code"};
    for (const auto& t : v.audit->targets)
      at.rows.push_back({Esc(t.name), fmt::format("{}", t.as_is), fmt::format("{}", t.rewrite),
                         fmt::format("{}", t.application)});
    s += RenderTable(at);
    std::string groups;
    for (const auto& t : v.audit->targets)
      for (const auto& g : t.unsupported)
        groups +=
            fmt::format("<li>{}: {} ({} nodes)</li>", Esc(t.name), Esc(g.reason), g.nodes.size());
    if (!groups.empty()) s += "<ul>" + groups + "</ul>\n";
  }
  if (!v.failures.empty()) {
    s += "<ul>";
    for (const auto& f : v.failures)
      s += "<li><span class=\"fail\">FAIL</span> " + Esc(f) + "</li>";
    s += "</ul>\n";
  }
  return s;
}

}  // namespace

std::string FormatHtml(const BuildResult& r) {
  std::string title = fmt::format("Build report: {} {}", r.name, r.version);
  std::string s = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
      Esc(title), kStyle, Esc(title));
  s += "<ul>\n";
  s += fmt::format("<li>verdict: {}</li>\n", r.written ? "<span class=\"pass\">PASS</span>"
                                                       : "<span class=\"fail\">FAIL</span>");
  if (!r.command_line.empty()) s += fmt::format("<li>command: {}</li>\n", Code(r.command_line));
  s += fmt::format("<li>config: {} (SHA-256 {})</li>\n<li>source: {} (SHA-256 {})</li>\n",
                   Code(r.config), Code(r.config_sha256), Code(r.source), Code(r.source_sha256));
  s += fmt::format("<li>artifact: {}{}</li>\n", Code(r.out),
                   r.written ? fmt::format(" (manifest SHA-256 {})", Code(r.manifest_sha256))
                             : std::string(" (not written)"));
  s += fmt::format("<li>golden set: {} set(s){}{}</li>\n</ul>\n", r.golden_sets,
                   r.labels ? fmt::format(", {} labeled rows", r.golden_rows) : "",
                   r.edge_sets ? fmt::format(", {} edge case set(s)", r.edge_sets) : "");
  if (!r.failures.empty()) {
    s += "<h2 id=\"failures\">Gate failures</h2>\n<ul>\n";
    for (const auto& f : r.failures) s += "<li>" + Esc(f) + "</li>\n";
    s += "</ul>\n";
  }
  {
    Table t;
    t.header = {"variant", "role", "file", "bytes", "SHA-256", "gate"};
    for (size_t i = 0; i < r.variants.size(); ++i) {
      const auto& v = r.variants[i];
      t.rows.push_back({fmt::format("<a href=\"#variant-{0}\">{0}</a>", Esc(v.name)),
                        Esc(Role(r, i)), Code(v.file), fmt::format("{}", v.bytes),
                        v.sha256.empty() ? "-" : Code(v.sha256.substr(0, 16)),
                        Verdict(v.failures.empty())});
    }
    s += "<h2 id=\"variants\">Variants</h2>\n" + RenderTable(t);
  }

  s += "<h2 id=\"errors\">Errors per output</h2>\n";
  for (size_t k = 0; k < r.source_inspect.outputs.size(); ++k)
    s += ErrorFigure(r, k, r.source_inspect.outputs[k].name);
  if (r.labels) s += "<h2 id=\"classes\">Accuracy per class</h2>\n" + ClassFigure(r);
  s += "<h2 id=\"layers\">Error along the graph</h2>\n";
  for (size_t i = 0; i < r.variants.size(); ++i) s += LayerFigure(r.variants[i], i);
  s += "<h2 id=\"latency\">Latency</h2>\n" + LatencyFigure(r);

  for (size_t i = 0; i < r.variants.size(); ++i) s += VariantSection(r, i);

  bool bench = false;
  for (const auto& v : r.variants) bench = bench || v.bench.has_value();
  if (bench) {
    Table t;
    t.caption = "Timings vary from run to run; they are not part of the artifact.";
    t.header = {"variant", "threads", "load ms", "first ms",    "p50 ms",
                "p90 ms",  "p99 ms",  "runs/s",  "peak RSS MB", "model MB"};
    for (const auto& v : r.variants) {
      if (!v.bench) continue;
      const auto& b = *v.bench;
      t.rows.push_back({Esc(v.name), fmt::format("{}", b.threads), fmt::format("{:.2f}", b.load_ms),
                        fmt::format("{:.2f}", b.first_ms), fmt::format("{:.3f}", b.p50_ms),
                        fmt::format("{:.3f}", b.p90_ms), fmt::format("{:.3f}", b.p99_ms),
                        fmt::format("{:.1f}", b.throughput), fmt::format("{:.1f}", b.peak_rss_mb),
                        fmt::format("{:.2f}", b.model_mb)});
    }
    s += "<h2 id=\"bench\">Bench summary</h2>\n" + RenderTable(t);
  }
  {
    Table t;
    t.header = {"stage", "seconds"};
    for (const auto& [k, sec] : r.timings) t.rows.push_back({Esc(k), fmt::format("{:.2f}", sec)});
    s += "<h2 id=\"timings\">Timings</h2>\n" + RenderTable(t);
  }
  if (r.written) {
    Table t;
    t.header = {"path", "bytes", "SHA-256"};
    for (const auto& f : r.files)
      t.rows.push_back({Code(f.path), fmt::format("{}", f.bytes), Code(f.sha256)});
    s += "<h2 id=\"files\">Files</h2>\n" + RenderTable(t);
  }
  s += "</body>\n</html>\n";
  return s;
}

}  // namespace ferry::artifact
