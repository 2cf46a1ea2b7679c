// verify::Verify (every mode) and verify::CaptureGolden: the typed results of `ferry verify`
// and `ferry golden capture`.
#include "verify/verify.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "verb_models.h"
#include "verify/capture.h"

namespace ferry::verify {
namespace {

namespace fs = std::filesystem;

// ClassifierModel with w2's first element moved by `delta`.
std::unique_ptr<ir::Model> Perturbed(float delta) {
  auto m = testing::ClassifierModel();
  for (auto& init : m->graph.initializers)
    if (init.name == "w2") init.tensor.data<float>()[0] += delta;
  return m;
}

TEST(Verify, CompareFindsThePerturbedLayer) {
  std::string dir = testing::FreshDir();
  VerifyOptions o;
  o.reference = testing::SaveTo(*testing::ClassifierModel(), dir, "ref.onnx");
  o.candidate = testing::SaveTo(*Perturbed(0.5f), dir, "cand.onnx");
  o.data = dir + "/data";  // 3 sets of 2 rows: a leading dim beyond the input's rank
  std::filesystem::create_directories(o.data);
  ASSERT_TRUE(
      WriteFileAtomic(o.data + "/x.npy", SerializeNpy(testing::RandomFloats({3, 2, 8}, 5))).ok());
  o.per_layer = true;
  o.command_line = "ferry verify ...";
  std::vector<std::string> stages;
  o.progress = [&](std::string_view stage, size_t i, size_t) {
    if (i == 0) stages.emplace_back(stage);
  };
  auto r = Verify(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->mode, "compare");
  EXPECT_EQ(r->sets, 3);
  EXPECT_FALSE(r->pass());
  ASSERT_EQ(r->outputs.size(), 1u);
  EXPECT_FALSE(r->outputs[0].stats.pass());
  EXPECT_GT(r->outputs[0].stats.max_abs, 0);
  ASSERT_TRUE(r->per_layer);
  ASSERT_GE(r->first_failed_layer, 0);
  const LayerRow& first = r->layers[static_cast<size_t>(r->first_failed_layer)];
  EXPECT_EQ(first.op_type, "MatMul");  // the layers before it are unchanged
  EXPECT_EQ(stages, (std::vector<std::string>{"reference", "candidate"}));
  ASSERT_EQ(r->models.size(), 2u);
  EXPECT_NE(r->models[0].weights_sha256, r->models[1].weights_sha256);
  EXPECT_EQ(nlohmann::json::parse(FormatJson(*r))["pass"], false);

  // The same sets given in memory instead of a folder.
  auto model = ir::LoadModel(o.reference);
  ASSERT_TRUE(model.ok());
  auto sets = ir::LoadDataSets(o.data, (*model)->graph, false);
  ASSERT_TRUE(sets.ok()) << sets.status().message();
  VerifyOptions mem = o;
  mem.data.clear();
  mem.sets = std::move(sets).value();
  mem.progress = nullptr;
  auto in_memory = Verify(mem);
  ASSERT_TRUE(in_memory.ok()) << in_memory.status().message();
  EXPECT_EQ(in_memory->sets, 3);
  EXPECT_EQ(in_memory->outputs[0].stats.max_abs, r->outputs[0].stats.max_abs);
  EXPECT_EQ(in_memory->first_failed_layer, r->first_failed_layer);

  o.candidate = o.reference;
  auto same = Verify(o);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_TRUE(same->pass());
  EXPECT_EQ(same->outputs[0].stats.max_abs, 0);
  EXPECT_EQ(same->first_failed_layer, -1);
}

TEST(Verify, GoldenAndValidateModes) {
  std::string dir = testing::FreshDir();
  GoldenCaptureOptions g;
  g.model = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  g.out = dir + "/golden";
  g.capture.count = 2;
  g.capture.shapes["x"] = {3, 8};
  auto cap = CaptureGolden(g);
  ASSERT_TRUE(cap.ok()) << cap.status().message();
  ASSERT_EQ(cap->sets.size(), 4u);  // 2 random + zeros + large
  EXPECT_EQ(cap->sets[0].kind, "random");
  EXPECT_EQ(cap->sets[2].kind, "zeros");
  EXPECT_EQ(cap->sets[3].kind, "large");
  EXPECT_EQ(cap->sets[0].input_shapes[0].second, (Shape{3, 8}));
  EXPECT_EQ(cap->sets[0].outputs[0].second, "float32[3,3]");
  EXPECT_EQ(cap->weights_sha256.size(), 64u);
  EXPECT_TRUE(fs::exists(g.out + "/test_data_set_3/output_0.pb"));
  auto manifest = nlohmann::json::parse(FormatJson(*cap));
  EXPECT_EQ(manifest["sets"].size(), 4u);
  EXPECT_EQ(manifest["out"], g.out);
  // A second capture into the same folder needs force.
  EXPECT_EQ(CaptureGolden(g).status().code(), StatusCode::kInvalid);

  VerifyOptions o;
  o.model = g.model;
  o.golden = g.out;
  auto r = Verify(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->mode, "golden");
  EXPECT_EQ(r->sets, 4);
  EXPECT_TRUE(r->pass());
  o.model = testing::SaveTo(*Perturbed(0.5f), dir, "cand.onnx");
  auto bad = Verify(o);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->pass());

  VerifyOptions v;
  v.model = g.model;
  v.data = testing::ClassifierData(dir + "/data", 4);
  v.validate = true;
  auto val = Verify(v);
  ASSERT_TRUE(val.ok()) << val.status().message();
  EXPECT_EQ(val->mode, "validate");
  ASSERT_EQ(val->nan.size(), 1u);
  EXPECT_FALSE(val->nan[0].finding.found);
  EXPECT_TRUE(val->pass());
  EXPECT_NE(FormatMarkdown(*val).find("## NaN/Inf validation"), std::string::npos);
}

TEST(Verify, InconsistentModesAreUsageErrors) {
  VerifyOptions o;
  EXPECT_EQ(Verify(o).status().code(), StatusCode::kUsage);  // nothing to verify
  o.reference = "a.onnx";
  EXPECT_EQ(Verify(o).status().code(), StatusCode::kUsage);  // without a candidate
  o.candidate = "b.onnx";
  o.data = "d";
  o.model = "m.onnx";
  EXPECT_EQ(Verify(o).status().code(), StatusCode::kUsage);  // both forms
  VerifyOptions p;
  p.model = "m.onnx";
  p.golden = "g";
  p.per_layer = true;
  EXPECT_EQ(Verify(p).status().code(), StatusCode::kUsage);
  p.per_layer = false;
  p.top_k = 0;
  EXPECT_EQ(Verify(p).status().code(), StatusCode::kUsage);
}

}  // namespace
}  // namespace ferry::verify
