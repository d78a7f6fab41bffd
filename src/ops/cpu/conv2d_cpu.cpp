// CPU conv2d: oneDNN convolution forward, backward data and backward weights.
// Activations stay channels-last (nhwc, our tensor layout) so no activation is ever reordered;
// weights are handed to oneDNN in whatever blocked layout its jit kernel prefers
// (format_tag::any), reordered from our OIHW each call (and diff weights back to OIHW). Weights
// are small next to activations, and change every step anyway. Primitives, descriptors and the
// blocked weight buffers are cached per thread, keyed by shapes and parameters.
#include <optional>

#include "ops/cpu/dnnl_util.hpp"
#include "scaletrain/ops/conv2d.hpp"

namespace scaletrain::ops::cpu {
namespace {

using ::scaletrain::cpu::cached_primitive;
using ::scaletrain::cpu::dnnl_desc;
using ::scaletrain::cpu::dnnl_dims;
using ::scaletrain::cpu::dnnl_tag;
using ::scaletrain::cpu::engine_key;
using ::scaletrain::cpu::PrimitiveKey;

// Sizes of one convolution, in oneDNN's logical order.
struct ConvDims {
  int64_t n, h, w, c, o, kh, kw, oh, ow, stride, pad;

  dnnl_dims src() const { return {n, c, h, w}; }
  dnnl_dims weights() const { return {o, c, kh, kw}; }
  dnnl_dims dst() const { return {n, o, oh, ow}; }
  dnnl_dims strides() const { return {stride, stride}; }
  // PyTorch pads both sides equally; oneDNN accepts a right padding that the last window
  // does not reach (it only checks that the output size follows from it).
  dnnl_dims padding() const { return {pad, pad}; }
  PrimitiveKey key(const dnnl::engine& e) const { return {engine_key(e), n, h, w, c, o, kh, kw, stride, pad}; }
};

// x: (N, H, W, C); w: (O, C, KH, KW).
ConvDims conv_dims(const Conv2dParams& p, const Shape& x, const Shape& w) {
  ConvDims d{};
  d.n = x[0], d.h = x[1], d.w = x[2], d.c = x[3];
  d.o = w[0], d.kh = w[2], d.kw = w[3];
  d.stride = p.stride, d.pad = p.padding;
  d.oh = (d.h + 2 * d.pad - d.kh) / d.stride + 1;
  d.ow = (d.w + 2 * d.pad - d.kw) / d.stride + 1;
  return d;
}

dnnl::memory::desc activation_desc(const dnnl_dims& dims) { return dnnl_desc(dims, dnnl_tag::nhwc); }

// A memory whose buffer is set per call (set_data_handle) to the caller's tensor.
dnnl::memory user_memory(const dnnl::memory::desc& md, const dnnl::engine& e) { return dnnl::memory(md, e, nullptr); }

dnnl::convolution_forward::primitive_desc forward_pd(const ConvDims& d, const dnnl::engine& e) {
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                       activation_desc(d.src()), dnnl_desc(d.weights(), dnnl_tag::any),
                                       activation_desc(d.dst()), d.strides(), d.padding(), d.padding());
  return dnnl::convolution_forward::primitive_desc(desc, e);
}

// Memory for weights in the primitive's layout `want`, plus the reorder between it and our OIHW
// buffer `user` (from user to blocked when `to_blocked`, else back). No reorder when they agree.
struct BlockedWeights {
  dnnl::memory user, blocked;
  std::optional<dnnl::reorder> reorder;
};

BlockedWeights blocked_weights(const ConvDims& d, const dnnl::memory::desc& want, const dnnl::engine& e,
                               bool to_blocked) {
  BlockedWeights b;
  b.user = user_memory(dnnl_desc(d.weights(), dnnl_tag::oihw), e);
  if (want == b.user.get_desc()) {
    b.blocked = b.user;
  } else {
    b.blocked = dnnl::memory(want, e);
    b.reorder = to_blocked ? dnnl::reorder(b.user, b.blocked) : dnnl::reorder(b.blocked, b.user);
  }
  return b;
}

struct ConvForward {
  dnnl::convolution_forward prim;
  dnnl::memory src, dst;
  BlockedWeights weights;
};

struct ConvBackwardData {
  dnnl::convolution_backward_data prim;
  dnnl::memory diff_dst, diff_src;
  BlockedWeights weights;
};

struct ConvBackwardWeights {
  dnnl::convolution_backward_weights prim;
  dnnl::memory src, diff_dst;
  BlockedWeights diff_weights;
};

}  // namespace

void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, Tensor& y) {
  const ConvDims d = conv_dims(p, x.shape(), w.shape());
  if (d.n == 0) return;
  dnnl::engine& engine = dnnl_engine(ctx);
  dnnl::stream& stream = dnnl_stream(ctx);
  ConvForward& e = cached_primitive<ConvForward>(d.key(engine), [&] {
    auto pd = forward_pd(d, engine);
    return ConvForward{dnnl::convolution_forward(pd), user_memory(pd.src_desc(), engine),
                       user_memory(pd.dst_desc(), engine), blocked_weights(d, pd.weights_desc(), engine, true)};
  });
  e.src.set_data_handle(x.raw());
  e.dst.set_data_handle(y.raw());
  e.weights.user.set_data_handle(w.raw());
  if (e.weights.reorder) e.weights.reorder->execute(stream, e.weights.user, e.weights.blocked);
  e.prim.execute(stream, {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_WEIGHTS, e.weights.blocked}, {DNNL_ARG_DST, e.dst}});
}

void conv2d_backward_data(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  const ConvDims d = conv_dims(p, dx.shape(), w.shape());
  if (d.n == 0) return;
  dnnl::engine& engine = dnnl_engine(ctx);
  dnnl::stream& stream = dnnl_stream(ctx);
  ConvBackwardData& e = cached_primitive<ConvBackwardData>(d.key(engine), [&] {
    dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, activation_desc(d.src()),
                                               dnnl_desc(d.weights(), dnnl_tag::any), activation_desc(d.dst()),
                                               d.strides(), d.padding(), d.padding());
    dnnl::convolution_backward_data::primitive_desc pd(desc, engine, forward_pd(d, engine));
    return ConvBackwardData{dnnl::convolution_backward_data(pd), user_memory(pd.diff_dst_desc(), engine),
                            user_memory(pd.diff_src_desc(), engine),
                            blocked_weights(d, pd.weights_desc(), engine, true)};
  });
  e.diff_dst.set_data_handle(dy.raw());
  e.diff_src.set_data_handle(dx.raw());
  e.weights.user.set_data_handle(w.raw());
  if (e.weights.reorder) e.weights.reorder->execute(stream, e.weights.user, e.weights.blocked);
  e.prim.execute(
      stream,
      {{DNNL_ARG_DIFF_DST, e.diff_dst}, {DNNL_ARG_WEIGHTS, e.weights.blocked}, {DNNL_ARG_DIFF_SRC, e.diff_src}});
}

void conv2d_backward_filter(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw) {
  const ConvDims d = conv_dims(p, x.shape(), dw.shape());
  if (d.n == 0) {
    dw.zero();
    return;
  }
  dnnl::engine& engine = dnnl_engine(ctx);
  dnnl::stream& stream = dnnl_stream(ctx);
  ConvBackwardWeights& e = cached_primitive<ConvBackwardWeights>(d.key(engine), [&] {
    dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, activation_desc(d.src()),
                                                  dnnl_desc(d.weights(), dnnl_tag::any), activation_desc(d.dst()),
                                                  d.strides(), d.padding(), d.padding());
    dnnl::convolution_backward_weights::primitive_desc pd(desc, engine, forward_pd(d, engine));
    return ConvBackwardWeights{dnnl::convolution_backward_weights(pd), user_memory(pd.src_desc(), engine),
                               user_memory(pd.diff_dst_desc(), engine),
                               blocked_weights(d, pd.diff_weights_desc(), engine, false)};
  });
  e.src.set_data_handle(x.raw());
  e.diff_dst.set_data_handle(dy.raw());
  e.diff_weights.user.set_data_handle(dw.raw());
  e.prim.execute(
      stream,
      {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_DIFF_DST, e.diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, e.diff_weights.blocked}});
  if (e.diff_weights.reorder) e.diff_weights.reorder->execute(stream, e.diff_weights.blocked, e.diff_weights.user);
}

}  // namespace scaletrain::ops::cpu
