// Test support: naive float64 batch norm (forward training and evaluation, backward), the spec
// the fast kernels are tested against. Data is channels-last, viewed as (M, C): every dimension
// but the last is a row. PyTorch's conventions: biased variance to normalise, unbiased variance
// for the running estimate, running = (1 - momentum) * running + momentum * batch.
#pragma once

#include <cstdint>
#include <vector>

namespace scaletrain::test {

struct BatchNormTrainingRef {
  std::vector<double> y;             // (M, C)
  std::vector<double> mean;          // (C) batch mean
  std::vector<double> inv_std;       // (C) 1 / sqrt(biased batch variance + eps)
  std::vector<double> running_mean;  // (C) after the update
  std::vector<double> running_var;   // (C) after the update
};

// x: (M, C) with C = channels; gamma, beta, running_mean, running_var: (C).
BatchNormTrainingRef reference_batch_norm_forward_training(
    const std::vector<double>& x, int64_t channels, const std::vector<double>& gamma, const std::vector<double>& beta,
    const std::vector<double>& running_mean, const std::vector<double>& running_var, double eps, double momentum);

// Evaluation: normalises with the running statistics. Returns y: (M, C).
std::vector<double> reference_batch_norm_forward_inference(const std::vector<double>& x, int64_t channels,
                                                           const std::vector<double>& gamma,
                                                           const std::vector<double>& beta,
                                                           const std::vector<double>& running_mean,
                                                           const std::vector<double>& running_var, double eps);

struct BatchNormBackwardRef {
  std::vector<double> dx;      // (M, C)
  std::vector<double> dgamma;  // (C)
  std::vector<double> dbeta;   // (C)
};

// Gradients of training-mode batch norm; the batch statistics are recomputed from x.
BatchNormBackwardRef reference_batch_norm_backward(const std::vector<double>& x, const std::vector<double>& dy,
                                                   int64_t channels, const std::vector<double>& gamma, double eps);

}  // namespace scaletrain::test
