// Layers with parameters and the stateless layers between them, as nn::Modules on channels-last
// activations. Each layer registers its tensors into a ParameterSet under torchvision's names
// ("<prefix>.weight", "<prefix>.running_mean", ...), keeps what its backward needs, and owns its
// output buffer: it is reused from step to step (a smaller batch, such as the last one of an
// epoch, takes a view of the same storage), so the tensor a forward returns stays valid only until
// that layer's next forward. The input gradient a backward returns is a fresh tensor
// (fresh_activation), freed once the layer before has used it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/nn/module.hpp"
#include "scaletrain/ops/batch_norm.hpp"
#include "scaletrain/ops/conv2d.hpp"
#include "scaletrain/ops/pool.hpp"

namespace scaletrain::nn {

// A tensor of `shape` in the storage of `buffer`; buffer grows (is reallocated) only when it is
// too small, or is of another dtype. The result aliases whatever buffer handed out before.
Tensor reuse_buffer(Tensor& buffer, const Shape& shape, Device device = Device::cpu, DType dtype = DType::f32);
// The same for an activation or an activation's gradient: in ctx's activation dtype (16 bits
// under a mixed precision, Context::activation_dtype).
inline Tensor reuse_activation(Tensor& buffer, const Shape& shape, const Context& ctx) {
  return reuse_buffer(buffer, shape, ctx.device(), ctx.activation_dtype());
}
// A new tensor in ctx's activation dtype, for an input gradient. Why not a buffer per layer, as
// for outputs: the outputs must all live until backward anyway, but a layer's input gradient is
// dead once the layer before has read it, so backward holds a few at a time instead of one per
// layer (half of a ResNet's activation memory). The GPU's caching allocator hands the same blocks
// out again every step; on the CPU malloc does.
inline Tensor fresh_activation(const Shape& shape, const Context& ctx) {
  return Tensor::empty(shape, ctx.activation_dtype(), ctx.device());
}

// Joins a module prefix and a name the way state_dict does: ("", "conv1") -> "conv1",
// ("layer1.0", "conv1") -> "layer1.0.conv1".
std::string join_name(const std::string& prefix, const std::string& name);

// How a Conv2d or Linear layer fills its weight and bias (initialize). fan_in is
// (in_channels / groups) * KH * KW for a convolution and in_features for a linear layer; fan_out
// is out_channels * KH * KW or out_features (PyTorch's _calculate_fan_in_and_fan_out).
struct Init {
  enum class Kind {
    kaiming_normal_fan_out,  // weight N(0, 2 / fan_out) (kaiming_normal_, mode='fan_out', relu); bias 0
    torch_default,           // PyTorch's reset_parameters: weight and bias U(-1/sqrt(fan_in), +1/sqrt(fan_in))
    trunc_normal,            // weight trunc_normal_(std, a=-2, b=2); bias as torch_default (torchvision leaves it)
    gaussian,                // Caffe's gaussian filler: weight N(0, std^2); bias the constant bias_value
    xavier_fan_in,           // Caffe's xavier filler: weight U(-sqrt(3 / fan_in), +sqrt(3 / fan_in)); bias constant
    glorot_uniform,          // TensorFlow's glorot (variance scaling 1, fan_avg, uniform):
                             // weight U(-sqrt(6 / (fan_in + fan_out)), +...); bias 0 (the Transformer's Dense)
  };
  Kind kind = Kind::kaiming_normal_fan_out;
  double stddev = 0.0;      // trunc_normal and gaussian
  double bias_value = 0.0;  // gaussian and xavier_fan_in

  static Init kaiming_normal_fan_out() { return {}; }
  static Init torch_default() { return {Kind::torch_default}; }
  // PyTorch's bounds a and b are absolute, not in units of std: at std 0.01 they sit at 200 std.
  static Init trunc_normal(double stddev) { return {Kind::trunc_normal, stddev}; }
  static Init gaussian(double stddev, double bias_value = 0.0) { return {Kind::gaussian, stddev, bias_value}; }
  static Init xavier_fan_in(double bias_value = 0.0) { return {Kind::xavier_fan_in, 0.0, bias_value}; }
  static Init glorot_uniform() { return {Kind::glorot_uniform}; }
};

// Fills `weight` and `bias` (undefined: none) by `init`, drawing from rng in that order.
void initialize_parameters(Rng& rng, const Init& init, double fan_in, double fan_out, Tensor& weight, Tensor& bias);

// A Conv2d layer's shape and init: PyTorch's Conv2d(kernel_size=(kernel_h, kernel_w),
// stride=(stride_h, stride_w), padding=(pad_h, pad_w), groups, bias). Padding is per dimension
// (the same on both sides), as every model here needs and as cuDNN runs it.
struct ConvSpec {
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int groups = 1;
  bool bias = false;
  Init init;  // kaiming_normal_fan_out, ResNet's

  // A square kernel with one stride and one padding: Conv2d(k, stride=s, padding=p).
  static ConvSpec square(int kernel, int stride = 1, int padding = 0) {
    ConvSpec s;
    s.kernel_h = s.kernel_w = kernel;
    s.stride_h = s.stride_w = stride;
    s.pad_h = s.pad_w = padding;
    return s;
  }
  // A rectangular kernel with its padding per dimension: Conv2d((1, 7), padding=(0, 3)).
  static ConvSpec rect(int kernel_h, int kernel_w, int pad_h, int pad_w) {
    ConvSpec s;
    s.kernel_h = kernel_h, s.kernel_w = kernel_w;
    s.pad_h = pad_h, s.pad_w = pad_w;
    return s;
  }
  ConvSpec& with_bias(bool b = true) {
    bias = b;
    return *this;
  }
  ConvSpec& with_groups(int g) {
    groups = g;
    return *this;
  }
  ConvSpec& with_init(const Init& i) {
    init = i;
    return *this;
  }
  ops::Conv2dParams params() const { return ops::Conv2dParams::per_dim(stride_h, stride_w, pad_h, pad_w, groups); }
};

// PyTorch Conv2d: weight "<name>.weight" (O, C / groups, KH, KW), then, with spec.bias,
// "<name>.bias" (O) (state_dict order).
class Conv2d : public Module {
 public:
  Conv2d(ParameterSet& params, const std::string& name, int in_channels, int out_channels, const ConvSpec& spec);
  // ResNet's: a square kernel, no bias, kaiming_normal fan_out.
  Conv2d(ParameterSet& params, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
         int padding)
      : Conv2d(params, name, in_channels, out_channels, ConvSpec::square(kernel, stride, padding)) {}
  // x: (N, H, W, in_channels). Returns (N, OH, OW, out_channels).
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  // Writes the bias's and weight's gradients (marked ready), then returns dx (N, H, W,
  // in_channels) unless !need_dx.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  // The same gradients, dx added into `sum` as it is stored (ops::conv2d_backward_data_add).
  void backward_adding(Context& ctx, const Tensor& dy, Tensor& sum) override;
  void list_backward_adding_ops(ops::OpNames& ops) const override;
  // By spec.init (initialize_parameters).
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;
  // Training's fused epilogue (ops::conv2d_bias_relu_forward): max(0, conv(x) + bias) in one op;
  // needs a bias. backward is the plain one, after the ReLU's.
  Tensor forward_bias_relu(Context& ctx, const Tensor& x);
  int weight_index() const { return weight_; }
  int bias_index() const { return bias_; }  // -1 without a bias
  const ConvSpec& spec() const { return spec_; }

 private:
  Tensor output_for(Context& ctx, const Tensor& x);
  void parameter_gradients(Context& ctx, const Tensor& dy);

  ParameterSet* params_;
  std::string name_;
  int in_channels_, out_channels_;
  ConvSpec spec_;
  ops::Conv2dParams conv_;
  int weight_, bias_ = -1;
  Tensor x_;  // forward input, for the filter gradient
  Tensor y_buffer_;
};

// PyTorch BatchNorm2d (affine, track_running_stats): parameters "<name>.weight", "<name>.bias";
// buffers "<name>.running_mean", "<name>.running_var" (num_batches_tracked is not kept).
class BatchNorm2d : public Module {
 public:
  BatchNorm2d(ParameterSet& params, const std::string& name, int channels, ops::BatchNormParams bn = {});
  // training: normalises with batch statistics and updates the running statistics;
  // otherwise normalises with the running statistics.
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  // Writes weight and bias gradients (marked ready). Needs a training-mode forward before it.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  // weight 1, bias 0, running_mean 0, running_var 1.
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;
  int weight_index() const { return weight_; }
  int bias_index() const { return bias_; }

  // Training only, fused (ops::batch_norm_add_relu_forward_training): max(0, bn(x) + z), the end of
  // a residual block (--fuse bn-add-relu). backward_add_relu then returns dx and dz (the gradient
  // of z) from dy, and marks the weight and bias gradients ready.
  Tensor forward_add_relu(Context& ctx, const Tensor& x, const Tensor& z);
  struct AddReluGradients {
    Tensor dx, dz;
  };
  AddReluGradients backward_add_relu(Context& ctx, const Tensor& dy, bool need_dx);
  bool fused_last() const { return fused_ == Fused::add_relu; }  // the last training forward was forward_add_relu
  // Training only, fused (ops::batch_norm_relu_forward_training): max(0, bn(x)) (--fuse bn-relu,
  // BatchNormReLU). backward_relu then returns dx from dy (the gradient of the ReLU's output) and
  // marks the weight and bias gradients ready.
  Tensor forward_relu(Context& ctx, const Tensor& x);
  Tensor backward_relu(Context& ctx, const Tensor& dy, bool need_dx);
  bool fused_relu_last() const { return fused_ == Fused::relu; }

 private:
  enum class Fused { none, add_relu, relu };  // what the last training forward ran with batch norm
  void ensure_saved_statistics(Context& ctx);
  Tensor output_for(Context& ctx, const Tensor& x);

  ParameterSet* params_;
  std::string name_;
  int channels_;
  ops::BatchNormParams bn_;
  int weight_, bias_, running_mean_, running_var_;
  Tensor x_;  // forward input (batch norm backward needs x, so the output never overwrites it)
  Tensor saved_mean_, saved_inv_std_;
  Tensor y_buffer_;
  bool have_batch_stats_ = false;
  // The fused paths': their output (the ReLU's mask) and cuDNN's reserve space.
  Fused fused_ = Fused::none;
  Tensor y_, reserve_;
};

// ReLU. inplace: forward writes its output over its input and backward writes dx over dy, which
// saves memory traffic; use it only where neither the input nor dy is read again (after batch
// norm or a residual add, as in ResNets).
class ReLU : public Module {
 public:
  explicit ReLU(bool inplace = true) : inplace_(inplace) {}
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng&) override {}
  void list_ops(ops::OpNames& ops, bool training) const override;
  // The output a fused op before it computed in its place (ConvReLU): backward reads it as its own.
  void adopt_output(const Tensor& y) { y_ = y; }

 private:
  bool inplace_;
  Tensor y_;  // forward output: backward needs y > 0
  Tensor y_buffer_;
};

// A convolution with bias and the in-place ReLU after it (AlexNet's features, every Caffe
// convolution): the same parameters and values as Conv2d then ReLU(true). With --fuse
// conv-bias-relu (Context::fuse_conv_bias_relu) a training forward runs them as one op
// (Conv2d::forward_bias_relu); backward is the ReLU's then the convolution's either way.
class ConvReLU : public Module {
 public:
  ConvReLU(ParameterSet& params, const std::string& name, int in_channels, int out_channels, const ConvSpec& spec);
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng& rng) override { conv_.initialize(rng); }
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  Conv2d conv_;
  ReLU relu_{true};
};

// Batch norm and the in-place ReLU after it (ResNet's blocks but their last batch norm and its
// stem, GoogLeNet's and Inception-v3's BasicConv2d): the same parameters, under the same names, and
// values as BatchNorm2d then ReLU(true). With --fuse bn-relu (Context::fuse_bn_relu) a training
// forward runs them as one op (BatchNorm2d::forward_relu) and backward as one op too.
class BatchNormReLU : public Module {
 public:
  BatchNormReLU(ParameterSet& params, const std::string& name, int channels, ops::BatchNormParams bn = {})
      : bn_(params, name, channels, bn) {}
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng& rng) override { bn_.initialize(rng); }
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  BatchNorm2d bn_;
  ReLU relu_{true};
};

// PyTorch MaxPool2d(kernel, stride, padding, ceil_mode), square windows.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(ops::MaxPool2dParams p = {}) : pool_(p) {}
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng&) override {}
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  ops::MaxPool2dParams pool_;
  Tensor x_, y_;
  Tensor y_buffer_;
};

// AdaptiveAvgPool2d(1) followed by flatten: (N, H, W, C) -> (N, C).
class GlobalAvgPool : public Module {
 public:
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng&) override {}
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  Shape x_shape_;
  Tensor y_buffer_;
};

// PyTorch Linear: "<name>.weight" (out, in), "<name>.bias" (out).
class Linear : public Module {
 public:
  Linear(ParameterSet& params, const std::string& name, int in_features, int out_features,
         const Init& init = Init::torch_default());
  // x: (N, in_features). Returns (N, out_features).
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  // By the init given (initialize_parameters); PyTorch's default: weight and bias
  // uniform(-1/sqrt(in), 1/sqrt(in)).
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;
  int weight_index() const { return weight_; }
  int bias_index() const { return bias_; }

 private:
  ParameterSet* params_;
  std::string name_;
  int in_features_, out_features_;
  Init init_;
  int weight_, bias_;
  Tensor x_;
  Tensor y_buffer_;
};

// Runs its modules in order; backward runs them in reverse, passing need_dx only to the first.
class Sequential : public Module {
 public:
  Sequential() = default;
  Module& add(ModulePtr module);
  template <typename M, typename... Args>
  M& emplace(Args&&... args) {
    return static_cast<M&>(add(std::make_unique<M>(std::forward<Args>(args)...)));
  }
  std::size_t size() const { return modules_.size(); }
  Module& at(std::size_t i) { return *modules_.at(i); }
  // The first `count` modules only (a residual block runs its last batch norm fused).
  Tensor forward_first(Context& ctx, const Tensor& x, bool training, std::size_t count);
  Tensor backward_first(Context& ctx, const Tensor& dy, bool need_dx, std::size_t count);
  // backward_first with the input gradient added into `sum` (Module::backward_adding).
  void backward_first_adding(Context& ctx, const Tensor& dy, std::size_t count, Tensor& sum);

  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void backward_adding(Context& ctx, const Tensor& dy, Tensor& sum) override;
  void list_backward_adding_ops(ops::OpNames& ops) const override;  // its first module's
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  std::vector<ModulePtr> modules_;
};

}  // namespace scaletrain::nn
