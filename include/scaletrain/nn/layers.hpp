// Layers with parameters and the stateless layers between them, as nn::Modules on channels-last
// activations. Each layer registers its tensors into a ParameterSet under torchvision's names
// ("<prefix>.weight", "<prefix>.running_mean", ...), keeps what its backward needs, and owns its
// output and input-gradient buffers: they are reused from step to step (a smaller batch, such as
// the last one of an epoch, takes a view of the same storage), so the tensor a forward or backward
// returns stays valid only until that layer's next forward or backward.
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
// too small. The result aliases whatever buffer handed out before.
Tensor reuse_buffer(Tensor& buffer, const Shape& shape, Device device = Device::cpu);

// Joins a module prefix and a name the way state_dict does: ("", "conv1") -> "conv1",
// ("layer1.0", "conv1") -> "layer1.0.conv1".
std::string join_name(const std::string& prefix, const std::string& name);

// PyTorch Conv2d(bias=False): weight "<name>.weight" (O, C, KH, KW).
class Conv2d : public Module {
 public:
  Conv2d(ParameterSet& params, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
         int padding);
  // x: (N, H, W, in_channels). Returns (N, OH, OW, out_channels).
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  // Writes weight's gradient (marked ready), then returns dx (N, H, W, in_channels) unless !need_dx.
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  // kaiming_normal_(mode='fan_out', nonlinearity='relu'): N(0, 2 / (O * KH * KW)).
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;
  int weight_index() const { return weight_; }

 private:
  ParameterSet* params_;
  std::string name_;
  int in_channels_, out_channels_, kernel_;
  ops::Conv2dParams conv_;
  int weight_;
  Tensor x_;  // forward input, for the filter gradient
  Tensor y_buffer_, dx_buffer_;
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

 private:
  ParameterSet* params_;
  std::string name_;
  int channels_;
  ops::BatchNormParams bn_;
  int weight_, bias_, running_mean_, running_var_;
  Tensor x_;  // forward input (batch norm backward needs x, so the output never overwrites it)
  Tensor saved_mean_, saved_inv_std_;
  Tensor y_buffer_, dx_buffer_;
  bool have_batch_stats_ = false;
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

 private:
  bool inplace_;
  Tensor y_;  // forward output: backward needs y > 0
  Tensor y_buffer_, dx_buffer_;
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
  Tensor y_buffer_, dx_buffer_;
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
  Tensor y_buffer_, dx_buffer_;
};

// PyTorch Linear: "<name>.weight" (out, in), "<name>.bias" (out).
class Linear : public Module {
 public:
  Linear(ParameterSet& params, const std::string& name, int in_features, int out_features);
  // x: (N, in_features). Returns (N, out_features).
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  // PyTorch's default: weight and bias uniform(-1/sqrt(in), 1/sqrt(in)).
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;
  int weight_index() const { return weight_; }
  int bias_index() const { return bias_; }

 private:
  ParameterSet* params_;
  std::string name_;
  int in_features_, out_features_;
  int weight_, bias_;
  Tensor x_;
  Tensor y_buffer_, dx_buffer_;
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

  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng& rng) override;
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  std::vector<ModulePtr> modules_;
};

}  // namespace scaletrain::nn
