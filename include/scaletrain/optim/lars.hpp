// LARS (layer-wise adaptive rate scaling, You, Gitman & Ginsburg 2017) as the MLPerf ResNet-50
// reference uses it for large global batches (mlcommons/training image_classification,
// MLPERF_LARSOptimizer / LARSOptimizer). For each adapted parameter tensor w with gradient g,
// learning rate lr, momentum mu, weight decay wd, trust coefficient eta and epsilon eps:
//
//   trust = eta * ||w|| / (||g|| + wd * ||w|| + eps)   if ||w|| > 0 and ||g|| > 0, else 1
//   v     = mu * v + lr * trust * (g + wd * w)
//   w     = w - v
//
// This is the reference's form exactly: it hands apply_momentum a learning rate of 1 and the
// gradient (g + wd * w) * lr * trust, so the learning rate sits inside the momentum buffer
// (unlike Sgd, which is PyTorch's v = mu * v + g; w -= lr * v). Weight decay enters the update
// even when the trust ratio falls back to 1 (a zero gradient still decays the weights).
//
// Excluded tensors (by default every rank-1 tensor: the batch-norm weights and biases and all
// biases, which is the reference's skip list ['batch_normalization', 'bias', 'bn'] for
// torchvision's names, including the batch norm inside "downsample.1") get neither the trust
// ratio nor weight decay: v = mu * v + lr * g; w = w - v, a plain momentum-SGD step.
//
// Epsilon defaults to 0, the value of the TF1 reference and of NVIDIA's MXNet implementation and
// the value MLPerf runs log as lars_epsilon (the zero-norm guard keeps the ratio finite). The TF2
// reference also logs 0 but lets Keras replace a 0 by its own 1e-7; set epsilon to match it.
//
// LARS runs are meant to use the polynomial schedule with warmup of lr_schedule.hpp (kind "poly",
// power 2, end_lr 1e-4, a few warmup epochs) as the MLPerf recipes do.
//
// Norms are sums of squares in double over fixed chunks of each tensor (chunks never cross a
// tensor), computed in parallel and added per tensor in chunk order: the result does not depend
// on the number of OpenMP threads, so ranks with the same averaged gradients stay bit-identical.
// The update itself is float arithmetic on the flat buffers, like Sgd.
#pragma once

#include <cstdint>
#include <vector>

#include "scaletrain/core/json.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/ops/lars.hpp"
#include "scaletrain/optim/optimizer.hpp"

namespace scaletrain::optim {

// Which tensors skip the trust ratio and weight decay.
enum class LarsExclusion {
  bn_and_bias,  // every tensor of rank <= 1 (batch-norm weight/bias, biases): the MLPerf rule
  none,         // adapt and decay every tensor (the paper's plain form)
};

struct LarsOptions {
  double momentum = 0.9;             // lars_opt_momentum in the MLPerf recipes
  double weight_decay = 5e-5;        // lars_opt_weight_decay; the project's ResNet-50 default
  double trust_coefficient = 0.001;  // eta ("eeta" in the reference)
  double epsilon = 0.0;              // lars_epsilon
  LarsExclusion exclusion = LarsExclusion::bn_and_bias;
};

// "bn_and_bias" / "none", for report.json and error messages.
const char* lars_exclusion_name(LarsExclusion exclusion);
// True when the rule leaves this parameter out of the trust ratio and weight decay.
bool lars_excludes(const nn::TensorInfo& info, LarsExclusion exclusion);

class Lars : public Optimizer {
 public:
  // params must be finalized and outlive the optimizer. Throws on invalid options.
  Lars(nn::ParameterSet& params, const LarsOptions& options);
  void step(Context& ctx, double lr) override;
  const char* name() const override { return "lars"; }
  ops::OpNames ops() const override;
  // {"name": "lars", "momentum", "weight_decay", "trust_coefficient", "epsilon", "exclusion",
  //  "adapted_tensors", "excluded_tensors"}
  Json describe() const override;

  const LarsOptions& options() const { return options_; }
  // Whether parameter i gets the trust ratio and weight decay.
  bool adapted(int i) const { return adapted_.at(i) != 0; }
  // Parameter i's trust ratio in the last step (1 for excluded tensors and before any step).
  double trust_ratio(int i) const { return trust_.at(i); }

 private:
  void plan_chunks();
  void compute_trust_ratios(Context& ctx);
  void apply_update(Context& ctx, double lr);

  LarsOptions options_;
  std::vector<char> adapted_;                   // per parameter
  std::vector<double> trust_;                   // per parameter, last step
  std::vector<ops::LarsChunk> chunks_;          // every parameter's elements, in order, in slices
  std::vector<int> chunk_tensor_;               // the parameter of each chunk
  std::vector<ops::LarsChunk> adapted_chunks_;  // the chunks of adapted parameters
  std::vector<int> adapted_chunk_tensor_;
  std::vector<double> chunk_w_sq_, chunk_g_sq_;  // per adapted chunk, last step
};

}  // namespace scaletrain::optim
