// Gradient accumulation (--accumulate-steps K): one optimizer step from K micro-batches of the
// per-rank batch, so that a strong-scaling series can keep a global batch of thousands on few
// ranks. The gradients of the K micro-batches are summed locally and all-reduced once.
//
// The loss of each micro-batch is its mean over b samples, so the gradient of the mean over all
// K·b samples is (g_1 + ... + g_K) / K: exactly what one batch of K·b gives, up to float rounding,
// for every layer but batch norm, whose statistics (and so its normalisation and running
// averages) are per micro-batch of b (docs/scaling-studies.md says so).
//
// Where: the ParameterSet's grad-ready hook. Backward writes each parameter's gradient over the
// flat gradient buffer; during micro-batches 1..K-1 the accumulator keeps the running sum in its
// own buffer, and in the last one it folds the sum into the gradient and scales it by 1/K before
// the gradient is announced to the reducer, so the last micro-batch's all-reduce still overlaps
// its backward.
#pragma once

#include <functional>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::train {

class GradientAccumulator {
 public:
  // micro_batches >= 1; with 1 every gradient passes straight to `ready`. The sums run as the op
  // accumulate_gradient on ctx's device (where the gradients are).
  GradientAccumulator(Context& ctx, nn::ParameterSet& params, int micro_batches, std::function<void(int)> ready);

  // Before micro-batch k's backward (k = 0 .. micro_batches - 1).
  void start_micro_batch(int k) { micro_ = k; }
  bool last_micro_batch() const { return micro_ == micro_batches_ - 1; }
  int micro_batches() const { return micro_batches_; }

  // The grad-ready hook: parameter i's gradient of the current micro-batch is written.
  void on_grad_ready(int i);

 private:
  Context& ctx_;
  nn::ParameterSet& params_;
  int micro_batches_;
  std::function<void(int)> ready_;
  int micro_ = 0;
  Tensor sum_;  // flat, the layout of params.flat_grads(); allocated only for micro_batches > 1
};

}  // namespace scaletrain::train
