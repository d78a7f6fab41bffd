// The training loop's own observers (step_accounting.hpp).
#include "train/step_accounting.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scaletrain/core/log.hpp"
#include "scaletrain/core/trace.hpp"

namespace scaletrain::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

void StepClock::on_step_end(const StepEnd& step) {
  if (trace::enabled()) {
    const double end = now_seconds();
    trace::record("step " + std::to_string(step.position.global_step), "step", trace::kMainThread, end - step.seconds,
                  end);
  }
  train_s_ += step.seconds;
  step_seconds_.push_back(step.seconds);
  if (step_seconds_.size() == 1) first_step_timers_ = timers_;  // the warm-up, left out of step_split
  samples_ += step.batch.size();
  if (first_step_done_unix_ms_ < 0) first_step_done_unix_ms_ = unix_time_ms();
}

void StepClock::fill(report::TrainSummary& summary) {
  summary.step_seconds = &step_seconds_;
  summary.first_step_timers = &first_step_timers_;
  summary.segment_train_s = train_s_;
  summary.segment_samples = samples_;
}

void ProgressLine::on_epoch_start(const RunPosition&) {
  clock_.reset();
  steps_ = 0;
  units_ = 0;
  loss_ = 0.0;
}

void ProgressLine::on_step_end(const StepEnd& step) {
  loss_ += step.loss;
  ++steps_;
  units_ += step.global_batch;
  const RunPosition& pos = step.position;
  if (log_every_ <= 0 || pos.global_step % log_every_ != 0) return;
  const double dt = clock_.elapsed();
  const double rate = static_cast<double>(units_) / std::max(dt, 1e-9);
  const double eta = (step.total_steps - pos.global_step) * dt / steps_;
  char line[256];
  std::snprintf(line, sizeof line, "epoch %lld/%d  step %lld/%lld  loss %.4f  lr %.5f  %.1f %s/s  eta %s",
                static_cast<long long>(pos.epoch + 1), step.epochs, static_cast<long long>(pos.step_in_epoch),
                static_cast<long long>(step.steps_per_epoch), loss_ / steps_, step.lr, rate, unit_.c_str(),
                format_duration(eta).c_str());
  ST_LOG(line);
  on_epoch_start(pos);
}

void ProgressLine::on_epoch_record(const EpochRecord& record) {
  char line[256];
  std::snprintf(line, sizeof line, "epoch %lld done  train loss %.4f  val %s  elapsed %s",
                static_cast<long long>(record.position.epoch + 1), record.train_loss, record.quality.c_str(),
                format_duration(record.elapsed_s).c_str());
  ST_LOG(line);
  if (record.reached_target_after_s >= 0)
    ST_LOG("reached target accuracy " << record.target << " after " << record.reached_target_after_s << " s");
}

}  // namespace scaletrain::train
