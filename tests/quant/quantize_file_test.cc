// quant::CalibrateFile / QuantizeFile: the typed results of `ferry calibrate` and `ferry
// quantize` (evaluation, per-class table, layer selection, per-layer table, latency).
#include "quant/quantize_file.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "quant/calibrate_file.h"
#include "runtime/session.h"
#include "verb_models.h"

namespace ferry::quant {
namespace {

namespace fs = std::filesystem;

// labels.npy: the float model's argmax on `data`, with the first `flip` rows relabelled.
std::string Labels(const std::string& model, const std::string& data, const std::string& dir,
                   int flip) {
  auto m = ir::LoadModel(model);
  EXPECT_TRUE(m.ok());
  auto s = runtime::Session::Create(std::shared_ptr<const ir::Model>(std::move(m).value()));
  auto x = ReadNpy(data + "/x.npy");
  EXPECT_TRUE(s.ok() && x.ok());
  auto y = (*s)->Run({{"x", Value(*x)}});
  EXPECT_TRUE(y.ok());
  const Tensor& t = (*y)[0].tensor();
  Tensor lab(DType::kInt64, {t.dim(0)});
  for (int64_t r = 0; r < t.dim(0); ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < t.dim(1); ++c)
      if (t.data<float>()[r * t.dim(1) + c] > t.data<float>()[r * t.dim(1) + best]) best = c;
    lab.data<int64_t>()[r] = r < flip ? (best + 1) % t.dim(1) : best;
  }
  std::string path = dir + "/labels.npy";
  EXPECT_TRUE(WriteFileAtomic(path, SerializeNpy(lab)).ok());
  return path;
}

TEST(CalibrateFile, WritesTheTableOfEveryFloatTensor) {
  std::string dir = testing::FreshDir();
  CalibrateFileOptions o;
  o.model = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.data = testing::ClassifierData(dir + "/data", 20);
  o.output = dir + "/table.json";
  o.calibrate.batch = 8;
  std::pair<size_t, size_t> last{0, 0};
  o.progress = [&](std::string_view stage, size_t i, size_t n) {
    EXPECT_EQ(stage, "calibrate");
    last = {i, n};
  };
  auto r = CalibrateFile(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->table.samples, 20);
  EXPECT_EQ(r->table.runs, 3);                           // 8 + 8 + 4
  EXPECT_EQ(last, (std::pair<size_t, size_t>{19, 20}));  // samples done / in all
  ASSERT_NE(r->table.Find("x"), nullptr);
  ASSERT_NE(r->table.Find("r"), nullptr);
  EXPECT_GE(r->table.Find("r")->min, 0);  // a Relu output
  auto back = ReadTable(o.output);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tensors.size(), r->table.tensors.size());
  auto j = nlohmann::json::parse(FormatJson(*r));
  EXPECT_EQ(j["samples"], 20);
  EXPECT_EQ(j["runs"], 3);
  EXPECT_NE(FormatMarkdown(*r).find("| r |"), std::string::npos);
  o.data = dir + "/missing";
  auto bad = CalibrateFile(o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalid);
  EXPECT_EQ(bad.status().message().rfind("--data: ", 0), 0u) << bad.status().message();
}

TEST(QuantizeFile, StaticWithEvaluationPerClassLayersAndLatency) {
  std::string dir = testing::FreshDir();
  QuantizeFileOptions o;
  o.input = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.output = dir + "/q.onnx";
  o.mode = QuantMode::kStatic;
  o.calibration = testing::ClassifierData(dir + "/calib", 32, 11);
  o.eval = testing::ClassifierData(dir + "/eval", 30, 12);
  o.labels = Labels(o.input, o.eval, dir, 3);
  o.latency_runs = 2;
  o.quantize.per_channel = true;
  auto r = QuantizeFile(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->written);
  EXPECT_TRUE(r->verdict().ok());
  EXPECT_EQ(r->summary.quantized_nodes.size(), 2u);  // the Gemm and the MatMul
  EXPECT_EQ(r->summary.weights, 2);
  EXPECT_EQ(r->ranges.rfind("calibrated on " + o.calibration + " (32 samples", 0), 0u) << r->ranges;
  EXPECT_EQ(r->size_after, fs::file_size(o.output));
  ASSERT_TRUE(r->eval.has_value());
  EXPECT_EQ(r->eval->samples, 30);
  ASSERT_EQ(r->eval->outputs.size(), 1u);
  const OutputEval& y = r->eval->outputs[0];
  ASSERT_TRUE(y.classifier.has_value());
  EXPECT_EQ(y.classifier->labeled, 30);
  // The float model gets the 3 relabelled rows wrong, nothing else.
  EXPECT_EQ(y.classifier->ref_correct, 27);
  int64_t rows = 0;
  for (const auto& c : y.classes) rows += c.rows;
  EXPECT_EQ(rows, 30);
  EXPECT_GT(y.stats.cosine(), 0.99);
  ASSERT_TRUE(r->layers.has_value());
  EXPECT_EQ(r->layers->samples, 30);
  EXPECT_FALSE(r->layers->rows.empty());
  ASSERT_TRUE(r->latency.has_value());
  EXPECT_EQ(r->latency->runs, 2);
  EXPECT_GT(r->latency->before_p50_ms, 0);
  auto j = nlohmann::json::parse(FormatJson(*r));
  EXPECT_EQ(j["mode"], "static");
  EXPECT_EQ(j["activation_type"], "u8");
  EXPECT_EQ(j["eval"]["outputs"][0]["labeled"], 30);
  EXPECT_EQ(j["eval"]["outputs"][0]["per_class"].size(), y.classes.size());
  EXPECT_TRUE(j["written"].get<bool>());
  EXPECT_NE(FormatMarkdown(*r).find("## Per-layer error"), std::string::npos);
  EXPECT_NE(FormatText(*r).find("wrote " + o.output), std::string::npos);
}

TEST(QuantizeFile, AnUnreachableBudgetWritesNothing) {
  std::string dir = testing::FreshDir();
  QuantizeFileOptions o;
  o.input = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.output = dir + "/q.onnx";
  o.mode = QuantMode::kDynamic;
  o.eval = testing::ClassifierData(dir + "/eval", 16);
  o.max_error = 0;  // no quantized layer is exact
  o.latency_runs = 0;
  auto r = QuantizeFile(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->written);
  EXPECT_FALSE(fs::exists(o.output));
  ASSERT_TRUE(r->selection.has_value());
  EXPECT_EQ(r->selection->metric, "max_abs_error");
  EXPECT_FALSE(r->selection->sel.met);
  EXPECT_EQ(r->selection->sel.ranking.size(), 2u);
  EXPECT_EQ(r->verdict().code(), StatusCode::kCheckFailed);
  EXPECT_NE(r->verdict().message().find("nothing written"), std::string::npos);
  EXPECT_FALSE(nlohmann::json::parse(FormatJson(*r))["written"].get<bool>());
  EXPECT_EQ(FormatText(*r).find("wrote"), std::string::npos);
  // A generous budget keeps every layer quantized.
  o.max_error = 1e9;
  auto met = QuantizeFile(o);
  ASSERT_TRUE(met.ok()) << met.status().message();
  EXPECT_TRUE(met->written && met->selection->sel.met);
  EXPECT_TRUE(met->selection->sel.kept_float.empty());
  EXPECT_TRUE(fs::exists(o.output));
}

TEST(QuantizeFile, InconsistentOptionsAreUsageErrors) {
  std::string dir = testing::FreshDir();
  QuantizeFileOptions o;
  o.input = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.output = dir + "/q.onnx";
  o.mode = QuantMode::kStatic;  // no calibration, no table
  EXPECT_EQ(QuantizeFile(o).status().code(), StatusCode::kUsage);
  o.mode = QuantMode::kDynamic;
  o.labels = "labels.npy";  // without eval
  EXPECT_EQ(QuantizeFile(o).status().code(), StatusCode::kUsage);
  o.labels.clear();
  o.quantize.exclude = {"no_such_node"};
  auto r = QuantizeFile(o);
  EXPECT_EQ(r.status().code(), StatusCode::kUsage);
  EXPECT_NE(r.status().message().find("no_such_node"), std::string::npos);
  EXPECT_EQ(ParseQuantMode("both").status().code(), StatusCode::kUsage);
  EXPECT_FALSE(fs::exists(o.output));
}

}  // namespace
}  // namespace ferry::quant

namespace ferry::quant {
namespace {

TEST(QuantizeFile, TheCheckComparesBeforeWriting) {
  std::string dir = testing::FreshDir();
  QuantizeFileOptions o;
  o.input = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.output = dir + "/q.onnx";
  o.mode = QuantMode::kDynamic;
  auto none = QuantizeFile(o);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->check.has_value());  // off by default
  o.check.count = 2;
  o.check.shapes["x"] = {4, 8};
  auto r = QuantizeFile(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->check.has_value());
  EXPECT_EQ(r->check->sets, 2);
  EXPECT_EQ(r->check->seeded_shapes.at("x"), (Shape{4, 8}));
  ASSERT_EQ(r->check->outputs.size(), 1u);
  EXPECT_EQ(r->check->outputs[0].candidate_nonfinite, 0);
  EXPECT_GT(r->check->outputs[0].cosine, 0.99);
  EXPECT_GT(r->check->outputs[0].max_abs, 0);  // int8 is not exact
  EXPECT_EQ(r->check->outputs[0].top1_total, 8);
  EXPECT_EQ(nlohmann::json::parse(FormatJson(*r))["check"]["inputs"], 2);
  EXPECT_NE(FormatText(*r).find("check on 2 seeded input set(s)"), std::string::npos);

  o.check.count = 0;
  o.check.shapes.clear();
  o.check.data = testing::ClassifierData(dir + "/data", 5);
  auto data = QuantizeFile(o);
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ(data->check->data, o.check.data);
  EXPECT_EQ(data->check->sets, 1);
  o.check.count = 2;  // both
  EXPECT_EQ(QuantizeFile(o).status().code(), StatusCode::kUsage);
  o.check.data.clear();
  o.check.count = 0;
  o.check.shapes["x"] = {1, 8};  // --shape without --check
  EXPECT_EQ(QuantizeFile(o).status().code(), StatusCode::kUsage);
}

}  // namespace
}  // namespace ferry::quant
