// The training step (training_step.hpp): micro-batches of forward, loss and backward, the mean
// over ranks, the optimizer.
#include "scaletrain/train/training_step.hpp"

namespace scaletrain::train {
namespace {

using report::Phase;

// One phase of the step, begun and ended around a scope (ended also when the phase throws).
class WatchedPhase {
 public:
  WatchedPhase(StepPhaseWatcher& watcher, Phase phase) : watcher_(watcher), phase_(phase) { watcher_.begin(phase_); }
  ~WatchedPhase() { watcher_.end(phase_); }
  WatchedPhase(const WatchedPhase&) = delete;
  WatchedPhase& operator=(const WatchedPhase&) = delete;

 private:
  StepPhaseWatcher& watcher_;
  Phase phase_;
};

}  // namespace

TrainingStep::TrainingStep(Context& ctx, Task& task, models::Network& network, optim::Optimizer& optimizer,
                           comm::GradientReducer& reducer, int accumulate_steps, int rank)
    : ctx_(ctx),
      task_(task),
      network_(network),
      optimizer_(optimizer),
      reducer_(reducer),
      accumulator_(ctx, network.params(), accumulate_steps, [this](int i) { reducer_.on_grad_ready(i); }),
      rank_(rank) {
  network_.params().set_grad_ready_hook([this](int i) { accumulator_.on_grad_ready(i); });
}

TrainingStep::~TrainingStep() { network_.params().set_grad_ready_hook(nullptr); }

double TrainingStep::run(const Batch& batch, int64_t micro_batch, int64_t global_step, double lr,
                         StepPhaseWatcher& watcher) {
  double loss = 0.0;
  if (micro_batches() == 1)  // the batch whole: token batches hold a different number of rows each step
    loss = forward_and_backward(batch, 0, global_step, watcher);
  else
    for (int k = 0; k < micro_batches(); ++k)
      loss += forward_and_backward(batch.rows(k * micro_batch, micro_batch), k, global_step, watcher);
  {
    WatchedPhase phase(watcher, Phase::allreduce);
    reducer_.finish();
  }
  {
    WatchedPhase phase(watcher, Phase::optimizer);
    optimizer_.step(ctx_, lr);
    ctx_.synchronize();  // the step's device work is done: its time is real, not queued
  }
  return loss / micro_batches();
}

// Micro-batch k: forward and loss, then backward; in the step's last micro-batch the reducer's
// step begins, so that its buckets start as backward completes them. The random draws (dropout)
// are placed by (step, micro-batch, rank) alone, never by draws before them, so that a resumed
// run repeats them.
double TrainingStep::forward_and_backward(const Batch& micro_batch, int k, int64_t global_step,
                                          StepPhaseWatcher& watcher) {
  double loss = 0.0;
  network_.set_random_position(global_step, k, rank_);
  {
    WatchedPhase phase(watcher, Phase::forward);
    loss = task_.forward_and_loss(ctx_, network_, micro_batch);
  }
  {
    WatchedPhase phase(watcher, Phase::backward);
    accumulator_.start_micro_batch(k);
    if (accumulator_.last_micro_batch()) reducer_.begin_step();
    task_.backward(ctx_, network_);
  }
  return loss;
}

}  // namespace scaletrain::train
