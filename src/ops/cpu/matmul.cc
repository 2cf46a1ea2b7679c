// cpu kernels: MatMul and Gemm (float32) on oneDNN's matmul primitive.
//
// MatMul: A [..., M, K] x B [..., K, N] with broadcast batch dims; a 2-D B folds A's batch dims
// into M (one GEMM). Gemm: transA/transB as strides, C as bias (broadcast [N], [1,N], [M,1],
// [M,N] or a scalar), alpha = 1 and beta = 1 only (else the reference runs). A constant B is
// reordered once into the layout oneDNN prefers; a computed B is read in place every run.
// MatMul hosts fusion (KernelDef::fuse_input 2): a following Add of a bias broadcast along the
// rows ([N], [1, N], ...) becomes oneDNN's bias, an Add of a tensor of the output's shape its
// sum post-op, and a Relu/Clip its eltwise post-op, so a Linear (+ activation) is one primitive.
// A constant 2-D B (MatMul, or Gemm without transA) on an AVX2+FMA CPU may take the own packed
// GEMM instead (gemm_avx2.h; small problems by default, see UseOwnGemm): B packed at prepare into
// 16-column panels, the same fused epilogue (bias, then the residual sum, then Relu/Clip) applied
// on the microkernel's registers.
#include <cstring>
#include <vector>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"
#include "ops/cpu/gemm_avx2.h"

namespace ferry::ops::cpu {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct MatMulState : KernelState {
  StateKey key;
  Shape out_shape;
  dnnl::matmul prim;
  memory::desc a_md, b_md, c_md, y_md, packed_md;
  bool pack = false, has_c = false;
  bool fused = false, sum = false;  // fusion accepted; the residual is a sum post-op
  dnnl::primitive_attr attr;
  dnnl::reorder pack_reorder;  // a computed B into `packed`
  PackedPtr packed_buf;        // a constant B in packed_md (shared)
  memory packed;
  const void* packed_from = nullptr;
  bool serial = false;  // too small to split: built and run on one thread
  // The own packed GEMM (gemm_avx2.h): y [m, n] = A [m, k] (row stride k) x packed B.
  bool own = false, own_trans = false;  // own_trans: B is stored [n, k] (Gemm transB)
  bool gemv = false;  // own matrix-vector product on B [n, k] in place (GemvTransB)
  std::shared_ptr<const PackedB> own_b;  // shared when B is constant
  int64_t m = 0, k = 0;
  int64_t bias_rs = 0, bias_cs = 0;  // C addressed as c[row * bias_rs + col * bias_cs]
  GemmEpilogue::Act act = GemmEpilogue::Act::kNone;
  float lo = 0.f, hi = 0.f;
  std::vector<float> residual_copy;  // the residual when it shares the output's buffer
};

// Below this many multiply-adds a matmul runs on one thread: waking a second one costs more than
// it saves (and, on a busy machine, a whole scheduler time slice).
constexpr int64_t kSerialFmas = int64_t{1} << 18;

// Sets the OpenMP thread count to 1 for its lifetime when `on` (oneDNN reads it at primitive
// creation and execution).
class SerialScope {
 public:
  explicit SerialScope(bool on) {
#ifdef _OPENMP
    if (on && omp_get_max_threads() != 1) {
      saved_ = omp_get_max_threads();
      omp_set_num_threads(1);
    }
#else
    (void)on;
#endif
  }
  ~SerialScope() {
#ifdef _OPENMP
    if (saved_ > 0) omp_set_num_threads(saved_);
#endif
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int saved_ = 0;
};

int64_t Fmas(const memory::desc& a, const memory::desc& y) {
  int64_t n = a.dims().back();  // K
  for (int64_t d : y.dims()) n *= d;
  return n;
}

memory::desc Strided(const memory::dims& d, bool transposed_last2) {
  // Row-major dims d, or (transposed) the last two dims stored swapped.
  memory::dims strides(d.size());
  const size_t r = d.size();
  if (!transposed_last2) {
    int64_t s = 1;
    for (size_t i = r; i-- > 0;) {
      strides[i] = s;
      s *= d[i];
    }
  } else {
    strides[r - 2] = 1;
    strides[r - 1] = d[r - 2];
    int64_t s = d[r - 2] * d[r - 1];
    for (size_t i = r - 2; i-- > 0;) {
      strides[i] = s;
      s *= d[i];
    }
  }
  return memory::desc(d, memory::data_type::f32, strides);
}

// Builds the primitive for a [.., M, K] x [.., K, N] (+ bias) problem.
Status Build(NodeSlot& slot, MatMulState* st, bool b_const) {
  dnnl::engine& eng = slot.provider->engine();
  memory::desc b_req = st->b_md;
  if (b_const) b_req = memory::desc(st->b_md.dims(), memory::data_type::f32, tag::any);
  auto make = [&](const memory::desc& b) {
    dnnl::matmul::desc d = st->has_c ? dnnl::matmul::desc(st->a_md, b, st->c_md, st->y_md)
                                     : dnnl::matmul::desc(st->a_md, b, st->y_md);
    return dnnl::matmul::primitive_desc(d, st->attr, eng);
  };
  dnnl::matmul::primitive_desc pd;
  try {
    pd = make(b_req);
  } catch (const dnnl::error&) {
    pd = make(st->b_md);  // a layout oneDNN cannot pick for this shape: read B as it is
  }
  // A constant 2-D B that oneDNN leaves row-major (its jit sgemm, no blocked layout on AVX2)
  // is stored transposed instead: measured up to 2x faster on [128,256] x [256,2048]
  // (bench/micro bert_ffn1), the same on the other BERT shapes.
  const memory::dims& bd = st->b_md.dims();
  if (b_const && bd.size() == 2 &&
      pd.weights_desc() == memory::desc(bd, st->b_md.data_type(), tag::ab)) {
    try {
      pd = make(memory::desc(bd, memory::data_type::f32, tag::ba));
    } catch (const dnnl::error&) {
    }
  }
  st->prim = dnnl::matmul(pd);
  st->packed_md = pd.weights_desc();
  st->pack = st->packed_md != st->b_md;
  if (st->pack && !b_const) {  // a computed B is reordered every run into this context's copy
    st->packed = memory(st->packed_md, eng);
    st->pack_reorder =
        dnnl::reorder(dnnl::reorder::primitive_desc(eng, st->b_md, eng, st->packed_md));
  }
  return Status::Ok();
}

bool Plain(const NodeSlot& slot, size_t n) {
  for (size_t i = 0; i < n && i < slot.in_layouts.size(); ++i)
    if (slot.in_layouts[i] != Layout::kPlain) return false;
  return true;
}

bool FloatTensors(const OpContext& ctx, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!ctx.input_is_tensor(i) || ctx.input(i).dtype() != DType::kFloat) return false;
  return true;
}

// Packs a constant B once (again if the initializer changes), a computed B every run.
void PackB(const OpContext& ctx, NodeSlot& slot, MatMulState* st) {
  if (st->gemv) return;  // B is read where it is
  const bool b_const = ConstInput(slot, 1);
  if (st->own) {
    const float* b = static_cast<const float*>(ctx.input(1).raw());
    if (st->packed_from == b) return;
    const memory::dims& d = st->b_md.dims();  // [k, n]
    st->own_b = SharedPack<PackedB>(
        slot, b_const, b, fmt::format("own k{} n{} t{}", d[0], d[1], st->own_trans ? 1 : 0), [&] {
          auto p = std::make_shared<PackedB>();
          p->Pack(b, d[0], d[1], st->own_trans);
          return p;
        });
    st->packed_from = b;
    return;
  }
  if (!st->pack) return;
  const void* b = ctx.input(1).raw();
  if (b_const && st->packed_from == b) return;
  dnnl::engine& eng = slot.provider->engine();
  if (b_const) {
    st->packed_buf = SharedReorder(slot, true, b, st->b_md, st->packed_md, eng,
                                   slot.provider->stream(), "matmul");
    st->packed = memory(st->packed_md, eng, const_cast<float*>(st->packed_buf->data()));
    st->packed_from = b;
    return;
  }
  memory user(st->b_md, eng, const_cast<void*>(b));
  st->pack_reorder.execute(slot.provider->stream(), user, st->packed);
  slot.provider->stream().wait();
  st->packed_from = nullptr;
}

// Builds `fresh`'s primitive and makes it the slot's state; without the fusion when oneDNN
// cannot fuse it, declines when oneDNN cannot build it at all.
Status InstallState(NodeSlot& slot, std::unique_ptr<MatMulState> fresh) {
  const bool b_const = slot.const_inputs.size() > 1 && slot.const_inputs[1];
  fresh->serial = Fmas(fresh->a_md, fresh->y_md) < kSerialFmas;
  SerialScope scope(fresh->serial);
  try {
    FERRY_RETURN_IF_ERROR(Build(slot, fresh.get(), b_const));
  } catch (const dnnl::error&) {
    if (!fresh->fused) {
      slot.declined = true;
      return Status::Ok();
    }
    fresh->fused = fresh->sum = fresh->has_c = false;
    fresh->attr = dnnl::primitive_attr();
    return InstallState(slot, std::move(fresh));
  }
  slot.state = std::move(fresh);
  return Status::Ok();
}

// Packs constant weights (once) and declares the plain output.
Status DeclareOutput(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<MatMulState*>(slot.state.get());
  PackB(ctx, slot, st);
  ctx.set_output(0, DType::kFloat, st->out_shape);
  slot.out_layouts.assign(1, Layout::kPlain);
  slot.fused = st->fused;
  return Status::Ok();
}

// Accepts the requested fusion when oneDNN can express it: the Add operand (input 2) as a
// bias broadcast along the rows, or as a sum of the output's exact shape; then Relu / Clip.
void PlanFusion(const OpContext& ctx, const NodeSlot& slot, MatMulState* st) {
  const Fusion& f = slot.fusion;
  if (!f.any() || f.act == Fusion::Act::kSwish || f.act == Fusion::Act::kHardSwish) return;
  dnnl::post_ops po;
  if (f.sum) {
    if (!FloatTensors(ctx, 3) || !Plain(slot, 3)) return;
    const Shape& r = ctx.input(2).shape();
    const Shape& y = st->out_shape;
    const int64_t n = y.back();
    bool row = r.size() <= y.size() && !r.empty() && r.back() == n;
    for (size_t d = 0; row && d + 1 < r.size(); ++d) row = r[d] == 1;
    if (row) {
      memory::dims c(st->y_md.dims().size(), 1);
      c.back() = n;
      st->c_md = Strided(c, false);
      st->has_c = true;
    } else if (r == y) {
      po.append_sum(1.f);
      st->sum = true;
    } else {
      return;
    }
  }
  if (f.act == Fusion::Act::kRelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (f.act == Fusion::Act::kClip)
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, f.lo, f.hi);
  if (f.act == Fusion::Act::kGelu)  // x * 0.5 * (1 + erf(x / sqrt(2)))
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  st->attr.set_post_ops(po);
  st->fused = true;
}

// The own packed GEMM applies to a constant 2-D B [k, n] (or [n, k] with transB) read from an
// initializer and a row-major A, on AVX2+FMA. By default it takes only the small problems (under
// kSerialFmas multiply-adds, the one-thread class): there it runs as fast as oneDNN and spares
// a model whose only GEMMs are small (the GRU encoder's head) oneDNN's one-time sgemm JIT set-up,
// ~26 ms of the first run. On BERT's large shapes it measured level with oneDNN's sgemm at one
// thread, within this machine's noise (0.90x-1.09x, src/ops/cpu/README.md), so those stay on
// oneDNN. PackedGemmOverride 1 (FERRY_GEMM=packed) takes it wherever it applies (tests,
// benchmarks); 0 (FERRY_GEMM=onednn) never.
bool UseOwnGemm(const NodeSlot& slot, int64_t fmas) {
  const bool b_const = slot.const_inputs.size() > 1 && slot.const_inputs[1];
  if (!b_const || !GemmAvx2Supported()) return false;
  const int forced = PackedGemmOverride();
  return forced == 1 || (forced < 0 && fmas < kSerialFmas);
}

// A Gemm with transB whose A has a few rows and whose constant B is large (a classifier's Linear
// at batch 1: AlexNet's 9216x4096, 151 MB) reads B in place (GemvTransB): oneDNN would pack a
// second copy, and the first run would pay for making it.
constexpr size_t kGemvMinBytes = size_t{1} << 20;

bool UseGemv(const NodeSlot& slot, int64_t m, int64_t k, int64_t n, bool ta, bool tb, bool gelu) {
  const bool b_const = slot.const_inputs.size() > 1 && slot.const_inputs[1];
  return b_const && !ta && tb && !gelu && m <= kGemvMaxRows &&
         static_cast<size_t>(k * n) * sizeof(float) >= kGemvMinBytes && GemmAvx2Supported() &&
         PackedGemmOverride() != 0;
}

// Takes the own path for `fresh` (m x k x n, B transposed when tb) and installs it.
void InstallOwn(NodeSlot& slot, std::unique_ptr<MatMulState> fresh, int64_t m, int64_t k, bool tb) {
  fresh->own = true;
  fresh->m = m;
  fresh->k = k;
  fresh->serial = Fmas(fresh->a_md, fresh->y_md) < kSerialFmas;
  if (fresh->fused) {
    const Fusion& f = slot.fusion;
    fresh->act = f.act == Fusion::Act::kRelu   ? GemmEpilogue::Act::kRelu
                 : f.act == Fusion::Act::kClip ? GemmEpilogue::Act::kClip
                                               : GemmEpilogue::Act::kNone;
    fresh->lo = f.lo;
    fresh->hi = f.hi;
  }
  fresh->own_trans = tb;
  slot.state = std::move(fresh);
}

Status PrepareMatMul(OpContext& ctx, NodeSlot& slot) {
  if (!FloatTensors(ctx, 2) || !Plain(slot, 2) || ctx.input(0).rank() < 2 ||
      ctx.input(1).rank() < 2) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<MatMulState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 2));
    auto fresh = std::make_unique<MatMulState>();
    fresh->key = key;
    fresh->out_shape = decl[0].shape;
    const Shape& a = ctx.input(0).shape();
    const Shape& b = ctx.input(1).shape();
    const Shape& y = fresh->out_shape;
    if (NumElements(y) == 0) {
      slot.declined = true;
      return Status::Ok();
    }
    const int64_t k = a.back(), n = b.back();
    if (b.size() == 2) {
      const int64_t m = NumElements(a) / k;
      fresh->a_md = Strided({m, k}, false);
      fresh->b_md = Strided({k, n}, false);
      fresh->y_md = Strided({m, n}, false);
    } else {
      const size_t r = y.size();
      auto pad = [&](const Shape& s) {
        memory::dims d(r, 1);
        std::copy(s.begin(), s.end(), d.end() - static_cast<std::ptrdiff_t>(s.size()));
        return d;
      };
      fresh->a_md = Strided(pad(a), false);
      fresh->b_md = Strided(pad(b), false);
      fresh->y_md = Strided(Dims(y), false);
    }
    PlanFusion(ctx, slot, fresh.get());
    // The own GEMM's epilogue has no GELU: a fused GELU stays on oneDNN.
    const bool gelu = fresh->fused && slot.fusion.act == Fusion::Act::kGelu;
    if (b.size() == 2 && !gelu && UseOwnGemm(slot, NumElements(a) * n)) {
      const int64_t m = NumElements(a) / k;
      if (fresh->has_c) {
        fresh->bias_rs = 0;
        fresh->bias_cs = 1;
      }
      InstallOwn(slot, std::move(fresh), m, k, false);
      return DeclareOutput(ctx, slot);
    }
    FERRY_RETURN_IF_ERROR(InstallState(slot, std::move(fresh)));
    if (slot.declined) return Status::Ok();
  }
  return DeclareOutput(ctx, slot);
}

Status PrepareGemm(OpContext& ctx, NodeSlot& slot) {
  const bool has_c = ctx.has_input(2);
  if (!FloatTensors(ctx, has_c ? 3 : 2) || !Plain(slot, 3) || ctx.input(0).rank() != 2 ||
      ctx.input(1).rank() != 2 || ctx.attr_float("alpha", 1.f) != 1.f ||
      (has_c && (ctx.attr_float("beta", 1.f) != 1.f || ctx.input(2).rank() > 2))) {
    slot.declined = true;
    return Status::Ok();
  }
  auto* st = static_cast<MatMulState*>(slot.state.get());
  const KeyProbe key = MakeKey(ctx, slot);
  if (!st || !(st->key == key)) {
    FERRY_ASSIGN_OR_RETURN(auto decl, ReferenceDeclare(ctx, slot, 3));
    auto fresh = std::make_unique<MatMulState>();
    fresh->key = key;
    fresh->out_shape = decl[0].shape;
    const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
    const Shape& a = ctx.input(0).shape();
    const Shape& b = ctx.input(1).shape();
    const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1], n = tb ? b[0] : b[1];
    if (m * n == 0) {
      slot.declined = true;
      return Status::Ok();
    }
    fresh->a_md = Strided({m, k}, ta);
    fresh->b_md = Strided({k, n}, tb);
    fresh->y_md = Strided({m, n}, false);
    fresh->has_c = has_c;
    if (has_c) {
      Shape c = ctx.input(2).shape();
      while (c.size() < 2) c.insert(c.begin(), 1);
      fresh->c_md = Strided(Dims(c), false);
      // Broadcast C: [1|m, 1|n] as row / column strides (0 along a broadcast dim).
      fresh->bias_rs = c[0] == 1 ? 0 : c[1];
      fresh->bias_cs = c[1] == 1 ? 0 : 1;
    }
    const bool gelu = fresh->fused && slot.fusion.act == Fusion::Act::kGelu;
    if (UseGemv(slot, m, k, n, ta, tb, gelu)) {
      fresh->gemv = true;
      InstallOwn(slot, std::move(fresh), m, k, tb);
      return DeclareOutput(ctx, slot);
    }
    if (!ta && UseOwnGemm(slot, m * k * n)) {
      InstallOwn(slot, std::move(fresh), m, k, tb);
      return DeclareOutput(ctx, slot);
    }
    FERRY_RETURN_IF_ERROR(InstallState(slot, std::move(fresh)));
    if (slot.declined) return Status::Ok();
  }
  return DeclareOutput(ctx, slot);
}

void RunOwn(OpContext& ctx, MatMulState* st) {
  GemmEpilogue e;
  float* y = static_cast<float*>(ctx.output(0).raw());
  if (st->has_c) {
    e.bias = static_cast<const float*>(ctx.input(2).raw());
    e.bias_rs = st->bias_rs;
    e.bias_cs = st->bias_cs;
  }
  if (st->sum) {
    e.residual = static_cast<const float*>(ctx.input(2).raw());
    if (e.residual == y) {  // the K blocks write partial sums into y: read the residual aside
      st->residual_copy.assign(e.residual, e.residual + NumElements(st->out_shape));
      e.residual = st->residual_copy.data();
    }
  }
  e.act = st->act;
  e.lo = st->lo;
  e.hi = st->hi;
  const int threads = st->serial ? 1 : omp_get_max_threads();
  if (st->gemv)
    GemvTransB(static_cast<const float*>(ctx.input(0).raw()), st->m, st->k,
               static_cast<const float*>(ctx.input(1).raw()), st->k,
               NumElements(st->out_shape) / st->m, y, e, threads);
  else
    PackedGemm(static_cast<const float*>(ctx.input(0).raw()), st->m, st->k, *st->own_b, y, e,
               threads);
}

void RunMatMul(OpContext& ctx, NodeSlot& slot) {
  auto* st = static_cast<MatMulState*>(slot.state.get());
  if (st->own) return RunOwn(ctx, st);
  Provider& p = *slot.provider;
  dnnl::engine& eng = p.engine();
  memory a(st->a_md, eng, const_cast<void*>(ctx.input(0).raw()));
  memory b = st->pack ? st->packed : memory(st->b_md, eng, const_cast<void*>(ctx.input(1).raw()));
  memory y(st->y_md, eng, ctx.output(0).raw());
  if (st->sum && ctx.input(2).raw() != ctx.output(0).raw())
    std::memcpy(ctx.output(0).raw(), ctx.input(2).raw(), ctx.output(0).nbytes());
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, y}};
  if (st->has_c) args[DNNL_ARG_BIAS] = memory(st->c_md, eng, const_cast<void*>(ctx.input(2).raw()));
  SerialScope scope(st->serial);
  st->prim.execute(p.stream(), args);
  p.stream().wait();
}

constexpr KernelDef kKernels[] = {
    {"", "MatMul", 1, 1000, nullptr, 0, 2, PrepareMatMul, RunMatMul},
    {"", "Gemm", 7, 1000, nullptr, 0, 0, PrepareGemm, RunMatMul},
};

}  // namespace

std::span<const KernelDef> MatMulKernels() {
  return kKernels;
}

}  // namespace ferry::ops::cpu
