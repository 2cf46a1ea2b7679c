#include <filesystem>

#include <gtest/gtest.h>

#include "ir/onnx_io.h"

namespace ferry::ir {
namespace {

namespace fs = std::filesystem;

// Large initializers go to `<file>.data` beside the model and load back unchanged.
TEST(SaveModel, ExternalDataAboveTheThreshold) {
  Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 13});
  Tensor big(DType::kFloat, {1000});
  for (int64_t i = 0; i < big.size(); ++i) big.data<float>()[i] = static_cast<float>(i) * 0.5f;
  Tensor small = Tensor::FromVector<float>({1.f, 2.f}, {2});
  m.graph.initializers.push_back({"big", big, ""});
  m.graph.initializers.push_back({"small", small, ""});
  ValueInfo out;
  out.name = "y";
  m.graph.outputs.push_back(out);
  Node n;
  n.op_type = "Add";
  n.inputs = {"big", "big"};
  n.outputs = {"y"};
  m.graph.nodes.push_back(std::move(n));

  fs::path dir = fs::temp_directory_path() / "ferry_external_data_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "m.onnx").string();
  ASSERT_TRUE(SaveModel(m, path, 1000).ok());
  ASSERT_TRUE(fs::exists(dir / "m.onnx.data"));
  EXPECT_EQ(fs::file_size(dir / "m.onnx.data"), 4000u);  // only the big tensor
  EXPECT_LT(fs::file_size(path), 1000u);

  auto loaded = LoadModel(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const Initializer* b = loaded.value()->graph.FindInitializer("big");
  const Initializer* s = loaded.value()->graph.FindInitializer("small");
  ASSERT_TRUE(b && s);
  ASSERT_EQ(b->tensor.size(), 1000);
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(b->tensor.data<float>()[i], static_cast<float>(i) * 0.5f);
  EXPECT_EQ(s->tensor.data<float>()[1], 2.f);

  // Below the threshold everything stays inline.
  const std::string inline_path = (dir / "inline.onnx").string();
  ASSERT_TRUE(SaveModel(m, inline_path).ok());
  EXPECT_FALSE(fs::exists(dir / "inline.onnx.data"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry::ir
