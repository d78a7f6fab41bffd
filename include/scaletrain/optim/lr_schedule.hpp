// Learning-rate schedules: linear warmup, then cosine, polynomial or step decay or none, as functions of
// the optimizer step. base_lr is the learning rate for the run's global batch: nothing here
// scales it with the batch size or the number of ranks (Goyal et al. 2017 leave that to the user).
//
// With W = round(warmup_epochs * steps_per_epoch) warmup steps and T = total_steps:
//   warmup (s < W):  base_lr * (s + 1) / W            (from base_lr / W up to base_lr at s = W - 1)
//   after, with progress p = (s - W) / max(1, T - W), clamped to [0, 1]:
//   cosine: base_lr * (1 + cos(pi * p)) / 2           (Loshchilov & Hutter 2017; reaches 0 at s = T)
//   poly:   end_lr + (base_lr - end_lr) * (1 - p)^power  (the MLPerf ResNet reference: power 2;
//                                                      Caffe's bvlc_googlenet: 0.5, to 0; reaches
//                                                      end_lr at s = T)
//   step:   base_lr * step_gamma^k, k = number of step_epochs e with s >= round(e * steps_per_epoch)
//           (default step_epochs: 30%, 60% and 80% of the run's epochs T / steps_per_epoch, which is
//           the classic 30/60/80 of 90 epochs of He et al. 2016 scaled to any run length; with
//           step_every E > 0: E, 2E, 3E, ... below the run's epochs, TF's staircase exponential
//           decay, as Inception-v3's 0.94 every 2 epochs). Drops count from step 0, warmup included,
//           as Caffe's and TF's solvers count iterations.
//   constant: base_lr                                 (the MLPerf NCF reference's Adam)
//   rsqrt:  base_lr * min(1, s / W) * sqrt(W / max(s, W))   (the MLPerf Transformer reference's
//           2 d^-1/2 min(1, s/W) max(s, W)^-1/2 with base_lr its peak 2 (d W)^-1/2 at s = W; its
//           own warmup from 0 at step 0, as the reference's first update; needs W >= 1)
// With warmup_epochs 0, at(0) == base_lr exactly. A warmup longer than the run is allowed (a short
// --max-steps smoke test of a long config): the run then ends inside the warmup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace scaletrain::optim {

struct LrScheduleOptions {
  std::string kind = "cosine";  // cosine | poly | step | constant
  double base_lr = 0.1;         // the LR for the run's global batch; no implicit scaling
  double warmup_epochs = 0.0;   // linear warmup from base_lr/warmup_steps up to base_lr
  int64_t warmup_steps = -1;    // >= 0: the warmup in optimizer steps, instead of warmup_epochs
  int64_t steps_per_epoch = 1;
  int64_t total_steps = 1;          // epochs * steps_per_epoch (or --max-steps)
  double end_lr = 1e-4;             // poly only: the final LR (MLPerf ResNet reference value)
  double poly_power = 2.0;          // poly only: the exponent
  std::vector<double> step_epochs;  // step only: epochs (may be fractional) where the LR drops;
                                    // empty: {0.3, 0.6, 0.8} * total epochs
  double step_every = 0.0;          // step only, instead of step_epochs: a drop every this many epochs
  double step_gamma = 0.1;          // step only: factor at each drop
};

class LrSchedule {
 public:
  // Throws a clear error on an unknown kind (listing the known ones) or invalid numbers.
  explicit LrSchedule(const LrScheduleOptions& options);
  // Learning rate of optimizer step `step` (counted from 0).
  double at(int64_t step) const;

  const LrScheduleOptions& options() const { return options_; }
  int64_t warmup_steps() const { return warmup_steps_; }
  // The step boundaries where the step schedule drops (resolved from step_epochs).
  const std::vector<int64_t>& step_boundaries() const { return boundaries_; }

 private:
  enum class Kind { cosine, poly, step, constant, rsqrt };
  LrScheduleOptions options_;
  Kind kind_ = Kind::cosine;
  int64_t warmup_steps_ = 0;
  std::vector<int64_t> boundaries_;
};

// "cosine, poly, step, constant, rsqrt": for help texts and error messages.
const char* lr_schedule_kinds();

}  // namespace scaletrain::optim
