// Model bytes -> ir::ParseModel -> `inspect` (ops::Inspect) and `audit` (passes::Audit, targets
// ferry, ferry-cpu and one opset) rendered as JSON, text and Markdown. The JSON must parse back
// as one JSON document (what `--json` promises scripts).
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_common.h"
#include "ir/onnx_io.h"
#include "ops/inspect.h"
#include "passes/audit.h"

namespace {

void ExpectJson(const std::string& s, const char* what) {
  if (!nlohmann::json::accept(s))
    ferry::fuzz::Fail(std::string(what) + " --json printed invalid JSON: " + s.substr(0, 200));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry;
  const uint64_t hash = fuzz::InputHash(data, size);
  auto parsed =
      ir::ParseModel(std::string(reinterpret_cast<const char*>(data), size), "", "fuzz.onnx");
  if (!parsed.ok()) return 0;
  ir::Model& model = *parsed.value();

  ops::InspectResult ir = ops::Inspect(model, "fuzz.onnx");
  ExpectJson(ops::FormatJson(ir), "inspect");
  (void)ops::FormatText(ir);
  (void)ops::FormatMarkdown(ir);

  const char* opsets[] = {"opset:7", "opset:11", "opset:13", "opset:17"};
  passes::AuditOptions options;
  options.targets = {"ferry", "ferry-cpu", opsets[hash % 4]};
  auto audit = passes::Audit(model, "fuzz.onnx", options);
  if (!audit.ok()) return 0;
  ExpectJson(passes::FormatJson(audit.value()), "audit");
  (void)passes::FormatText(audit.value());
  (void)passes::FormatMarkdown(audit.value());
  return 0;
}
