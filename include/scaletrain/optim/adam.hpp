// Adam (Kingma & Ba 2015) as torch.optim.Adam computes it (amsgrad off, no weight decay: the
// MLPerf NCF reference passes neither), for the NCF benchmark. With gradient g, learning rate lr
// and t the number of this step (1 for the first):
//
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   w = w - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
//
// which is PyTorch's grouping of the bias corrections (epsilon is added after the second moment
// is corrected). Both moments start at zero, so the first step moves every weight by
// lr * g / (|g| + epsilon): about lr * sign(g).
//
// State for checkpoints: the first moment m is the base class's momentum buffer (so it is saved
// and restored wherever momentum is), the second moment v is second_moment_buffer() with the
// same layout, and t is steps(), which a resumed run must restore (restore_steps) because the
// bias correction depends on it.
//
// Defaults: AdamOptions holds the MLPerf NCF reference's values (mlcommons/training,
// retired_benchmarks/ncf/ncf.py: --beta1 0.9, --beta2 0.999, --eps 1e-8, left at their defaults by
// its run_and_time.sh, which sets -l 0.0002 -b 65536). These happen to be PyTorch's own defaults.
// ncf_large_batch_adam_options() is NVIDIA's large-batch recipe from its MLPerf v0.5 submission
// (mlcommons/training_results_v0.5, v0.5.0/nvidia/submission/code/recommendation/pytorch/
// run_and_time.sh: -l 0.0045 -b 1048576 -b1 0.25 -b2 0.5 --eps 1e-8).
#pragma once

#include "scaletrain/core/json.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/ops/adam.hpp"
#include "scaletrain/optim/optimizer.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::optim {

// Learning rates for the two recipes below, each with its global batch (the schedule passes lr).
constexpr double kNcfReferenceLr = 0.0002;   // MLPerf NCF reference, global batch 65536
constexpr double kNcfLargeBatchLr = 0.0045;  // NVIDIA MLPerf v0.5, global batch 1048576

struct AdamOptions {
  double beta1 = 0.9;     // MLPerf NCF reference (see above)
  double beta2 = 0.999;   // MLPerf NCF reference
  double epsilon = 1e-8;  // MLPerf NCF reference; must be > 0 (a zero gradient would give 0/0)
};

// beta1 0.25, beta2 0.5, epsilon 1e-8: NVIDIA's MLPerf v0.5 NCF submission (see above).
AdamOptions ncf_large_batch_adam_options();

class Adam : public Optimizer {
 public:
  // params must be finalized and outlive the optimizer. Throws on invalid options.
  Adam(nn::ParameterSet& params, const AdamOptions& options);
  // One update of every parameter from params.flat_grads() with learning rate lr.
  void step(Context& ctx, double lr) override;
  ops::OpNames ops() const override;
  const char* name() const override { return "adam"; }
  // {"name": "adam", "beta1", "beta2", "epsilon"}
  Json describe() const override;
  // {{"exp_avg_sq", second moment}}: stored by checkpoints beside the momentum (PyTorch's exp_avg).
  std::vector<StateBuffer> extra_state() override { return {{"exp_avg_sq", &second_moment_}}; }

  const AdamOptions& options() const { return options_; }

  // The first moment m is momentum_buffer() / momentum_view(i) (base class).
  // The second moment v: flat, same layout/offsets as params().flat_values().
  Tensor& second_moment_buffer() { return second_moment_; }
  // View of parameter i's second moment, with the parameter's shape (for checkpoints).
  Tensor second_moment_view(int i) { return state_view(second_moment_, i); }

 protected:
  // The update's float coefficients for this step (t = steps() + 1) and learning rate lr.
  ops::AdamUpdateParams update_params(double lr) const;

 private:
  AdamOptions options_;
  Tensor second_moment_;
};

// LazyAdam (--optimizer lazy_adam, MLPerf's opt_name "lazy_adam"): TensorFlow's LazyAdamOptimizer,
// which the MLPerf Transformer reference trains with. On a lookup-only table
// (ParameterSet::set_lookup_only) it updates only the rows the step looked up, whose gradient is
// not all zeros, and leaves the other rows' weights and moments as they are; every other
// parameter gets Adam's update. Its bias corrections count every step, as TensorFlow's do.
//
// Where no parameter is lookup-only it is Adam, bit for bit: the Transformer's embedding is shared
// with the output projection, whose gradient reaches every row, so TensorFlow too densifies it
// and applies Adam's update to every row. On NCF's tables it differs from Adam: an untouched row's
// moments do not decay and its weights do not move on old momentum. A row that was looked up but
// whose summed gradient is exactly zero counts as untouched here (TensorFlow would decay its
// moments): with float gradients from the loss this needs an exact cancellation.
//
// The update's arithmetic is Adam's (PyTorch's grouping of the bias corrections, above), not
// TensorFlow's, which adds epsilon before correcting the second moment: the two differ by epsilon
// scaled by 1/sqrt(1 - beta2^t) - 1, nothing beside the gradients' size for epsilon 1e-9.
class LazyAdam : public Adam {
 public:
  LazyAdam(nn::ParameterSet& params, const AdamOptions& options) : Adam(params, options) {}
  void step(Context& ctx, double lr) override;
  ops::OpNames ops() const override;
  const char* name() const override { return "lazy_adam"; }
};

}  // namespace scaletrain::optim
