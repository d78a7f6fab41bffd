// Loss scaling's rules and state (loss_scaler.hpp).
#include "scaletrain/train/loss_scaler.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "scaletrain/core/error.hpp"

namespace scaletrain::train {
namespace {

// The scale exactly, as C's hexadecimal float ("0x1p+16"): JSON numbers are written with 15
// digits, which do not hold every power of two a long run of halvings reaches.
std::string exact_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

double parse_exact(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  ST_CHECK(errno == 0 && end != text.c_str() && *end == '\0' && std::isfinite(v) && v > 0,
           "the checkpoint's loss scale '" << text << "' is not a positive finite number");
  return v;
}

}  // namespace

// The fewest significant digits that read back as v: 1048576, 1234567, 0.5, 2.9802322387695312e-08.
std::string LossScaler::scale_text(double v) {
  char buf[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

const char* LossScaler::mode_name(Mode mode) {
  switch (mode) {
    case Mode::none:
      return "none";
    case Mode::fixed:
      return "fixed";
    case Mode::dynamic:
      return "dynamic";
  }
  return "?";
}

LossScaler LossScaler::from_option(const std::string& value, const LossScaleRules& rules) {
  LossScaler s;
  s.rules_ = rules;
  if (value == "none") return s;
  if (value == "dynamic") {
    s.mode_ = Mode::dynamic;
    s.scale_ = rules.initial;
    return s;
  }
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || v < std::numeric_limits<float>::min() ||
      v > std::numeric_limits<float>::max())
    throw UsageError("--loss-scale '" + value +
                     "' is not none, dynamic or a positive number a float can hold, 1.2e-38 to 3.4e+38 (e.g. 1024)");
  s.mode_ = Mode::fixed;
  s.scale_ = v;
  return s;
}

bool LossScaler::update(bool gradients_finite) {
  if (mode_ == Mode::none) return true;
  if (!gradients_finite) {
    ++skipped_steps_;
    ++consecutive_skipped_;
    if (mode_ == Mode::dynamic) {
      scale_ *= rules_.backoff_factor;
      growth_tracker_ = 0;
      // 144 halvings in a row from 2^16: no float holds the inverse any more. PyTorch would skip
      // on towards zero; here the run stops, naming what happened.
      ST_CHECK(scale_ >= std::numeric_limits<float>::min(),
               "training diverged: the gradients held inf or NaN at "
                   << consecutive_skipped_ << " steps in a row and the loss scale fell to " << scale_text(scale_)
                   << ", below the smallest normal float (try a smaller --base-lr)");
    } else {
      ST_CHECK(consecutive_skipped_ < kFixedScaleSkipLimit,
               "training diverged: the gradients held inf or NaN at "
                   << consecutive_skipped_ << " steps in a row with the fixed loss scale " << scale_text(scale_)
                   << " (try a smaller --loss-scale, dynamic, or a smaller --base-lr)");
    }
    return false;
  }
  consecutive_skipped_ = 0;
  if (mode_ == Mode::dynamic && ++growth_tracker_ == rules_.growth_interval) {
    // GradScaler grows the scale only where the grown one is still a finite float.
    const double grown = scale_ * rules_.growth_factor;
    if (grown <= std::numeric_limits<float>::max()) scale_ = grown;
    growth_tracker_ = 0;
  }
  return true;
}

std::string LossScaler::describe() const {
  std::ostringstream s;
  switch (mode_) {
    case Mode::none:
      return "none";
    case Mode::fixed:
      s << "fixed " << scale_text(scale_) << " (steps with inf or NaN gradients are skipped)";
      return s.str();
    case Mode::dynamic:
      s << "dynamic (PyTorch GradScaler's rules: from " << rules_.initial << ", x" << rules_.growth_factor << " after "
        << rules_.growth_interval << " finite steps, x" << rules_.backoff_factor
        << " and the step skipped on inf or NaN)";
      return s.str();
  }
  return "?";
}

Json LossScaler::to_json() const {
  Json j = Json::object();
  j.set("mode", mode_name(mode_));
  j.set("scale", scale_);
  j.set("scale_exact", exact_text(scale_));
  j.set("growth_tracker", growth_tracker_);
  j.set("skipped_steps", skipped_steps_);
  j.set("consecutive_skipped", consecutive_skipped_);
  return j;
}

void LossScaler::restore(const Json& state) {
  restore_note_.clear();
  const std::string mode = state.contains("mode") ? state.at("mode").as_string() : "none";
  if (mode != mode_name(mode_)) {
    restore_note_ = std::string("loss scale: the checkpoint's is ") + mode + ", this run's " + mode_name(mode_) +
                    (mode_ == Mode::dynamic ? ": it starts again from " + scale_text(scale_) : "");
    return;
  }
  if (mode_ == Mode::none) return;
  skipped_steps_ = state.at("skipped_steps").as_int();
  consecutive_skipped_ = state.at("consecutive_skipped").as_int();
  if (mode_ == Mode::fixed) return;  // the option gives the value; a changed one is this run's
  scale_ = parse_exact(state.at("scale_exact").as_string());
  growth_tracker_ = state.at("growth_tracker").as_int();
  restore_note_ = "loss scale: resumed at " + scale_text(scale_) + ", " + std::to_string(growth_tracker_) +
                  " finite steps since it last changed";
}

}  // namespace scaletrain::train
