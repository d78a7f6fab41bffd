// The training step (training_step.hpp): micro-batches of forward, loss and backward, the mean
// over ranks, the optimizer.
#include "scaletrain/train/training_step.hpp"

#include <cstdlib>
#include <limits>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/loss_scale.hpp"
#include "scaletrain/train/mixed_precision.hpp"

namespace scaletrain::train {
namespace {

using report::Phase;

// The loss scale of the test hook's step on its rank: no float holds it, so every nonzero element
// of the loss's gradient becomes inf (the loss ops compute the factor in double).
constexpr double kOverflowingScale = 1e300;

// SCALETRAIN_INJECT_OVERFLOW=STEP[-LAST][:RANK[:after|:loss]] for `rank`: its steps (from 1; -1:
// none) and whether the overflow comes after the all-reduce (this rank alone then sees it) or is
// in the loss itself as well as its gradient (a forward that overflowed).
TrainingStep::InjectedOverflow injected_overflow(int rank) {
  const char* text = std::getenv("SCALETRAIN_INJECT_OVERFLOW");
  if (text == nullptr || *text == '\0') return {};
  const std::string value = text;
  char* end = nullptr;
  const long long step = std::strtoll(value.c_str(), &end, 10);
  long long last = step, on_rank = 0;
  if (*end == '-') last = std::strtoll(end + 1, &end, 10);
  bool after = false, loss = false;
  if (*end == ':') on_rank = std::strtoll(end + 1, &end, 10);
  if (std::string(end) == ":after") {
    after = true;
    end += 6;
  } else if (std::string(end) == ":loss") {
    loss = true;
    end += 5;
  }
  ST_CHECK(step >= 1 && last >= step && on_rank >= 0 && *end == '\0',
           "SCALETRAIN_INJECT_OVERFLOW='" << value
                                          << "' is not STEP[-LAST][:RANK[:after|:loss]] with 1 <= STEP <= LAST (a "
                                             "test hook)");
  if (on_rank != rank) return {};
  return {step, last, after, loss};
}

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

void TrainingStep::use_loss_scaler(LossScaler* scaler, const comm::Communicator* comm) {
  scaler_ = scaler != nullptr && scaler->enabled() ? scaler : nullptr;
  comm_ = comm;
  inject_ = scaler_ ? injected_overflow(rank_) : InjectedOverflow{};
}

double TrainingStep::run(const Batch& batch, int64_t micro_batch, int64_t global_step, double lr,
                         StepPhaseWatcher& watcher) {
  double loss = 0.0;
  task_.set_loss_scale(loss_scale_for(global_step));
  {
    const HalfWeights half(ctx_, network_.params(), master_weights_);  // a mixed precision's weight copies
    if (micro_batches() == 1)  // the batch whole: token batches hold a different number of rows each step
      loss = forward_and_backward(batch, 0, global_step, watcher);
    else
      for (int k = 0; k < micro_batches(); ++k)
        loss += forward_and_backward(batch.rows(k * micro_batch, micro_batch), k, global_step, watcher);
  }
  if (inject_.at(global_step + 1) && inject_.loss) loss = std::numeric_limits<double>::infinity();
  {
    WatchedPhase phase(watcher, Phase::allreduce);
    reducer_.finish();
  }
  {
    WatchedPhase phase(watcher, Phase::optimizer);
    last_step_skipped_ = scaler_ != nullptr && !scaler_->update(unscaled_gradients_finite(global_step));
    if (!last_step_skipped_) optimizer_.step(ctx_, lr);
    ctx_.synchronize();  // the step's device work is done: its time is real, not queued
  }
  return loss / micro_batches();
}

double TrainingStep::loss_scale_for(int64_t global_step) const {
  if (scaler_ == nullptr) return 1.0;
  const bool inject = inject_.at(global_step + 1) && !inject_.after_allreduce;
  return inject ? kOverflowingScale : scaler_->scale();
}

// The all-reduced gradients divided by the loss scale, and whether every rank found them all
// finite. The ranks hold the same sums, but agreeing costs one small all-reduce and makes the
// skip a decision of all ranks whatever the all-reduce's rounding.
bool TrainingStep::unscaled_gradients_finite(int64_t global_step) {
  int64_t here =
      ops::unscale_gradients(ctx_, static_cast<float>(1.0 / scaler_->scale()), network_.params().flat_grads());
  if (inject_.at(global_step + 1) && inject_.after_allreduce) ++here;  // the test hook: this rank alone
  return (comm_ != nullptr ? comm_->allreduce_max(here) : here) == 0;
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
