// ferry verify --reference REF --candidate CAND --data DIR [--per-layer] [--validate]
// ferry verify MODEL --golden DIR [--validate]
// ferry verify MODEL --validate --data DIR
// Inputs from photos: --prep SPEC --images DIR|FILE... instead of --data (each image one set,
// through the spec's steps: the same tensors `ferry prep run` writes).
// Common: [--atol A] [--rtol R] [--tolerance OUTPUT=ATOL,RTOL]... [--top-k K] [--labels FILE]
//         [--json] [--report FILE.md] [--threads N]
// The work is verify::Verify (src/verify/verify.h); this file parses, renders, writes the
// --report and exits: 0 when every output is within tolerance (and, with --validate, no layer
// produced NaN or Inf), 1 otherwise; 2/3/4 for usage, invalid input, unsupported.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli/command.h"
#include "core/npy.h"
#include "core/utf8.h"
#include "prep/check.h"
#include "prep/pipeline.h"
#include "verify/verify.h"

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
  std::string prep;                 // a preprocessing spec: --images are the inputs
  std::vector<std::string> images;  // files or folders
};

// One input set per file (an image, or a CSV table for a table spec): each input the spec
// names gets the file through its steps.
Result<std::vector<ir::DataSet>> ImageSets(const std::string& spec_path,
                                           const std::vector<std::string>& items) {
  FERRY_ASSIGN_OR_RETURN(prep::Spec spec, prep::LoadSpec(spec_path));
  FERRY_ASSIGN_OR_RETURN(std::vector<std::string> files, prep::ExpandImages(items));
  std::vector<ir::DataSet> sets;
  for (const auto& f : files) {
    FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(f));
    ir::DataSet set;
    set.name = f;
    for (const auto& in : spec.inputs) {
      FERRY_ASSIGN_OR_RETURN(Tensor t, prep::PreprocessInput(in, bytes, f));
      set.inputs.emplace_back(in.name, Value(std::move(t)));
    }
    sets.push_back(std::move(set));
  }
  return sets;
}

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

Result<std::map<std::string, Tolerance>> ParseTolerances(const std::vector<std::string>& specs) {
  std::map<std::string, Tolerance> out;
  for (const auto& spec : specs) {
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

void Progress(std::string_view stage, size_t i, size_t n) {
  static const bool tty = isatty(2);
  if (!tty) return;
  std::fprintf(stderr, "\r%.*s: set %zu/%zu ", static_cast<int>(stage.size()), stage.data(), i + 1,
               n);
  if (i + 1 == n) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

int RunVerify(const Options& o) {
  verify::VerifyOptions vo;
  vo.model = o.model;
  vo.reference = o.reference;
  vo.candidate = o.candidate;
  vo.data = o.data;
  vo.golden = o.golden;
  vo.labels = o.labels;
  vo.tol = Tolerance{o.atol, o.rtol};
  vo.top_k = o.top_k;
  vo.threads = o.threads;
  vo.per_layer = o.per_layer;
  vo.validate = o.validate;
  if (!o.prep.empty() || !o.images.empty()) {
    if (o.prep.empty() || o.images.empty())
      return ReportError(UsageError("--prep SPEC and --images go together"));
    if (!o.data.empty() || !o.golden.empty())
      return ReportError(UsageError("--images replace --data; drop --data / --golden"));
    auto sets = ImageSets(o.prep, o.images);
    if (!sets.ok()) return ReportError(sets.status());
    vo.sets = std::move(sets).value();
    vo.data = fmt::format("{} image(s) through {}", vo.sets.size(), o.prep);
  }
  auto tols = ParseTolerances(o.tolerances);
  if (!tols.ok()) return ReportError(tols.status());
  vo.tolerances = std::move(tols).value();
  vo.command_line = CommandLine();
  vo.progress = Progress;
  auto rep = verify::Verify(vo);
  if (!rep.ok()) return ReportError(rep.status());
  if (!o.report.empty()) {
    Status w = WriteFileAtomic(o.report, ValidUtf8(verify::FormatMarkdown(*rep)));
    if (!w.ok()) return ReportError(w.With("--report"));
  }
  std::string text = o.json ? verify::FormatJson(*rep) : verify::FormatText(*rep);
  PrintOut(text);
  return rep->pass() ? 0 : 1;
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
  sub.add_option(
      "--prep", o->prep,
      "Preprocessing spec: --images (PNG, JPEG; CSV for a table spec) through its steps are the "
      "input sets");
  sub.add_option("--images", o->images, "Image files or folders (with --prep), one set each");
  sub.add_flag("--json", o->json, "Print one JSON document");
  sub.callback([o, action] { *action = [o] { return RunVerify(*o); }; });
}

}  // namespace ferry::cli
