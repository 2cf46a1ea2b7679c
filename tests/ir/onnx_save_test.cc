#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

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

// LoadModel reads initializers of 64 KiB and more straight from the file into their tensors
// (the rest of the file is parsed without them): the same model as parsing the whole file,
// also with the large tensors between small ones and a nested graph attribute; a file cut
// inside a large payload or inside the small fields is one clear error.
TEST(LoadModel, LargeInitializersReadApartMatchAWholeParse) {
  Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 13});
  auto fill = [](int64_t n, float k) {
    Tensor t(DType::kFloat, {n});
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = k * static_cast<float>(i % 977) - 3.f;
    return t;
  };
  m.graph.initializers.push_back({"a", fill(30000, 0.25f), ""});  // 120 KB: read apart
  m.graph.initializers.push_back({"s", Tensor::FromVector<float>({1.f, 2.f}, {2}), ""});
  m.graph.initializers.push_back({"b", fill(16384, -0.5f), ""});  // exactly 64 KiB: read apart
  m.graph.initializers.push_back({"c", fill(16383, 2.f), ""});    // 4 bytes under: parsed
  Tensor ids(DType::kInt64, {20000});
  for (int64_t i = 0; i < ids.size(); ++i) ids.data<int64_t>()[i] = i * 3 - 7;
  m.graph.initializers.push_back({"ids", ids, ""});
  ValueInfo out;
  out.name = "y";
  m.graph.outputs.push_back(out);
  Node n;
  n.op_type = "Add";
  n.inputs = {"a", "a"};
  n.outputs = {"y"};
  m.graph.nodes.push_back(std::move(n));

  fs::path dir = fs::temp_directory_path() / "ferry_load_split_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "m.onnx").string();
  ASSERT_TRUE(SaveModel(m, path).ok());
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  auto whole = ParseModel(bytes, dir.string(), path);
  auto split = LoadModel(path);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_EQ(LargeRawReadForTesting(), 3);  // a, b and ids; not s or c
  ASSERT_EQ(whole.value()->graph.initializers.size(), split.value()->graph.initializers.size());
  for (const auto& w : whole.value()->graph.initializers) {
    SCOPED_TRACE(w.name);
    const Initializer* l = split.value()->graph.FindInitializer(w.name);
    ASSERT_TRUE(l);
    ASSERT_EQ(l->tensor.dtype(), w.tensor.dtype());
    ASSERT_EQ(l->tensor.shape(), w.tensor.shape());
    ASSERT_EQ(0, std::memcmp(l->tensor.raw(), w.tensor.raw(), w.tensor.nbytes()));
  }
  EXPECT_EQ(split.value()->graph.nodes.size(), 1u);
  EXPECT_EQ(split.value()->opset_imports.size(), 1u);

  // Cut inside a's payload, and inside the small fields at the end.
  for (size_t keep : {bytes.size() / 4, bytes.size() - 3}) {
    const std::string cut = (dir / "cut.onnx").string();
    {
      std::ofstream f(cut, std::ios::binary);
      f.write(bytes.data(), static_cast<std::streamsize>(keep));
    }
    auto r = LoadModel(cut);
    ASSERT_FALSE(r.ok()) << keep;
    EXPECT_NE(r.status().message().find("cut.onnx"), std::string::npos) << r.status().message();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ferry::ir
