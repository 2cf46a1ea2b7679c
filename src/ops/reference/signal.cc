// Reference kernels: signal processing (HannWindow, HammingWindow, BlackmanWindow, DFT, STFT,
// MelWeightMatrix). Transforms are naive O(n^2) DFTs computed in double.
#include <numbers>

#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

constexpr double kTwoPi = 2 * std::numbers::pi;

void StoreAs(Tensor& t, int64_t i, double v) {
  VisitNumeric(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    t.data<T>()[i] = static_cast<T>(static_cast<ComputeType<T>>(v));
  });
}

Result<DType> OutputDType(const OpContext& ctx) {
  int64_t code = ctx.attr_int("output_datatype", static_cast<int64_t>(DType::kFloat));
  auto dt = DTypeFromCode(static_cast<int>(code));
  if (!dt || !IsNumeric(*dt))
    return NodeUnsupported(ctx, "output_datatype {} is not a numeric dtype", code);
  return *dt;
}

// Reads input i as an integer scalar.
Result<int64_t> ScalarInt(const OpContext& ctx, size_t i, std::string_view what) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(RequireDType(ctx, i, {DType::kInt32, DType::kInt64}));
  if (ctx.input(i).size() != 1)
    return NodeError(ctx, "{} has shape {}, expected a scalar", what,
                     ShapeToString(ctx.input(i).shape()));
  return ctx.input(i).GetAsInt64(0);
}

Result<double> ScalarFloat(const OpContext& ctx, size_t i, std::string_view what) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, i, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  if (ctx.input(i).size() != 1)
    return NodeError(ctx, "{} has shape {}, expected a scalar", what,
                     ShapeToString(ctx.input(i).shape()));
  return ctx.input(i).GetAsDouble(0);
}

// ---- windows: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) ----
// N = size (periodic) or size - 1 (symmetric).
struct WindowCoeffs {
  double a0, a1, a2;
};

Status PrepareWindow(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_ASSIGN_OR_RETURN(int64_t size, ScalarInt(ctx, 0, "size"));
  if (size < 0) return NodeError(ctx, "size is {}, expected >= 0", size);
  FERRY_ASSIGN_OR_RETURN(DType dt, OutputDType(ctx));
  ctx.set_output(0, dt, {size});
  return Status::Ok();
}

template <const WindowCoeffs& kC>
void RunWindow(OpContext& ctx) {
  Tensor& out = ctx.output(0);
  int64_t size = out.dim(0);
  int64_t period = ctx.attr_int("periodic", 1) != 0 ? size : size - 1;
  for (int64_t n = 0; n < size; ++n) {
    double x = period > 0 ? kTwoPi * static_cast<double>(n) / static_cast<double>(period) : 0.0;
    StoreAs(out, n, kC.a0 - kC.a1 * std::cos(x) + kC.a2 * std::cos(2 * x));
  }
}

constexpr WindowCoeffs kHann{0.5, 0.5, 0.0};
constexpr WindowCoeffs kHamming{25.0 / 46.0, 21.0 / 46.0, 0.0};
constexpr WindowCoeffs kBlackman{0.42, 0.5, 0.08};

// ---- DFT core ----
// One transform of `n` points from `len` complex inputs (zero-padded / truncated to n),
// writing the first `bins` outputs.
void Dft1D(const std::vector<double>& re, const std::vector<double>& im, int64_t n, bool inverse,
           int64_t bins, std::vector<double>* out_re, std::vector<double>* out_im) {
  int64_t len = std::min<int64_t>(static_cast<int64_t>(re.size()), n);
  double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  out_re->assign(static_cast<size_t>(bins), 0.0);
  out_im->assign(static_cast<size_t>(bins), 0.0);
  for (int64_t k = 0; k < bins; ++k) {
    double sr = 0, si = 0;
    for (int64_t j = 0; j < len; ++j) {
      double a = sign * kTwoPi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      double c = std::cos(a), s = std::sin(a);
      size_t ju = static_cast<size_t>(j);
      sr += re[ju] * c - im[ju] * s;
      si += re[ju] * s + im[ju] * c;
    }
    (*out_re)[static_cast<size_t>(k)] = sr * scale;
    (*out_im)[static_cast<size_t>(k)] = si * scale;
  }
}

struct DftPlan {
  int64_t axis = 1, n = 0, bins = 0;
  bool inverse = false;
  Shape out_shape;
};

Result<DftPlan> GetDftPlan(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  DftPlan p;
  int64_t r = x.rank();
  if (r < 3)
    return NodeError(ctx, "input has rank {}, expected at least 3 [batch, signal..., 1 or 2]", r);
  int64_t comp = x.dim(r - 1);
  if (comp != 1 && comp != 2)
    return NodeError(ctx, "input's last dim is {}, expected 1 (real) or 2 (complex)", comp);
  int64_t axis = ctx.attr_int("axis", 1);
  if (ctx.opset() >= 20) axis = ctx.has_input(2) ? ctx.input(2).GetAsInt64(0) : -2;
  FERRY_ASSIGN_OR_RETURN(p.axis, NormalizeAxis(ctx, axis, r));
  if (p.axis == r - 1)
    return NodeError(ctx, "axis {} is the real/imaginary axis, expected a signal axis", axis);
  p.n = x.dim(p.axis);
  if (ctx.has_input(1)) {
    FERRY_ASSIGN_OR_RETURN(p.n, ScalarInt(ctx, 1, "dft_length"));
    if (p.n < 1) return NodeError(ctx, "dft_length is {}, expected >= 1", p.n);
  }
  if (p.n < 1) return NodeError(ctx, "signal length along axis {} is 0", p.axis);
  p.inverse = ctx.attr_int("inverse", 0) != 0;
  bool onesided = ctx.attr_int("onesided", 0) != 0;
  if (onesided && comp == 2)
    return NodeError(ctx, "onesided=1 needs a real input, got a complex one");
  if (onesided && p.inverse)
    return NodeUnsupported(ctx, "onesided=1 with inverse=1 is not supported");
  p.bins = onesided ? p.n / 2 + 1 : p.n;
  p.out_shape = x.shape();
  p.out_shape[static_cast<size_t>(p.axis)] = p.bins;
  p.out_shape.back() = 2;
  return p;
}

Status PrepareDft(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 3));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  if (ctx.opset() >= 20 && ctx.has_input(2))
    FERRY_RETURN_IF_ERROR(ScalarInt(ctx, 2, "axis").status());
  FERRY_ASSIGN_OR_RETURN(DftPlan p, GetDftPlan(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), p.out_shape);
  return Status::Ok();
}

void RunDft(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  DftPlan p = GetDftPlan(ctx).value();
  const Shape& s = x.shape();
  size_t a = static_cast<size_t>(p.axis);
  int64_t comp = s.back(), len = s[a];
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < a; ++d) outer *= s[d];
  for (size_t d = a + 1; d + 1 < s.size(); ++d) inner *= s[d];
  std::vector<double> re(static_cast<size_t>(len)), im(static_cast<size_t>(len)), ore, oim;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < len; ++j) {
        int64_t base = ((o * len + j) * inner + i) * comp;
        re[static_cast<size_t>(j)] = x.GetAsDouble(base);
        im[static_cast<size_t>(j)] = comp == 2 ? x.GetAsDouble(base + 1) : 0.0;
      }
      Dft1D(re, im, p.n, p.inverse, p.bins, &ore, &oim);
      for (int64_t k = 0; k < p.bins; ++k) {
        int64_t base = ((o * p.bins + k) * inner + i) * 2;
        StoreAs(out, base, ore[static_cast<size_t>(k)]);
        StoreAs(out, base + 1, oim[static_cast<size_t>(k)]);
      }
    }
  }
}

// ---- STFT: signal [batch, length, 1 or 2] -> [batch, frames, bins, 2] ----
struct StftPlan {
  int64_t step = 0, frame = 0, frames = 0, bins = 0;
};

Result<StftPlan> GetStftPlan(const OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  StftPlan p;
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    return NodeError(ctx, "signal has shape {}, expected [batch, length, 1 or 2]",
                     ShapeToString(x.shape()));
  FERRY_ASSIGN_OR_RETURN(p.step, ScalarInt(ctx, 1, "frame_step"));
  if (p.step < 1) return NodeError(ctx, "frame_step is {}, expected >= 1", p.step);
  bool has_window = ctx.has_input(2);
  if (has_window) {
    FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 2, "window"));
    if (ctx.input(2).rank() != 1)
      return NodeError(ctx, "window has rank {}, expected 1", ctx.input(2).rank());
    if (ctx.input(2).dtype() != x.dtype())
      return NodeError(ctx, "window has dtype {}, expected {}", DTypeName(ctx.input(2).dtype()),
                       DTypeName(x.dtype()));
    p.frame = ctx.input(2).dim(0);
  }
  if (ctx.has_input(3)) {
    FERRY_ASSIGN_OR_RETURN(int64_t fl, ScalarInt(ctx, 3, "frame_length"));
    if (has_window && fl != p.frame)
      return NodeError(ctx, "frame_length is {}, but the window has {} points", fl, p.frame);
    p.frame = fl;
  } else if (!has_window) {
    return NodeError(ctx, "needs a window or a frame_length");
  }
  if (p.frame < 1) return NodeError(ctx, "frame length is {}, expected >= 1", p.frame);
  int64_t length = x.dim(1);
  if (length < p.frame)
    return NodeError(ctx, "signal length {} is shorter than the frame length {}", length, p.frame);
  p.frames = (length - p.frame) / p.step + 1;
  bool onesided = ctx.attr_int("onesided", 1) != 0;
  if (onesided && x.dim(2) == 2)
    return NodeError(ctx, "onesided=1 needs a real signal, got a complex one");
  p.bins = onesided ? p.frame / 2 + 1 : p.frame;
  return p;
}

Status PrepareStft(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 4));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "signal"));
  FERRY_RETURN_IF_ERROR(
      RequireDType(ctx, 0, {DType::kFloat, DType::kDouble, DType::kFloat16, DType::kBFloat16}));
  FERRY_ASSIGN_OR_RETURN(StftPlan p, GetStftPlan(ctx));
  ctx.set_output(0, ctx.input(0).dtype(), {ctx.input(0).dim(0), p.frames, p.bins, 2});
  return Status::Ok();
}

void RunStft(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& out = ctx.output(0);
  StftPlan p = GetStftPlan(ctx).value();
  int64_t batch = x.dim(0), length = x.dim(1), comp = x.dim(2);
  std::vector<double> re(static_cast<size_t>(p.frame)), im(static_cast<size_t>(p.frame)), ore, oim;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < p.frames; ++f) {
      for (int64_t j = 0; j < p.frame; ++j) {
        int64_t base = (b * length + f * p.step + j) * comp;
        double w = ctx.has_input(2) ? ctx.input(2).GetAsDouble(j) : 1.0;
        re[static_cast<size_t>(j)] = x.GetAsDouble(base) * w;
        im[static_cast<size_t>(j)] = comp == 2 ? x.GetAsDouble(base + 1) * w : 0.0;
      }
      Dft1D(re, im, p.frame, false, p.bins, &ore, &oim);
      for (int64_t k = 0; k < p.bins; ++k) {
        int64_t base = ((b * p.frames + f) * p.bins + k) * 2;
        StoreAs(out, base, ore[static_cast<size_t>(k)]);
        StoreAs(out, base + 1, oim[static_cast<size_t>(k)]);
      }
    }
  }
}

// ---- MelWeightMatrix ----
// Band edges: num_mel_bins + 2 points spaced by (high_mel - low_mel) / (num_mel_bins + 2) from
// low_mel on the mel scale, mapped to DFT bins as floor((dft_length + 1) * hz / sample_rate);
// band i rises linearly from edge i to edge i+1 (peak 1) and falls to edge i+2.
struct MelPlan {
  int64_t mel_bins = 0, spec_bins = 0;
  std::vector<int64_t> edges;
};

Result<MelPlan> GetMelPlan(const OpContext& ctx) {
  MelPlan p;
  FERRY_ASSIGN_OR_RETURN(p.mel_bins, ScalarInt(ctx, 0, "num_mel_bins"));
  FERRY_ASSIGN_OR_RETURN(int64_t dft_length, ScalarInt(ctx, 1, "dft_length"));
  FERRY_ASSIGN_OR_RETURN(int64_t rate, ScalarInt(ctx, 2, "sample_rate"));
  FERRY_ASSIGN_OR_RETURN(double lo, ScalarFloat(ctx, 3, "lower_edge_hertz"));
  FERRY_ASSIGN_OR_RETURN(double hi, ScalarFloat(ctx, 4, "upper_edge_hertz"));
  if (p.mel_bins < 1) return NodeError(ctx, "num_mel_bins is {}, expected >= 1", p.mel_bins);
  if (dft_length < 1) return NodeError(ctx, "dft_length is {}, expected >= 1", dft_length);
  if (rate < 1) return NodeError(ctx, "sample_rate is {}, expected >= 1", rate);
  if (!(lo >= 0 && lo <= hi))
    return NodeError(ctx, "edges [{}, {}] Hz are not 0 <= lower <= upper", lo, hi);
  p.spec_bins = dft_length / 2 + 1;
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  double lo_mel = to_mel(lo), step = (to_mel(hi) - lo_mel) / static_cast<double>(p.mel_bins + 2);
  for (int64_t i = 0; i < p.mel_bins + 2; ++i) {
    double hz = 700.0 * (std::pow(10.0, (lo_mel + static_cast<double>(i) * step) / 2595.0) - 1.0);
    p.edges.push_back(static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate))));
  }
  // Band i writes rows edges[i]..max(edges[i+1], edges[i+2] - 1).
  for (int64_t i = 0; i < p.mel_bins; ++i) {
    size_t u = static_cast<size_t>(i);
    if (std::max(p.edges[u + 1], p.edges[u + 2] - 1) >= p.spec_bins)
      return NodeError(
          ctx, "upper_edge_hertz {} maps to DFT bin {}, beyond the {} bins of a {}-point DFT", hi,
          p.edges[u + 2], p.spec_bins, dft_length);
  }
  return p;
}

Status PrepareMelWeightMatrix(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 5, 5));
  FERRY_ASSIGN_OR_RETURN(MelPlan p, GetMelPlan(ctx));
  FERRY_ASSIGN_OR_RETURN(DType dt, OutputDType(ctx));
  ctx.set_output(0, dt, {p.spec_bins, p.mel_bins});
  return Status::Ok();
}

void RunMelWeightMatrix(OpContext& ctx) {
  MelPlan p = GetMelPlan(ctx).value();
  std::vector<double> w(static_cast<size_t>(p.spec_bins * p.mel_bins), 0.0);
  auto at = [&](int64_t row, int64_t col) -> double& {
    return w[static_cast<size_t>(row * p.mel_bins + col)];
  };
  for (int64_t i = 0; i < p.mel_bins; ++i) {
    size_t u = static_cast<size_t>(i);
    int64_t left = p.edges[u], center = p.edges[u + 1], right = p.edges[u + 2];
    if (center == left) {
      at(center, i) = 1.0;
    } else {
      for (int64_t j = left; j <= center; ++j)
        at(j, i) = static_cast<double>(j - left) / static_cast<double>(center - left);
    }
    for (int64_t j = center; j < right; ++j)
      at(j, i) = static_cast<double>(right - j) / static_cast<double>(right - center);
  }
  Tensor& out = ctx.output(0);
  for (int64_t i = 0; i < out.size(); ++i) StoreAs(out, i, w[static_cast<size_t>(i)]);
}

constexpr OpDef kOps[] = {
    {"", "HannWindow", 17, nullptr, PrepareWindow, RunWindow<kHann>},
    {"", "HammingWindow", 17, nullptr, PrepareWindow, RunWindow<kHamming>},
    {"", "BlackmanWindow", 17, nullptr, PrepareWindow, RunWindow<kBlackman>},
    {"", "DFT", 17, nullptr, PrepareDft, RunDft},
    {"", "STFT", 17, nullptr, PrepareStft, RunStft},
    {"", "MelWeightMatrix", 17, nullptr, PrepareMelWeightMatrix, RunMelWeightMatrix},
};

}  // namespace

std::span<const OpDef> SignalOps() {
  return kOps;
}

}  // namespace ferry::ops
