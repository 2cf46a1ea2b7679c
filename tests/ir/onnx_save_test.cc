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
  Tensor big2(DType::kFloat, {2000});
  for (int64_t i = 0; i < big2.size(); ++i) big2.data<float>()[i] = 7.f - static_cast<float>(i);
  Tensor small = Tensor::FromVector<float>({1.f, 2.f}, {2});
  m.graph.initializers.push_back({"big", big, ""});
  m.graph.initializers.push_back({"big2", big2, ""});
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
  // Only the big tensors, each at its own (64-byte aligned) offset.
  EXPECT_EQ(fs::file_size(dir / "m.onnx.data"), 4032u + 8000u);
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
  // The second tensor is read from its own offset, not from the start of the file.
  const Initializer* b2 = loaded.value()->graph.FindInitializer("big2");
  ASSERT_TRUE(b2);
  for (int64_t i = 0; i < 2000; ++i)
    ASSERT_EQ(b2->tensor.data<float>()[i], 7.f - static_cast<float>(i));

  // Below the threshold everything stays inline.
  const std::string inline_path = (dir / "inline.onnx").string();
  ASSERT_TRUE(SaveModel(m, inline_path).ok());
  EXPECT_FALSE(fs::exists(dir / "inline.onnx.data"));

  // Inline raw bytes of large initializers are moved into the tensors, which own them: they
  // stay valid after the model that loaded them is gone (ASan checks the ownership).
  Tensor kept;
  {
    auto in = LoadModel(inline_path);
    ASSERT_TRUE(in.ok()) << in.status().message();
    const Initializer* k = in.value()->graph.FindInitializer("big2");
    ASSERT_TRUE(k && k->tensor.owned());
    kept = k->tensor;
  }
  ASSERT_EQ(kept.size(), 2000);
  for (int64_t i = 0; i < 2000; ++i) ASSERT_EQ(kept.data<float>()[i], 7.f - static_cast<float>(i));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry::ir
