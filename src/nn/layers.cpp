// Layers: thin stateful wrappers over the ops. Output buffers are owned by the layer and reused
// between steps (reuse_buffer): they all live until backward anyway. Input gradients are fresh
// tensors (fresh_activation), freed as soon as the layer before has read them, which halves the
// activation memory of a step; the GPU's caching allocator makes their allocation a lookup.
// Parameter gradients are written straight into the ParameterSet's flat gradient buffer and marked
// ready at once, so that a bucketed all-reduce can start while the rest of backward runs.
#include "scaletrain/nn/layers.hpp"

#include <cmath>
#include <functional>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/linear.hpp"

namespace scaletrain::nn {

Tensor reuse_buffer(Tensor& buffer, const Shape& shape, Device device, DType dtype) {
  const int64_t n = shape_numel(shape);
  if (!buffer.defined() || buffer.numel() < n || buffer.device() != device || buffer.dtype() != dtype) {
    buffer = Tensor::empty(shape, dtype, device);
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

// ---- Module ----

void Module::backward_adding(Context& ctx, const Tensor& dy, Tensor& sum) {
  const Tensor dx = backward(ctx, dy, true);
  ops::add_inplace(ctx, sum, dx);
}

void Module::list_backward_adding_ops(ops::OpNames& ops) const { ops.insert("add_inplace"); }

// ---- initialisation ----

namespace {

void fill(Tensor& t, const std::function<double()>& draw) {
  float* p = t.data<float>();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = static_cast<float>(draw());
}

// PyTorch's trunc_normal_(std, a=-2, b=2): N(0, std^2) conditioned on [-2, 2], by rejection (the
// same distribution as PyTorch's inverse-CDF method; at the std of the models here a draw is
// rejected about never).
double truncated_normal(Rng& rng, double stddev) {
  for (;;) {
    const double v = stddev * rng.normal();
    if (v >= -2.0 && v <= 2.0) return v;
  }
}

}  // namespace

void initialize_parameters(Rng& rng, const Init& init, double fan_in, double fan_out, Tensor& weight, Tensor& bias) {
  const double torch_bound = 1.0 / std::sqrt(fan_in);
  auto torch_uniform = [&] { return rng.uniform(-torch_bound, torch_bound); };
  switch (init.kind) {
    case Init::Kind::kaiming_normal_fan_out: {
      const double std = std::sqrt(2.0 / fan_out);
      fill(weight, [&] { return std * rng.normal(); });
      if (bias.defined()) bias.fill(0.0f);
      return;
    }
    case Init::Kind::torch_default:
      // kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
      fill(weight, torch_uniform);
      if (bias.defined()) fill(bias, torch_uniform);
      return;
    case Init::Kind::trunc_normal:
      ST_CHECK(init.stddev > 0, "trunc_normal init: std must be > 0, got " << init.stddev);
      fill(weight, [&] { return truncated_normal(rng, init.stddev); });
      if (bias.defined()) fill(bias, torch_uniform);
      return;
    case Init::Kind::gaussian:
      ST_CHECK(init.stddev >= 0, "gaussian init: std must be >= 0, got " << init.stddev);
      fill(weight, [&] { return init.stddev * rng.normal(); });
      if (bias.defined()) bias.fill(static_cast<float>(init.bias_value));
      return;
    case Init::Kind::xavier_fan_in: {
      const double bound = std::sqrt(3.0 / fan_in);
      fill(weight, [&] { return rng.uniform(-bound, bound); });
      if (bias.defined()) bias.fill(static_cast<float>(init.bias_value));
      return;
    }
    case Init::Kind::glorot_uniform: {
      const double bound = std::sqrt(6.0 / (fan_in + fan_out));
      fill(weight, [&] { return rng.uniform(-bound, bound); });
      if (bias.defined()) bias.fill(0.0f);
      return;
    }
  }
  ST_THROW("initialize_parameters: unknown init kind " << static_cast<int>(init.kind));
}

// ---- Conv2d ----

Conv2d::Conv2d(ParameterSet& params, const std::string& name, int in_channels, int out_channels, const ConvSpec& spec)
    : params_(&params),
      name_(name),
      in_channels_(in_channels),
      out_channels_(out_channels),
      spec_(spec),
      conv_(spec.params()) {
  ST_CHECK(spec.kernel_h >= 1 && spec.kernel_w >= 1,
           name << ": kernel must be >= 1, got " << spec.kernel_h << "x" << spec.kernel_w);
  ST_CHECK(spec.groups >= 1 && in_channels % spec.groups == 0 && out_channels % spec.groups == 0,
           name << ": groups " << spec.groups << " must divide the input channels (" << in_channels
                << ") and the output channels (" << out_channels << ")");
  weight_ = params.add_parameter(join_name(name, "weight"),
                                 {out_channels, in_channels / spec.groups, spec.kernel_h, spec.kernel_w});
  if (spec.bias) bias_ = params.add_parameter(join_name(name, "bias"), {out_channels});
}

void Conv2d::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("conv2d_forward");
  if (training) ops.insert({"conv2d_backward_data", "conv2d_backward_filter"});
}

// The output buffer for x, after checking that x fits the layer.
Tensor Conv2d::output_for(Context& ctx, const Tensor& x) {
  check_channels_last(x, in_channels_, name_);
  const Shape out = ops::conv2d_output_shape(conv_, x.shape(), params_->value(weight_).shape());
  ST_CHECK(out[1] > 0 && out[2] > 0, "input " << x.dim(1) << "x" << x.dim(2) << " is too small for " << name_
                                              << " (kernel " << spec_.kernel_h << "x" << spec_.kernel_w << ", stride "
                                              << spec_.stride_h << "x" << spec_.stride_w << ", padding " << spec_.pad_h
                                              << "x" << spec_.pad_w << ")");
  return reuse_activation(y_buffer_, out, ctx);
}

Tensor Conv2d::forward(Context& ctx, const Tensor& x, bool training) {
  Tensor y = output_for(ctx, x);
  const Tensor no_bias;
  ops::conv2d_forward(ctx, conv_, x, params_->value(weight_), bias_ >= 0 ? params_->value(bias_) : no_bias, y);
  x_ = x;
  return y;
}

Tensor Conv2d::forward_bias_relu(Context& ctx, const Tensor& x) {
  ST_CHECK(bias_ >= 0, name_ << ": the fused bias and ReLU needs a convolution with a bias");
  Tensor y = output_for(ctx, x);
  ops::conv2d_bias_relu_forward(ctx, conv_, x, params_->value(weight_), params_->value(bias_), y);
  x_ = x;
  return y;
}

// The weight's and bias's gradients, marked ready.
void Conv2d::parameter_gradients(Context& ctx, const Tensor& dy) {
  ST_CHECK(x_.defined(), name_ << ": backward before forward");
  Tensor no_bias;
  ops::conv2d_backward_filter(ctx, conv_, x_, dy, params_->grad(weight_), bias_ >= 0 ? params_->grad(bias_) : no_bias);
  // In reverse registration order, as the gradients of the layers before complete later.
  if (bias_ >= 0) params_->mark_grad_ready(bias_);
  params_->mark_grad_ready(weight_);
}

Tensor Conv2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  parameter_gradients(ctx, dy);
  if (!need_dx) return Tensor();
  Tensor dx = fresh_activation(x_.shape(), ctx);
  ops::conv2d_backward_data(ctx, conv_, dy, params_->value(weight_), dx);
  return dx;
}

void Conv2d::backward_adding(Context& ctx, const Tensor& dy, Tensor& sum) {
  parameter_gradients(ctx, dy);
  ST_CHECK(sum.shape() == x_.shape(), name_ << ": the input gradient's sum has shape " << shape_string(sum.shape())
                                            << ", the input " << shape_string(x_.shape()));
  ops::conv2d_backward_data_add(ctx, conv_, dy, params_->value(weight_), sum);
}

void Conv2d::list_backward_adding_ops(ops::OpNames& ops) const { ops.insert("conv2d_backward_data_add"); }

void Conv2d::initialize(Rng& rng) {
  const double receptive = static_cast<double>(spec_.kernel_h) * spec_.kernel_w;
  const double fan_in = static_cast<double>(in_channels_ / spec_.groups) * receptive;
  const double fan_out = static_cast<double>(out_channels_) * receptive;
  Tensor no_bias;
  initialize_parameters(rng, spec_.init, fan_in, fan_out, params_->value(weight_),
                        bias_ >= 0 ? params_->value(bias_) : no_bias);
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

void BatchNorm2d::ensure_saved_statistics(Context& ctx) {
  if (saved_mean_.defined()) return;
  saved_mean_ = Tensor::empty({channels_}, DType::f32, ctx.device());
  saved_inv_std_ = Tensor::empty({channels_}, DType::f32, ctx.device());
}

// The output buffer for x, after checking that x fits the layer.
Tensor BatchNorm2d::output_for(Context& ctx, const Tensor& x) {
  ST_CHECK(x.ndim() >= 2 && x.dim(-1) == channels_,
           name_ << " expects input (..., " << channels_ << "), got " << shape_string(x.shape()));
  return reuse_activation(y_buffer_, x.shape(), ctx);
}

Tensor BatchNorm2d::forward(Context& ctx, const Tensor& x, bool training) {
  Tensor y = output_for(ctx, x);
  fused_ = Fused::none;
  if (training) {
    ensure_saved_statistics(ctx);
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
  ST_CHECK(fused_ == Fused::none, name_ << ": the last forward was fused with a ReLU: use its fused backward");
  // The op computes dx alongside dgamma/dbeta, so dx is produced even when not needed.
  Tensor dx = fresh_activation(x_.shape(), ctx);
  ops::batch_norm_backward(ctx, bn_, x_, dy, params_->value(weight_), saved_mean_, saved_inv_std_, dx,
                           params_->grad(weight_), params_->grad(bias_));
  params_->mark_grad_ready(bias_);
  params_->mark_grad_ready(weight_);
  return need_dx ? dx : Tensor();
}

Tensor BatchNorm2d::forward_add_relu(Context& ctx, const Tensor& x, const Tensor& z) {
  Tensor y = output_for(ctx, x);
  ensure_saved_statistics(ctx);
  ops::batch_norm_add_relu_forward_training(ctx, bn_, x, z, params_->value(weight_), params_->value(bias_),
                                            params_->buffer(running_mean_), params_->buffer(running_var_), y,
                                            saved_mean_, saved_inv_std_, reserve_);
  have_batch_stats_ = true;
  fused_ = Fused::add_relu;
  x_ = x;
  y_ = y;
  return y;
}

BatchNorm2d::AddReluGradients BatchNorm2d::backward_add_relu(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(fused_ == Fused::add_relu && have_batch_stats_,
           name_ << ": backward_add_relu needs forward_add_relu before it");
  AddReluGradients g;
  g.dx = fresh_activation(x_.shape(), ctx);
  g.dz = fresh_activation(x_.shape(), ctx);
  ops::batch_norm_add_relu_backward(ctx, bn_, x_, y_, dy, params_->value(weight_), params_->value(bias_), saved_mean_,
                                    saved_inv_std_, reserve_, g.dx, g.dz, params_->grad(weight_), params_->grad(bias_));
  params_->mark_grad_ready(bias_);
  params_->mark_grad_ready(weight_);
  if (!need_dx) g.dx = Tensor();
  return g;
}

Tensor BatchNorm2d::forward_relu(Context& ctx, const Tensor& x) {
  Tensor y = output_for(ctx, x);
  ensure_saved_statistics(ctx);
  ops::batch_norm_relu_forward_training(ctx, bn_, x, params_->value(weight_), params_->value(bias_),
                                        params_->buffer(running_mean_), params_->buffer(running_var_), y, saved_mean_,
                                        saved_inv_std_, reserve_);
  have_batch_stats_ = true;
  fused_ = Fused::relu;
  x_ = x;
  y_ = y;
  return y;
}

Tensor BatchNorm2d::backward_relu(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(fused_ == Fused::relu && have_batch_stats_, name_ << ": backward_relu needs forward_relu before it");
  // The op computes dx alongside dgamma/dbeta, so dx is produced even when not needed.
  Tensor dx = fresh_activation(x_.shape(), ctx);
  ops::batch_norm_relu_backward(ctx, bn_, x_, y_, dy, params_->value(weight_), params_->value(bias_), saved_mean_,
                                saved_inv_std_, reserve_, dx, params_->grad(weight_), params_->grad(bias_));
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
  Tensor y = inplace_ ? x : reuse_activation(y_buffer_, x.shape(), ctx);
  ops::relu_forward(ctx, x, y);
  y_ = y;
  return y;
}

Tensor ReLU::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(y_.defined(), "ReLU: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = inplace_ ? dy : fresh_activation(dy.shape(), ctx);
  ops::relu_backward(ctx, y_, dy, dx);
  return dx;
}

// ---- ConvReLU ----

ConvReLU::ConvReLU(ParameterSet& params, const std::string& name, int in_channels, int out_channels,
                   const ConvSpec& spec)
    : conv_(params, name, in_channels, out_channels, spec) {
  ST_CHECK(spec.bias, name << ": ConvReLU is a convolution with bias and its ReLU; this one has no bias");
}

void ConvReLU::list_ops(ops::OpNames& ops, bool training) const {
  conv_.list_ops(ops, training);
  relu_.list_ops(ops, training);
  if (training) ops.insert("conv2d_bias_relu_forward");  // --fuse conv-bias-relu
}

Tensor ConvReLU::forward(Context& ctx, const Tensor& x, bool training) {
  if (!training || !ctx.fuse_conv_bias_relu()) return relu_.forward(ctx, conv_.forward(ctx, x, training), training);
  Tensor y = conv_.forward_bias_relu(ctx, x);
  relu_.adopt_output(y);
  return y;
}

Tensor ConvReLU::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  return conv_.backward(ctx, relu_.backward(ctx, dy, true), need_dx);
}

// ---- BatchNormReLU ----

void BatchNormReLU::list_ops(ops::OpNames& ops, bool training) const {
  bn_.list_ops(ops, training);
  relu_.list_ops(ops, training);
  if (training) ops.insert({"batch_norm_relu_forward_training", "batch_norm_relu_backward"});  // --fuse bn-relu
}

Tensor BatchNormReLU::forward(Context& ctx, const Tensor& x, bool training) {
  if (!training || !ctx.fuse_bn_relu()) return relu_.forward(ctx, bn_.forward(ctx, x, training), training);
  return bn_.forward_relu(ctx, x);
}

Tensor BatchNormReLU::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  if (bn_.fused_relu_last()) return bn_.backward_relu(ctx, dy, need_dx);
  return bn_.backward(ctx, relu_.backward(ctx, dy, true), need_dx);
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
  Tensor y = reuse_activation(y_buffer_, out, ctx);
  ops::max_pool2d_forward(ctx, pool_, x, y);
  x_ = x;
  y_ = y;
  return y;
}

Tensor MaxPool2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(x_.defined(), "MaxPool2d: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = fresh_activation(x_.shape(), ctx);
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
  Tensor y = reuse_activation(y_buffer_, {x.dim(0), x.dim(3)}, ctx);
  ops::global_avg_pool_forward(ctx, x, y);
  x_shape_ = x.shape();
  return y;
}

Tensor GlobalAvgPool::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(!x_shape_.empty(), "GlobalAvgPool: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = fresh_activation(x_shape_, ctx);
  ops::global_avg_pool_backward(ctx, dy, dx);
  return dx;
}

// ---- Linear ----

Linear::Linear(ParameterSet& params, const std::string& name, int in_features, int out_features, const Init& init)
    : params_(&params), name_(name), in_features_(in_features), out_features_(out_features), init_(init) {
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
  Tensor y = reuse_activation(y_buffer_, {x.dim(0), out_features_}, ctx);
  ops::linear_forward(ctx, x, params_->value(weight_), params_->value(bias_), y);
  x_ = x;
  return y;
}

Tensor Linear::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(x_.defined(), name_ << ": backward before forward");
  Tensor dx = need_dx ? fresh_activation(x_.shape(), ctx) : Tensor();
  ops::linear_backward(ctx, x_, params_->value(weight_), dy, dx, params_->grad(weight_), params_->grad(bias_));
  params_->mark_grad_ready(bias_);
  params_->mark_grad_ready(weight_);
  return dx;
}

void Linear::initialize(Rng& rng) {
  initialize_parameters(rng, init_, in_features_, out_features_, params_->value(weight_), params_->value(bias_));
}

// ---- Sequential ----

Module& Sequential::add(ModulePtr module) {
  ST_CHECK(module != nullptr, "Sequential: null module");
  modules_.push_back(std::move(module));
  return *modules_.back();
}

Tensor Sequential::forward(Context& ctx, const Tensor& x, bool training) {
  return forward_first(ctx, x, training, modules_.size());
}

Tensor Sequential::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  return backward_first(ctx, dy, need_dx, modules_.size());
}

Tensor Sequential::forward_first(Context& ctx, const Tensor& x, bool training, std::size_t count) {
  ST_CHECK(count <= modules_.size(), "Sequential: " << count << " of " << modules_.size() << " modules");
  Tensor h = x;
  for (std::size_t i = 0; i < count; ++i) h = modules_[i]->forward(ctx, h, training);
  return h;
}

Tensor Sequential::backward_first(Context& ctx, const Tensor& dy, bool need_dx, std::size_t count) {
  ST_CHECK(count <= modules_.size(), "Sequential: " << count << " of " << modules_.size() << " modules");
  Tensor g = dy;
  for (std::size_t i = count; i-- > 0;) g = modules_[i]->backward(ctx, g, i > 0 || need_dx);
  return g;
}

void Sequential::backward_first_adding(Context& ctx, const Tensor& dy, std::size_t count, Tensor& sum) {
  ST_CHECK(count <= modules_.size(), "Sequential: " << count << " of " << modules_.size() << " modules");
  if (count == 0) {  // no layer: the input gradient is dy itself
    ops::add_inplace(ctx, sum, dy);
    return;
  }
  Tensor g = dy;
  for (std::size_t i = count; i-- > 1;) g = modules_[i]->backward(ctx, g, true);
  modules_[0]->backward_adding(ctx, g, sum);
}

void Sequential::backward_adding(Context& ctx, const Tensor& dy, Tensor& sum) {
  backward_first_adding(ctx, dy, modules_.size(), sum);
}

void Sequential::list_backward_adding_ops(ops::OpNames& ops) const {
  if (modules_.empty())
    ops.insert("add_inplace");  // backward_first_adding adds dy itself
  else
    modules_.front()->list_backward_adding_ops(ops);
}

void Sequential::list_ops(ops::OpNames& ops, bool training) const {
  for (const ModulePtr& m : modules_) m->list_ops(ops, training);
}

void Sequential::initialize(Rng& rng) {
  for (auto& m : modules_) m->initialize(rng);
}

}  // namespace scaletrain::nn
