// CPU conv2d: oneDNN convolution forward, backward data and backward weights.
// Activations stay channels-last (nhwc, our tensor layout) so no activation is ever reordered;
// weights are handed to oneDNN in whatever blocked layout its jit kernel prefers
// (format_tag::any), reordered from our OIHW each call (and diff weights back to OIHW). Weights
// are small next to activations, and change every step anyway. Primitives, descriptors and the
// blocked weight buffers are cached per thread, keyed by shapes and parameters.
// Groups: oneDNN takes grouped weights as 5-D (G, O/G, C/G, KH, KW), whose plain layout goihw is
// the same bytes as our (O, C/G, KH, KW) OIHW. The bias is fused: forward adds it, backward
// weights writes its gradient (diff_bias) in the same pass over dy.
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
  int64_t n, h, w, c, o, kh, kw, oh, ow;
  int64_t stride_h, stride_w, pad_top, pad_bottom, pad_left, pad_right, groups;
  bool bias;  // the primitive adds a bias (forward) or computes its gradient (backward weights)

  dnnl_dims src() const { return {n, c, h, w}; }
  // Groups = 1 keeps the plain 4-D weights (the primitives ResNet has always run).
  dnnl_dims weights() const {
    return groups == 1 ? dnnl_dims{o, c, kh, kw} : dnnl_dims{groups, o / groups, c / groups, kh, kw};
  }
  dnnl_tag weights_tag() const { return groups == 1 ? dnnl_tag::oihw : dnnl_tag::goihw; }
  dnnl_dims dst() const { return {n, o, oh, ow}; }
  dnnl_dims strides() const { return {stride_h, stride_w}; }
  // oneDNN pads each side on its own; it accepts a bottom or right padding that the last window
  // does not reach (it only checks that the output size follows from it).
  dnnl_dims padding_l() const { return {pad_top, pad_left}; }
  dnnl_dims padding_r() const { return {pad_bottom, pad_right}; }
  PrimitiveKey key(const dnnl::engine& e) const {
    return {engine_key(e), n,        h,       w,          c,        o,         kh,     kw,
            stride_h,      stride_w, pad_top, pad_bottom, pad_left, pad_right, groups, bias};
  }
};

// x: (N, H, W, C); w: (O, C / groups, KH, KW).
ConvDims conv_dims(const Conv2dParams& p, const Shape& x, const Shape& w, bool bias) {
  ConvDims d{};
  d.n = x[0], d.h = x[1], d.w = x[2], d.c = x[3];
  d.o = w[0], d.kh = w[2], d.kw = w[3];
  d.stride_h = p.stride_h, d.stride_w = p.stride_w;
  d.pad_top = p.pad_top, d.pad_bottom = p.pad_bottom, d.pad_left = p.pad_left, d.pad_right = p.pad_right;
  d.groups = p.groups;
  d.bias = bias;
  d.oh = (d.h + d.pad_top + d.pad_bottom - d.kh) / d.stride_h + 1;
  d.ow = (d.w + d.pad_left + d.pad_right - d.kw) / d.stride_w + 1;
  return d;
}

dnnl::memory::desc activation_desc(const dnnl_dims& dims) { return dnnl_desc(dims, dnnl_tag::nhwc); }

// A memory whose buffer is set per call (set_data_handle) to the caller's tensor.
dnnl::memory user_memory(const dnnl::memory::desc& md, const dnnl::engine& e) { return dnnl::memory(md, e, nullptr); }

dnnl::memory::desc bias_desc(const ConvDims& d) { return dnnl_desc({d.o}, dnnl_tag::a); }

// The forward primitive, also the hint for the backward ones (with the bias where they have one).
dnnl::convolution_forward::primitive_desc forward_pd(const ConvDims& d, const dnnl::engine& e) {
  const auto prop = dnnl::prop_kind::forward_training;
  const auto alg = dnnl::algorithm::convolution_direct;
  const auto weights = dnnl_desc(d.weights(), dnnl_tag::any);
  if (d.bias) {
    dnnl::convolution_forward::desc desc(prop, alg, activation_desc(d.src()), weights, bias_desc(d),
                                         activation_desc(d.dst()), d.strides(), d.padding_l(), d.padding_r());
    return dnnl::convolution_forward::primitive_desc(desc, e);
  }
  dnnl::convolution_forward::desc desc(prop, alg, activation_desc(d.src()), weights, activation_desc(d.dst()),
                                       d.strides(), d.padding_l(), d.padding_r());
  return dnnl::convolution_forward::primitive_desc(desc, e);
}

dnnl::convolution_backward_weights::desc backward_weights_desc(const ConvDims& d) {
  const auto alg = dnnl::algorithm::convolution_direct;
  const auto diff_weights = dnnl_desc(d.weights(), dnnl_tag::any);
  if (d.bias)
    return dnnl::convolution_backward_weights::desc(alg, activation_desc(d.src()), diff_weights, bias_desc(d),
                                                    activation_desc(d.dst()), d.strides(), d.padding_l(),
                                                    d.padding_r());
  return dnnl::convolution_backward_weights::desc(alg, activation_desc(d.src()), diff_weights, activation_desc(d.dst()),
                                                  d.strides(), d.padding_l(), d.padding_r());
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
  b.user = user_memory(dnnl_desc(d.weights(), d.weights_tag()), e);
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
  dnnl::memory src, dst, bias;  // bias: empty without one
  BlockedWeights weights;
};

struct ConvBackwardData {
  dnnl::convolution_backward_data prim;
  dnnl::memory diff_dst, diff_src;
  BlockedWeights weights;
};

struct ConvBackwardWeights {
  dnnl::convolution_backward_weights prim;
  dnnl::memory src, diff_dst, diff_bias;  // diff_bias: empty without a bias
  BlockedWeights diff_weights;
};

}  // namespace

void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const ConvDims d = conv_dims(p, x.shape(), w.shape(), b.defined());
  if (d.n == 0) return;
  dnnl::engine& engine = dnnl_engine(ctx);
  dnnl::stream& stream = dnnl_stream(ctx);
  ConvForward& e = cached_primitive<ConvForward>(d.key(engine), [&] {
    auto pd = forward_pd(d, engine);
    return ConvForward{dnnl::convolution_forward(pd), user_memory(pd.src_desc(), engine),
                       user_memory(pd.dst_desc(), engine),
                       d.bias ? user_memory(pd.bias_desc(), engine) : dnnl::memory(),
                       blocked_weights(d, pd.weights_desc(), engine, true)};
  });
  e.src.set_data_handle(x.raw());
  e.dst.set_data_handle(y.raw());
  e.weights.user.set_data_handle(w.raw());
  if (e.weights.reorder) e.weights.reorder->execute(stream, e.weights.user, e.weights.blocked);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, e.src}, {DNNL_ARG_WEIGHTS, e.weights.blocked}, {DNNL_ARG_DST, e.dst}};
  if (d.bias) {
    e.bias.set_data_handle(b.raw());
    args.emplace(DNNL_ARG_BIAS, e.bias);
  }
  e.prim.execute(stream, args);
}

void relu_forward(Context& ctx, const Tensor& x, Tensor& y);  // activation_cpu.cpp
void add_inplace(Context& ctx, Tensor& y, const Tensor& x);   // activation_cpu.cpp

// The two ops' arithmetic: the convolution with its bias, then the ReLU's kernel over y in place,
// so the same bits as the unfused layers.
void conv2d_bias_relu_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                              Tensor& y) {
  cpu::conv2d_forward(ctx, p, x, w, b, y);
  cpu::relu_forward(ctx, y, y);
}

void conv2d_backward_data(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  const ConvDims d = conv_dims(p, dx.shape(), w.shape(), false);  // the bias plays no part in dx
  if (d.n == 0) return;
  dnnl::engine& engine = dnnl_engine(ctx);
  dnnl::stream& stream = dnnl_stream(ctx);
  ConvBackwardData& e = cached_primitive<ConvBackwardData>(d.key(engine), [&] {
    dnnl::convolution_backward_data::desc desc(dnnl::algorithm::convolution_direct, activation_desc(d.src()),
                                               dnnl_desc(d.weights(), dnnl_tag::any), activation_desc(d.dst()),
                                               d.strides(), d.padding_l(), d.padding_r());
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

// The gradient into a scratch fp32 tensor, then added into dx in float: under a mixed precision the
// dispatch hands this kernel dx widened and rounds the sum once after it.
void conv2d_backward_data_add(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  Tensor gradient = Tensor::empty(dx.shape(), DType::f32, Device::cpu);
  cpu::conv2d_backward_data(ctx, p, dy, w, gradient);
  cpu::add_inplace(ctx, dx, gradient);
}

void conv2d_backward_filter(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                            Tensor& db) {
  const ConvDims d = conv_dims(p, x.shape(), dw.shape(), db.defined());
  if (d.n == 0) {  // a sum over no samples
    dw.zero();
    if (d.bias) db.zero();
    return;
  }
  dnnl::engine& engine = dnnl_engine(ctx);
  dnnl::stream& stream = dnnl_stream(ctx);
  ConvBackwardWeights& e = cached_primitive<ConvBackwardWeights>(d.key(engine), [&] {
    dnnl::convolution_backward_weights::primitive_desc pd(backward_weights_desc(d), engine, forward_pd(d, engine));
    return ConvBackwardWeights{dnnl::convolution_backward_weights(pd), user_memory(pd.src_desc(), engine),
                               user_memory(pd.diff_dst_desc(), engine),
                               d.bias ? user_memory(pd.diff_bias_desc(), engine) : dnnl::memory(),
                               blocked_weights(d, pd.diff_weights_desc(), engine, false)};
  });
  e.src.set_data_handle(x.raw());
  e.diff_dst.set_data_handle(dy.raw());
  e.diff_weights.user.set_data_handle(dw.raw());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, e.src}, {DNNL_ARG_DIFF_DST, e.diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, e.diff_weights.blocked}};
  if (d.bias) {
    e.diff_bias.set_data_handle(db.raw());
    args.emplace(DNNL_ARG_DIFF_BIAS, e.diff_bias);
  }
  e.prim.execute(stream, args);
  if (e.diff_weights.reorder) e.diff_weights.reorder->execute(stream, e.diff_weights.blocked, e.diff_weights.user);
}

}  // namespace scaletrain::ops::cpu
