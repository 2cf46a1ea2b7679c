// ferry.yaml validation: every key checked, errors naming the key path, its line and what was
// expected.
#include <gtest/gtest.h>

#include "artifact/config.h"

namespace ferry::artifact {
namespace {

const char* kGood = R"(name: digits
version: 1.0.0
source:
  path: model.onnx
  sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF
reference:
  data: test_data
  samples: 2
  edge_cases: [zeros, large]
  random: 1
  seed: 7
tolerance: {atol: 1e-4, rtol: 1e-3}
tolerances:
  logits: {atol: 1e-3}
task:
  output: logits
  labels: labels.npy
  max_accuracy_drop: 1
  max_class_drop: 5
audit:
  targets: [ferry-cpu, "opset:17"]
variants:
  - name: fp32
    steps:
      - optimize: {level: all, fix_shape: {image: [1, 1, 8, 8]}}
  - name: int8
    steps:
      - optimize:
      - quantize: {mode: static, calibration: calib, method: "percentile:99.9", per_channel: true, accuracy_budget: 2}
    tolerance: {atol: 0.5, rtol: 0.1}
    max_class_drop: 10
  - name: half
    steps:
      - convert: {fp16: true, keep_io_types: true, keep_fp32: [Softmax]}
fallback: int8
)";

Result<Config> Parse(const std::string& text) {
  return ParseConfig(text, "cfg/ferry.yaml");
}

// The error of `text` (which must fail).
std::string ErrorOf(const std::string& text) {
  auto r = Parse(text);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid);
  return r.status().message();
}

// kGood with `from` replaced by `to` (which must occur once).
std::string Edit(const std::string& from, const std::string& to) {
  std::string s = kGood;
  size_t pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  EXPECT_EQ(s.find(from, pos + 1), std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

TEST(ArtifactConfig, ParsesEveryKey) {
  auto r = Parse(kGood);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Config& c = *r;
  EXPECT_EQ(c.name, "digits");
  EXPECT_EQ(c.version, "1.0.0");
  EXPECT_EQ(c.source, "cfg/model.onnx");
  EXPECT_EQ(c.source_name, "model.onnx");
  EXPECT_EQ(c.source_sha256, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  EXPECT_EQ(c.reference_data, "cfg/test_data");
  EXPECT_EQ(c.samples, 2);
  EXPECT_EQ(c.edge_cases, (std::vector<std::string>{"zeros", "large"}));
  EXPECT_EQ(c.random_sets, 1);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_DOUBLE_EQ(c.tolerances.at("logits").atol, 1e-3);
  EXPECT_DOUBLE_EQ(c.tolerances.at("logits").rtol, 1e-3);  // default kept
  ASSERT_TRUE(c.task.has_value());
  EXPECT_EQ(c.task->labels, "cfg/labels.npy");
  EXPECT_EQ(*c.task->max_class_drop, 5);
  EXPECT_EQ(c.audit_targets, (std::vector<std::string>{"ferry-cpu", "opset:17"}));
  ASSERT_EQ(c.variants.size(), 3u);
  EXPECT_EQ(c.variants[0].steps[0].optimize.fix_shape.at("image"), (Shape{1, 1, 8, 8}));
  const Variant& q = c.variants[1];
  ASSERT_EQ(q.steps.size(), 2u);
  EXPECT_EQ(q.steps[0].kind, Step::Kind::kOptimize);
  EXPECT_EQ(q.steps[0].optimize.level, "all");
  EXPECT_EQ(q.steps[1].kind, Step::Kind::kQuantize);
  EXPECT_EQ(q.steps[1].quantize.calibration, "cfg/calib");
  EXPECT_EQ(q.steps[1].quantize.method, "percentile:99.9");
  EXPECT_TRUE(q.steps[1].quantize.per_channel);
  EXPECT_EQ(*q.steps[1].quantize.accuracy_budget, 2);
  EXPECT_EQ(q.tolerance->atol, 0.5);
  EXPECT_EQ(*q.max_class_drop, 10);
  EXPECT_TRUE(c.variants[2].steps[0].convert.fp16);
  EXPECT_EQ(c.fallback, "int8");
  EXPECT_EQ(c.Line("source.sha256"), 5);
  EXPECT_EQ(c.Line("variants[1].steps[1].quantize.calibration"), 29);
  EXPECT_EQ(c.sha256.size(), 64u);
}

TEST(ArtifactConfig, UnknownKeyNamesKeyAndLine) {
  std::string e = ErrorOf(Edit("  samples: 2\n", "  samples: 2\n  sampels: 3\n"));
  EXPECT_NE(e.find("cfg/ferry.yaml:9: reference.sampels: unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("samples"), std::string::npos) << e;
  e = ErrorOf(Edit("fallback: int8\n", "fallback: int8\ncolour: red\n"));
  EXPECT_NE(e.find(":36: colour: unknown key"), std::string::npos) << e;
}

TEST(ArtifactConfig, MissingKeyNamesKey) {
  std::string e = ErrorOf(
      Edit("  sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF\n", ""));
  EXPECT_NE(e.find("cfg/ferry.yaml:3: source.sha256: missing (required)"), std::string::npos) << e;
  e = ErrorOf(Edit("version: 1.0.0\n", ""));
  EXPECT_NE(e.find("version: missing"), std::string::npos) << e;
  e = ErrorOf(Edit("calibration: calib, ", ""));
  EXPECT_NE(
      e.find("variants[1].steps[1].quantize.calibration: missing (required with mode: static)"),
      std::string::npos)
      << e;
}

TEST(ArtifactConfig, MistypedValueNamesExpectation) {
  std::string e = ErrorOf(Edit("samples: 2", "samples: two"));
  EXPECT_NE(e.find(":8: reference.samples: expected an integer, got 'two'"), std::string::npos)
      << e;
  e = ErrorOf(Edit("mode: static", "mode: int4"));
  EXPECT_NE(e.find("variants[1].steps[1].quantize.mode: expected static or dynamic, got 'int4'"),
            std::string::npos)
      << e;
  e = ErrorOf(Edit("per_channel: true", "per_channel: maybe"));
  EXPECT_NE(e.find("per_channel: expected true or false, got 'maybe'"), std::string::npos) << e;
  e = ErrorOf(Edit("atol: 0.5", "atol: -1"));
  EXPECT_NE(e.find("variants[1].tolerance.atol: expected a number >= 0, got '-1'"),
            std::string::npos)
      << e;
  e = ErrorOf(Edit("sha256: 0123456789abcdef", "sha256: 0123456789abcdeg"));
  EXPECT_NE(e.find("source.sha256: expected 64 hex digits"), std::string::npos) << e;
  e = ErrorOf(Edit("  data: test_data\n", "  data: [a, b]\n"));
  EXPECT_NE(e.find(":7: reference.data: expected a string, got a list"), std::string::npos) << e;
  e = ErrorOf(Edit("edge_cases: [zeros, large]", "edge_cases: [zeros, huge]"));
  EXPECT_NE(e.find("reference.edge_cases[1]: expected zeros or large, got 'huge'"),
            std::string::npos)
      << e;
  e = ErrorOf(Edit("      - convert: {fp16: true, keep_io_types: true, keep_fp32: [Softmax]}",
                   "      - convert: {opset: 17, fp16: true}"));
  EXPECT_NE(e.find("variants[2].steps[0].convert: give exactly one of opset: N and fp16: true"),
            std::string::npos)
      << e;
  e = ErrorOf(Edit("      - optimize:\n", "      - shrink: {}\n"));
  EXPECT_NE(e.find("variants[1].steps[0].shrink: unknown key (expected one of: optimize, convert, "
                   "quantize)"),
            std::string::npos)
      << e;
}

TEST(ArtifactConfig, CrossKeyChecks) {
  std::string e = ErrorOf(Edit("fallback: int8", "fallback: int4"));
  EXPECT_NE(e.find("fallback: expected the name of a variant (fp32, int8, half), got 'int4'"),
            std::string::npos)
      << e;
  e = ErrorOf(Edit("fallback: int8", "fallback: fp32"));
  EXPECT_NE(e.find("is the default variant"), std::string::npos) << e;
  e = ErrorOf(Edit("  - name: half\n", "  - name: fp32\n"));
  EXPECT_NE(e.find("variant 'fp32' is given twice"), std::string::npos) << e;
  std::string no_task = kGood;
  no_task.erase(no_task.find("task:"), no_task.find("audit:") - no_task.find("task:"));
  e = ErrorOf(no_task);
  EXPECT_NE(e.find("accuracy_budget: needs a task"), std::string::npos) << e;
  e = ErrorOf(Edit("name: digits\n", "name: digits\nname: again\n"));
  EXPECT_NE(e.find(":2: name: given twice"), std::string::npos) << e;
}

TEST(ArtifactConfig, NotYamlOrEmpty) {
  std::string e = ErrorOf("name: [unclosed\nversion: 1\n");
  EXPECT_NE(e.find("cfg/ferry.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid YAML"), std::string::npos) << e;
  e = ErrorOf("");
  EXPECT_NE(e.find("the file is empty"), std::string::npos) << e;
  e = ErrorOf("- a\n- b\n");
  EXPECT_NE(e.find("expected a mapping, got a list"), std::string::npos) << e;
}

TEST(ArtifactConfig, CheckInputsNamesMissingFiles) {
  auto r = Parse(kGood);
  ASSERT_TRUE(r.ok());
  Status st = CheckInputs(*r);
  EXPECT_EQ(st.code(), StatusCode::kInvalid);
  EXPECT_NE(st.message().find("cfg/ferry.yaml:4: source.path: 'cfg/model.onnx' is not a file"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace ferry::artifact
