// artifact diff's compatibility rules, one per test, on synthetic artifact descriptions: each
// would fail if the rule it names were dropped or inverted.
#include <gtest/gtest.h>

#include "artifact/diff.h"

namespace ferry::artifact {
namespace {

DimInfo Fixed(int64_t v) {
  DimInfo d;
  d.value = v;
  return d;
}
DimInfo Dyn(const std::string& s) {
  DimInfo d;
  d.symbol = s;
  return d;
}

ArtifactInfo Base() {
  ArtifactInfo a;
  a.path = "old";
  a.name = "m";
  a.version = "1";
  a.manifest_sha256 = "aa";
  VariantInfo v;
  v.name = "fp32";
  v.file = "models/fp32.onnx";
  v.sha256 = "s1";
  v.weights_sha256 = "w1";
  v.inputs = {{"x", "float32", std::vector<DimInfo>{Dyn("N"), Fixed(3), Fixed(224), Fixed(224)}}};
  v.outputs = {{"y", "float32", std::vector<DimInfo>{Dyn("N"), Fixed(1000)}}};
  a.variants = {v};
  a.default_variant = "fp32";
  a.inputs = v.inputs;
  a.outputs = v.outputs;
  a.prep_json =
      R"({"inputs":[{"image":{"resize":{"filter":"pil_bilinear","size":[224,224]}},"name":"x"}],"version":1})";
  a.prep_sha256 = "p1";
  a.class_names = {"cat", "dog"};
  return a;
}

ArtifactInfo Next(ArtifactInfo a) {
  a.path = "new";
  a.manifest_sha256 = "bb";
  return a;
}

const ArtifactChange* Find(const ArtifactDiff& d, const std::string& what) {
  for (const auto& c : d.changes)
    if (c.what == what) return &c;
  return nullptr;
}

TEST(ArtifactDiff, IdenticalManifests) {
  ArtifactInfo a = Base();
  ArtifactInfo b = a;
  ArtifactDiff d = DiffArtifacts(a, b);
  EXPECT_TRUE(d.identical);
  EXPECT_TRUE(d.changes.empty());
  EXPECT_EQ(d.breaking(), 0);
}

TEST(ArtifactDiff, RequantizedSameInterfaceIsCompatible) {
  ArtifactInfo a = Base(), b = Next(Base());
  b.version = "2";
  b.variants[0].sha256 = "s2";
  b.variants[0].weights_sha256 = "w2";
  ArtifactDiff d = DiffArtifacts(a, b);
  EXPECT_EQ(d.breaking(), 0) << FormatText(d);
  const ArtifactChange* c = Find(d, "variant 'fp32' model");
  ASSERT_NE(c, nullptr) << FormatText(d);
  EXPECT_FALSE(c->breaking);
  EXPECT_EQ(c->why, "other weights");
  ASSERT_NE(Find(d, "version"), nullptr);
}

TEST(ArtifactDiff, RenamedOutputIsBreakingAndRecognised) {
  ArtifactInfo a = Base(), b = Next(Base());
  b.variants[0].outputs[0].name = "scores";
  ArtifactDiff d = DiffArtifacts(a, b);
  const ArtifactChange* c = Find(d, "output 'y'");
  ASSERT_NE(c, nullptr) << FormatText(d);
  EXPECT_TRUE(c->breaking);
  EXPECT_NE(c->why.find("renamed to 'scores'"), std::string::npos) << c->why;
  // The new output itself is an addition (compatible).
  const ArtifactChange* added = Find(d, "output 'scores'");
  ASSERT_NE(added, nullptr);
  EXPECT_FALSE(added->breaking);
}

TEST(ArtifactDiff, ChangeInEveryVariantListedOnceVariantOnlyChangePrefixed) {
  ArtifactInfo a = Base();
  VariantInfo int8 = a.variants[0];
  int8.name = "int8";
  a.variants.push_back(int8);
  ArtifactInfo b = Next(a);
  for (auto& v : b.variants) v.outputs[0].name = "scores";
  ArtifactDiff d = DiffArtifacts(a, b);
  EXPECT_EQ(d.breaking(), 1) << FormatText(d);

  ArtifactInfo c = Next(a);
  c.variants[1].inputs[0].dtype = "uint8";  // only the int8 variant changes
  d = DiffArtifacts(a, c);
  EXPECT_EQ(d.breaking(), 1) << FormatText(d);
  EXPECT_NE(Find(d, "variant 'int8': input 'x' dtype"), nullptr) << FormatText(d);
}

TEST(ArtifactDiff, InputDimsNarrowedBreakWidenedDoNot) {
  ArtifactInfo a = Base(), b = Next(Base());
  b.variants[0].inputs[0].shape->at(0) = Fixed(1);  // dynamic batch -> 1: narrower
  ArtifactDiff d = DiffArtifacts(a, b);
  const ArtifactChange* c = Find(d, "input 'x' dim 0");
  ASSERT_NE(c, nullptr) << FormatText(d);
  EXPECT_TRUE(c->breaking);

  ArtifactInfo w = Next(Base());
  w.variants[0].inputs[0].shape->at(2) = Dyn("H");  // 224 -> dynamic: wider
  d = DiffArtifacts(a, w);
  c = Find(d, "input 'x' dim 2");
  ASSERT_NE(c, nullptr) << FormatText(d);
  EXPECT_FALSE(c->breaking);
  EXPECT_EQ(d.breaking(), 0);
}

TEST(ArtifactDiff, OutputDimFixedToDynamicBreaks) {
  ArtifactInfo a = Base(), b = Next(Base());
  b.variants[0].outputs[0].shape->at(1) = Dyn("C");
  ArtifactDiff d = DiffArtifacts(a, b);
  const ArtifactChange* c = Find(d, "output 'y' dim 1");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->breaking);
}

TEST(ArtifactDiff, DtypeRankAndAddedInputBreak) {
  ArtifactInfo a = Base(), b = Next(Base());
  b.variants[0].inputs[0].dtype = "float16";
  b.variants[0].inputs.push_back({"mask", "int64", std::vector<DimInfo>{Dyn("N")}});
  b.variants[0].outputs[0].shape->push_back(Fixed(1));
  ArtifactDiff d = DiffArtifacts(a, b);
  ASSERT_NE(Find(d, "input 'x' dtype"), nullptr);
  EXPECT_TRUE(Find(d, "input 'x' dtype")->breaking);
  ASSERT_NE(Find(d, "input 'mask'"), nullptr);
  EXPECT_TRUE(Find(d, "input 'mask'")->breaking);
  ASSERT_NE(Find(d, "output 'y' rank"), nullptr);
  EXPECT_EQ(d.breaking(), 3);
  // Breaking changes come first.
  EXPECT_TRUE(d.changes.front().breaking);
}

TEST(ArtifactDiff, PrepStepChangedRemovedAdded) {
  ArtifactInfo a = Base(), b = Next(Base());
  b.prep_json =
      R"({"inputs":[{"image":{"resize":{"filter":"cv2_linear","size":[224,224]}},"name":"x"}],"version":1})";
  ArtifactDiff d = DiffArtifacts(a, b);
  const ArtifactChange* c = Find(d, "prep inputs[x].image.resize.filter");
  ASSERT_NE(c, nullptr) << FormatText(d);
  EXPECT_TRUE(c->breaking);
  EXPECT_EQ(c->old_value, "\"pil_bilinear\"");
  EXPECT_EQ(c->new_value, "\"cv2_linear\"");

  ArtifactInfo none = Next(Base());
  none.prep_json.clear();
  none.prep_sha256.clear();
  d = DiffArtifacts(a, none);
  ASSERT_NE(Find(d, "pre-processing"), nullptr);
  EXPECT_TRUE(Find(d, "pre-processing")->breaking);
  d = DiffArtifacts(none, a);  // added
  ASSERT_NE(Find(d, "pre-processing"), nullptr);
  EXPECT_FALSE(Find(d, "pre-processing")->breaking);
  EXPECT_EQ(d.breaking(), 0);
}

TEST(ArtifactDiff, PrepOutputsChangeIsBreaking) {
  ArtifactInfo a = Base(), b = Next(Base());
  a.prep_json =
      R"({"inputs":[{"image":{},"name":"x"}],"outputs":[{"detect":{"iou_threshold":0.45},"name":"y"}],"version":1})";
  b.prep_json =
      R"({"inputs":[{"image":{},"name":"x"}],"outputs":[{"detect":{"iou_threshold":0.7},"name":"y"}],"version":1})";
  ArtifactDiff d = DiffArtifacts(a, b);
  const ArtifactChange* c = Find(d, "prep outputs[y].detect.iou_threshold");
  ASSERT_NE(c, nullptr) << FormatText(d);
  EXPECT_TRUE(c->breaking);
}

TEST(ArtifactDiff, ClassNamesAndVariants) {
  ArtifactInfo a = Base(), b = Next(Base());
  b.class_names = {"cat", "wolf"};
  VariantInfo extra = b.variants[0];
  extra.name = "int8";
  b.variants.push_back(extra);
  ArtifactDiff d = DiffArtifacts(a, b);
  ASSERT_NE(Find(d, "class name 1"), nullptr);
  EXPECT_TRUE(Find(d, "class name 1")->breaking);
  ASSERT_NE(Find(d, "variant 'int8'"), nullptr);
  EXPECT_FALSE(Find(d, "variant 'int8'")->breaking);
  d = DiffArtifacts(b, a);  // int8 removed
  ASSERT_NE(Find(d, "variant 'int8'"), nullptr);
  EXPECT_TRUE(Find(d, "variant 'int8'")->breaking);
}

}  // namespace
}  // namespace ferry::artifact
