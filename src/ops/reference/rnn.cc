// Reference kernels: RNN, GRU, LSTM (all directions, sequence_lens, layout 0/1, optional outputs).
//
// Inputs are read into double, each direction runs the recurrence of the ONNX spec step by step,
// and outputs are rounded once on store. Steps past a batch entry's sequence length leave Y at 0
// and Y_h/Y_c at the state after its last valid step.
#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

enum class RnnKind { kRnn, kGru, kLstm };

int GateCount(RnnKind k) {
  return k == RnnKind::kRnn ? 1 : k == RnnKind::kGru ? 3 : 4;
}
int ActivationCount(RnnKind k) {
  return k == RnnKind::kRnn ? 1 : k == RnnKind::kGru ? 2 : 3;
}

// ---- activation functions with their alpha/beta ----
enum class ActFn {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct Activation {
  ActFn fn = ActFn::kTanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (fn) {
      case ActFn::kRelu:
        return x > 0 ? x : 0;
      case ActFn::kTanh:
        return std::tanh(x);
      case ActFn::kSigmoid:
        return 1 / (1 + std::exp(-x));
      case ActFn::kAffine:
        return alpha * x + beta;
      case ActFn::kLeakyRelu:
        return x >= 0 ? x : alpha * x;
      case ActFn::kThresholdedRelu:
        return x > alpha ? x : 0;
      case ActFn::kScaledTanh:
        return alpha * std::tanh(beta * x);
      case ActFn::kHardSigmoid:
        return std::clamp(alpha * x + beta, 0.0, 1.0);
      case ActFn::kElu:
        return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case ActFn::kSoftsign:
        return x / (1 + std::fabs(x));
      case ActFn::kSoftplus:
        return x > 30 ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

struct ActInfo {
  std::string_view name;
  ActFn fn;
  bool uses_alpha, uses_beta;
  double alpha, beta;  // defaults
};

constexpr ActInfo kActivations[] = {
    {"relu", ActFn::kRelu, false, false, 0, 0},
    {"tanh", ActFn::kTanh, false, false, 0, 0},
    {"sigmoid", ActFn::kSigmoid, false, false, 0, 0},
    {"affine", ActFn::kAffine, true, true, 1.0, 0.0},
    {"leakyrelu", ActFn::kLeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", ActFn::kThresholdedRelu, true, false, 1.0, 0},
    {"scaledtanh", ActFn::kScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", ActFn::kHardSigmoid, true, true, 0.2, 0.5},
    {"elu", ActFn::kElu, true, false, 1.0, 0},
    {"softsign", ActFn::kSoftsign, false, false, 0, 0},
    {"softplus", ActFn::kSoftplus, false, false, 0, 0},
};

// ---- configuration, validated in prepare and rebuilt in run ----
struct RnnConfig {
  RnnKind kind;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, num_dir = 1;
  bool layout1 = false, reverse_only = false;
  bool has_clip = false;
  double clip = 0;
  bool linear_before_reset = false, input_forget = false;
  std::vector<Activation> acts;   // num_dir * ActivationCount(kind)
  std::vector<int64_t> seq_lens;  // per batch entry
};

// Input indices shared by the three ops (LSTM adds initial_c and P).
constexpr size_t kX = 0, kW = 1, kR = 2, kB = 3, kSeqLens = 4, kInitH = 5, kInitC = 6, kP = 7;

Result<std::vector<Activation>> ParseActivations(const OpContext& ctx, RnnKind kind,
                                                 int64_t num_dir) {
  size_t per_dir = static_cast<size_t>(ActivationCount(kind));
  std::vector<std::string> names = ctx.node().attr_strings("activations");
  if (names.empty()) {
    if (kind == RnnKind::kRnn)
      names = {"Tanh"};
    else if (kind == RnnKind::kGru)
      names = {"Sigmoid", "Tanh"};
    else
      names = {"Sigmoid", "Tanh", "Tanh"};
  }
  if (names.size() == per_dir && num_dir == 2) {
    std::vector<std::string> twice = names;
    twice.insert(twice.end(), names.begin(), names.end());
    names = twice;
  }
  if (names.size() != per_dir * static_cast<size_t>(num_dir))
    return NodeError(ctx, "has {} activations, expected {} ({} per direction)", names.size(),
                     per_dir * static_cast<size_t>(num_dir), per_dir);
  // alpha/beta values are consumed in order by the functions that take them.
  std::vector<float> alphas = ctx.attr_floats("activation_alpha");
  std::vector<float> betas = ctx.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> acts;
  for (const std::string& name : names) {
    std::string lower;
    for (char ch : name)
      lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
    const ActInfo* info = nullptr;
    for (const ActInfo& a : kActivations)
      if (a.name == lower) info = &a;
    if (!info) return NodeUnsupported(ctx, "unknown activation function '{}'", name);
    Activation act{info->fn, info->alpha, info->beta};
    if (info->uses_alpha && ai < alphas.size()) act.alpha = alphas[ai++];
    if (info->uses_beta && bi < betas.size()) act.beta = betas[bi++];
    acts.push_back(act);
  }
  return acts;
}

// Checks optional input i is a tensor of X's dtype with shape `want`.
Status CheckRnnInput(const OpContext& ctx, size_t i, std::string_view what, const Shape& want) {
  if (!ctx.has_input(i)) return Status::Ok();
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  const Tensor& t = ctx.input(i);
  if (t.dtype() != ctx.input(kX).dtype())
    return NodeError(ctx, "{} has dtype {}, expected {} like X", what, DTypeName(t.dtype()),
                     DTypeName(ctx.input(kX).dtype()));
  if (t.shape() != want)
    return NodeError(ctx, "{} has shape {}, expected {}", what, ShapeToString(t.shape()),
                     ShapeToString(want));
  return Status::Ok();
}

Result<RnnConfig> GetRnnConfig(const OpContext& ctx, RnnKind kind) {
  RnnConfig c;
  c.kind = kind;
  size_t max_inputs = kind == RnnKind::kLstm ? 8 : 6;
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 3, max_inputs));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, kX, "X"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, kX, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, kW, "W"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, kR, "R"));
  const Tensor& x = ctx.input(kX);
  if (x.rank() != 3) return NodeError(ctx, "X has rank {}, expected 3", x.rank());
  c.layout1 = ctx.opset() >= 14 && ctx.attr_int("layout", 0) != 0;
  c.seq = c.layout1 ? x.dim(1) : x.dim(0);
  c.batch = c.layout1 ? x.dim(0) : x.dim(1);
  c.input = x.dim(2);
  std::string direction = ctx.attr_string("direction", "forward");
  if (direction == "bidirectional")
    c.num_dir = 2;
  else if (direction == "reverse")
    c.reverse_only = true;
  else if (direction != "forward")
    return NodeError(ctx, "direction '{}' is not forward, reverse or bidirectional", direction);
  const Tensor& r = ctx.input(kR);
  if (r.rank() != 3) return NodeError(ctx, "R has rank {}, expected 3", r.rank());
  c.hidden = ctx.has_attr("hidden_size") ? ctx.attr_int("hidden_size", 0) : r.dim(2);
  if (c.hidden <= 0 || c.hidden > (int64_t{1} << 40))
    return NodeError(ctx, "hidden_size is {}, expected a positive value up to 2^40", c.hidden);
  int64_t gh = GateCount(kind) * c.hidden;
  FERRY_RETURN_IF_ERROR(CheckRnnInput(ctx, kW, "W", {c.num_dir, gh, c.input}));
  FERRY_RETURN_IF_ERROR(CheckRnnInput(ctx, kR, "R", {c.num_dir, gh, c.hidden}));
  FERRY_RETURN_IF_ERROR(CheckRnnInput(ctx, kB, "B", {c.num_dir, 2 * gh}));
  Shape state =
      c.layout1 ? Shape{c.batch, c.num_dir, c.hidden} : Shape{c.num_dir, c.batch, c.hidden};
  FERRY_RETURN_IF_ERROR(CheckRnnInput(ctx, kInitH, "initial_h", state));
  if (kind == RnnKind::kLstm) {
    FERRY_RETURN_IF_ERROR(CheckRnnInput(ctx, kInitC, "initial_c", state));
    FERRY_RETURN_IF_ERROR(CheckRnnInput(ctx, kP, "P", {c.num_dir, 3 * c.hidden}));
  }
  c.seq_lens.assign(static_cast<size_t>(c.batch), c.seq);
  if (ctx.has_input(kSeqLens)) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, kSeqLens, "sequence_lens"));
    FERRY_RETURN_IF_ERROR(RequireDType(ctx, kSeqLens, {DType::kInt32, DType::kInt64}));
    const Tensor& sl = ctx.input(kSeqLens);
    if (sl.shape() != Shape{c.batch})
      return NodeError(ctx, "sequence_lens has shape {}, expected [{}]", ShapeToString(sl.shape()),
                       c.batch);
    c.seq_lens = sl.ToInt64Vector();
    for (int64_t v : c.seq_lens)
      if (v < 0 || v > c.seq)
        return NodeError(ctx, "sequence_lens value {} is outside [0, {}]", v, c.seq);
  }
  if (ctx.has_attr("clip")) {
    c.has_clip = true;
    c.clip = ctx.attr_float("clip", 0.f);
    if (!(c.clip > 0)) return NodeError(ctx, "clip is {}, expected a positive value", c.clip);
  }
  c.linear_before_reset = kind == RnnKind::kGru && ctx.attr_int("linear_before_reset", 0) != 0;
  c.input_forget = kind == RnnKind::kLstm && ctx.attr_int("input_forget", 0) != 0;
  FERRY_ASSIGN_OR_RETURN(c.acts, ParseActivations(ctx, kind, c.num_dir));
  return c;
}

Status PrepareRnnKind(OpContext& ctx, RnnKind kind) {
  FERRY_ASSIGN_OR_RETURN(RnnConfig c, GetRnnConfig(ctx, kind));
  size_t max_outputs = kind == RnnKind::kLstm ? 3 : 2;
  if (ctx.num_outputs() > max_outputs)
    return NodeError(ctx, "has {} outputs, expected at most {}", ctx.num_outputs(), max_outputs);
  DType dt = ctx.input(kX).dtype();
  Shape y = c.layout1 ? Shape{c.batch, c.seq, c.num_dir, c.hidden}
                      : Shape{c.seq, c.num_dir, c.batch, c.hidden};
  Shape state =
      c.layout1 ? Shape{c.batch, c.num_dir, c.hidden} : Shape{c.num_dir, c.batch, c.hidden};
  for (size_t i = 0; i < ctx.num_outputs(); ++i)
    if (ctx.has_output(i)) ctx.set_output(i, dt, i == 0 ? y : state);
  return Status::Ok();
}

Status PrepareRnn(OpContext& ctx) {
  return PrepareRnnKind(ctx, RnnKind::kRnn);
}
Status PrepareGru(OpContext& ctx) {
  return PrepareRnnKind(ctx, RnnKind::kGru);
}
Status PrepareLstm(OpContext& ctx) {
  return PrepareRnnKind(ctx, RnnKind::kLstm);
}

std::vector<double> ReadDoubles(const OpContext& ctx, size_t i, size_t n_if_absent) {
  if (!ctx.has_input(i)) return std::vector<double>(n_if_absent, 0.0);
  const Tensor& t = ctx.input(i);
  std::vector<double> v(static_cast<size_t>(t.size()));
  for (size_t k = 0; k < v.size(); ++k) v[k] = t.GetAsDouble(static_cast<int64_t>(k));
  return v;
}

void StoreDoubles(const std::vector<double>& v, Tensor& t) {
  VisitNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(static_cast<ComputeType<T>>(v[i]));
  });
}

// dot(row of `m` starting at `row * len`, v) over len values.
double Dot(const std::vector<double>& m, int64_t row, const double* v, int64_t len) {
  const double* r = m.data() + row * len;
  double s = 0;
  for (int64_t k = 0; k < len; ++k) s += r[k] * v[k];
  return s;
}

void RunRnnKind(OpContext& ctx, RnnKind kind) {
  RnnConfig c = GetRnnConfig(ctx, kind).value();
  const int64_t H = c.hidden, I = c.input, G = GateCount(kind), nd = c.num_dir;
  const int64_t gh = G * H;
  std::vector<double> x = ReadDoubles(ctx, kX, 0), w = ReadDoubles(ctx, kW, 0);
  std::vector<double> r = ReadDoubles(ctx, kR, 0);
  std::vector<double> bias = ReadDoubles(ctx, kB, static_cast<size_t>(nd * 2 * gh));
  size_t state_size = static_cast<size_t>(nd * c.batch * H);
  std::vector<double> init_h = ReadDoubles(ctx, kInitH, state_size);
  std::vector<double> init_c, peep;
  if (kind == RnnKind::kLstm) {
    init_c = ReadDoubles(ctx, kInitC, state_size);
    peep = ReadDoubles(ctx, kP, static_cast<size_t>(nd * 3 * H));
  }
  // Index helpers for the two layouts.
  auto x_at = [&](int64_t t, int64_t b) {
    return x.data() + (c.layout1 ? b * c.seq + t : t * c.batch + b) * I;
  };
  auto state_off = [&](int64_t d, int64_t b) {
    return static_cast<size_t>((c.layout1 ? b * nd + d : d * c.batch + b) * H);
  };
  auto y_off = [&](int64_t t, int64_t d, int64_t b) {
    return static_cast<size_t>((c.layout1 ? (b * c.seq + t) * nd + d : (t * nd + d) * c.batch + b) *
                               H);
  };
  std::vector<double> y(static_cast<size_t>(c.seq) * state_size, 0.0);
  std::vector<double> y_h(state_size, 0.0), y_c(state_size, 0.0);
  auto clip = [&](double v) { return c.has_clip ? std::clamp(v, -c.clip, c.clip) : v; };

  std::vector<double> xw(static_cast<size_t>(gh)), hr(static_cast<size_t>(gh));
  std::vector<double> h(static_cast<size_t>(H)), cell(static_cast<size_t>(H));
  std::vector<double> rh(static_cast<size_t>(H));
  for (int64_t d = 0; d < nd; ++d) {
    bool reverse = c.reverse_only || d == 1;
    const Activation* act = c.acts.data() + d * ActivationCount(kind);
    std::vector<double> wd(w.begin() + d * gh * I, w.begin() + (d + 1) * gh * I);
    std::vector<double> rd(r.begin() + d * gh * H, r.begin() + (d + 1) * gh * H);
    const double* wb = bias.data() + d * 2 * gh;
    const double* rb = wb + gh;
    const double* p = kind == RnnKind::kLstm ? peep.data() + d * 3 * H : nullptr;
    for (int64_t b = 0; b < c.batch; ++b) {
      size_t so = state_off(d, b);
      std::copy(init_h.begin() + static_cast<std::ptrdiff_t>(so),
                init_h.begin() + static_cast<std::ptrdiff_t>(so) + H, h.begin());
      if (kind == RnnKind::kLstm)
        std::copy(init_c.begin() + static_cast<std::ptrdiff_t>(so),
                  init_c.begin() + static_cast<std::ptrdiff_t>(so) + H, cell.begin());
      int64_t len = c.seq_lens[static_cast<size_t>(b)];
      for (int64_t s = 0; s < len; ++s) {
        int64_t t = reverse ? len - 1 - s : s;
        const double* xt = x_at(t, b);
        for (int64_t g = 0; g < gh; ++g) {
          xw[static_cast<size_t>(g)] = Dot(wd, g, xt, I) + wb[g];
          hr[static_cast<size_t>(g)] = Dot(rd, g, h.data(), H) + rb[g];
        }
        auto u = [](int64_t j) { return static_cast<size_t>(j); };
        if (kind == RnnKind::kRnn) {
          for (int64_t j = 0; j < H; ++j) h[u(j)] = act[0](clip(xw[u(j)] + hr[u(j)]));
        } else if (kind == RnnKind::kGru) {
          // Gate order z, r, h.
          std::vector<double> z(u(H)), rg(u(H));
          for (int64_t j = 0; j < H; ++j) {
            z[u(j)] = act[0](clip(xw[u(j)] + hr[u(j)]));
            rg[u(j)] = act[0](clip(xw[u(H + j)] + hr[u(H + j)]));
          }
          for (int64_t j = 0; j < H; ++j) rh[u(j)] = rg[u(j)] * h[u(j)];
          std::vector<double> next(u(H));
          for (int64_t j = 0; j < H; ++j) {
            double rec = c.linear_before_reset ? rg[u(j)] * hr[u(2 * H + j)]
                                               : Dot(rd, 2 * H + j, rh.data(), H) + rb[2 * H + j];
            double hh = act[1](clip(xw[u(2 * H + j)] + rec));
            next[u(j)] = (1 - z[u(j)]) * hh + z[u(j)] * h[u(j)];
          }
          h = next;
        } else {
          // Gate order i, o, f, c; peepholes i, o, f.
          for (int64_t j = 0; j < H; ++j) {
            double ig = act[0](clip(xw[u(j)] + hr[u(j)] + p[j] * cell[u(j)]));
            double fg =
                act[0](clip(xw[u(2 * H + j)] + hr[u(2 * H + j)] + p[2 * H + j] * cell[u(j)]));
            if (c.input_forget) fg = 1 - ig;
            double cand = act[1](clip(xw[u(3 * H + j)] + hr[u(3 * H + j)]));
            cell[u(j)] = fg * cell[u(j)] + ig * cand;
            double og = act[0](clip(xw[u(H + j)] + hr[u(H + j)] + p[H + j] * cell[u(j)]));
            h[u(j)] = og * act[2](cell[u(j)]);
          }
        }
        std::copy(h.begin(), h.end(), y.begin() + static_cast<std::ptrdiff_t>(y_off(t, d, b)));
      }
      std::copy(h.begin(), h.end(), y_h.begin() + static_cast<std::ptrdiff_t>(so));
      if (kind == RnnKind::kLstm)
        std::copy(cell.begin(), cell.end(), y_c.begin() + static_cast<std::ptrdiff_t>(so));
    }
  }
  const std::vector<double>* outs[] = {&y, &y_h, &y_c};
  for (size_t i = 0; i < ctx.num_outputs() && i < 3; ++i)
    if (ctx.has_output(i)) StoreDoubles(*outs[i], ctx.output(i));
}

void RunRnn(OpContext& ctx) {
  RunRnnKind(ctx, RnnKind::kRnn);
}
void RunGru(OpContext& ctx) {
  RunRnnKind(ctx, RnnKind::kGru);
}
void RunLstm(OpContext& ctx) {
  RunRnnKind(ctx, RnnKind::kLstm);
}

constexpr OpDef kOps[] = {
    {"", "RNN", 1, nullptr, PrepareRnn, RunRnn},
    {"", "GRU", 1, nullptr, PrepareGru, RunGru},
    {"", "LSTM", 1, nullptr, PrepareLstm, RunLstm},
};

}  // namespace

std::span<const OpDef> RnnOps() {
  return kOps;
}

}  // namespace ferry::ops
