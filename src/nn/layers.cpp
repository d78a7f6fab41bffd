// Layers: thin stateful wrappers over the ops. Output and gradient buffers are owned by the layer
// and reused between steps (reuse_buffer), because allocating ~100 MB of activations per step
// would cost more than some of the kernels. Parameter gradients are written straight into the
// ParameterSet's flat gradient buffer and marked ready at once, so that a bucketed all-reduce
// can start while the rest of backward runs.
#include "scaletrain/nn/layers.hpp"

#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/linear.hpp"

namespace scaletrain::nn {

Tensor reuse_buffer(Tensor& buffer, const Shape& shape, Device device) {
  const int64_t n = shape_numel(shape);
  if (!buffer.defined() || buffer.numel() < n || buffer.device() != device) {
    buffer = Tensor::empty(shape, DType::f32, device);
    return buffer;
  }
  if (buffer.shape() == shape) return buffer;
  return Tensor::view_of(buffer, 0, shape);
}

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

namespace {
void check_channels_last(const Tensor& x, int64_t channels, const std::string& layer) {
  ST_CHECK(x.ndim() == 4 && x.dim(3) == channels,
           layer << " expects input (N, H, W, " << channels << "), got " << shape_string(x.shape()));
}
}  // namespace

// ---- Conv2d ----

Conv2d::Conv2d(ParameterSet& params, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
               int padding)
    : params_(&params), name_(name), in_channels_(in_channels), out_channels_(out_channels), kernel_(kernel) {
  conv_.stride = stride;
  conv_.padding = padding;
  weight_ = params.add_parameter(join_name(name, "weight"), {out_channels, in_channels, kernel, kernel});
}

void Conv2d::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("conv2d_forward");
  if (training) ops.insert({"conv2d_backward_data", "conv2d_backward_filter"});
}

Tensor Conv2d::forward(Context& ctx, const Tensor& x, bool training) {
  check_channels_last(x, in_channels_, name_);
  const Tensor& w = params_->value(weight_);
  const Shape out = ops::conv2d_output_shape(conv_, x.shape(), w.shape());
  ST_CHECK(out[1] > 0 && out[2] > 0, "input " << x.dim(1) << "x" << x.dim(2) << " is too small for " << name_
                                              << " (kernel " << kernel_ << ", stride " << conv_.stride << ", padding "
                                              << conv_.padding << ")");
  Tensor y = reuse_buffer(y_buffer_, out, ctx.device());
  ops::conv2d_forward(ctx, conv_, x, w, y);
  x_ = x;
  return y;
}

Tensor Conv2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(x_.defined(), name_ << ": backward before forward");
  ops::conv2d_backward_filter(ctx, conv_, x_, dy, params_->grad(weight_));
  params_->mark_grad_ready(weight_);
  if (!need_dx) return Tensor();
  Tensor dx = reuse_buffer(dx_buffer_, x_.shape(), ctx.device());
  ops::conv2d_backward_data(ctx, conv_, dy, params_->value(weight_), dx);
  return dx;
}

void Conv2d::initialize(Rng& rng) {
  const double fan_out = static_cast<double>(out_channels_) * kernel_ * kernel_;
  const double std = std::sqrt(2.0 / fan_out);
  Tensor& w = params_->value(weight_);
  float* p = w.data<float>();
  for (int64_t i = 0, n = w.numel(); i < n; ++i) p[i] = static_cast<float>(std * rng.normal());
}

// ---- BatchNorm2d ----

BatchNorm2d::BatchNorm2d(ParameterSet& params, const std::string& name, int channels, ops::BatchNormParams bn)
    : params_(&params), name_(name), channels_(channels), bn_(bn) {
  weight_ = params.add_parameter(join_name(name, "weight"), {channels});
  bias_ = params.add_parameter(join_name(name, "bias"), {channels});
  running_mean_ = params.add_buffer(join_name(name, "running_mean"), {channels});
  running_var_ = params.add_buffer(join_name(name, "running_var"), {channels});
}

void BatchNorm2d::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("batch_norm_forward_inference");
  if (training) ops.insert({"batch_norm_forward_training", "batch_norm_backward"});
}

Tensor BatchNorm2d::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(x.ndim() >= 2 && x.dim(-1) == channels_,
           name_ << " expects input (..., " << channels_ << "), got " << shape_string(x.shape()));
  Tensor y = reuse_buffer(y_buffer_, x.shape(), ctx.device());
  if (training) {
    if (!saved_mean_.defined()) {
      saved_mean_ = Tensor::empty({channels_}, DType::f32, ctx.device());
      saved_inv_std_ = Tensor::empty({channels_}, DType::f32, ctx.device());
    }
    ops::batch_norm_forward_training(ctx, bn_, x, params_->value(weight_), params_->value(bias_),
                                     params_->buffer(running_mean_), params_->buffer(running_var_), y, saved_mean_,
                                     saved_inv_std_);
  } else {
    ops::batch_norm_forward_inference(ctx, bn_, x, params_->value(weight_), params_->value(bias_),
                                      params_->buffer(running_mean_), params_->buffer(running_var_), y);
  }
  have_batch_stats_ = training;
  x_ = x;
  return y;
}

Tensor BatchNorm2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(have_batch_stats_, name_ << ": backward needs a forward in training mode before it");
  // The op computes dx alongside dgamma/dbeta, so dx is produced even when not needed.
  Tensor dx = reuse_buffer(dx_buffer_, x_.shape(), ctx.device());
  ops::batch_norm_backward(ctx, bn_, x_, dy, params_->value(weight_), saved_mean_, saved_inv_std_, dx,
                           params_->grad(weight_), params_->grad(bias_));
  params_->mark_grad_ready(bias_);
  params_->mark_grad_ready(weight_);
  return need_dx ? dx : Tensor();
}

void BatchNorm2d::initialize(Rng&) {
  params_->value(weight_).fill(1.0f);
  params_->value(bias_).fill(0.0f);
  params_->buffer(running_mean_).fill(0.0f);
  params_->buffer(running_var_).fill(1.0f);
}

// ---- ReLU ----

void ReLU::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("relu_forward");
  if (training) ops.insert("relu_backward");
}

Tensor ReLU::forward(Context& ctx, const Tensor& x, bool training) {
  Tensor y = inplace_ ? x : reuse_buffer(y_buffer_, x.shape(), ctx.device());
  ops::relu_forward(ctx, x, y);
  y_ = y;
  return y;
}

Tensor ReLU::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(y_.defined(), "ReLU: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = inplace_ ? dy : reuse_buffer(dx_buffer_, dy.shape(), ctx.device());
  ops::relu_backward(ctx, y_, dy, dx);
  return dx;
}

// ---- MaxPool2d ----

void MaxPool2d::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("max_pool2d_forward");
  if (training) ops.insert("max_pool2d_backward");
}

Tensor MaxPool2d::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(x.ndim() == 4, "MaxPool2d expects input (N, H, W, C), got " << shape_string(x.shape()));
  const Shape out = ops::max_pool2d_output_shape(pool_, x.shape());
  ST_CHECK(out[1] > 0 && out[2] > 0, "input " << x.dim(1) << "x" << x.dim(2) << " is too small for max pooling");
  Tensor y = reuse_buffer(y_buffer_, out, ctx.device());
  ops::max_pool2d_forward(ctx, pool_, x, y);
  x_ = x;
  y_ = y;
  return y;
}

Tensor MaxPool2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(x_.defined(), "MaxPool2d: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = reuse_buffer(dx_buffer_, x_.shape(), ctx.device());
  ops::max_pool2d_backward(ctx, pool_, x_, y_, dy, dx);
  return dx;
}

// ---- GlobalAvgPool ----

void GlobalAvgPool::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("global_avg_pool_forward");
  if (training) ops.insert("global_avg_pool_backward");
}

Tensor GlobalAvgPool::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(x.ndim() == 4, "GlobalAvgPool expects input (N, H, W, C), got " << shape_string(x.shape()));
  Tensor y = reuse_buffer(y_buffer_, {x.dim(0), x.dim(3)}, ctx.device());
  ops::global_avg_pool_forward(ctx, x, y);
  x_shape_ = x.shape();
  return y;
}

Tensor GlobalAvgPool::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(!x_shape_.empty(), "GlobalAvgPool: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = reuse_buffer(dx_buffer_, x_shape_, ctx.device());
  ops::global_avg_pool_backward(ctx, dy, dx);
  return dx;
}

// ---- Linear ----

Linear::Linear(ParameterSet& params, const std::string& name, int in_features, int out_features)
    : params_(&params), name_(name), in_features_(in_features), out_features_(out_features) {
  weight_ = params.add_parameter(join_name(name, "weight"), {out_features, in_features});
  bias_ = params.add_parameter(join_name(name, "bias"), {out_features});
}

void Linear::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("linear_forward");
  if (training) ops.insert("linear_backward");
}

Tensor Linear::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(x.ndim() == 2 && x.dim(1) == in_features_,
           name_ << " expects input (N, " << in_features_ << "), got " << shape_string(x.shape()));
  Tensor y = reuse_buffer(y_buffer_, {x.dim(0), out_features_}, ctx.device());
  ops::linear_forward(ctx, x, params_->value(weight_), params_->value(bias_), y);
  x_ = x;
  return y;
}

Tensor Linear::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(x_.defined(), name_ << ": backward before forward");
  Tensor dx = need_dx ? reuse_buffer(dx_buffer_, x_.shape(), ctx.device()) : Tensor();
  ops::linear_backward(ctx, x_, params_->value(weight_), dy, dx, params_->grad(weight_), params_->grad(bias_));
  params_->mark_grad_ready(bias_);
  params_->mark_grad_ready(weight_);
  return dx;
}

void Linear::initialize(Rng& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features_));
  for (int index : {weight_, bias_}) {
    Tensor& t = params_->value(index);
    float* p = t.data<float>();
    for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<float>(rng.uniform(-bound, bound));
  }
}

// ---- Sequential ----

Module& Sequential::add(ModulePtr module) {
  ST_CHECK(module != nullptr, "Sequential: null module");
  modules_.push_back(std::move(module));
  return *modules_.back();
}

Tensor Sequential::forward(Context& ctx, const Tensor& x, bool training) {
  Tensor h = x;
  for (auto& m : modules_) h = m->forward(ctx, h, training);
  return h;
}

Tensor Sequential::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  Tensor g = dy;
  for (std::size_t i = modules_.size(); i-- > 0;) g = modules_[i]->backward(ctx, g, i > 0 || need_dx);
  return g;
}

void Sequential::list_ops(ops::OpNames& ops, bool training) const {
  for (const ModulePtr& m : modules_) m->list_ops(ops, training);
}

void Sequential::initialize(Rng& rng) {
  for (auto& m : modules_) m->initialize(rng);
}

}  // namespace scaletrain::nn
