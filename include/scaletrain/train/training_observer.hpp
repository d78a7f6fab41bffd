// Those who watch the training loop from outside it (LBANN's callbacks on batch and epoch ends):
// the loop steps, evaluates and moves the run's position; its accounting (each step's time, the
// progress and epoch lines, the device's GPU times, the MLPerf log, and later a model's own
// counts, such as a language model's tokens) lives in observers, each told of the loop's events
// and filling its part of the report's summary. A new count is a new observer, not a new member
// of the loop.
//
// The events of one epoch, in order: on_epoch_start; on_step_end per step; on_epoch_end when its
// steps are done; on_evaluation_start and on_evaluation_end when it is evaluated; on_epoch_record
// when its record is complete. Then, once per segment, on_run_end when the run is complete (not
// after a stop signal: the run goes on in a later segment).
#pragma once

#include <cstdint>
#include <string>

#include "scaletrain/report/train_report.hpp"
#include "scaletrain/train/run_state.hpp"
#include "scaletrain/train/task.hpp"

namespace scaletrain::train {

// One optimizer step, as the loop reports it after moving the position past it.
struct StepEnd {
  const RunPosition& position;  // after the step
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;   // of this run (--max-steps or all epochs)
  int epochs = 0;            // --epochs
  const Batch& batch;        // this rank's (all micro-batches)
  int64_t global_batch = 0;  // this step's work over all ranks, in the task's unit (samples or tokens)
  double loss = 0.0;         // this rank's mean over the step's micro-batches
  double lr = 0.0;
  double seconds = 0.0;  // this rank's wall time: the wait for the batch and the step
};

// An epoch's record (report.json "epochs"), complete: after its evaluation, if it had one, and
// before the position moves on to the next epoch.
struct EpochRecord {
  const RunPosition& position;             // at the epoch's end (or at the run's last step inside it)
  bool last = false;                       // the run's steps are all done
  double train_loss = 0.0;                 // mean over the epoch's steps and the ranks
  const Evaluation* evaluation = nullptr;  // null when the epoch was not evaluated
  std::string quality;                     // the evaluation as the log prints it ("top-1 46.62%", "top-1 -")
  double elapsed_s = 0.0;                  // the time-to-target clock
  double reached_target_after_s = -1.0;    // the clock when this epoch's evaluation reached the target; -1 if not
  double target = 0.0;                     // --target-accuracy (0: none)
};

// How the run ended, once it is complete (every step, the target, or --max-steps).
struct RunOutcome {
  const RunPosition& position;
  bool target_reached = false;
  int64_t skipped_steps = 0;  // steps skipped for an inf or NaN gradient (loss scaling)
  double loss_scale = 0.0;    // the loss scale at the end; 0 without loss scaling
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  // An epoch starts (or a resumed one continues) at `position`.
  virtual void on_epoch_start(const RunPosition& position) {}
  virtual void on_step_end(const StepEnd& step) {}
  // The epoch's steps are done (all of them, or the run's last ones inside it).
  virtual void on_epoch_end(const RunPosition& position) {}
  virtual void on_evaluation_start(const RunPosition& position) {}
  virtual void on_evaluation_end(const RunPosition& position, const Evaluation& evaluation) {}
  virtual void on_epoch_record(const EpochRecord& record) {}
  virtual void on_run_end(const RunOutcome& outcome) {}
  // The job is failing (an error, or a rank's watchdog aborting it): the observer's last words.
  // May be called from another thread than the loop's; must not throw.
  virtual void on_run_aborted(const RunPosition& position, const std::string& why) noexcept {}
  // Its part of the segment's summary (report.json), at the segment's end.
  virtual void fill(report::TrainSummary& summary) {}
};

}  // namespace scaletrain::train
