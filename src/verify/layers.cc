#include "verify/layers.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace ferry::verify {

namespace fs = std::filesystem;

Result<std::unique_ptr<LayerCapture>> LayerCapture::Create(ToleranceFn tol) {
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string tmpl = (base / "ferry-verify-XXXXXX").string();
  if (!mkdtemp(tmpl.data()))
    return InvalidError("cannot create a temporary folder under '{}' for per-layer tensors",
                        base.string());
  std::unique_ptr<LayerCapture> c(new LayerCapture());
  c->dir_ = tmpl;
  c->tol_ = std::move(tol);
  return c;
}

LayerCapture::~LayerCapture() {
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

runtime::NodeObserver LayerCapture::ReferenceObserver(int set) {
  return [this, set](const ir::Node& node, const std::string& name, const Value& v) {
    auto [it, inserted] = by_name_.emplace(name, rows_.size());
    if (inserted) {
      LayerRow row;
      row.index = static_cast<int64_t>(rows_.size());
      row.tensor = name;
      row.node = node.name;
      row.op_type = node.op_type;
      row.tol = tol_ ? tol_(name) : Tolerance{};
      rows_.push_back(std::move(row));
      seen_in_candidate_.push_back(false);
    }
    size_t r = it->second;
    if (!status_.ok()) return;
    if (!v.is_tensor() || v.tensor().dtype() == DType::kString ||
        v.tensor().dtype() == DType::kUndefined) {
      rows_[r].state = LayerRow::State::kNotCompared;
      rows_[r].note = v.is_tensor() ? "string tensor" : v.is_sequence() ? "sequence" : "none";
      return;
    }
    const Tensor& t = v.tensor();
    std::string path = fmt::format("{}/s{}_{}.bin", dir_, set, r);
    FILE* f = std::fopen(path.c_str(), "wb");
    bool ok = f && (t.nbytes() == 0 || std::fwrite(t.raw(), 1, t.nbytes(), f) == t.nbytes());
    if (f) ok = std::fclose(f) == 0 && ok;
    if (!ok) {
      status_ = InvalidError("cannot write per-layer tensor '{}' ({} bytes) to '{}'", name,
                             t.nbytes(), path);
      return;
    }
    spilled_[{set, r}] = Spilled{t.dtype(), t.shape(), path};
  };
}

runtime::NodeObserver LayerCapture::CandidateObserver(int set) {
  return [this, set](const ir::Node&, const std::string& name, const Value& v) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      candidate_only_.insert(name);
      return;
    }
    size_t r = it->second;
    seen_in_candidate_[r] = true;
    auto sp = spilled_.find({set, r});
    if (sp == spilled_.end() || !status_.ok()) return;
    LayerRow& row = rows_[r];
    const Spilled& s = sp->second;
    if (!v.is_tensor()) {
      row.state = LayerRow::State::kIncomparable;
      row.note = fmt::format("candidate produced {}", v.is_sequence() ? "a sequence" : "nothing");
    } else {
      Tensor ref(s.dtype, s.shape);
      FILE* f = std::fopen(s.path.c_str(), "rb");
      bool ok =
          f && (ref.nbytes() == 0 || std::fread(ref.raw(), 1, ref.nbytes(), f) == ref.nbytes());
      if (f) std::fclose(f);
      if (!ok) {
        status_ = InvalidError("cannot read back per-layer tensor '{}' from '{}'", name, s.path);
        return;
      }
      std::string why = Incompatibility(ref, v.tensor());
      if (!why.empty()) {
        row.state = LayerRow::State::kIncomparable;
        row.note = why;
      } else {
        if (row.state != LayerRow::State::kIncomparable) row.state = LayerRow::State::kCompared;
        row.stats.Add(ref, v.tensor(), row.tol);
      }
    }
    std::error_code ec;
    fs::remove(s.path, ec);
    spilled_.erase(sp);
  };
}

std::vector<LayerRow> LayerCapture::Finish() {
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].state == LayerRow::State::kNotCompared) continue;
    if (!seen_in_candidate_[r]) {
      rows_[r].state = LayerRow::State::kUnmatched;
      rows_[r].note = "not produced by the candidate (fused or renamed away)";
    }
  }
  // Spilled tensors never compared (unmatched) are removed with the folder.
  return rows_;
}

int64_t FirstFailedLayer(const std::vector<LayerRow>& rows) {
  for (const auto& r : rows)
    if (r.failed()) return r.index;
  return -1;
}

void NanWatch::Known(const std::string& name, const Value& v) {
  NonFinite nf;
  if (v.is_tensor()) nf = CountNonFinite(v.tensor());
  for (const auto& t : v.sequence()) {
    NonFinite x = CountNonFinite(t);
    nf.nan += x.nan;
    nf.inf += x.inf;
  }
  state_[name] = nf;
}

void NanWatch::KnownInitializers(const ir::Graph& g) {
  for (const auto& init : g.initializers) Known(init.name, Value(init.tensor));
}

runtime::NodeObserver NanWatch::Observer(const std::string& set) {
  counter_ = 0;
  return [this, set](const ir::Node& node, const std::string& name, const Value& v) {
    int64_t index = counter_++;
    Known(name, v);
    if (finding_.found) return;
    const NonFinite& nf = state_[name];
    if (!nf.any() || node.op_type == "Constant" || node.op_type == "ConstantOfShape") return;
    bool in_nan = false, in_inf = false;
    for (const auto& in : node.inputs) {
      auto it = state_.find(in);
      if (in.empty() || it == state_.end()) continue;
      in_nan = in_nan || it->second.nan > 0;
      in_inf = in_inf || it->second.inf > 0;
    }
    bool introduces = (nf.nan > 0 && !in_nan) || (nf.inf > 0 && !in_nan && !in_inf);
    if (introduces) finding_ = {true, index, node.name, node.op_type, name, set, nf};
  };
}

runtime::NodeObserver Chain(runtime::NodeObserver a, runtime::NodeObserver b) {
  if (!a) return b;
  if (!b) return a;
  return [a = std::move(a), b = std::move(b)](const ir::Node& n, const std::string& name,
                                              const Value& v) {
    a(n, name, v);
    b(n, name, v);
  };
}

}  // namespace ferry::verify
