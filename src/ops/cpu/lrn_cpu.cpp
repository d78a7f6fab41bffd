// CPU local response normalisation: oneDNN's lrn_across_channels on the data viewed as
// (M, C, 1, 1) in nhwc, M the product of the leading dims (the same memory: M rows of C channels).
//
// Checked against PyTorch's F.local_response_norm and our float64 reference (oneDNN 2.6: the jit
// avx512/avx2/sse41 kernels and lrn_ref): oneDNN divides alpha by local_size, clips the window at
// the channel ends and still divides by local_size there (C = 1 and C = 3 < 5 agree), for odd sizes.
// Even sizes do not match (lrn.hpp refuses them).
//
// The backward needs the workspace of a forward_training run of the same primitive, whose layout
// belongs to the implementation oneDNN picks (the avx512 kernel keeps two floats per element, the
// reference none). Rather than hand an opaque buffer from forward to backward through the op's
// interface, lrn_backward runs forward_training again: its output goes into dx, which the backward
// then overwrites, and the workspace is allocated for the call. The cost is one more LRN forward per
// step, small next to the convolutions around it. lrn_forward runs forward_inference (no workspace).
//
// Size 1 (an element-wise function) does not go to oneDNN: 2.6's avx512 jit backward crashes while
// its primitive is created for local_size 1 and 2 (any C; the avx2 and sse41 builds pick lrn_ref and
// do not), so a short loop does it.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/cpu/dnnl_util.hpp"
#include "scaletrain/ops/lrn.hpp"

namespace scaletrain::ops::cpu {
namespace {

using ::scaletrain::cpu::cached_primitive;
using ::scaletrain::cpu::dnnl_desc;
using ::scaletrain::cpu::dnnl_tag;
using ::scaletrain::cpu::engine_key;
using ::scaletrain::cpu::PrimitiveKey;

int64_t float_bits(float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

struct LrnDims {
  int64_t rows, channels;

  dnnl::memory::desc desc() const { return dnnl_desc({rows, channels, 1, 1}, dnnl_tag::nhwc); }
  PrimitiveKey key(const dnnl::engine& e, const LrnParams& p) const {
    return {engine_key(e), rows, channels, p.size, float_bits(p.alpha), float_bits(p.beta), float_bits(p.k)};
  }
};

LrnDims lrn_dims(const Tensor& x) {
  const int64_t channels = x.dim(-1);
  return {x.numel() / channels, channels};
}

dnnl::lrn_forward::primitive_desc forward_pd(const LrnDims& d, const LrnParams& p, dnnl::prop_kind kind,
                                             const dnnl::engine& e) {
  dnnl::lrn_forward::desc desc(kind, dnnl::algorithm::lrn_across_channels, d.desc(), p.size, p.alpha, p.beta, p.k);
  return dnnl::lrn_forward::primitive_desc(desc, e);
}

// A memory whose buffer is set per call (set_data_handle) to the caller's tensor.
dnnl::memory user_memory(const dnnl::memory::desc& md, const dnnl::engine& e) { return dnnl::memory(md, e, nullptr); }

struct LrnForward {
  dnnl::lrn_forward prim;
  dnnl::memory src, dst;
};

struct LrnBackward {
  dnnl::lrn_forward forward;  // forward_training, for the workspace
  dnnl::lrn_backward prim;
  dnnl::memory::desc workspace;
  dnnl::memory src, diff_dst, diff_src;
};

constexpr int64_t kParallelMin = 1 << 15;  // elements; below this a thread team costs more than it saves

// Size 1: s = k + alpha x^2, y = x s^-beta, dx = dy (s^-beta - 2 alpha beta x^2 s^(-beta-1)).
void lrn_size1_forward(const LrnParams& p, const Tensor& x, Tensor& y) {
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] * std::pow(p.k + p.alpha * xp[i] * xp[i], -p.beta);
}

void lrn_size1_backward(const LrnParams& p, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const float* xp = x.data<float>();
  const float* g = dy.data<float>();
  float* dxp = dx.data<float>();
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float x2 = xp[i] * xp[i], s = p.k + p.alpha * x2, t = std::pow(s, -p.beta - 1.0f);
    dxp[i] = g[i] * (t * s - 2.0f * p.alpha * p.beta * x2 * t);
  }
}

}  // namespace

void lrn_forward(Context& ctx, const LrnParams& p, const Tensor& x, Tensor& y) {
  if (x.numel() == 0) return;
  if (p.size == 1) return lrn_size1_forward(p, x, y);
  const LrnDims d = lrn_dims(x);
  dnnl::engine& engine = dnnl_engine(ctx);
  LrnForward& e = cached_primitive<LrnForward>(d.key(engine, p), [&] {
    auto pd = forward_pd(d, p, dnnl::prop_kind::forward_inference, engine);
    return LrnForward{dnnl::lrn_forward(pd), user_memory(pd.src_desc(), engine), user_memory(pd.dst_desc(), engine)};
  });
  e.src.set_data_handle(x.raw());
  e.dst.set_data_handle(y.raw());
  e.prim.execute(dnnl_stream(ctx), {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_DST, e.dst}});
}

void lrn_backward(Context& ctx, const LrnParams& p, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (x.numel() == 0) return;
  if (p.size == 1) return lrn_size1_backward(p, x, dy, dx);
  const LrnDims d = lrn_dims(x);
  dnnl::engine& engine = dnnl_engine(ctx);
  dnnl::stream& stream = dnnl_stream(ctx);
  LrnBackward& e = cached_primitive<LrnBackward>(d.key(engine, p), [&] {
    auto fpd = forward_pd(d, p, dnnl::prop_kind::forward_training, engine);
    dnnl::lrn_backward::desc desc(dnnl::algorithm::lrn_across_channels, d.desc(), d.desc(), p.size, p.alpha, p.beta,
                                  p.k);
    dnnl::lrn_backward::primitive_desc pd(desc, engine, fpd);
    return LrnBackward{dnnl::lrn_forward(fpd),
                       dnnl::lrn_backward(pd),
                       fpd.workspace_desc(),
                       user_memory(pd.src_desc(), engine),
                       user_memory(pd.diff_dst_desc(), engine),
                       user_memory(pd.diff_src_desc(), engine)};
  });
  e.src.set_data_handle(x.raw());
  e.diff_dst.set_data_handle(dy.raw());
  e.diff_src.set_data_handle(dx.raw());
  dnnl::memory workspace(e.workspace, engine);  // allocated here, freed on return
  // The recomputed output goes into dx (the backward reads src, diff_dst and the workspace only).
  e.forward.execute(stream, {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_DST, e.diff_src}, {DNNL_ARG_WORKSPACE, workspace}});
  e.prim.execute(stream, {{DNNL_ARG_SRC, e.src},
                          {DNNL_ARG_DIFF_DST, e.diff_dst},
                          {DNNL_ARG_WORKSPACE, workspace},
                          {DNNL_ARG_DIFF_SRC, e.diff_src}});
}

}  // namespace scaletrain::ops::cpu
