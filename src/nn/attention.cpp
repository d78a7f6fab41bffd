// The Transformer's blocks (include/scaletrain/nn/attention.hpp): layer norm, multi-head
// attention on the registry's ops (linear projections, the heads' transpose, batched products,
// masked softmax, dropout), and the feed-forward block.
#include "scaletrain/nn/attention.hpp"

#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/batched_matmul.hpp"
#include "scaletrain/ops/linear.hpp"
#include "scaletrain/ops/softmax.hpp"
#include "scaletrain/ops/swap_axes.hpp"

namespace scaletrain::nn {

// ---- LayerNorm ----

LayerNorm::LayerNorm(ParameterSet& params, const std::string& name, int features, float eps) : params_(&params) {
  ln_.eps = eps;
  weight_ = params.add_parameter(join_name(name, "weight"), {features});
  bias_ = params.add_parameter(join_name(name, "bias"), {features});
}

Tensor LayerNorm::forward(Context& ctx, const Tensor& x, bool training) {
  const int64_t rows = x.numel() / x.dim(-1);
  Tensor y = reuse_activation(y_buffer_, x.shape(), ctx);
  mean_ = reuse_buffer(mean_buffer_, {rows}, ctx.device());
  rstd_ = reuse_buffer(rstd_buffer_, {rows}, ctx.device());
  ops::layer_norm_forward(ctx, ln_, x, params_->value(weight_), params_->value(bias_), y, mean_, rstd_);
  x_ = x;
  return y;
}

Tensor LayerNorm::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(x_.defined(), "LayerNorm: backward before forward");
  Tensor dx = reuse_activation(dx_buffer_, x_.shape(), ctx);
  ops::layer_norm_backward(ctx, x_, dy, params_->value(weight_), mean_, rstd_, dx, params_->grad(weight_),
                           params_->grad(bias_));
  params_->mark_grad_ready(bias_);
  params_->mark_grad_ready(weight_);
  return dx;
}

void LayerNorm::initialize(Rng&) {
  params_->value(weight_).fill(1.0f);
  params_->value(bias_).fill(0.0f);
}

void LayerNorm::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("layer_norm_forward");
  if (training) ops.insert("layer_norm_backward");
}

// ---- MultiheadAttention ----

namespace {

// (N * L, D) rows as (N, L, H, D / H) and their heads' (N * H, L, D / H) matrices, through `buffer`.
Tensor to_heads(Context& ctx, const Tensor& rows, int64_t n, int64_t l, int heads, Tensor& buffer) {
  const int64_t dh = rows.dim(1) / heads;
  Tensor h = reuse_activation(buffer, {n, heads, l, dh}, ctx);
  ops::swap_middle_axes(ctx, rows.reshape({n, l, heads, dh}), h);
  return h.reshape({n * heads, l, dh});
}

// The inverse: (N * H, L, D / H) to (N * L, D).
Tensor from_heads(Context& ctx, const Tensor& h, int64_t n, int64_t l, int heads, Tensor& buffer) {
  const int64_t dh = h.dim(2);
  Tensor rows = reuse_activation(buffer, {n, l, heads, dh}, ctx);
  ops::swap_middle_axes(ctx, h.reshape({n, heads, l, dh}), rows);
  return rows.reshape({n * l, heads * dh});
}

}  // namespace

MultiheadAttention::MultiheadAttention(ParameterSet& params, const std::string& name, int width, int heads,
                                       std::shared_ptr<RandomStream> stream, double dropout)
    : params_(&params), width_(width), heads_(heads), dropout_(std::move(stream), dropout) {
  ST_CHECK(heads >= 1 && width % heads == 0,
           name << ": the width " << width << " must be a multiple of the heads (" << heads << ")");
  in_weight_ = params.add_parameter(join_name(name, "in_proj_weight"), {3 * width, width});
  in_bias_ = params.add_parameter(join_name(name, "in_proj_bias"), {3 * width});
  out_weight_ = params.add_parameter(join_name(name, "out_proj.weight"), {width, width});
  out_bias_ = params.add_parameter(join_name(name, "out_proj.bias"), {width});
  // The reference's projections have no bias: PyTorch's names, zero, never trained.
  params.set_frozen(in_bias_, true);
  params.set_frozen(out_bias_, true);
}

Tensor MultiheadAttention::projection(int which) const {
  return Tensor::view_of(params_->value(in_weight_), int64_t(which) * width_ * width_, {width_, width_});
}

Tensor MultiheadAttention::forward(Context& ctx, const Tensor& query, const Tensor& memory, const AttentionShape& s,
                                   const Tensor& key_lengths, bool causal, bool training) {
  ST_CHECK(query.shape() == (Shape{s.n * s.lq, width_}) && memory.shape() == (Shape{s.n * s.lk, width_}),
           "MultiheadAttention: query " << shape_string(query.shape()) << " and memory " << shape_string(memory.shape())
                                        << " do not match N " << s.n << ", Lq " << s.lq << ", Lk " << s.lk << ", width "
                                        << width_);
  shape_ = s;
  self_ = query.raw() == memory.raw() && s.lq == s.lk;
  query_ = query, memory_ = memory, key_lengths_ = key_lengths;
  const auto project_heads = [&](const Tensor& x, int which, int64_t l, Tensor& rows_buffer, Tensor& heads_buffer) {
    Tensor rows = reuse_activation(rows_buffer, {s.n * l, width_}, ctx);
    project(ctx, x, which, rows);
    return to_heads(ctx, rows, s.n, l, heads_, heads_buffer);
  };
  qh_ = project_heads(query, 0, s.lq, dq_buffer_, qh_buffer_);
  kh_ = project_heads(memory, 1, s.lk, dk_buffer_, kh_buffer_);
  vh_ = project_heads(memory, 2, s.lk, dv_buffer_, vh_buffer_);
  const int64_t dh = width_ / heads_;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  Tensor scores = reuse_activation(dscores_buffer_, {s.n, heads_, s.lq, s.lk}, ctx);
  Tensor scores_3d = scores.reshape({s.n * heads_, s.lq, s.lk});
  ops::batched_matmul(ctx, {false, true, scale}, qh_, kh_, scores_3d);
  probs_ = reuse_activation(probs_buffer_, {s.n, heads_, s.lq, s.lk}, ctx);
  ops::masked_softmax_forward(ctx, ops::SoftmaxMask{causal}, scores, key_lengths, probs_);
  dropped_ = dropout_.forward(ctx, probs_, training).reshape({s.n * heads_, s.lq, s.lk});
  Tensor context_h = reuse_activation(context_h_buffer_, {s.n * heads_, s.lq, dh}, ctx);
  ops::batched_matmul(ctx, {false, false, 1.0f}, dropped_, vh_, context_h);
  context_ = from_heads(ctx, context_h, s.n, s.lq, heads_, context_buffer_);
  Tensor out = reuse_activation(out_buffer_, {s.n * s.lq, width_}, ctx);
  ops::linear_forward(ctx, context_, params_->value(out_weight_), params_->value(out_bias_), out);
  return out;
}

void MultiheadAttention::project(Context& ctx, const Tensor& x, int which, Tensor& rows) const {
  ST_CHECK(which >= 0 && which < 3 && x.ndim() == 2 && x.dim(1) == width_ && rows.shape() == x.shape(),
           "MultiheadAttention::project: projection " << which << " of " << shape_string(x.shape()) << " into "
                                                      << shape_string(rows.shape()) << ", width " << width_);
  const Tensor bias = Tensor::view_of(params_->value(in_bias_), int64_t(which) * width_, {width_});
  ops::linear_forward(ctx, x, projection(which), bias, rows);
}

Tensor MultiheadAttention::attend(Context& ctx, const Tensor& query, const Tensor& kh, const Tensor& vh,
                                  const AttentionShape& s, const Tensor& key_lengths, AttentionScratch& b) const {
  const int64_t dh = width_ / heads_;
  ST_CHECK(query.shape() == (Shape{s.n * s.lq, width_}) && kh.shape() == (Shape{s.n * heads_, s.lk, dh}) &&
               vh.shape() == kh.shape(),
           "MultiheadAttention::attend: query " << shape_string(query.shape()) << ", keys " << shape_string(kh.shape())
                                                << " and values " << shape_string(vh.shape()) << " do not match N "
                                                << s.n << ", Lq " << s.lq << ", Lk " << s.lk << ", width " << width_);
  Tensor q = reuse_activation(b.q, {s.n * s.lq, width_}, ctx);
  project(ctx, query, 0, q);
  const Tensor qh = to_heads(ctx, q, s.n, s.lq, heads_, b.qh);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  Tensor scores = reuse_activation(b.scores, {s.n, heads_, s.lq, s.lk}, ctx);
  Tensor scores_3d = scores.reshape({s.n * heads_, s.lq, s.lk});
  ops::batched_matmul(ctx, {false, true, scale}, qh, kh, scores_3d);
  Tensor probs = reuse_activation(b.probs, {s.n, heads_, s.lq, s.lk}, ctx);
  ops::masked_softmax_forward(ctx, ops::SoftmaxMask{false}, scores, key_lengths, probs);
  Tensor context_h = reuse_activation(b.context_h, {s.n * heads_, s.lq, dh}, ctx);
  ops::batched_matmul(ctx, {false, false, 1.0f}, probs.reshape({s.n * heads_, s.lq, s.lk}), vh, context_h);
  const Tensor context = from_heads(ctx, context_h, s.n, s.lq, heads_, b.context);
  Tensor out = reuse_activation(b.out, {s.n * s.lq, width_}, ctx);
  ops::linear_forward(ctx, context, params_->value(out_weight_), params_->value(out_bias_), out);
  return out;
}

Tensor MultiheadAttention::backward(Context& ctx, const Tensor& dy) {
  ST_CHECK(query_.defined(), "MultiheadAttention: backward before forward");
  const AttentionShape& s = shape_;
  const Device dev = ctx.device();
  const int64_t dh = width_ / heads_;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));
  // The frozen biases' gradients go to scratch: theirs stay zero.
  const auto bias_sink = [&](int64_t n) { return reuse_buffer(dbias_scratch_, {n}, dev); };

  Tensor dcontext = reuse_activation(dcontext_buffer_, {s.n * s.lq, width_}, ctx);
  Tensor dout_bias = bias_sink(width_);
  ops::linear_backward(ctx, context_, params_->value(out_weight_), dy, dcontext, params_->grad(out_weight_), dout_bias);
  params_->mark_grad_ready(out_bias_);
  params_->mark_grad_ready(out_weight_);
  const Tensor dcontext_h = to_heads(ctx, dcontext, s.n, s.lq, heads_, dcontext_h_buffer_);
  // context_h = dropped . vh: d(dropped) = dcontext_h . vh^T, dvh = dropped^T . dcontext_h.
  Tensor ddropped = reuse_activation(ddropped_buffer_, {s.n * heads_, s.lq, s.lk}, ctx);
  ops::batched_matmul(ctx, {false, true, 1.0f}, dcontext_h, vh_, ddropped);
  Tensor dvh = reuse_activation(dvh_buffer_, {s.n * heads_, s.lk, dh}, ctx);
  ops::batched_matmul(ctx, {true, false, 1.0f}, dropped_, dcontext_h, dvh);
  const Tensor dprobs = dropout_.backward(ctx, ddropped.reshape({s.n, heads_, s.lq, s.lk}));
  Tensor dscores = reuse_activation(dscores_buffer_, {s.n, heads_, s.lq, s.lk}, ctx);
  ops::masked_softmax_backward(ctx, probs_, dprobs, dscores);
  // scores = scale qh . kh^T: dqh = scale dscores . kh, dkh = scale dscores^T . qh.
  const Tensor ds = dscores.reshape({s.n * heads_, s.lq, s.lk});
  Tensor dqh = reuse_activation(dqh_buffer_, {s.n * heads_, s.lq, dh}, ctx);
  ops::batched_matmul(ctx, {false, false, scale}, ds, kh_, dqh);
  Tensor dkh = reuse_activation(dkh_buffer_, {s.n * heads_, s.lk, dh}, ctx);
  ops::batched_matmul(ctx, {true, false, scale}, ds, qh_, dkh);

  // The projections, in reverse: value, key, query. Each writes its third of the weight's gradient.
  Tensor& dweight = params_->grad(in_weight_);
  const auto dprojection = [&](int which) {
    return Tensor::view_of(dweight, int64_t(which) * width_ * width_, {width_, width_});
  };
  dmemory_ = reuse_activation(dmemory_buffer_, {s.n * s.lk, width_}, ctx);
  Tensor dpart = reuse_activation(dpart_buffer_, {s.n * s.lk, width_}, ctx);
  Tensor dbias = bias_sink(width_);
  const Tensor dv = from_heads(ctx, dvh, s.n, s.lk, heads_, dv_buffer_);
  Tensor dw = dprojection(2);
  ops::linear_backward(ctx, memory_, projection(2), dv, dmemory_, dw, dbias);
  const Tensor dk = from_heads(ctx, dkh, s.n, s.lk, heads_, dk_buffer_);
  dw = dprojection(1);
  ops::linear_backward(ctx, memory_, projection(1), dk, dpart, dw, dbias);
  ops::add_inplace(ctx, dmemory_, dpart);
  const Tensor dq = from_heads(ctx, dqh, s.n, s.lq, heads_, dq_buffer_);
  Tensor dquery = reuse_activation(dquery_buffer_, {s.n * s.lq, width_}, ctx);
  dw = dprojection(0);
  ops::linear_backward(ctx, query_, projection(0), dq, dquery, dw, dbias);
  params_->mark_grad_ready(in_bias_);
  params_->mark_grad_ready(in_weight_);
  if (self_) ops::add_inplace(ctx, dquery, dmemory_);
  return dquery;
}

void MultiheadAttention::initialize(Rng& rng) {
  for (int which = 0; which < 3; ++which) {
    Tensor w = projection(which), b;
    initialize_parameters(rng, Init::glorot_uniform(), width_, width_, w, b);
  }
  Tensor b;
  initialize_parameters(rng, Init::glorot_uniform(), width_, width_, params_->value(out_weight_), b);
  params_->value(in_bias_).fill(0.0f);
  params_->value(out_bias_).fill(0.0f);
}

void MultiheadAttention::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert({"linear_forward", "swap_middle_axes", "batched_matmul", "masked_softmax_forward"});
  if (training) ops.insert({"linear_backward", "masked_softmax_backward", "add_inplace"});
  dropout_.list_ops(ops, training);
}

// ---- FeedForward ----

FeedForward::FeedForward(ParameterSet& params, const std::string& prefix, int width, int inner,
                         std::shared_ptr<RandomStream> stream, double dropout) {
  net_.emplace<Linear>(params, prefix + "linear1", width, inner, Init::glorot_uniform());
  net_.emplace<ReLU>(false);
  net_.emplace<Dropout>(std::move(stream), dropout);
  net_.emplace<Linear>(params, prefix + "linear2", inner, width, Init::glorot_uniform());
}

Tensor FeedForward::forward(Context& ctx, const Tensor& x, bool training) { return net_.forward(ctx, x, training); }
Tensor FeedForward::backward(Context& ctx, const Tensor& dy, bool need_dx) { return net_.backward(ctx, dy, need_dx); }
void FeedForward::initialize(Rng& rng) { net_.initialize(rng); }
void FeedForward::list_ops(ops::OpNames& ops, bool training) const { net_.list_ops(ops, training); }

}  // namespace scaletrain::nn
