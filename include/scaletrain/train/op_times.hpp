// train --op-times: the time of every op of the training steps (ops/op_profiler.hpp), the first
// step left out as step_split leaves it, evaluation not counted; report.json's op_times (rank
// 0's) and a table of the longest at the run's end, so that a GPU run tells op by op where its
// step goes.
#pragma once

#include "scaletrain/backend/context.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/ops/op_profiler.hpp"
#include "scaletrain/train/training_observer.hpp"

namespace scaletrain::train {

class OpTimes final : public TrainingObserver {
 public:
  // Times the ops this thread dispatches from now on; ctx must outlive this.
  explicit OpTimes(Context& ctx) : profiler_(ctx) {}

  // After the step's synchronize (the device's observer comes first).
  void on_step_end(const StepEnd&) override;
  void on_evaluation_start(const RunPosition&) override { profiler_.set_paused(true); }
  void on_evaluation_end(const RunPosition&, const Evaluation&) override { profiler_.set_paused(false); }
  void fill(report::TrainSummary& summary) override;

 private:
  ops::OpProfiler profiler_;
  bool warm_ = false;  // the segment's first step has ended
};

// report.json's op_times: {clock, steps, top_level_ms_per_step, ops: [{op, calls_per_step,
// ms_per_step, share, nested}]}, the longest first; null when no step was kept.
Json op_times_json(const ops::OpProfiler& profiler);

}  // namespace scaletrain::train
