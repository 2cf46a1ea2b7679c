// Small models and data written to disk for the tests of the verbs' library calls (inspect,
// audit, optimize, convert, calibrate, quantize, verify, golden capture, bench).
#pragma once

#include <filesystem>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "core/npy.h"
#include "graph_builders.h"
#include "ir/onnx_io.h"

namespace ferry::testing {

// A fresh, empty folder under the system temp folder, named after the running test.
inline std::string FreshDir(const std::string& tag = "") {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "ferry_verbs" /
                              (std::string(info->test_suite_name()) + "." + info->name() + tag);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline Tensor RandomFloats(Shape shape, uint32_t seed, float scale = 1.f) {
  Tensor t(DType::kFloat, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, scale);
  for (int64_t i = 0; i < t.size(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

inline ir::Attribute IntAttr(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  return a;
}

// x [n, 8] -> Identity -> Gemm(w1 [8, 6], b1) -> Relu -> MatMul(w2 [6, 3]) -> y [n, 3]: a
// classifier with a symbolic batch ("n"), an Identity for optimize to remove, weights for both
// quantization modes. Opset 13.
inline std::unique_ptr<ir::Model> ClassifierModel() {
  auto m = std::make_unique<ir::Model>();
  m->ir_version = 8;
  m->producer_name = "ferry-tests";
  m->opset_imports.push_back({"", 13});
  ir::Graph& g = m->graph;
  ir::Dim n{std::nullopt, "n"};
  g.inputs.push_back(FloatValue("x", std::vector<ir::Dim>{n, ir::Dim{8, ""}}));
  g.outputs.push_back(FloatValue("y", std::vector<ir::Dim>{n, ir::Dim{3, ""}}));
  g.initializers.push_back({"w1", RandomFloats({8, 6}, 1), ""});
  g.initializers.push_back({"b1", RandomFloats({6}, 2, 0.1f), ""});
  g.initializers.push_back({"w2", RandomFloats({6, 3}, 3), ""});
  g.nodes.push_back(MakeNode("Identity", {"x"}, {"xi"}));
  g.nodes.push_back(MakeNode("Gemm", {"xi", "w1", "b1"}, {"h"}));
  g.nodes.push_back(MakeNode("Relu", {"h"}, {"r"}));
  g.nodes.push_back(MakeNode("MatMul", {"r", "w2"}, {"y"}));
  return m;
}

inline std::string SaveTo(const ir::Model& m, const std::string& dir, const std::string& name) {
  std::string path = (std::filesystem::path(dir) / name).string();
  Status st = ir::SaveModel(m, path);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

// `dir`/x.npy with `rows` seeded samples of ClassifierModel's input; returns `dir`.
inline std::string ClassifierData(const std::string& dir, int64_t rows, uint32_t seed = 7) {
  std::filesystem::create_directories(dir);
  Status st = WriteFileAtomic((std::filesystem::path(dir) / "x.npy").string(),
                              SerializeNpy(RandomFloats({rows, 8}, seed)));
  EXPECT_TRUE(st.ok()) << st.message();
  return dir;
}

}  // namespace ferry::testing
