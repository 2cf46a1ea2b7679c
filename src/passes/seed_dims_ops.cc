// What each op does to a dynamic input dim it carries, and what it asks of it (seed_dims.h).
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "passes/seed_dims_analysis.h"

namespace ferry::passes::seed_dims {

void Analysis::Broadcast(const ir::Node& n) {
  std::vector<const Info*> ins;
  size_t rank = 0;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const Info* x = Find(n, k);
    if (!x) return;  // an operand of unknown rank: no alignment
    ins.push_back(x);
    rank = std::max(rank, x->size());
  }
  Info out(rank);
  for (size_t j = 0; j < rank; ++j) {
    std::optional<Axis> merged;
    for (const Info* x : ins) {
      if (x->size() + j < rank) continue;
      const Axis& a = (*x)[x->size() + j - rank];
      if (a.known && *a.known == 1) continue;  // broadcasts
      merged = merged ? Unify(*merged, a, n) : a;
    }
    out[j] = merged.value_or(Known(1));
  }
  Set(n, 0, std::move(out));
}

void Analysis::Window(const ir::Node& n, bool conv) {
  const Info* x = Find(n, 0);
  if (!x || x->size() < 3) return;
  const size_t spatial = x->size() - 2;
  std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  const Info* w = conv ? Find(n, 1) : nullptr;
  if (conv && kernel.empty() && w && w->size() == x->size())
    for (size_t i = 2; i < w->size(); ++i) kernel.push_back((*w)[i].known.value_or(0));
  if (kernel.size() != spatial) return;
  std::vector<int64_t> strides = n.attr_ints("strides"), dil = n.attr_ints("dilations"),
                       pads = n.attr_ints("pads");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  Info out;
  out.push_back((*x)[0]);
  if (conv) {
    const int64_t group = n.attr_int("group", 1);
    if (w && w->size() == x->size() && (*w)[1].known)
      Unify((*x)[1], Known(*(*w)[1].known * group), n);
    out.push_back(w && !w->empty() ? (*w)[0] : Axis{});
  } else {
    out.push_back((*x)[1]);
  }
  for (size_t i = 0; i < spatial; ++i) {
    Step s;
    s.kind = Step::Kind::kWindow;
    s.same = same;
    s.ceil = n.attr_int("ceil_mode", 0) != 0;
    s.stride = i < strides.size() && strides[i] > 0 ? strides[i] : 1;
    const int64_t d = i < dil.size() && dil[i] > 0 ? dil[i] : 1;
    s.dk = (kernel[i] - 1) * d + 1;
    if (!same && auto_pad != "VALID" && pads.size() == 2 * spatial)
      s.pads = pads[i] + pads[i + spatial];
    const Axis& in = (*x)[2 + i];
    Axis a;
    if (in.known) {
      int64_t v = Eval({s}, *in.known);
      if (v > 0) a.known = v;
    } else if (in.carry) {
      if (!same)
        RequireMin(*in.carry, s.dk - s.pads,
                   fmt::format("{}: window {} on spatial axis {}", n.Describe(), s.dk, i));
      a.carry = in.carry;
      a.carry->steps.push_back(s);
    }
    out.push_back(std::move(a));
  }
  Set(n, 0, std::move(out));
}

void Analysis::MatMul(const ir::Node& n) {
  const Info* a = Find(n, 0);
  const Info* b = Find(n, 1);
  if (!a || !b || a->size() < 2 || b->size() < 2) return;
  Unify(a->back(), (*b)[b->size() - 2], n);
  Info out(a->begin(), a->end() - 1);
  out.push_back(b->back());
  Set(n, 0, std::move(out));
}

void Analysis::Gemm(const ir::Node& n) {
  const Info* a = Find(n, 0);
  const Info* b = Find(n, 1);
  if (!a || !b || a->size() != 2 || b->size() != 2) return;
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  Unify((*a)[ta ? 0 : 1], (*b)[tb ? 1 : 0], n);
  Set(n, 0, Info{(*a)[ta ? 1 : 0], (*b)[tb ? 0 : 1]});
}

void Analysis::Pad(const ir::Node& n) {
  const Info* x = Find(n, 0);
  auto pads = IntsOf(n, "pads", 1);
  if (!x || !pads || n.inputs.size() > 3 || pads->size() != 2 * x->size()) return;
  const bool reflect = n.attr_string("mode", "constant") == "reflect";
  Info out = *x;
  const size_t r = x->size();
  for (size_t i = 0; i < r; ++i) {
    const int64_t lo = (*pads)[i], hi = (*pads)[i + r];
    Axis& a = out[i];
    if (a.known) {
      a.known = *a.known + lo + hi;
    } else if (a.carry) {
      if (reflect && std::max(lo, hi) > 0)
        RequireMin(*a.carry, std::max(lo, hi) + 1, fmt::format("{} (reflect)", n.Describe()));
      Step s;
      s.add = lo + hi;
      a.carry->steps.push_back(s);
    }
  }
  Set(n, 0, std::move(out));
}

void Analysis::Transpose(const ir::Node& n) {
  const Info* x = Find(n, 0);
  if (!x) return;
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty())
    for (size_t i = x->size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != x->size()) return;
  Info out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(x->size())) return;
    out.push_back((*x)[static_cast<size_t>(p)]);
  }
  Set(n, 0, std::move(out));
}

void Analysis::Squeeze(const ir::Node& n, bool unsqueeze) {
  const Info* x = Find(n, 0);
  auto axes = IntsOf(n, "axes", 1);
  if (!x || !axes) return;
  const int64_t rank =
      static_cast<int64_t>(x->size()) + (unsqueeze ? static_cast<int64_t>(axes->size()) : 0);
  std::set<int64_t> at;
  for (int64_t a : *axes) at.insert(a < 0 ? a + rank : a);
  Info out;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (unsqueeze && at.count(i)) {
      out.push_back(Known(1));
    } else if (next < x->size()) {
      if (unsqueeze || !at.count(i)) out.push_back((*x)[next]);
      ++next;
    }
  }
  Set(n, 0, std::move(out));
}

void Analysis::Reshape(const ir::Node& n) {
  const Info* x = Find(n, 0);
  auto target = Ints(n, 1);
  if (!target) return;
  const bool allow_zero = n.attr_int("allowzero", 0) != 0;
  Info out;
  int64_t target_count = 1;
  bool has_infer = false;
  std::optional<size_t> copies_carry;
  for (size_t i = 0; i < target->size(); ++i) {
    const int64_t t = (*target)[i];
    if (t == 0 && !allow_zero) {
      if (!x || i >= x->size()) return;
      out.push_back((*x)[i]);
      if ((*x)[i].known)
        target_count *= *(*x)[i].known;
      else
        copies_carry = i;
    } else if (t < 0) {
      has_infer = true;
      out.push_back(Axis{});
    } else {
      out.push_back(Known(t));
      target_count *= t;
    }
  }
  if (x && !has_infer && !copies_carry) {
    int64_t known = 1;
    const Axis* carried = nullptr;
    int carries = 0;
    for (const Axis& a : *x) {
      if (a.known) {
        known *= *a.known;
      } else {
        carried = &a;
        ++carries;
      }
    }
    if (carries == 1 && carried->carry && known > 0 && target_count % known == 0)
      RequireExact(*carried->carry, target_count / known,
                   fmt::format("{} to {}", n.Describe(), ShapeToString(*target)));
  }
  Set(n, 0, std::move(out));
}

void Analysis::Concat(const ir::Node& n) {
  std::vector<const Info*> ins;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const Info* x = Find(n, k);
    if (!x || (!ins.empty() && x->size() != ins[0]->size())) return;
    ins.push_back(x);
  }
  if (ins.empty()) return;
  const int64_t rank = static_cast<int64_t>(ins[0]->size());
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return;
  Info out(static_cast<size_t>(rank));
  for (int64_t j = 0; j < rank; ++j) {
    const size_t u = static_cast<size_t>(j);
    if (j != axis) {
      Axis m = (*ins[0])[u];
      for (size_t k = 1; k < ins.size(); ++k) m = Unify(m, (*ins[k])[u], n);
      out[u] = m;
      continue;
    }
    // Along the axis: known sizes add up; one carried input carries the sum.
    int64_t sum = 0, carried = 0;
    const Axis* c = nullptr;
    for (const Info* x : ins) {
      if ((*x)[u].known) {
        sum += *(*x)[u].known;
      } else {
        c = &(*x)[u];
        ++carried;
      }
    }
    if (carried == 0) {
      out[u] = Known(sum);
    } else if (carried == 1 && c->carry) {
      out[u] = *c;
      Step s;
      s.add = sum;
      out[u].carry->steps.push_back(s);
    }
  }
  Set(n, 0, std::move(out));
}

void Analysis::Resize(const ir::Node& n) {
  const Info* x = Find(n, 0);
  if (!x) return;
  const bool v11 = n.op_type == "Resize" && n.inputs.size() >= 3;
  std::optional<std::vector<double>> scales;
  const size_t scales_at = v11 ? 2 : 1;
  if (n.attr("scales")) {
    scales.emplace();
    for (float f : n.attr_floats("scales")) scales->push_back(f);
  } else if (auto it = consts_.find(scales_at < n.inputs.size() ? n.inputs[scales_at] : "");
             it != consts_.end() && IsFloat(it->second->dtype()) && it->second->size() > 0) {
    scales.emplace();
    for (int64_t i = 0; i < it->second->size(); ++i) scales->push_back(it->second->GetAsDouble(i));
  }
  Info out(x->size());
  if (auto sizes = v11 ? Ints(n, 3) : std::nullopt; sizes && sizes->size() == x->size()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = Known((*sizes)[i]);
  } else if (scales && scales->size() == x->size()) {
    for (size_t i = 0; i < out.size(); ++i) {
      const Axis& a = (*x)[i];
      if (a.known) {
        out[i] =
            Known(static_cast<int64_t>(std::floor(static_cast<double>(*a.known) * (*scales)[i])));
      } else if (a.carry) {
        out[i] = a;
        if ((*scales)[i] != 1) {
          Step s;
          s.kind = Step::Kind::kScale;
          s.scale = (*scales)[i];
          out[i].carry->steps.push_back(s);
        }
      }
    }
  } else {
    return;
  }
  Set(n, 0, std::move(out));
}

void Analysis::Recurrent(const ir::Node& n) {
  const Info* x = Find(n, 0);
  const Info* w = Find(n, 1);
  if (!x || !w || x->size() != 3 || w->size() != 3 || n.attr_int("layout", 0) != 0) return;
  Unify((*x)[2], (*w)[2], n);
}

}  // namespace ferry::passes::seed_dims
