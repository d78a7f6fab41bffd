// Loss scaling (--loss-scale): the loss's gradient is multiplied by a scale before backward, so
// that small gradients survive 16-bit storage, and the gradients are divided by it again after the
// all-reduce, before the optimizer. A step whose gradients hold an inf or NaN is skipped on every
// rank (the optimizer does not run; the data and the learning-rate schedule move on, as with
// PyTorch's GradScaler).
//
// Dynamic scaling follows GradScaler's rules (torch.cuda.amp.GradScaler's defaults): the scale
// starts at 2^16; after 2,000 steps in a row with finite gradients it doubles (unless that would
// overflow a float); a step with an inf or NaN halves it and starts the count again. A fixed scale
// skips such steps and keeps its value. The scale and its counters are part of the run's state
// (train/run_state.hpp), so that a resumed run scales as one that never stopped.
//
// In fp32 the default is none. Multiplying by a power of two and dividing by it again is exact in
// binary floating point, away from overflow and subnormals, so fp32 training with a dynamic scale
// gives the bits of training without one until a step overflows (tests/cli/test_loss_scale.sh).
#pragma once

#include <cstdint>
#include <string>

#include "scaletrain/core/json.hpp"

namespace scaletrain::train {

// GradScaler's default constants.
struct LossScaleRules {
  double initial = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // finite steps in a row before the scale grows
};

// How many skipped steps in a row make the trainer warn (a loss that overflows at every scale,
// or gradients that are NaN whatever the scale).
constexpr int64_t kSkippedStepsWarning = 5;
// How many skipped steps in a row stop a run with a fixed scale as diverged: it cannot lower its
// scale, so a loss or gradient that overflows at every step would skip to the end of the run. (A
// dynamic scale stops when it falls below the smallest float, after 143 halvings from 2^16.)
constexpr int64_t kFixedScaleSkipLimit = 100;

class LossScaler {
 public:
  enum class Mode { none, fixed, dynamic };

  // From --loss-scale: "none", "dynamic", or a positive finite number (a fixed scale). Throws
  // naming the option and the value otherwise.
  static LossScaler from_option(const std::string& value, const LossScaleRules& rules = {});

  Mode mode() const { return mode_; }
  bool enabled() const { return mode_ != Mode::none; }
  // The factor of this step's loss gradient (1 when disabled).
  double scale() const { return scale_; }
  // After the all-reduce: whether every gradient of the step was finite on every rank. Returns
  // whether the optimizer is to apply the step, and moves the scale by the rules. Throws when a
  // dynamic scale falls below the smallest normal float (gradients non-finite at every scale).
  bool update(bool gradients_finite);

  int64_t skipped_steps() const { return skipped_steps_; }              // in the whole run
  int64_t consecutive_skipped() const { return consecutive_skipped_; }  // ending at the last step
  int64_t growth_tracker() const { return growth_tracker_; }            // finite steps since the scale changed

  // "dynamic (GradScaler's rules: 65536, x2 after 2000 finite steps, x0.5 on inf/NaN)", "fixed 1024", "none".
  std::string describe() const;
  static const char* mode_name(Mode mode);
  // A scale as the logs print it: the fewest digits that read back exactly (1048576, not 1.04858e+06).
  static std::string scale_text(double scale);
  // The run state's "loss_scale" object ({"mode", "scale", "growth_tracker", "skipped_steps",
  // "consecutive_skipped"}) and back. A checkpoint of another mode (or none) leaves this scaler as
  // it starts: the start-up lines say so (restore_note).
  Json to_json() const;
  void restore(const Json& state);
  const std::string& restore_note() const { return restore_note_; }

 private:
  Mode mode_ = Mode::none;
  LossScaleRules rules_;
  double scale_ = 1.0;
  int64_t growth_tracker_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t consecutive_skipped_ = 0;
  std::string restore_note_;
};

}  // namespace scaletrain::train
