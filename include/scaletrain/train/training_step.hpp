// The training step, written once. The trainer runs it on the loader's batches, and
// scaletrain-advisor calibrate times it on synthetic ones, so that what the advisor measures is
// the step users train with, for any model.
//
// One optimizer step on a batch already in hand: for each micro-batch, the task's forward and
// loss, then backward (each parameter's gradient announced as soon as it is written: summed by
// the accumulator, in the last micro-batch passed on to the reducer); the reducer's mean over
// ranks; the optimizer at the schedule's learning rate; then the device is synchronised, so that
// the step's time is its work, not its queueing. With loss scaling (use_loss_scaler), backward
// starts from the scaled loss, and after the all-reduce the gradients are unscaled and checked:
// a step with an inf or NaN on any rank is skipped by every rank.
//
// Whoever runs the step watches its phases (forward, backward, allreduce, optimizer) through a
// StepPhaseWatcher: the trainer's timers and GPU events, the calibration's stopwatch.
#pragma once

#include <cstdint>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/models/network.hpp"
#include "scaletrain/optim/optimizer.hpp"
#include "scaletrain/report/phase_timer.hpp"
#include "scaletrain/train/gradient_accumulation.hpp"
#include "scaletrain/train/loss_scaler.hpp"
#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

// Told when each phase of a step begins and ends (in that order, one phase at a time; end also
// when the phase throws).
class StepPhaseWatcher {
 public:
  virtual ~StepPhaseWatcher() = default;
  virtual void begin(report::Phase phase) = 0;
  virtual void end(report::Phase phase) noexcept = 0;
};

class TrainingStep {
 public:
  // Wires the network's grad-ready hook to the accumulator of accumulate_steps micro-batches and
  // the accumulator to the reducer; every part must outlive the step, which unhooks on
  // destruction. rank: this process's rank, a part of the dropout stream's position.
  TrainingStep(Context& ctx, Task& task, models::Network& network, optim::Optimizer& optimizer,
               comm::GradientReducer& reducer, int accumulate_steps, int rank);
  ~TrainingStep();
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;

  // One optimizer step on `batch`, micro_batches() micro-batches of micro_batch samples each, at
  // learning rate lr. global_step: the optimizer steps taken before this one
  // (RunPosition::global_step, restored by a resume); with the micro-batch and the rank it places
  // the network's random draws (Network::set_random_position). Returns the mean of the
  // micro-batches' losses (the caller judges it: a NaN means divergence).
  double run(const Batch& batch, int64_t micro_batch, int64_t global_step, double lr, StepPhaseWatcher& watcher);

  int micro_batches() const { return accumulator_.micro_batches(); }

  // Scales the loss by `scaler` (which outlives the step) from the next step on; comm: the ranks
  // that agree on skipping a step. A disabled scaler changes nothing. Reads the test hook
  // SCALETRAIN_INJECT_OVERFLOW=STEP[:RANK[:after]] (docs/mixed-precision.md): at optimizer step
  // STEP (from 1), on RANK (default 0), the loss's gradient is made infinite; with `after`, that
  // rank alone finds an inf after the all-reduce.
  void use_loss_scaler(LossScaler* scaler, const comm::Communicator* comm);

  struct InjectedOverflow {
    int64_t step = -1;  // from 1; -1: none
    int64_t last = -1;  // the steps step..last
    bool after_allreduce = false;
    bool loss = false;  // the loss itself made inf (a forward that overflowed), and its gradient
    bool at(int64_t s) const { return s >= step && s <= last; }
  };
  // Whether the last run() skipped its optimizer step (inf or NaN gradients).
  bool last_step_skipped() const { return last_step_skipped_; }

 private:
  double forward_and_backward(const Batch& micro_batch, int k, int64_t global_step, StepPhaseWatcher& watcher);
  double loss_scale_for(int64_t global_step) const;
  bool unscaled_gradients_finite(int64_t global_step);

  Context& ctx_;
  Task& task_;
  models::Network& network_;
  optim::Optimizer& optimizer_;
  comm::GradientReducer& reducer_;
  GradientAccumulator accumulator_;
  int rank_;
  LossScaler* scaler_ = nullptr;
  const comm::Communicator* comm_ = nullptr;
  InjectedOverflow inject_;  // the test hook's, for this rank
  Tensor master_weights_;    // a mixed precision's fp32 weights during forward and backward
  bool last_step_skipped_ = false;
};

}  // namespace scaletrain::train
