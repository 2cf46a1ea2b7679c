// The cpu provider's table, its session-wide resources and layout conversion.
#include <algorithm>
#include <cstring>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/float_mode.h"
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/families.h"

namespace ferry::ops::cpu {

Provider::Provider(int threads, const dnnl::engine& engine)
    : threads_(threads), engine_(engine), stream_(engine_) {}

void* Provider::Scratch(int k, size_t bytes) {
  Buffer& b = scratch_[k];
  if (b.size < bytes) {
    auto* p = static_cast<std::byte*>(::operator new[](bytes, std::align_val_t(64)));
    b.data = std::unique_ptr<std::byte[], void (*)(std::byte*)>(
        p, [](std::byte* q) { ::operator delete[](q, std::align_val_t(64)); });
    b.size = bytes;
  }
  return b.data.get();
}

void DestroyProvider(Provider* p) {
  delete p;
}

ProviderPtr MakeProvider(int threads, const Provider* engine_of) {
  if (engine_of) return ProviderPtr(new Provider(threads, engine_of->engine()));
  return ProviderPtr(new Provider(threads, dnnl::engine(dnnl::engine::kind::cpu, 0)));
}

namespace {

// The floating-point mode this thread's OpenMP workers were last given, and how many of them
// (libgomp keeps one pool of workers per thread that starts parallel regions, so per thread).
// Copying costs a parallel region, ~30 us at 2 threads in this VM: it is skipped when the
// workers have the mode already (the `ferry` binary's main thread runs in the flushing mode, so
// there no run copies anything after the first). A worker created later inherits the mode of
// the thread that created it, which is then the running thread's.
thread_local uint32_t t_workers_mode = 0;
thread_local int t_workers_synced = 0;

void GiveWorkersFloatMode([[maybe_unused]] Provider* p) {
#ifdef _OPENMP
  if (p->threads() <= 1) return;
  const uint32_t mode = GetFloatMode();
  if (t_workers_synced >= p->threads() && t_workers_mode == mode) return;
#pragma omp parallel num_threads(p->threads())
  SetFloatMode(mode);
  t_workers_mode = mode;
  t_workers_synced = std::max(t_workers_synced, p->threads());
#endif
}

}  // namespace

void BeginRun(Provider* p) {
#ifdef _OPENMP
  if (omp_get_max_threads() != p->threads()) omp_set_num_threads(p->threads());
#endif
  GiveWorkersFloatMode(p);
}

void EndRun(Provider* p) {
  GiveWorkersFloatMode(p);
}

namespace {

std::vector<const KernelDef*> BuildTable() {
  std::vector<const KernelDef*> all;
  const std::span<const KernelDef> families[] = {
      ConvKernels(),    PoolKernels(),      ElementwiseKernels(), MatMulKernels(),
      NormKernels(),    RnnKernels(),       MovementKernels(),    GatherKernels(),
      ConcatKernels(),  BatchNormKernels(), QMatMulKernels(),     QuantKernels(),
      DeconvKernels(),  ResizeKernels(),    MlTreeKernels(),      MlLinearKernels(),
      ContribKernels(), LogicKernels(),     ConvIntegerKernels(), DynQLstmKernels()};
  for (auto fam : families)
    for (const KernelDef& d : fam) all.push_back(&d);
  return all;
}

}  // namespace

std::span<const KernelDef* const> AllKernels() {
  static const std::vector<const KernelDef*> table = BuildTable();
  return table;
}

std::span<const Pattern> AllPatterns() {
  static const std::vector<Pattern> all = [] {
    std::vector<Pattern> v;
    for (auto fam :
         {NormPatterns(), QMatMulPatterns(), QuantPatterns(), PoolPatterns(), BatchNormPatterns(),
          MbConvPatterns(), StemPoolPatterns(), GeluTanhPatterns(), TransposeColumnConvPatterns()})
      v.insert(v.end(), fam.begin(), fam.end());
    return v;
  }();
  return all;
}

const KernelDef* FindKernel(const ir::Node& node, int64_t opset) {
  std::string_view domain = node.domain == "ai.onnx" ? std::string_view() : node.domain;
  for (const KernelDef* d : AllKernels()) {
    if (d->name != node.op_type || d->domain != domain) continue;
    if (opset < d->since_version || opset > d->last_version) continue;
    if (d->accepts && !d->accepts(node)) continue;
    return d;
  }
  return nullptr;
}

Result<std::vector<OpContext::Declared>> ReferenceDeclare(const OpContext& ctx,
                                                          const NodeSlot& slot, size_t num_inputs) {
  std::vector<const Value*> ins;
  for (size_t i = 0; i < num_inputs && i < ctx.num_inputs(); ++i)
    ins.push_back(ctx.has_input(i) ? &ctx.input_value(i) : nullptr);
  std::vector<Value> outs(ctx.num_outputs());
  OpContext ref(ctx.node(), ctx.opset(), std::move(ins), &outs);
  ref.set_pool(ctx.pool());
  FERRY_RETURN_IF_ERROR(slot.reference->prepare(ref));
  return ref.declared();
}

KeyProbe::operator StateKey() const {
  StateKey k;
  k.shapes.reserve(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    k.shapes.push_back(ctx.input_is_tensor(i) ? ctx.input(i).shape() : Shape{-1});
  k.layouts = slot.in_layouts;
  k.nhwc_ok = slot.nhwc_ok;
  k.fusion = slot.fusion;
  return k;
}

bool operator==(const StateKey& k, const KeyProbe& p) {
  if (k.shapes.size() != p.ctx.num_inputs()) return false;
  for (size_t i = 0; i < k.shapes.size(); ++i) {
    const Shape& want = k.shapes[i];
    if (p.ctx.input_is_tensor(i)) {
      if (want != p.ctx.input(i).shape()) return false;
    } else if (want.size() != 1 || want[0] != -1) {
      return false;
    }
  }
  const Fusion& f = p.slot.fusion;
  return k.layouts == p.slot.in_layouts && k.nhwc_ok == p.slot.nhwc_ok && k.fusion.act == f.act &&
         k.fusion.lo == f.lo && k.fusion.hi == f.hi && k.fusion.sum == f.sum &&
         k.fusion.affine == f.affine;
}

KeyProbe MakeKey(const OpContext& ctx, const NodeSlot& slot) {
  return KeyProbe{ctx, slot};
}

bool ChannelsLastNative() {
  static const bool nhwc = [] {
    try {
      using md = dnnl::memory::desc;
      const auto any = dnnl::memory::format_tag::any;
      const auto f32 = dnnl::memory::data_type::f32;
      dnnl::engine eng(dnnl::engine::kind::cpu, 0);
      const Shape y = {1, 64, 14, 14};  // the input's shape too (3x3, padding 1)
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, md(Dims(y), f32, any),
                                        md({64, 64, 3, 3}, f32, any), md(Dims(y), f32, any), {1, 1},
                                        {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(d, eng);
      return LayoutOf(pd.dst_desc(), y) == Layout::kNhwc;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return nhwc;
}

void ConvertLayout(const Tensor& src, Layout from, Tensor* dst, Layout to) {
  ConvertLayoutInto(src, from, dst->raw(), to);
}

void ConvertLayoutInto(const Tensor& src, Layout from, void* dst, Layout to) {
  // Rank 5+: only channels-last (a Reshape view splitting C) differs from plain.
  const bool wide = src.rank() > 4 && (from == Layout::kNhwc || to == Layout::kNhwc);
  if (from == to || (src.rank() != 4 && !wide)) {
    std::memcpy(dst, src.raw(), src.nbytes());
    return;
  }
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const auto dt = DnnlType(src.dtype());
  auto desc = [&](Layout l) {
    if (!wide) return LayoutDesc(src.shape(), l, dt);
    const std::vector<int64_t> st =
        l == Layout::kNhwc ? NhwcStrides(src.shape()) : PlainStrides(src.shape());
    return dnnl::memory::desc(Dims(src.shape()), dt, dnnl::memory::dims(st.begin(), st.end()));
  };
  dnnl::memory s(desc(from), engine, const_cast<void*>(src.raw()));
  dnnl::memory d(desc(to), engine, dst);
  dnnl::reorder(s, d).execute(stream, s, d);
  stream.wait();
}

}  // namespace ferry::ops::cpu
