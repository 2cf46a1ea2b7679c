// Model bytes -> ir::ParseModel -> each graph pass alone, then `optimize`'s pipeline (every pass
// to a fixed point, as `ferry optimize` runs it: level "all" or "basic", one input's shape
// fixed now and then, the equivalence check on one seeded set for small models), and the
// converters of `ferry convert` (float16; an opset now and then). Every rewritten model must
// serialize into bytes ParseModel accepts again.
#include <string>
#include <vector>

#include "core/memory_budget.h"
#include "fuzz_common.h"
#include "ir/onnx_io.h"
#include "passes/check.h"
#include "passes/convert.h"
#include "passes/pass_manager.h"

namespace {

using namespace ferry;

constexpr size_t kMaxCheckedNodes = 64;

void ExpectReparses(const ir::Model& m, const std::string& after) {
  auto again = ir::ParseModel(ir::SerializeModel(m), "", "rewritten");
  if (!again.ok())
    fuzz::Fail("the model " + after + " does not load again: " + again.status().message());
}

// A fresh copy of the input (ir::Model holds subgraphs by unique_ptr: no copies).
std::unique_ptr<ir::Model> Load(const std::string& bytes) {
  auto m = ir::ParseModel(bytes, "", "fuzz.onnx");
  if (!m.ok()) fuzz::Fail("the input parsed once and not twice: " + m.status().message());
  return std::move(m).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Every session the passes make (folding, the equivalence check and its seeded inputs) stays
  // within 1 GiB, as in the session target: a 2.5 GB seeded input took 27 s to fill.
  static const bool budget = (ferry::SetDefaultMaxMemory(uint64_t{1} << 30), true);
  (void)budget;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const uint64_t hash = fuzz::InputHash(data, size);
  auto first = ir::ParseModel(bytes, "", "fuzz.onnx");
  if (!first.ok()) return 0;

  // Each pass alone.
  for (const passes::PassInfo& p : passes::AllPasses()) {
    auto m = Load(bytes);
    passes::OptimizeOptions o;
    o.only = {p.name};
    if (passes::Optimize(*m, o).ok()) ExpectReparses(*m, std::string("after pass ") + p.name);
  }

  // The pipeline.
  std::unique_ptr<ir::Model> m = std::move(first).value();
  passes::OptimizeOptions o;
  o.level = (hash & 1) ? "basic" : "all";
  if (hash & 2) {
    auto inputs = m->graph.RealInputs();
    if (!inputs.empty() && inputs[0]->type.shape) {
      Shape dims;
      for (const ir::Dim& d : *inputs[0]->type.shape) dims.push_back(d.value.value_or(2));
      (void)passes::FixInputShape(*m, inputs[0]->name, dims);
    }
  }
  if (passes::Optimize(*m, o).ok()) {
    ExpectReparses(*m, "after the " + o.level + " pipeline");
    if (m->graph.nodes.size() <= kMaxCheckedNodes && (hash & 4)) {
      passes::CheckOptions check;
      check.count = 1;
      auto original = Load(bytes);
      (void)passes::CheckEquivalent(*original, *m, check);
    }
  }

  // The converters.
  {
    auto c = Load(bytes);
    passes::Fp16Options fp16;
    if (passes::ConvertToFloat16(*c, fp16).ok()) ExpectReparses(*c, "after float16 conversion");
  }
  if ((hash >> 8) % 4 == 0) {
    const int64_t opsets[] = {7, 11, 13, 17};
    auto c = Load(bytes);
    if (passes::ConvertOpset(*c, opsets[(hash >> 16) % 4]).ok())
      ExpectReparses(*c, "after opset conversion");
  }
  return 0;
}
