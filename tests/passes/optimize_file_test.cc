// passes::OptimizeFile / ConvertFile: the typed results of `ferry optimize` and `ferry convert`.
#include "passes/optimize_file.h"

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "passes/pass_manager.h"
#include "verb_models.h"

namespace ferry::passes {
namespace {

namespace fs = std::filesystem;

TEST(OptimizeFile, RemovesTheIdentityChecksAndWrites) {
  std::string dir = testing::FreshDir();
  OptimizeFileOptions o;
  o.input = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.output = dir + "/opt.onnx";
  o.fix_shapes["x"] = {2, 8};
  auto r = OptimizeFile(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nodes_before, 4);
  EXPECT_EQ(r->ops_before.at("Identity"), 1);
  EXPECT_EQ(r->ops_after.count("Identity"), 0u);
  EXPECT_LT(r->nodes_after, r->nodes_before);
  EXPECT_EQ(r->check.count, 3);
  EXPECT_EQ(r->check.shapes.at("x"), (Shape{2, 8}));
  EXPECT_TRUE(r->check_result.ok);
  EXPECT_LE(r->check_result.max_abs, 1e-5);
  int changes = 0;
  for (const auto& p : r->passes) changes += p.changes;
  EXPECT_GT(changes, 0);
  auto written = ir::LoadModel(o.output);
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ(static_cast<int64_t>((*written)->graph.nodes.size()), r->nodes_after);
  EXPECT_EQ((*written)->graph.inputs[0].type.ToString(), "float32[2,8]");
  auto j = nlohmann::json::parse(FormatJson(*r));
  EXPECT_EQ(j["check"]["ok"], true);
  EXPECT_EQ(j["nodes_before"], 4);
  EXPECT_NE(FormatText(*r).find("wrote " + o.output), std::string::npos);
  EXPECT_NE(FormatMarkdown(*r).find("| Identity | 1 | 0 |"), std::string::npos);
}

// A Shape with two outputs on a value of static shape: fold_constants replaced both outputs from
// a one-tensor list (heap-buffer-overflow, `free(): invalid pointer` in `ferry optimize`; issue
// 19's black-box campaign: fuzz/corpus/passes/fold-shape-two-outputs-asan.onnx). It stays a node.
TEST(FoldConstants, AShapeWithTwoOutputsIsNotFolded) {
  auto m = std::make_unique<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", 13});
  m->graph.name = "g";
  m->graph.inputs.push_back(testing::FloatValue("x", std::vector<int64_t>{2, 3}));
  m->graph.nodes.push_back(testing::MakeNode("Shape", {"x"}, {"s", "s2"}));
  m->graph.outputs.push_back(testing::FloatValue("s", std::vector<int64_t>{2}));
  m->graph.outputs.back().type.elem_type = DType::kInt64;
  OptimizeOptions o;
  o.only = {"fold_constants"};
  auto r = Optimize(*m, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(m->graph.nodes.size(), 1u);
  EXPECT_EQ(m->graph.nodes[0].op_type, "Shape");
  EXPECT_TRUE(m->graph.initializers.empty());
}

TEST(OptimizeFile, RefusesToOverwriteItsInputAndNegativeChecks) {
  std::string dir = testing::FreshDir();
  OptimizeFileOptions o;
  o.input = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.output = o.input;
  EXPECT_EQ(OptimizeFile(o).status().code(), StatusCode::kUsage);
  o.output = dir + "/out.onnx";
  o.check.count = -1;
  EXPECT_EQ(OptimizeFile(o).status().code(), StatusCode::kUsage);
  o.check.count = 0;
  o.passes.only = {"no_such_pass"};
  EXPECT_EQ(OptimizeFile(o).status().code(), StatusCode::kUsage);
  EXPECT_FALSE(fs::exists(o.output));
}

TEST(ConvertFile, Float16KeepsOutputsFinite) {
  std::string dir = testing::FreshDir();
  ConvertFileOptions o;
  o.input = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.output = dir + "/fp16.onnx";
  o.fp16 = true;
  auto r = ConvertFile(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->fp16);
  EXPECT_EQ(r->fp16_report.converted_initializers, 3);
  EXPECT_TRUE(r->checked);
  ASSERT_EQ(r->check_result.outputs.size(), 1u);
  EXPECT_EQ(r->check_result.outputs[0].candidate_nonfinite, 0);
  EXPECT_GT(r->check_result.outputs[0].cosine, 0.999);
  EXPECT_GT(r->bytes_in, r->bytes_out);
  EXPECT_EQ(r->bytes_out, fs::file_size(o.output));
  auto j = nlohmann::json::parse(FormatJson(*r));
  EXPECT_EQ(j["converted_initializers"], 3);
  EXPECT_EQ(j["check"]["inputs"], 3);
}

TEST(ConvertFile, OpsetConversionAndUsage) {
  std::string dir = testing::FreshDir();
  ConvertFileOptions o;
  o.input = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.output = dir + "/o14.onnx";
  EXPECT_EQ(ConvertFile(o).status().code(), StatusCode::kUsage);  // neither opset nor fp16
  o.opset = 14;
  auto r = ConvertFile(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->opset_from, 13);
  EXPECT_EQ(r->opset_to, 14);
  EXPECT_TRUE(r->check_result.ok);
  auto written = ir::LoadModel(o.output);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ((*written)->OpsetFor(""), 14);
  EXPECT_NE(FormatText(*r).find("opset 13 -> 14"), std::string::npos);
}

}  // namespace
}  // namespace ferry::passes

namespace ferry::passes {
namespace {

// x [1, ?] -> Reshape [-1, 7] -> Relu -> y: only multiples of 7 run, and the graph does not say
// so (the -1): the seeded check's 1 fails, naming the input, the dims fed and the node.
std::unique_ptr<ir::Model> SevensModel() {
  auto m = std::make_unique<ir::Model>();
  m->ir_version = 8;
  m->opset_imports.push_back({"", 13});
  ir::Graph& g = m->graph;
  g.inputs.push_back(
      testing::FloatValue("x", std::vector<ir::Dim>{ir::Dim{1, ""}, ir::Dim{std::nullopt, ""}}));
  g.outputs.push_back(
      testing::FloatValue("y", std::vector<ir::Dim>{ir::Dim{std::nullopt, ""}, ir::Dim{7, ""}}));
  g.initializers.push_back({"shape", Tensor::FromVector<int64_t>({-1, 7}, {2}), ""});
  g.nodes.push_back(testing::MakeNode("Identity", {"x"}, {"xi"}));
  g.nodes.push_back(testing::MakeNode("Reshape", {"xi", "shape"}, {"r"}));
  g.nodes.push_back(testing::MakeNode("Relu", {"r"}, {"y"}));
  return m;
}

TEST(OptimizeFile, ASeededCheckTheModelCannotRunNamesInputNodeAndFlags) {
  std::string dir = testing::FreshDir();
  OptimizeFileOptions o;
  o.input = testing::SaveTo(*SevensModel(), dir, "sevens.onnx");
  o.output = dir + "/opt.onnx";
  auto r = OptimizeFile(o);
  ASSERT_FALSE(r.ok());
  const std::string& msg = r.status().message();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalid) << msg;
  for (const char* needle : {"cannot run on seeded input set 0", "x float32[1,1] for float32[1,?]",
                             "Reshape 'r'", "--shape NAME=DIMS", "--check-data DIR"})
    EXPECT_NE(msg.find(needle), std::string::npos) << needle << " in: " << msg;
  EXPECT_FALSE(fs::exists(o.output));

  o.check.shapes["x"] = {1, 14};
  auto shaped = OptimizeFile(o);
  ASSERT_TRUE(shaped.ok()) << shaped.status().message();
  EXPECT_EQ(shaped->check_result.seeded_shapes.at("x"), (Shape{1, 14}));
  EXPECT_EQ(shaped->check_result.sets, 3);

  o.check.shapes.clear();
  o.check.data = dir + "/data";
  fs::create_directories(o.check.data);
  ASSERT_TRUE(
      WriteFileAtomic(o.check.data + "/x.npy", SerializeNpy(testing::RandomFloats({2, 1, 21}, 4)))
          .ok());
  auto data = OptimizeFile(o);
  ASSERT_TRUE(data.ok()) << data.status().message();
  EXPECT_EQ(data->check_result.data, o.check.data);
  EXPECT_EQ(data->check_result.sets, 2);  // the leading dim holds two sets
  EXPECT_TRUE(data->check_result.seeded_shapes.empty());
  auto j = nlohmann::json::parse(FormatJson(*data));
  EXPECT_EQ(j["check"]["data"], o.check.data);
  EXPECT_EQ(j["check"]["inputs"], 2);
  EXPECT_NE(FormatText(*data).find("check: 2 input set(s) from " + o.check.data),
            std::string::npos);
}

TEST(OptimizeFile, CheckFlagsAreValidated) {
  std::string dir = testing::FreshDir();
  OptimizeFileOptions o;
  o.input = testing::SaveTo(*SevensModel(), dir, "sevens.onnx");
  o.output = dir + "/opt.onnx";
  o.check.shapes["nope"] = {1, 7};
  EXPECT_EQ(OptimizeFile(o).status().code(), StatusCode::kUsage);
  o.check.shapes = {{"x", {2, 7}}};  // against the declared 1
  EXPECT_EQ(OptimizeFile(o).status().code(), StatusCode::kInvalid);
  o.check.shapes = {{"x", {1, 7}}};
  o.fix_shapes = {{"x", {1, 7}}};
  EXPECT_EQ(OptimizeFile(o).status().code(), StatusCode::kUsage);  // --shape and --fix-shape
  o.check.shapes.clear();
  o.check.count = 0;
  o.check.data = dir;
  EXPECT_EQ(OptimizeFile(o).status().code(), StatusCode::kUsage);  // --check-data with --check 0
  o.check.count = 3;
  o.check.data = dir + "/missing";
  auto missing = OptimizeFile(o);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalid);
  EXPECT_EQ(missing.status().message().rfind("--check-data: ", 0), 0u)
      << missing.status().message();
}

TEST(ConvertFile, TheCheckTakesDataAndShapes) {
  std::string dir = testing::FreshDir();
  ConvertFileOptions o;
  o.input = testing::SaveTo(*SevensModel(), dir, "sevens.onnx");
  o.output = dir + "/fp16.onnx";
  o.fp16 = true;
  EXPECT_EQ(ConvertFile(o).status().code(), StatusCode::kInvalid);  // 1 is not a multiple of 7
  o.check.shapes["x"] = {1, 35};
  auto r = ConvertFile(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->check_result.seeded_shapes.at("x"), (Shape{1, 35}));
  EXPECT_EQ(nlohmann::json::parse(FormatJson(*r))["check"]["shapes"]["x"],
            nlohmann::json::parse("[1, 35]"));
}

}  // namespace
}  // namespace ferry::passes
