// Private to src/train: the training loop's own observers (training_observer.hpp). StepClock keeps
// each step's wall time, the segment's training time and samples, the phase timers after the
// first step (the warm-up the report leaves out) and a trace event per step; ProgressLine prints
// rank 0's progress line every --log-every steps and each epoch's line. DeviceMetrics
// (device_metrics.hpp) and the MLPerf log (mlperf_log.hpp) are the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scaletrain/core/timer.hpp"
#include "scaletrain/report/phase_timer.hpp"
#include "scaletrain/train/training_observer.hpp"

namespace scaletrain::train {

// "5m12s", "2h03m"; "?" for a negative or infinite time.
std::string format_duration(double seconds);

class StepClock final : public TrainingObserver {
 public:
  // timers: the loop's phase timers, copied after the segment's first step.
  explicit StepClock(const report::PhaseTimers& timers) : timers_(timers) {}
  void on_step_end(const StepEnd& step) override;
  void fill(report::TrainSummary& summary) override;

  double train_seconds() const { return train_s_; }  // this rank's, the segment's steps
  // When the segment's first step ended (Unix ms), or -1 before it.
  double first_step_done_unix_ms() const { return first_step_done_unix_ms_; }

 private:
  const report::PhaseTimers& timers_;
  report::PhaseTimers first_step_timers_;
  std::vector<double> step_seconds_;
  double train_s_ = 0.0;
  int64_t samples_ = 0;  // this rank's
  double first_step_done_unix_ms_ = -1.0;
};

// "epoch 2/30  step 150/390  loss 1.2345  lr 0.10000  1234.5 samples/s  eta 5m12s": the mean loss
// and the rate over the steps since the last line (log_every 0: no line). At each epoch's end,
// "epoch 2 done  train loss 1.2001  val top-1 46.62%  elapsed 5m12s", and the line saying when the
// target was reached.
class ProgressLine final : public TrainingObserver {
 public:
  explicit ProgressLine(int log_every) : log_every_(log_every) {}
  // What the rate counts: the task's unit (Task::work_unit).
  void set_unit(std::string unit) { unit_ = std::move(unit); }
  void on_epoch_start(const RunPosition& position) override;
  void on_step_end(const StepEnd& step) override;
  void on_epoch_record(const EpochRecord& record) override;

 private:
  int log_every_;
  std::string unit_ = "samples";  // or tokens
  Stopwatch clock_;
  int64_t steps_ = 0;
  int64_t units_ = 0;
  double loss_ = 0.0;
};

}  // namespace scaletrain::train
