#include "ir/data_sets.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "ir/onnx_io.h"
#include "ir/value_files.h"

namespace ferry::ir {

namespace fs = std::filesystem;

namespace {

// Files of `dir` named `prefix<N>...`, by N.
std::vector<std::string> ListNumberedIn(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<long, std::string>> items;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() ||
        !std::isdigit(static_cast<unsigned char>(name[prefix.size()])))
      continue;
    items.emplace_back(std::strtol(name.c_str() + prefix.size(), nullptr, 10), e.path().string());
  }
  std::sort(items.begin(), items.end());
  std::vector<std::string> out;
  for (auto& [n, p] : items) out.push_back(p);
  return out;
}

std::string InputNames(const std::vector<const ValueInfo*>& v) {
  std::string s;
  for (const auto* vi : v) s += (s.empty() ? "" : ", ") + vi->name;
  return s;
}

Result<DataSet> LoadTestDataSet(const std::string& set, const Graph& g, const DataReaders& readers,
                                bool want_outputs) {
  DataSet ds;
  ds.name = fs::path(set).filename().string();
  std::vector<const ValueInfo*> real = g.RealInputs();
  std::vector<std::string> in_files = ListNumberedIn(set, "input_");
  std::vector<std::string> out_files = ListNumberedIn(set, "output_");
  if (in_files.empty() && !real.empty()) return InvalidError("'{}' holds no input_N.pb files", set);
  std::set<std::string> fed;
  for (size_t k = 0; k < in_files.size(); ++k) {
    std::string name = TensorPbName(in_files[k]);
    const ValueInfo* vi = nullptr;
    for (const auto& in : g.inputs)
      if (!name.empty() && in.name == name) vi = &in;
    if (!vi) {
      if (k >= real.size())
        return InvalidError("'{}': the model has only {} inputs ({})", in_files[k], real.size(),
                            InputNames(real));
      vi = real[k];
    }
    FERRY_ASSIGN_OR_RETURN(Value v, readers.read(in_files[k], vi->type));
    if (!fed.insert(vi->name).second)
      return InvalidError("'{}': input '{}' is given twice", set, vi->name);
    ds.inputs.emplace_back(vi->name, std::move(v));
  }
  for (const auto* vi : real)
    if (!fed.count(vi->name))
      return InvalidError("'{}': no input file for model input '{}'", set, vi->name);
  if (want_outputs) {
    if (out_files.size() != g.outputs.size())
      return InvalidError("'{}' holds {} expected outputs (output_N.pb), the model has {}", set,
                          out_files.size(), g.outputs.size());
    std::set<std::string> got;
    for (size_t k = 0; k < out_files.size(); ++k) {
      std::string name = TensorPbName(out_files[k]);
      const ValueInfo* vi = &g.outputs[k];
      for (const auto& out : g.outputs)
        if (!name.empty() && out.name == name) vi = &out;
      FERRY_ASSIGN_OR_RETURN(Value v, ReadValuePb(out_files[k], vi->type));
      if (!got.insert(vi->name).second)
        return InvalidError("'{}': expected output '{}' is given twice", set, vi->name);
      ds.expected.emplace_back(vi->name, std::move(v));
    }
  }
  return ds;
}

// Element i along axis 0 of t, as an owned tensor.
Tensor Slice0(const Tensor& t, int64_t i) {
  Shape shape(t.shape().begin() + 1, t.shape().end());
  Tensor out(t.dtype(), shape);
  int64_t n = out.size();
  if (t.dtype() == DType::kString) {
    for (int64_t j = 0; j < n; ++j) out.data<std::string>()[j] = t.data<std::string>()[i * n + j];
  } else if (out.nbytes() > 0) {
    std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + i * out.nbytes(), out.nbytes());
  }
  return out;
}

Result<std::vector<DataSet>> LoadNpyDir(const std::string& dir, const Graph& g,
                                        const DataReaders& readers) {
  std::vector<const ValueInfo*> real = g.RealInputs();
  struct Loaded {
    std::string name, file;
    Value v;
    bool batched = false;
  };
  std::vector<Loaded> loaded;
  int64_t sets = -1;
  std::string sets_from;
  for (const auto* vi : real) {
    std::vector<std::string> names;
    if (readers.file_name) names.push_back(readers.file_name(vi->name) + ".npy");
    names.push_back(vi->name + ".npy");
    std::string file;
    std::error_code ec;
    for (const auto& n : names)
      if (file.empty() && fs::is_regular_file(fs::path(dir) / n, ec))
        file = (fs::path(dir) / n).string();
    if (file.empty())
      return InvalidError(
          "'{}' holds no test_data_set_* folders, no input_N.pb files and no '{}' for model "
          "input '{}'",
          dir, names.front(), vi->name);
    FERRY_ASSIGN_OR_RETURN(Value v, readers.read(file, vi->type));
    Loaded l{vi->name, file, std::move(v), false};
    if (l.v.is_tensor() && vi->type.kind == TypeInfo::Kind::kTensor && vi->type.shape &&
        l.v.tensor().rank() == static_cast<int64_t>(vi->type.shape->size()) + 1) {
      l.batched = true;
      int64_t s = l.v.tensor().dim(0);
      if (sets >= 0 && s != sets)
        return InvalidError("'{}' holds {} sets (leading dim), but '{}' holds {}", file, s,
                            sets_from, sets);
      sets = s;
      sets_from = file;
    }
    loaded.push_back(std::move(l));
  }
  if (sets < 0) sets = 1;
  if (sets == 0) return InvalidError("'{}' holds 0 sets (leading dim 0)", sets_from);
  std::vector<DataSet> out;
  for (int64_t i = 0; i < sets; ++i) {
    DataSet ds;
    ds.name = sets_from.empty() ? fs::path(dir).filename().string()
                                : fmt::format("{}[{}]", fs::path(sets_from).filename().string(), i);
    for (const auto& l : loaded)
      ds.inputs.emplace_back(l.name, l.batched ? Value(Slice0(l.v.tensor(), i)) : l.v);
    out.push_back(std::move(ds));
  }
  return out;
}

}  // namespace

Result<std::vector<DataSet>> LoadDataSets(const std::string& dir, const Graph& graph,
                                          const DataReaders& readers, bool want_outputs) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return InvalidError("data folder '{}' does not exist", dir);
  std::vector<std::string> sets = ListNumberedIn(dir, "test_data_set_");
  if (sets.empty() && (!ListNumberedIn(dir, "input_").empty() ||
                       (want_outputs && !ListNumberedIn(dir, "output_").empty())))
    sets.push_back(dir);
  std::vector<DataSet> out;
  if (sets.empty()) {
    if (want_outputs)
      return InvalidError(
          "'{}' holds no test_data_set_* folders (golden data needs input_N.pb and output_N.pb)",
          dir);
    return LoadNpyDir(dir, graph, readers);
  }
  for (const auto& s : sets) {
    FERRY_ASSIGN_OR_RETURN(DataSet ds, LoadTestDataSet(s, graph, readers, want_outputs));
    out.push_back(std::move(ds));
  }
  return out;
}

DataReaders FileReaders() {
  return DataReaders{ReadInputFile, SanitizeFileName};
}

Result<std::vector<DataSet>> LoadDataSets(const std::string& dir, const Graph& graph,
                                          bool want_outputs) {
  return LoadDataSets(dir, graph, FileReaders(), want_outputs);
}

std::vector<std::string> ListNumbered(const std::string& dir, const std::string& prefix) {
  return ListNumberedIn(dir, prefix);
}

}  // namespace ferry::ir
