// The loss scaler (train/loss_scaler.hpp) against PyTorch GradScaler's rules, worked out by hand
// from its documented constants (init_scale 2^16, growth_factor 2, backoff_factor 0.5,
// growth_interval 2000): the scale after runs of finite and overflowing steps, the cap at the
// largest float, a fixed scale, the option's errors, and the state a checkpoint keeps resuming
// the same sequence.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/train/loss_scaler.hpp"

using scaletrain::UsageError;
using scaletrain::train::LossScaler;
using scaletrain::train::LossScaleRules;

namespace {

// `n` steps of the same outcome; returns how many of them the optimizer was to apply.
int steps(LossScaler& s, int n, bool finite) {
  int applied = 0;
  for (int i = 0; i < n; ++i) applied += s.update(finite) ? 1 : 0;
  return applied;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(loss_scaler)

BOOST_AUTO_TEST_CASE(none_scales_nothing_and_skips_nothing) {
  LossScaler s = LossScaler::from_option("none");
  BOOST_TEST(!s.enabled());
  BOOST_TEST(s.scale() == 1.0);
  BOOST_TEST(steps(s, 3, false) == 3);  // nothing to skip for: the trainer's divergence check judges
  BOOST_TEST(s.skipped_steps() == 0);
}

BOOST_AUTO_TEST_CASE(dynamic_grows_after_2000_finite_steps) {
  LossScaler s = LossScaler::from_option("dynamic");
  BOOST_TEST(s.scale() == 65536.0);
  BOOST_TEST(steps(s, 1999, true) == 1999);
  BOOST_TEST(s.scale() == 65536.0);
  BOOST_TEST(s.growth_tracker() == 1999);
  s.update(true);  // the 2000th
  BOOST_TEST(s.scale() == 131072.0);
  BOOST_TEST(s.growth_tracker() == 0);
  steps(s, 2000, true);
  BOOST_TEST(s.scale() == 262144.0);
  BOOST_TEST(s.skipped_steps() == 0);
}

BOOST_AUTO_TEST_CASE(an_overflow_halves_the_scale_skips_the_step_and_restarts_the_count) {
  LossScaler s = LossScaler::from_option("dynamic");
  steps(s, 1500, true);
  BOOST_TEST(!s.update(false));
  BOOST_TEST(s.scale() == 32768.0);
  BOOST_TEST(s.growth_tracker() == 0);
  BOOST_TEST(s.skipped_steps() == 1);
  BOOST_TEST(s.consecutive_skipped() == 1);
  // 1999 finite steps after the skip are not enough (the 1500 before it no longer count).
  steps(s, 1999, true);
  BOOST_TEST(s.scale() == 32768.0);
  BOOST_TEST(s.consecutive_skipped() == 0);
  s.update(true);
  BOOST_TEST(s.scale() == 65536.0);
  // Three in a row: 65536 / 8.
  BOOST_TEST(steps(s, 3, false) == 0);
  BOOST_TEST(s.scale() == 8192.0);
  BOOST_TEST(s.consecutive_skipped() == 3);
  BOOST_TEST(s.skipped_steps() == 4);
}

BOOST_AUTO_TEST_CASE(the_scale_never_grows_past_the_largest_float) {
  LossScaleRules rules;
  rules.initial = std::ldexp(1.0, 127);  // the largest power of two a float holds
  rules.growth_interval = 3;
  LossScaler s = LossScaler::from_option("dynamic", rules);
  steps(s, 3, true);
  BOOST_TEST(s.scale() == std::ldexp(1.0, 127));
  BOOST_TEST(s.growth_tracker() == 0);  // the count starts again, as GradScaler's does
}

BOOST_AUTO_TEST_CASE(a_scale_halved_below_the_smallest_float_stops_the_run) {
  LossScaler s = LossScaler::from_option("dynamic");
  for (int i = 0; i < 142; ++i) BOOST_TEST_REQUIRE(!s.update(false));  // 2^16 / 2^142 = 2^-126, the smallest normal
  BOOST_TEST(s.scale() == std::ldexp(1.0, -126));
  try {
    s.update(false);
    BOOST_ERROR("a scale of 2^-127 was accepted");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(std::string(e.what()).find("training diverged: the gradients held inf or NaN at 143 steps in a row") !=
               std::string::npos);
  }
  BOOST_TEST(LossScaler::scale_text(std::ldexp(1.0, 20)) == "1048576");
  BOOST_TEST(LossScaler::scale_text(1234567.0) == "1234567");
}

BOOST_AUTO_TEST_CASE(a_fixed_scale_skips_but_keeps_its_value) {
  LossScaler s = LossScaler::from_option("1000");
  BOOST_TEST(std::string(LossScaler::mode_name(s.mode())) == "fixed");
  BOOST_TEST(s.scale() == 1000.0);
  BOOST_TEST(!s.update(false));
  steps(s, 5000, true);
  BOOST_TEST(s.scale() == 1000.0);
  BOOST_TEST(s.skipped_steps() == 1);
  // It cannot lower itself: 100 skipped steps in a row stop the run (a finite step resets the count).
  for (int i = 0; i < 98; ++i) BOOST_TEST_REQUIRE(!s.update(false));
  BOOST_TEST(s.update(true));
  for (int i = 0; i < 99; ++i) BOOST_TEST_REQUIRE(!s.update(false));
  try {
    s.update(false);
    BOOST_ERROR("a 100th skipped step in a row with a fixed scale was accepted");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(std::string(e.what()).find("training diverged: the gradients held inf or NaN at 100 steps in a row "
                                          "with the fixed loss scale 1000") != std::string::npos,
               e.what());
  }
}

BOOST_AUTO_TEST_CASE(the_option_refuses_what_is_not_a_scale) {
  for (const char* bad : {"", "0", "-4", "inf", "nan", "1e39", "1e-39", "dynamc", "64k"}) {
    BOOST_TEST_CONTEXT("--loss-scale '" << bad << "'") {
      try {
        LossScaler::from_option(bad);
        BOOST_ERROR("accepted");
      } catch (const UsageError& e) {
        BOOST_TEST(std::string(e.what()).find(std::string("--loss-scale '") + bad + "'") != std::string::npos);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_checkpointed_state_continues_the_same_sequence) {
  LossScaler a = LossScaler::from_option("dynamic");
  steps(a, 1234, true);
  a.update(false);
  steps(a, 700, true);
  for (int i = 0; i < 40; ++i) a.update(false);  // 2^16 / 2^41 = 2^-25: needs all its digits
  LossScaler b = LossScaler::from_option("dynamic");
  b.restore(scaletrain::Json::parse(a.to_json().dump()));  // through the checkpoint's text
  BOOST_TEST(b.scale() == std::ldexp(1.0, 16 - 41));
  BOOST_TEST(b.scale() == a.scale());
  BOOST_TEST(b.skipped_steps() == a.skipped_steps());
  BOOST_TEST(b.consecutive_skipped() == 40);
  for (int i = 0; i < 4100; ++i) {
    const bool finite = i % 1500 != 7;
    BOOST_TEST_REQUIRE(a.update(finite) == b.update(finite));
    BOOST_TEST_REQUIRE(a.scale() == b.scale());
    BOOST_TEST_REQUIRE(a.growth_tracker() == b.growth_tracker());
  }
  BOOST_TEST(b.restore_note().find("resumed at") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_of_another_mode_starts_the_scaler_afresh) {
  LossScaler fixed = LossScaler::from_option("512");
  fixed.update(false);
  LossScaler dynamic = LossScaler::from_option("dynamic");
  dynamic.restore(fixed.to_json());
  BOOST_TEST(dynamic.scale() == 65536.0);
  BOOST_TEST(dynamic.restore_note().find("the checkpoint's is fixed, this run's dynamic") != std::string::npos);
  // A checkpoint from before loss scaling (no "loss_scale" object) reads as none.
  LossScaler from_old = LossScaler::from_option("dynamic");
  from_old.restore(scaletrain::Json::object());
  BOOST_TEST(from_old.scale() == 65536.0);
  BOOST_TEST(from_old.restore_note().find("the checkpoint's is none") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
