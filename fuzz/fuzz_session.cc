// Model bytes -> ir::ParseModel -> runtime::Session::Create -> one Run on seeded inputs of the
// declared shapes. Provider "cpu" or "reference" (one bit of the input's hash), one thread.
//
// Bounds, so that one mutated model cannot take the machine: symbolic and unknown dims are
// 1..4 (dims sharing a symbol share a size); models whose declared inputs hold more than
// kMaxInputElements elements, whose inputs are of unknown rank, or with a Loop that has no
// trip count bound by the target are skipped. The session's memory budget is 1 GiB
// (SessionOptions::max_memory: a step that would pass it fails with a Status); what the budget
// does not charge is bounded by libFuzzer's -malloc_limit_mb / -rss_limit_mb (a model that gets
// past both is a finding: the engine should refuse it with a Status).
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_common.h"
#include "ir/onnx_io.h"
#include "runtime/session.h"

namespace {

using namespace ferry;

constexpr int64_t kMaxInputElements = 1 << 20;  // all inputs together
constexpr int64_t kMaxRank = 8;
constexpr int64_t kMaxLoopTrips = 64;

// Whether every Loop (at any depth) has a trip count that is a graph input (fed small) or a
// small constant; a Loop without one may run forever on a condition that stays true.
bool LoopsBounded(const ir::Graph& g, std::vector<const ir::Graph*>& scopes) {
  scopes.push_back(&g);
  for (const ir::Node& n : g.nodes) {
    if (n.op_type == "Loop" && n.domain.empty()) {
      if (n.inputs.empty() || n.inputs[0].empty()) return false;
      const std::string& m = n.inputs[0];
      bool bounded = false;
      for (const ir::Graph* s : scopes) {
        if (const ir::Initializer* init = s->FindInitializer(m)) {
          const Tensor& t = init->tensor;
          bounded = t.size() == 1 && IsInteger(t.dtype()) && t.GetAsInt64(0) <= kMaxLoopTrips;
          break;
        }
        for (const ir::ValueInfo* in : s->RealInputs())
          if (in->name == m && s == scopes.front()) bounded = true;
      }
      if (!bounded) return false;
    }
    for (const ir::Attribute& a : n.attributes) {
      if (a.g && !LoopsBounded(*a.g, scopes)) return false;
      for (const auto& sg : a.graphs)
        if (!LoopsBounded(*sg, scopes)) return false;
    }
  }
  scopes.pop_back();
  return true;
}

// Seeded values: floats in [-2, 2) with now and then a zero or an extreme, integers 0..3 (ids,
// axes, shapes stay small) and now and then -1, random bools, short strings.
void Fill(Tensor& t, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> real(-2.f, 2.f);
  auto value = [&]() -> double {
    switch (rng() % 32) {
      case 0:
        return 0.0;
      case 1:
        return 1e6;
      default:
        return real(rng);
    }
  };
  auto integer = [&]() -> int64_t {
    return rng() % 16 == 0 ? -1 : static_cast<int64_t>(rng() % 4);
  };
  VisitDType(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = t.data<T>();
    for (int64_t i = 0; i < t.size(); ++i) {
      if constexpr (std::is_same_v<T, std::string>) {
        d[i] = std::string(rng() % 4, 'a');
      } else if constexpr (std::is_same_v<T, bool>) {
        d[i] = (rng() & 1) != 0;
      } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        d[i] = T(static_cast<float>(value()));
      } else if constexpr (std::is_floating_point_v<T>) {
        d[i] = static_cast<T>(value());
      } else if constexpr (std::is_unsigned_v<T>) {
        d[i] = static_cast<T>(rng() % 4);
      } else {
        d[i] = static_cast<T>(integer());
      }
    }
  });
}

// Dims for a declared shape: known dims as declared, others 1..4 (per symbol); false when a
// known dim is negative or the rank is unknown or above kMaxRank.
bool ChooseDims(const ir::TypeInfo& type, std::map<std::string, int64_t>& symbols,
                std::mt19937_64& rng, Shape* dims) {
  if (type.kind != ir::TypeInfo::Kind::kTensor || !type.shape) return false;
  if (static_cast<int64_t>(type.shape->size()) > kMaxRank) return false;
  dims->clear();
  for (const ir::Dim& d : *type.shape) {
    if (d.value) {
      if (*d.value < 0 || *d.value > kMaxInputElements) return false;
      dims->push_back(*d.value);
    } else if (!d.symbol.empty()) {
      auto it = symbols.find(d.symbol);
      if (it == symbols.end()) it = symbols.emplace(d.symbol, 1 + rng() % 4).first;
      dims->push_back(it->second);
    } else {
      dims->push_back(1 + static_cast<int64_t>(rng() % 4));
    }
  }
  return true;
}

bool MakeTensor(const ir::TypeInfo& type, std::map<std::string, int64_t>& symbols,
                std::mt19937_64& rng, int64_t* budget, Tensor* out) {
  Shape dims;
  if (!ChooseDims(type, symbols, rng, &dims)) return false;
  if (type.elem_type == DType::kUndefined) return false;
  int64_t n = 1;
  for (int64_t d : dims) {
    n *= d;
    if (n > kMaxInputElements) return false;
  }
  if ((*budget -= n) < 0) return false;
  *out = Tensor(type.elem_type, dims);
  Fill(*out, rng);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint64_t hash = fuzz::InputHash(data, size);
  auto parsed =
      ir::ParseModel(std::string(reinterpret_cast<const char*>(data), size), "", "fuzz.onnx");
  if (!parsed.ok()) return 0;
  std::shared_ptr<const ir::Model> model = std::move(parsed).value();
  std::vector<const ir::Graph*> scopes;
  if (!LoopsBounded(model->graph, scopes)) return 0;

  std::mt19937_64 rng(hash);
  std::map<std::string, int64_t> symbols;
  int64_t budget = kMaxInputElements;
  std::vector<std::pair<std::string, Value>> feeds;
  for (const ir::ValueInfo* in : model->graph.RealInputs()) {
    const ir::TypeInfo& type = in->type;
    if (type.kind == ir::TypeInfo::Kind::kTensor) {
      Tensor t;
      if (!MakeTensor(type, symbols, rng, &budget, &t)) return 0;
      feeds.emplace_back(in->name, Value(std::move(t)));
    } else if ((type.kind == ir::TypeInfo::Kind::kSequence ||
                type.kind == ir::TypeInfo::Kind::kOptional) &&
               type.inner && type.inner->kind == ir::TypeInfo::Kind::kTensor) {
      if (type.kind == ir::TypeInfo::Kind::kOptional && rng() % 4 == 0) {
        feeds.emplace_back(in->name, Value());  // an empty optional
        continue;
      }
      std::vector<Tensor> items(type.kind == ir::TypeInfo::Kind::kSequence ? rng() % 3 : 1);
      for (Tensor& t : items)
        if (!MakeTensor(*type.inner, symbols, rng, &budget, &t)) return 0;
      if (type.kind == ir::TypeInfo::Kind::kOptional)
        feeds.emplace_back(in->name, Value(std::move(items[0])));
      else
        feeds.emplace_back(in->name, Value::Sequence(std::move(items), type.inner->elem_type));
    } else {
      return 0;  // maps, unknown types: nothing to feed
    }
  }

  runtime::SessionOptions options;
  options.threads = 1;
  options.share_cores = false;
  options.max_memory = uint64_t{1} << 30;
  options.provider = (hash >> 32) % 2 ? "reference" : "cpu";
  auto session = runtime::Session::Create(model, options);
  if (!session.ok()) return 0;
  runtime::RunOptions run;
  run.threads = 1;
  auto outputs = session.value()->Run(feeds, run);
  (void)outputs;
  return 0;
}
