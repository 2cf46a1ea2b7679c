// cpu pattern: the tanh approximation of GELU as jax2tf / tf2onnx export it (magika's
// ApplyActivation), nine elementwise steps on one tensor x:
//   a = c1 * x; b = x * a; d = x * b; e = x + d; f = c2 * e; t = Tanh(f); u = one + t;
//   v = half * u; y = x * v
// (c1, c2, one, half: single-value float constants, whatever their values; operands of each
// step in either order). Also the exact (erf) GELU where no MatMul absorbs it (after a Conv, an
// Add: PaddleOCR's PP-HGNet / SVTR blocks): d = x / c (or x * c); e = Erf(d); u = e + one;
// v = x * u; y = v * half — five steps, any layout (every step is elementwise with scalar
// constants), the output in the input's layout when every reader takes it. Both in one pass over
// x, bit-identical to the steps, which read and wrote the whole tensor nine times (magika's
// [10, 512, 508] activation: 5 ms of elementwise passes at 1 thread). The erf form is one loop
// (vec.h gelu_erf: each element through the steps' float operations in their order, kept in
// registers; 9.5 -> see bench/README.md ms per PP-OCRv6 rec run for its 13 GELUs); the tanh form
// runs each step's row kernel in turn over chunks of 512 elements that stay in L1 (written as one
// expression, GCC contracts x + x * b into an FMA, which the steps do not). Plain float32 x only; a
// constant of higher rank than x (which would broadcast the output) declines.
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/vec.h"

namespace ferry::ops::cpu {

namespace {

// Whether value v is a single-value float32 constant; its value and rank.
bool ScalarConst(const GraphView& g, int v, float* c, float* rank) {
  const Tensor* t = v >= 0 ? g.constant(v) : nullptr;
  if (!t || t->dtype() != DType::kFloat || t->size() != 1) return false;
  *c = t->data<float>()[0];
  *rank = std::max(*rank, static_cast<float>(t->rank()));
  return true;
}

// Step s is `op` with operands {v, a single-value constant}: the constant.
bool WithConst(const GraphView& g, size_t s, std::string_view op, int v, float* c, float* rank) {
  return IsOp(g, s, op) && g.opset(s) >= 7 && ScalarConst(g, Other(g, s, v), c, rank);
}

// The next step: the only reader of step s's output, of type op.
bool Next(const GraphView& g, size_t s, std::string_view op, size_t* next) {
  return OnlyReader(g, g.output(s, 0), next) && IsOp(g, *next, op) && g.opset(*next) >= 7;
}

bool MatchGeluTanh(const GraphView& g, size_t host, PatternMatch* m) {
  if (!IsOp(g, host, "Mul") || g.opset(host) < 7) return false;
  float c1 = 0, c2 = 0, one = 0, half = 0, rank = 0;
  int x = -1;
  for (int k = 0; k < 2 && x < 0; ++k) {
    const int v = g.input(host, static_cast<size_t>(k));
    if (ScalarConst(g, g.input(host, static_cast<size_t>(1 - k)), &c1, &rank) && v >= 0 &&
        g.constant(v) == nullptr)
      x = v;
  }
  if (x < 0) return false;
  size_t s2, s3, s4, s5, s6, s7, s8, s9;
  if (!Next(g, host, "Mul", &s2) || Other(g, s2, g.output(host, 0)) != x) return false;
  if (!Next(g, s2, "Mul", &s3) || Other(g, s3, g.output(s2, 0)) != x) return false;
  if (!Next(g, s3, "Add", &s4) || Other(g, s4, g.output(s3, 0)) != x) return false;
  if (!OnlyReader(g, g.output(s4, 0), &s5) || !WithConst(g, s5, "Mul", g.output(s4, 0), &c2, &rank))
    return false;
  if (!OnlyReader(g, g.output(s5, 0), &s6) || !IsOp(g, s6, "Tanh")) return false;
  if (!OnlyReader(g, g.output(s6, 0), &s7) ||
      !WithConst(g, s7, "Add", g.output(s6, 0), &one, &rank))
    return false;
  if (!OnlyReader(g, g.output(s7, 0), &s8) ||
      !WithConst(g, s8, "Mul", g.output(s7, 0), &half, &rank))
    return false;
  if (!Next(g, s8, "Mul", &s9) || Other(g, s9, g.output(s8, 0)) != x) return false;
  m->absorbed = {s2, s3, s4, s5, s6, s7, s8, s9};
  std::sort(m->absorbed.begin(), m->absorbed.end());
  m->inputs = {x};
  m->output = g.output(s9, 0);
  m->params = {c1, c2, one, half, rank};
  m->kernel = GeluTanhPatternKernel();
  return true;
}

// fn(i, len, t1, t2) over [0, n) in chunks of kChunk elements (two L1-sized scratch rows),
// split over the threads above 2^15 elements.
constexpr int64_t kChunk = 512;
template <typename Fn>
void ChunkedPass(int64_t n, const Fn& fn) {
  ParallelRange(n, 1 << 15, [&](int64_t b, int64_t e) {
    float t1[kChunk], t2[kChunk];
    for (int64_t i = b; i < e; i += kChunk) fn(i, std::min(kChunk, e - i), t1, t2);
  });
}

Status PrepareGeluTanh(OpContext& ctx, NodeSlot& slot) {
  const bool plain = slot.in_layouts.empty() || slot.in_layouts[0] == Layout::kPlain;
  if (!plain || !ctx.input_is_tensor(0) || ctx.input(0).dtype() != DType::kFloat ||
      slot.params.size() != 5 || static_cast<float>(ctx.input(0).rank()) < slot.params[4]) {
    slot.declined = true;
    return Status::Ok();
  }
  slot.out_layouts.assign(1, Layout::kPlain);
  ctx.set_output(0, DType::kFloat, ctx.input(0).shape());
  return Status::Ok();
}

void RunGeluTanh(OpContext& ctx, NodeSlot& slot) {
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const int64_t n = ctx.input(0).size();
  const float c1 = slot.params[0], c2 = slot.params[1], one = slot.params[2], half = slot.params[3];
  const VecOps& v = Vec();
  const auto mul = v.binary[static_cast<int>(BinOp::kMul)];
  const auto add = v.binary[static_cast<int>(BinOp::kAdd)];
  const auto vv = static_cast<int>(RowKind::kVV), sv = static_cast<int>(RowKind::kSV);
  const auto tanh = v.unary[static_cast<int>(UnOp::kTanh)];
  ChunkedPass(n, [&](int64_t i, int64_t len, float* t1, float* t2) {
    const float* xi = x + i;
    mul[sv](&c1, xi, t1, len);    // a = c1 * x
    mul[vv](xi, t1, t2, len);     // b = x * a
    mul[vv](xi, t2, t1, len);     // d = x * b
    add[vv](xi, t1, t2, len);     // e = x + d
    mul[sv](&c2, t2, t1, len);    // f = c2 * e
    tanh(t1, t2, len, 0.f, 0.f);  // t
    add[sv](&one, t2, t1, len);   // u = one + t
    mul[sv](&half, t1, t2, len);  // v = half * u
    mul[vv](xi, t2, y + i, len);  // y = x * v
  });
}

constexpr KernelDef kGeluTanh = {"", "GeluTanh (pattern)", 1,          1000, nullptr, 0,
                                 0,  PrepareGeluTanh,      RunGeluTanh};

const KernelDef* GeluErfPatternKernel();

// Whether value v is written by a MatMul / Gemm / Conv step before `host`, directly or through an
// Add (its bias or residual) and Identities: that GELU the runtime fuses into the MatMul or Conv
// as oneDNN's gelu_erf post-op instead (cpu_plan.cc FusionChain).
bool FromFusingHost(const GraphView& g, int v, size_t host, int adds = 0) {
  for (size_t s = 0; s < host; ++s)
    for (size_t k = 0; g.output(s, k) >= 0; ++k) {
      if (g.output(s, k) != v) continue;
      if (IsOp(g, s, "MatMul") || IsOp(g, s, "Gemm") || IsOp(g, s, "Conv")) return true;
      if (IsOp(g, s, "Identity")) return FromFusingHost(g, g.input(s, 0), s, adds);
      return adds == 0 && IsOp(g, s, "Add") &&
             (FromFusingHost(g, g.input(s, 0), s, 1) || FromFusingHost(g, g.input(s, 1), s, 1));
    }
  return false;
}

bool MatchGeluErf(const GraphView& g, size_t host, PatternMatch* m) {
  const bool div = IsOp(g, host, "Div");
  if ((!div && !IsOp(g, host, "Mul")) || g.opset(host) < 7) return false;
  float c = 0, one = 0, half = 0, rank = 0;
  const int x = g.input(host, 0);
  if (x < 0 || g.constant(x) != nullptr || !ScalarConst(g, g.input(host, 1), &c, &rank) ||
      FromFusingHost(g, x, host))
    return false;
  size_t s2, s3, s4, s5;
  if (!Next(g, host, "Erf", &s2) || g.opset(s2) < 9) return false;
  if (!OnlyReader(g, g.output(s2, 0), &s3) ||
      !WithConst(g, s3, "Add", g.output(s2, 0), &one, &rank))
    return false;
  if (!Next(g, s3, "Mul", &s4) || Other(g, s4, g.output(s3, 0)) != x) return false;
  if (!OnlyReader(g, g.output(s4, 0), &s5) ||
      !WithConst(g, s5, "Mul", g.output(s4, 0), &half, &rank))
    return false;
  m->absorbed = {s2, s3, s4, s5};
  m->inputs = {x};
  m->output = g.output(s5, 0);
  m->params = {div ? 1.f : 0.f, c, one, half, rank};
  m->kernel = GeluErfPatternKernel();
  return true;
}

Status PrepareGeluErf(OpContext& ctx, NodeSlot& slot) {
  const Layout in = slot.in_layouts.empty() ? Layout::kPlain : slot.in_layouts[0];
  const bool nhwc_ok = !slot.nhwc_ok.empty() && slot.nhwc_ok[0];
  if ((in != Layout::kPlain && !nhwc_ok) || !ctx.input_is_tensor(0) ||
      ctx.input(0).dtype() != DType::kFloat || slot.params.size() != 5 ||
      static_cast<float>(ctx.input(0).rank()) < slot.params[4]) {
    slot.declined = true;
    return Status::Ok();
  }
  slot.out_layouts.assign(1, in);
  ctx.set_output(0, DType::kFloat, ctx.input(0).shape());
  return Status::Ok();
}

void RunGeluErf(OpContext& ctx, NodeSlot& slot) {
  const float* x = ctx.input(0).data<float>();
  float* y = ctx.output(0).data<float>();
  const bool div = slot.params[0] != 0.f;
  const float c = slot.params[1], one = slot.params[2], half = slot.params[3];
  const auto gelu = Vec().gelu_erf;
  // Every element, in whatever layout they are stored.
  ParallelRange(ctx.input(0).size(), 1 << 15,
                [&](int64_t b, int64_t e) { gelu(x + b, y + b, e - b, div, c, one, half); });
}

constexpr KernelDef kGeluErf = {"", "GeluErf (pattern)", 1,         1000, nullptr, 0,
                                0,  PrepareGeluErf,      RunGeluErf};

const KernelDef* GeluErfPatternKernel() {
  return &kGeluErf;
}

constexpr Pattern kPatterns[] = {{"GeluTanh", MatchGeluTanh}, {"GeluErf", MatchGeluErf}};

}  // namespace

const KernelDef* GeluTanhPatternKernel() {
  return &kGeluTanh;
}

std::span<const Pattern> GeluTanhPatterns() {
  return kPatterns;
}

}  // namespace ferry::ops::cpu
