// The interface the trainer holds: one update of every parameter from the (already rank-averaged)
// gradients with a learning rate from the schedule. Every optimizer keeps one momentum buffer
// with the layout and offsets of ParameterSet::flat_values(), so checkpoints store and restore
// it per parameter without knowing which optimizer wrote it. What a momentum value means does
// depend on the optimizer (Sgd keeps v without the learning rate, Lars with it): a checkpoint
// should record name() and a resume should refuse to switch optimizers. An optimizer with more
// per-parameter state (Adam's second moment) lists it in extra_state(), under PyTorch's name for
// it, so checkpoints store and restore the whole state of any optimizer, with steps().
//
// Everything but step() and describe() is inline, so that code which only reads or restores
// momentum (checkpoints) needs no link dependency on st_optim.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/ops/registry.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter from params().flat_grads() with learning rate lr, on ctx's
  // device (where the parameters live).
  virtual void step(Context& ctx, double lr) = 0;
  // The ops its step runs (ops/registry.hpp): --device asks each of them of the device.
  virtual ops::OpNames ops() const = 0;
  // "sgd", "lars", "adam" or "lazy_adam": the value of --optimizer and of MLPerf's opt_name.
  virtual const char* name() const = 0;
  // Name and hyper-parameters, for report.json.
  virtual Json describe() const = 0;

  int64_t steps() const { return steps_; }
  // For a resumed run: the number of steps already taken (Adam's bias correction depends on it).
  void restore_steps(int64_t steps) {
    ST_CHECK(steps >= 0, "optimizer: cannot restore a negative step count " << steps);
    steps_ = steps;
  }
  nn::ParameterSet& params() { return params_; }

  // Per-parameter state besides the momentum: a flat buffer with the layout of flat_values(),
  // named as in torch.optim's per-parameter state (Adam: "exp_avg_sq").
  struct StateBuffer {
    std::string key;
    Tensor* flat;
  };
  // None for Sgd and Lars; Adam's second moment.
  virtual std::vector<StateBuffer> extra_state() { return {}; }
  // View of parameter i's part of a flat state buffer, with the parameter's shape.
  Tensor state_view(const Tensor& flat, int i) const {
    const nn::TensorInfo& info = params_.parameter_info(i);
    return Tensor::view_of(flat, info.offset, info.shape);
  }

  // Moves the optimizer's state (momentum and extra_state()) to `device`, after its parameters
  // have moved there (ParameterSet::move_to).
  void move_state_to(Device device) {
    momentum_ = momentum_.to(device);
    for (const StateBuffer& extra : extra_state()) *extra.flat = extra.flat->to(device);
  }

  // Flat, same layout/offsets as params().flat_values().
  Tensor& momentum_buffer() { return momentum_; }
  // View of parameter i's momentum, with the parameter's shape (for checkpoints).
  Tensor momentum_view(int i) { return state_view(momentum_, i); }

 protected:
  // params must be finalized and outlive the optimizer. The momentum starts at zero.
  explicit Optimizer(nn::ParameterSet& params) : params_(params) {
    ST_CHECK(params.finalized(), "the optimizer needs a finalized ParameterSet (call finalize() first)");
    momentum_ = Tensor::zeros(params.flat_values().shape(), DType::f32, params.flat_values().device());
  }
  // Called once at the end of every step().
  void count_step() { ++steps_; }
  // The part [first, end) of a flat buffer (values, gradients, state) as a 1-D view: element-wise
  // updates run once per ParameterSet::trained_ranges() range, so that frozen parameters keep
  // their values and state. A range's elements update exactly as in one call over everything.
  static Tensor range_of(const Tensor& flat, const std::pair<int64_t, int64_t>& range) {
    return Tensor::view_of(flat, range.first, {range.second - range.first});
  }

  nn::ParameterSet& params_;
  Tensor momentum_;

 private:
  int64_t steps_ = 0;
};

}  // namespace scaletrain::optim
