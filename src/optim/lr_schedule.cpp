// Learning-rate schedules (formulas and sources in the header).
#include "scaletrain/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "scaletrain/core/error.hpp"

namespace scaletrain::optim {

const char* lr_schedule_kinds() { return "cosine, poly, step, constant, rsqrt"; }

LrSchedule::LrSchedule(const LrScheduleOptions& options) : options_(options) {
  if (options.kind == "cosine") {
    kind_ = Kind::cosine;
  } else if (options.kind == "poly") {
    kind_ = Kind::poly;
  } else if (options.kind == "step") {
    kind_ = Kind::step;
  } else if (options.kind == "constant") {
    kind_ = Kind::constant;
  } else if (options.kind == "rsqrt") {
    kind_ = Kind::rsqrt;
  } else {
    ST_THROW("unknown learning-rate schedule '" << options.kind << "' (--lr-schedule): known schedules are "
                                                << lr_schedule_kinds());
  }
  ST_CHECK(std::isfinite(options.base_lr) && options.base_lr > 0.0,
           "--base-lr must be a finite value > 0, got " << options.base_lr);
  ST_CHECK(std::isfinite(options.warmup_epochs) && options.warmup_epochs >= 0.0,
           "--warmup-epochs must be >= 0, got " << options.warmup_epochs);
  ST_CHECK(options.steps_per_epoch >= 1,
           "learning-rate schedule: steps per epoch must be >= 1, got " << options.steps_per_epoch);
  ST_CHECK(options.total_steps >= 1, "learning-rate schedule: total steps must be >= 1, got " << options.total_steps);
  warmup_steps_ = options.warmup_steps >= 0
                      ? options.warmup_steps
                      : std::llround(options.warmup_epochs * static_cast<double>(options.steps_per_epoch));
  ST_CHECK(kind_ != Kind::rsqrt || warmup_steps_ >= 1,
           "rsqrt schedule: needs a warmup of at least one step (--warmup-steps; the reference: 16000)");

  if (kind_ == Kind::poly) {
    ST_CHECK(std::isfinite(options.end_lr) && options.end_lr >= 0.0 && options.end_lr <= options.base_lr,
             "poly schedule: the end learning rate must be in [0, base LR " << options.base_lr << "], got "
                                                                            << options.end_lr);
    ST_CHECK(std::isfinite(options.poly_power) && options.poly_power > 0.0,
             "poly schedule: the power (--lr-poly-power) must be > 0, got " << options.poly_power);
  }
  if (kind_ == Kind::step) {
    ST_CHECK(std::isfinite(options.step_gamma) && options.step_gamma > 0.0,
             "step schedule: the decay factor must be > 0, got " << options.step_gamma);
    ST_CHECK(std::isfinite(options.step_every) && options.step_every >= 0.0,
             "step schedule: the interval (--lr-step-every) must be >= 0 epochs, got " << options.step_every);
    ST_CHECK(options.step_epochs.empty() || options.step_every == 0.0,
             "step schedule: give the epochs of the drops or an interval, not both");
    std::vector<double> epochs = options.step_epochs;
    const double total_epochs = static_cast<double>(options.total_steps) / options.steps_per_epoch;
    if (options.step_every > 0.0) {
      ST_CHECK(total_epochs / options.step_every <= 1e6,
               "step schedule: a drop every " << options.step_every << " epochs makes more than a million drops");
      for (int64_t k = 1; static_cast<double>(k) * options.step_every < total_epochs; ++k)
        epochs.push_back(static_cast<double>(k) * options.step_every);
    } else if (epochs.empty()) {
      epochs = {0.3 * total_epochs, 0.6 * total_epochs, 0.8 * total_epochs};
    }
    for (double e : epochs) {
      ST_CHECK(std::isfinite(e) && e >= 0.0, "step schedule: decay epoch " << e << " is not >= 0");
      boundaries_.push_back(std::llround(e * static_cast<double>(options.steps_per_epoch)));
    }
    std::sort(boundaries_.begin(), boundaries_.end());
  }
}

double LrSchedule::at(int64_t step) const {
  ST_CHECK(step >= 0, "learning rate asked for step " << step);
  const double base = options_.base_lr;
  if (kind_ == Kind::rsqrt) {
    const double s = static_cast<double>(step), w = static_cast<double>(warmup_steps_);
    return base * std::min(1.0, s / w) * std::sqrt(w / std::max(s, w));
  }
  // (s + 1) / W first, so that the last warmup step gives base_lr exactly.
  if (step < warmup_steps_) return base * (static_cast<double>(step + 1) / static_cast<double>(warmup_steps_));

  const int64_t decay_steps = std::max<int64_t>(1, options_.total_steps - warmup_steps_);
  const double p = std::min(1.0, static_cast<double>(step - warmup_steps_) / static_cast<double>(decay_steps));
  constexpr double kPi = 3.14159265358979323846;
  switch (kind_) {
    case Kind::constant:
      return base;
    case Kind::cosine:
      return p == 0.0 ? base : base * 0.5 * (1.0 + std::cos(kPi * p));
    case Kind::poly: {
      const double end = options_.end_lr;
      // (1 - p) * (1 - p) for the default power 2: the same bits as before the power was an option.
      const double decay = options_.poly_power == 2.0 ? (1.0 - p) * (1.0 - p) : std::pow(1.0 - p, options_.poly_power);
      return p == 0.0 ? base : end + (base - end) * decay;
    }
    case Kind::rsqrt:
      return base;  // handled above
    case Kind::step: {
      double lr = base;
      for (int64_t b : boundaries_)
        if (step >= b) lr *= options_.step_gamma;
      return lr;
    }
  }
  return base;
}

}  // namespace scaletrain::optim
