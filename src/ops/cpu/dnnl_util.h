// Internal to the cpu provider: the Provider definition (oneDNN engine/stream, scratch) and
// small helpers shared by the kernel families.
#pragma once

#ifdef _OPENMP
#include <omp.h>

#include <cstdlib>
#include <cstring>
#endif

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/cpu/cpu_kernel.h"
#include "ops/cpu/packed.h"

namespace ferry::ops::cpu {

class Provider {
 public:
  Provider(int threads, const dnnl::engine& engine);
  int threads() const { return threads_; }
  dnnl::engine& engine() { return engine_; }
  const dnnl::engine& engine() const { return engine_; }
  dnnl::stream& stream() { return stream_; }
  // A buffer of this run context of at least `bytes` for slot `k` (0, 1 or 2), valid until the
  // next call with a larger size for the same slot. A context's kernels run one at a time, so
  // they may share it.
  void* Scratch(int k, size_t bytes);

 private:
  int threads_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  struct Buffer {
    std::unique_ptr<std::byte[], void (*)(std::byte*)> data{nullptr, [](std::byte*) {}};
    size_t size = 0;
  };
  Buffer scratch_[3];
};

// Shorthands.
inline dnnl::memory::dims Dims(const Shape& s) {
  return dnnl::memory::dims(s.begin(), s.end());
}
inline dnnl::memory::desc PlainDesc(const Shape& s) {
  using tag = dnnl::memory::format_tag;
  static constexpr tag kTags[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  return dnnl::memory::desc(Dims(s), dnnl::memory::data_type::f32, kTags[s.size()]);
}
inline dnnl::memory::desc LayoutDesc(const Shape& s, Layout l,
                                     dnnl::memory::data_type dt = dnnl::memory::data_type::f32) {
  using tag = dnnl::memory::format_tag;
  switch (l) {
    case Layout::kNhwc:
      return dnnl::memory::desc(Dims(s), dt, tag::acdb);
    case Layout::kBlocked8:
      return dnnl::memory::desc(Dims(s), dt, tag::aBcd8b);
    case Layout::kBlocked16:
      return dnnl::memory::desc(Dims(s), dt, tag::aBcd16b);
    case Layout::kPlain:
      break;
  }
  if (dt != dnnl::memory::data_type::f32) {
    using t = dnnl::memory::format_tag;
    static constexpr t kTags[] = {t::undef, t::a, t::ab, t::abc, t::abcd, t::abcde};
    return dnnl::memory::desc(Dims(s), dt, kTags[s.size()]);
  }
  return PlainDesc(s);
}
// oneDNN's data type for a tensor dtype the layouts support (float32, int8, uint8).
inline dnnl::memory::data_type DnnlType(DType t) {
  switch (t) {
    case DType::kUint8:
      return dnnl::memory::data_type::u8;
    case DType::kInt8:
      return dnnl::memory::data_type::s8;
    case DType::kInt32:
      return dnnl::memory::data_type::s32;
    default:
      return dnnl::memory::data_type::f32;
  }
}
// The Layout whose descriptor equals `md` for a rank-4 tensor of shape `s` without padding
// (blocked layouts need C to be a multiple of the block); kPlain when none.
inline Layout LayoutOf(const dnnl::memory::desc& md, const Shape& s) {
  if (s.size() != 4) return Layout::kPlain;
  for (Layout l : {Layout::kNhwc, Layout::kBlocked8, Layout::kBlocked16}) {
    if (l == Layout::kBlocked8 && s[1] % 8 != 0) continue;
    if (l == Layout::kBlocked16 && s[1] % 16 != 0) continue;
    if (md == LayoutDesc(s, l)) return l;
  }
  return Layout::kPlain;
}

// A convolution-like node's float inputs: X and W rank-4 float32 tensors, B (input 2) absent or
// a float32 tensor. Conv and ConvTranspose decline otherwise.
inline bool FloatConvInputs(const OpContext& ctx) {
  return ctx.input_is_tensor(0) && ctx.input_is_tensor(1) &&
         ctx.input(0).dtype() == DType::kFloat && ctx.input(1).dtype() == DType::kFloat &&
         ctx.input(0).rank() == 4 && ctx.input(1).rank() == 4 &&
         (!ctx.has_input(2) || (ctx.input_is_tensor(2) && ctx.input(2).dtype() == DType::kFloat));
}

// oneDNN post-ops for `f`: the residual sum first (when f.sum), then the activation.
inline dnnl::post_ops MakePostOps(const Fusion& f) {
  dnnl::post_ops po;
  if (f.sum) po.append_sum(1.f);
  if (f.act == Fusion::Act::kRelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (f.act == Fusion::Act::kClip)
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, f.lo, f.hi);
  if (f.act == Fusion::Act::kSwish)  // x * sigmoid(alpha x), alpha = 1
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
  if (f.act == Fusion::Act::kHardSwish)  // oneDNN 2.x: x * relu6(x + 3) / 6
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_hardswish, 0.f, 0.f);
  if (f.act == Fusion::Act::kGelu)  // x * 0.5 * (1 + erf(x / sqrt(2)))
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
  return po;
}

// The tensors around a oneDNN primitive that picks its own activation layouts (Conv,
// ConvTranspose): the input as stored (`in_md`) is reordered into what the primitive reads
// (`src_md`) when they differ, and what it writes (`dst_md`) into the output's Layout (`out_md`).
struct DnnlIo {
  dnnl::memory::desc in_md, src_md, dst_md, out_md;
  bool reorder_src = false, reorder_dst = false;
  dnnl::reorder src_reorder, dst_reorder;

  // With in_md, src_md and dst_md set: out_md for output shape `y` in `out`, and the reorders.
  void Plan(dnnl::engine& eng, const Shape& y, Layout out) {
    reorder_src = src_md != in_md;
    if (reorder_src)
      src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, in_md, eng, src_md));
    out_md = LayoutDesc(y, out);
    reorder_dst = dst_md != out_md;
    if (reorder_dst)
      dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, dst_md, eng, out_md));
  }
  // The input as the primitive reads it (reordered into scratch 0 when needed).
  dnnl::memory Src(Provider& p, const void* x) const {
    dnnl::memory src(in_md, p.engine(), const_cast<void*>(x));
    if (!reorder_src) return src;
    dnnl::memory tmp(src_md, p.engine(), p.Scratch(0, src_md.get_size()));
    src_reorder.execute(p.stream(), src, tmp);
    return tmp;
  }
  // Where the primitive writes: y itself, or scratch 1 that Finish reorders into y.
  dnnl::memory Dst(Provider& p, void* y) const {
    return dnnl::memory(dst_md, p.engine(), reorder_dst ? p.Scratch(1, dst_md.get_size()) : y);
  }
  void Finish(Provider& p, dnnl::memory dst, void* y) const {
    if (!reorder_dst) return;
    dnnl::memory out(out_md, p.engine(), y);
    dst_reorder.execute(p.stream(), dst, out);
  }
};

// Runs fn(begin, end) over [0, n) on the provider's OpenMP threads.
// An own kernel's switch from the environment variable `var`: "onednn" 0 (off), `on` ("own" unless
// given) 1 (every shape it takes), anything else or unset -1 (its rule). Callers read it once.
inline int KernelModeFromEnv(const char* var, const char* on = "own") {
  const char* e = std::getenv(var);
  if (!e) return -1;
  return std::strcmp(e, "onednn") == 0 ? 0 : std::strcmp(e, on) == 0 ? 1 : -1;
}

template <typename F>
void ParallelRange(int64_t n, int64_t min_chunk, F&& fn) {
  int64_t chunks = n / (min_chunk > 0 ? min_chunk : 1);
#ifdef _OPENMP
  if (chunks > 1) {
#pragma omp parallel
    {
      int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t b = n * t / nt, e = n * (t + 1) / nt;
      if (b < e) fn(b, e);
    }
    return;
  }
#endif
  (void)chunks;
  fn(int64_t{0}, n);
}

// A oneDNN memory descriptor as part of a tag: its bytes, in hex (two descriptors that differ
// give different tags; equal ones the same, as oneDNN zero-fills what it does not set).
inline std::string DescTag(const dnnl::memory::desc& md) {
  std::string s;
  const auto* b = reinterpret_cast<const unsigned char*>(&md.data);
  s.reserve(sizeof(md.data) * 2);
  for (size_t i = 0; i < sizeof(md.data); ++i) s += fmt::format("{:02x}", b[i]);
  return s;
}

// Weights reordered by oneDNN from `user_md` (as stored at `w`) into `packed_md`, once per
// session for a constant `w`. The packed bytes live in the returned buffer; wrap them in a
// dnnl::memory of `packed_md` per run context.
inline PackedPtr SharedReorder(const NodeSlot& slot, bool w_const, const void* w,
                               const dnnl::memory::desc& user_md,
                               const dnnl::memory::desc& packed_md, dnnl::engine& eng,
                               dnnl::stream& stream, const std::string& kind) {
  const std::string tag = kind + ":" + DescTag(user_md) + ":" + DescTag(packed_md);
  return SharedPack<PackedFloats>(slot, w_const, w, tag, [&] {
    auto buf = std::make_shared<PackedFloats>((packed_md.get_size() + 3) / 4);
    dnnl::memory user(user_md, eng, const_cast<void*>(w));
    dnnl::memory dst(packed_md, eng, buf->data());
    dnnl::reorder(user, dst).execute(stream, user, dst);
    stream.wait();
    return buf;
  });
}

}  // namespace ferry::ops::cpu
