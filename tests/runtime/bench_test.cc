// runtime::Bench: the typed result of `ferry bench` (no timing is asserted).
#include "runtime/bench.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ir/onnx_io.h"
#include "verb_models.h"

namespace ferry::runtime {
namespace {

TEST(Bench, RunsTimesAndReportsTheInputsItChose) {
  std::string dir = testing::FreshDir();
  BenchOptions o;
  o.model = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.runs = 4;
  o.warmup = 1;
  o.session.threads = 1;
  o.session.profile = true;
  auto r = Bench(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->runs, 4);
  EXPECT_EQ(r->concurrency, 1);
  EXPECT_EQ(r->threads, 1);
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].second, (Shape{1, 8}));  // the symbolic batch as 1
  ASSERT_EQ(r->notes.size(), 1u);
  EXPECT_NE(r->notes[0].find("n=1"), std::string::npos) << r->notes[0];
  EXPECT_LE(r->min_ms, r->p50_ms);
  EXPECT_LE(r->p50_ms, r->p99_ms);
  EXPECT_LE(r->p99_ms, r->max_ms);
  // Every timed run's latency is kept; the quantiles are over them.
  ASSERT_EQ(r->run_ms.size(), 4u);
  EXPECT_DOUBLE_EQ(*std::min_element(r->run_ms.begin(), r->run_ms.end()), r->min_ms);
  EXPECT_DOUBLE_EQ(*std::max_element(r->run_ms.begin(), r->run_ms.end()), r->max_ms);
  EXPECT_GT(r->throughput, 0);
  EXPECT_GT(r->wall_ms, 0);
  EXPECT_GT(r->peak_rss_mb, 0);
  // The initializers and the cpu provider's packed copies (which depend on the CPU's ISA): what
  // a session of the same model reports after one run.
  {
    auto model = ir::LoadModel(o.model);
    ASSERT_TRUE(model.ok());
    auto s = Session::Create(std::shared_ptr<const ir::Model>(std::move(*model)), o.session);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Run({{"x", Value(testing::RandomFloats({1, 8}, 5))}}).ok());
    EXPECT_GE((*s)->weights_bytes(), 4u * (8 * 6 + 6 + 6 * 3));
    EXPECT_DOUBLE_EQ(r->weights_mb, static_cast<double>((*s)->weights_bytes()) / (1024 * 1024));
  }
  ASSERT_EQ(r->nodes.size(), 4u);
  int timed = 0;  // nodes that ran the 4 timed runs (the profile was reset after the warm-up)
  for (const auto& n : r->nodes) timed += n.calls == 4;
  EXPECT_GT(timed, 0);
  auto j = nlohmann::json::parse(FormatJson(*r));
  EXPECT_EQ(j["concurrency"], 1);
  EXPECT_EQ(j["inputs"]["x"], nlohmann::json::parse("[1, 8]"));
  EXPECT_TRUE(j.contains("ops") && j.contains("weights_mb") && j.contains("arena_mb"));
  EXPECT_NE(FormatText(*r).find("per op type"), std::string::npos);
  EXPECT_NE(FormatMarkdown(*r).find("| p50 |"), std::string::npos);
}

TEST(Bench, ShapesFilesAndUsageErrors) {
  std::string dir = testing::FreshDir();
  BenchOptions o;
  o.model = testing::SaveTo(*testing::ClassifierModel(), dir, "cls.onnx");
  o.runs = 2;
  o.warmup = 0;
  o.shapes["x"] = {5, 8};
  auto r = Bench(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->inputs[0].second, (Shape{5, 8}));
  EXPECT_TRUE(r->notes.empty());
  o.shapes["x"] = {5, 7};
  EXPECT_EQ(Bench(o).status().code(), StatusCode::kInvalid);  // against the declared 8
  o.shapes.clear();
  o.input_files["x"] = testing::ClassifierData(dir + "/data", 3) + "/x.npy";
  auto f = Bench(o);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->inputs[0].second, (Shape{3, 8}));
  o.input_files["nope"] = "x.npy";
  EXPECT_EQ(Bench(o).status().code(), StatusCode::kUsage);
  o.input_files.clear();
  o.concurrency = 0;
  EXPECT_EQ(Bench(o).status().code(), StatusCode::kUsage);
  o.concurrency = 2;
  o.session.profile = true;
  EXPECT_EQ(Bench(o).status().code(), StatusCode::kUsage);
  o.concurrency = 1;
  o.session.profile = false;
  o.runs = 0;
  EXPECT_EQ(Bench(o).status().code(), StatusCode::kUsage);
}

}  // namespace
}  // namespace ferry::runtime
