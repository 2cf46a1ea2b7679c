#include "quant/data.h"

#include <algorithm>
#include <cstring>

#include "core/npy.h"

namespace ferry::quant {

Tensor SliceRows(const Tensor& t, int64_t begin, int64_t end) {
  Shape s = t.shape();
  s[0] = end - begin;
  Tensor out(t.dtype(), s);
  size_t row = t.dim(0) ? t.nbytes() / static_cast<size_t>(t.dim(0)) : 0;
  if (row)
    std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + row * static_cast<size_t>(begin),
                row * static_cast<size_t>(end - begin));
  return out;
}

int64_t SplittableRows(const verify::DataSet& set, const ir::Graph& graph) {
  int64_t n = -1;
  for (const auto& [name, v] : set.inputs) {
    if (!v.is_tensor() || v.tensor().rank() == 0 || v.tensor().dtype() == DType::kString) return -1;
    for (const auto& vi : graph.inputs)
      if (vi.name == name && vi.type.shape && !vi.type.shape->empty() &&
          (*vi.type.shape)[0].known())
        return -1;
    int64_t d = v.tensor().dim(0);
    if (n >= 0 && d != n) return -1;
    n = d;
  }
  return n;
}

verify::DataSet SliceSet(const verify::DataSet& set, int64_t begin, int64_t end) {
  verify::DataSet part;
  part.name = fmt::format("{}[{}:{}]", set.name, begin, end);
  for (const auto& [name, v] : set.inputs)
    part.inputs.emplace_back(name, Value(SliceRows(v.tensor(), begin, end)));
  return part;
}

Status ForEachRun(std::vector<verify::DataSet>& sets, const ir::Graph& graph, int64_t max_samples,
                  const std::function<int64_t()>& batch,
                  const std::function<Status(verify::DataSet part, int64_t rows)>& fn) {
  int64_t done = 0;
  for (auto& set : sets) {
    if (max_samples > 0 && done >= max_samples) break;
    const int64_t rows = SplittableRows(set, graph);
    if (rows < 0) {
      FERRY_RETURN_IF_ERROR(fn(std::move(set), 1));
      ++done;
    } else {
      const int64_t n = max_samples > 0 ? std::min(rows, max_samples - done) : rows;
      for (int64_t b = 0; b < n;) {
        const int64_t e = std::min(n, b + std::max<int64_t>(batch(), 1));
        FERRY_RETURN_IF_ERROR(
            fn(b == 0 && e == rows ? std::move(set) : SliceSet(set, b, e), e - b));
        b = e;
      }
      done += n;
    }
    set.inputs.clear();  // released once run (a no-op when it was moved out)
  }
  return Status::Ok();
}

std::vector<verify::DataSet> SplitSamples(std::vector<verify::DataSet> sets, const ir::Graph& graph,
                                          int64_t batch, int64_t max_samples, int64_t* samples) {
  std::vector<verify::DataSet> out;
  int64_t kept = 0;
  (void)ForEachRun(
      sets, graph, max_samples, [batch] { return batch; },
      [&](verify::DataSet part, int64_t rows) {
        out.push_back(std::move(part));
        kept += rows;
        return Status::Ok();
      });
  if (samples) *samples = kept;
  return out;
}

Result<std::vector<verify::DataSet>> LoadSets(const std::string& dir, const std::string& flag,
                                              const ir::Graph& graph) {
  auto sets = ir::LoadDataSets(dir, graph, false);
  if (!sets.ok()) return sets.status().With(flag);
  return sets;
}

Result<std::vector<verify::DataSet>> LoadSamples(const std::string& dir, const std::string& flag,
                                                 const ir::Graph& graph, int64_t batch,
                                                 int64_t max_samples, int64_t* samples) {
  FERRY_ASSIGN_OR_RETURN(auto sets, LoadSets(dir, flag, graph));
  return SplitSamples(std::move(sets), graph, batch, max_samples, samples);
}

Result<std::vector<int64_t>> LoadLabels(const std::string& path) {
  auto t = ReadNpy(path);
  if (!t.ok()) return t.status().With("--labels");
  if (!IsInteger(t->dtype()))
    return InvalidError("--labels '{}': expected integer class ids, got dtype {}", path,
                        DTypeName(t->dtype()));
  return t->ToInt64Vector();
}

}  // namespace ferry::quant
