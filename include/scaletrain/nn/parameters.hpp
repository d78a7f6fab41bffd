// ParameterSet: every parameter of a model lives in one flat, contiguous value buffer and its
// gradient in one flat gradient buffer, in registration (forward) order. Each parameter's
// tensors are views into those buffers, so a communicator can all-reduce any contiguous range
// of gradients (a bucket) without copies. Layers call mark_grad_ready() as soon as a
// parameter's gradient is written during backward; the hook lets the trainer start a bucket's
// all-reduce then. Buffers (batch-norm running statistics) are kept apart: they are not trained.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/tensor/flat_layout.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::nn {

struct TensorInfo {
  std::string name;  // torchvision state_dict name, e.g. "layer1.0.conv1.weight"
  Shape shape;
  int64_t offset = 0;  // elements from the start of the flat buffer
};

class ParameterSet {
 public:
  // Registration (before finalize). Names must be unique. Returns the index.
  int add_parameter(const std::string& name, const Shape& shape);
  int add_buffer(const std::string& name, const Shape& shape);
  // Allocates the flat buffers (zeroed) and the views. Called once, after the model is built.
  void finalize(Device device = Device::cpu);
  // Moves the flat values, gradients and buffers to `device` (copying them; a no-op where they
  // are) and rebuilds the views. Layers reach their tensors by index, so they follow; a raw
  // pointer or view taken before the move does not.
  void move_to(Device device);
  bool finalized() const { return finalized_; }

  int num_parameters() const { return static_cast<int>(params_.size()); }
  int num_buffers() const { return static_cast<int>(buffers_.size()); }
  const TensorInfo& parameter_info(int i) const { return params_.at(i); }
  const TensorInfo& buffer_info(int i) const { return buffers_.at(i); }
  int64_t parameter_count() const { return param_elems_; }

  Tensor& value(int i) { return values_.at(i); }
  Tensor& grad(int i) { return grads_.at(i); }
  Tensor& buffer(int i) { return buffer_values_.at(i); }
  Tensor& flat_values() { return flat_values_; }
  Tensor& flat_grads() { return flat_grads_; }
  // The flat gradient buffer as named segments, one per parameter in registration order: what
  // gradient communication takes (comm does not depend on nn). Needs finalize().
  FlatLayout gradient_layout();
  // All buffers (batch-norm running statistics) in one flat tensor, for broadcast/averaging.
  Tensor& flat_buffers() { return flat_buffers_; }

  // Finds a parameter or buffer by name; nullptr if absent.
  Tensor* find(const std::string& name);
  // All state_dict entries (parameters, then buffers) in registration order.
  std::vector<TensorInfo> state_infos() const;

  // A frozen parameter keeps its value: no optimizer updates it, and its gradient stays zero (an
  // auxiliary head switched off by --aux-loss-weight 0 is neither run nor trained, as a PyTorch
  // parameter without a gradient is skipped by torch.optim). Its layer still marks it ready.
  void set_frozen(int i, bool frozen);
  bool frozen(int i) const { return frozen_.at(i) != 0; }
  // The parameters that train, as element ranges [first, second) of the flat buffers, adjacent
  // ones merged: the whole buffer in one range when nothing is frozen.
  std::vector<std::pair<int64_t, int64_t>> trained_ranges() const;

  // A lookup-only parameter is a table (rows x width, 2-D) that the model reads only by row
  // lookups, as NCF's embeddings: a row no sample of a step looked up gets a gradient of exact
  // zeros, which --optimizer lazy_adam takes to mean "untouched" (optim::LazyAdam). A table that
  // is also used densely (the Transformer's embedding, shared with the output projection) is not.
  void set_lookup_only(int i);
  bool lookup_only(int i) const { return lookup_only_.at(i) != 0; }
  // As trained_ranges(), less the lookup-only parameters.
  std::vector<std::pair<int64_t, int64_t>> trained_dense_ranges() const;

  // Called by layers during backward, once per parameter per step.
  void mark_grad_ready(int i) {
    if (hook_) hook_(i);
  }
  void set_grad_ready_hook(std::function<void(int)> hook) { hook_ = std::move(hook); }

 private:
  void check_new_name(const std::string& name) const;
  // Trained parameters' element ranges, adjacent ones merged; without lookup-only ones if asked.
  std::vector<std::pair<int64_t, int64_t>> ranges_of(bool skip_lookup_only) const;
  std::vector<TensorInfo> params_, buffers_;
  std::vector<char> frozen_;       // per parameter
  std::vector<char> lookup_only_;  // per parameter
  std::vector<Tensor> values_, grads_, buffer_values_;
  Tensor flat_values_, flat_grads_, flat_buffers_;
  int64_t param_elems_ = 0, buffer_elems_ = 0;
  bool finalized_ = false;
  std::function<void(int)> hook_;
};

}  // namespace scaletrain::nn
