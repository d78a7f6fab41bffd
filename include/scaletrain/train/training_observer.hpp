// Those who watch the training loop from outside it (LBANN's callbacks on batch and epoch ends):
// the loop steps and moves the run's position; its accounting (each step's time, the progress
// line, the device's GPU times, and later a model's own counts, such as a language model's
// tokens) lives in observers, each told of every epoch's start and every step's end and filling
// its part of the report's summary. A new count is a new observer, not a new member of the loop.
#pragma once

#include <cstdint>

#include "scaletrain/report/train_report.hpp"
#include "scaletrain/train/run_state.hpp"
#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

// One optimizer step, as the loop reports it after moving the position past it.
struct StepEnd {
  const RunPosition& position;  // after the step
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;  // of this run (--max-steps or all epochs)
  int epochs = 0;           // --epochs
  const Batch& batch;       // this rank's (all micro-batches)
  int64_t global_batch = 0;
  double loss = 0.0;  // this rank's mean over the step's micro-batches
  double lr = 0.0;
  double seconds = 0.0;  // this rank's wall time: the wait for the batch and the step
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  // An epoch starts (or a resumed one continues) at `position`.
  virtual void on_epoch_start(const RunPosition& position) {}
  virtual void on_step_end(const StepEnd& step) = 0;
  // Its part of the segment's summary (report.json), at the segment's end.
  virtual void fill(report::TrainSummary& summary) {}
};

}  // namespace scaletrain::train
