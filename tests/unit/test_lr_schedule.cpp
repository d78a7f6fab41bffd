// Learning-rate schedules: values at hand-picked steps derived from the formulas in
// lr_schedule.hpp (warmup ramp, cosine midpoint, poly endpoint, step boundaries).
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "scaletrain/core/error.hpp"
#include "scaletrain/optim/lr_schedule.hpp"

using scaletrain::optim::LrSchedule;
using scaletrain::optim::LrScheduleOptions;
namespace tt = boost::test_tools;

namespace {
LrScheduleOptions make(const std::string& kind, double warmup_epochs, int64_t steps_per_epoch, int64_t total) {
  LrScheduleOptions o;
  o.kind = kind;
  o.base_lr = 0.4;
  o.warmup_epochs = warmup_epochs;
  o.steps_per_epoch = steps_per_epoch;
  o.total_steps = total;
  return o;
}

bool message_has(const scaletrain::Error& e, const std::string& a, const std::string& b = "") {
  std::string m = e.what();
  return m.find(a) != std::string::npos && m.find(b) != std::string::npos;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(lr_schedule)

BOOST_AUTO_TEST_CASE(first_step_is_base_lr_without_warmup) {
  for (const char* kind : {"cosine", "poly", "step", "constant"}) {
    LrSchedule s(make(kind, 0.0, 10, 100));
    BOOST_TEST(s.warmup_steps() == 0);
    BOOST_TEST(s.at(0) == 0.4, "schedule " << kind);  // exactly
  }
}

// The NCF reference's Adam keeps its learning rate: base_lr at every step after the warmup, even
// past the schedule's end (a run cut by --max-steps and continued).
BOOST_AUTO_TEST_CASE(constant_after_warmup) {
  LrSchedule s(make("constant", 1.0, 10, 100));
  BOOST_TEST(s.at(0) == 0.4 * (1.0 / 10.0));  // the warmup ramp: base_lr * (s + 1) / W
  for (int64_t step : {10, 11, 50, 99, 100, 1000}) BOOST_TEST(s.at(step) == 0.4, "step " << step);
}

BOOST_AUTO_TEST_CASE(linear_warmup) {
  // 2 warmup epochs of 5 steps: W = 10; at(s) = 0.4 * (s + 1) / 10.
  LrSchedule s(make("cosine", 2.0, 5, 110));
  BOOST_TEST(s.warmup_steps() == 10);
  BOOST_TEST(s.at(0) == 0.04, tt::tolerance(1e-12));
  BOOST_TEST(s.at(4) == 0.2, tt::tolerance(1e-12));
  BOOST_TEST(s.at(9) == 0.4);
  BOOST_TEST(s.at(10) == 0.4);  // decay starts at progress 0
  // Fractional warmup epochs: 0.5 * 5 = 2.5 rounds to 3 steps.
  LrSchedule half(make("poly", 0.5, 5, 50));
  BOOST_TEST(half.warmup_steps() == 3);
  BOOST_TEST(half.at(0) == 0.4 / 3, tt::tolerance(1e-12));
  BOOST_TEST(half.at(2) == 0.4);
}

BOOST_AUTO_TEST_CASE(cosine) {
  // W = 10, decay over 100 steps: the midpoint (s = 60) is base/2, a quarter (s = 35) is
  // base * (1 + cos(pi/4)) / 2, the end (s = 110) is 0.
  LrSchedule s(make("cosine", 2.0, 5, 110));
  BOOST_TEST(s.at(60) == 0.2, tt::tolerance(1e-12));
  BOOST_TEST(s.at(35) == 0.2 * (1.0 + std::sqrt(0.5)), tt::tolerance(1e-12));
  BOOST_TEST(s.at(110) == 0.0, tt::tolerance(1e-12));
  BOOST_TEST(s.at(500) == 0.0, tt::tolerance(1e-12));  // clamped past the end
  BOOST_TEST(s.at(59) > s.at(60));
}

BOOST_AUTO_TEST_CASE(poly) {
  // No warmup, 100 steps, end_lr 1e-4: lr = 1e-4 + (0.4 - 1e-4) * (1 - s/100)^2.
  LrScheduleOptions o = make("poly", 0.0, 10, 100);
  o.end_lr = 1e-4;
  LrSchedule s(o);
  BOOST_TEST(s.at(50) == 1e-4 + (0.4 - 1e-4) * 0.25, tt::tolerance(1e-12));
  BOOST_TEST(s.at(90) == 1e-4 + (0.4 - 1e-4) * 0.01, tt::tolerance(1e-12));
  BOOST_TEST(s.at(100) == 1e-4, tt::tolerance(1e-12));
  BOOST_TEST(s.at(1000) == 1e-4, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(step_default_boundaries) {
  // 10 epochs of 10 steps: drops at 30%, 60%, 80% of the epochs = steps 30, 60, 80.
  LrSchedule s(make("step", 0.0, 10, 100));
  BOOST_TEST((s.step_boundaries() == std::vector<int64_t>{30, 60, 80}));
  BOOST_TEST(s.at(29) == 0.4);
  BOOST_TEST(s.at(30) == 0.04, tt::tolerance(1e-12));
  BOOST_TEST(s.at(59) == 0.04, tt::tolerance(1e-12));
  BOOST_TEST(s.at(60) == 0.004, tt::tolerance(1e-12));
  BOOST_TEST(s.at(80) == 0.0004, tt::tolerance(1e-12));
  BOOST_TEST(s.at(99) == 0.0004, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(step_explicit_epochs) {
  LrScheduleOptions o = make("step", 0.0, 10, 100);
  o.step_epochs = {5.0, 2.0};  // any order
  o.step_gamma = 0.5;
  LrSchedule s(o);
  BOOST_TEST(s.at(19) == 0.4);
  BOOST_TEST(s.at(20) == 0.2);
  BOOST_TEST(s.at(49) == 0.2);
  BOOST_TEST(s.at(50) == 0.1);
}

BOOST_AUTO_TEST_CASE(poly_with_another_power) {
  // Caffe's bvlc_googlenet quick solver: power 0.5 to 0. lr = 0.4 * sqrt(1 - s/100).
  LrScheduleOptions o = make("poly", 0.0, 10, 100);
  o.end_lr = 0.0;
  o.poly_power = 0.5;
  LrSchedule s(o);
  BOOST_TEST(s.at(0) == 0.4);
  BOOST_TEST(s.at(75) == 0.4 * 0.5, tt::tolerance(1e-12));
  BOOST_TEST(s.at(96) == 0.4 * 0.2, tt::tolerance(1e-12));
  BOOST_TEST(s.at(100) == 0.0);
}

BOOST_AUTO_TEST_CASE(step_every_interval) {
  // Inception-v3's staircase: x0.94 every 2 epochs. 7 epochs of 10 steps: drops at steps 20, 40, 60.
  LrScheduleOptions o = make("step", 0.0, 10, 70);
  o.step_every = 2.0;
  o.step_gamma = 0.94;
  LrSchedule s(o);
  BOOST_TEST((s.step_boundaries() == std::vector<int64_t>{20, 40, 60}));
  BOOST_TEST(s.at(19) == 0.4);
  BOOST_TEST(s.at(20) == 0.4 * 0.94, tt::tolerance(1e-12));
  BOOST_TEST(s.at(69) == 0.4 * 0.94 * 0.94 * 0.94, tt::tolerance(1e-12));
  o.step_epochs = {1.0};
  BOOST_CHECK_EXCEPTION(LrSchedule{o}, scaletrain::Error,
                        [](const scaletrain::Error& e) { return message_has(e, "not both"); });
  o.step_epochs.clear();
  o.step_every = 1e-9;
  BOOST_CHECK_EXCEPTION(LrSchedule{o}, scaletrain::Error,
                        [](const scaletrain::Error& e) { return message_has(e, "million"); });
}

BOOST_AUTO_TEST_CASE(warmup_longer_than_run) {
  // A 10-step smoke test of a config with 5 warmup epochs of 100 steps stays in warmup.
  LrSchedule s(make("cosine", 5.0, 100, 10));
  BOOST_TEST(s.at(9) == 0.4 * 10 / 500, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(bad_options) {
  BOOST_CHECK_EXCEPTION(LrSchedule(make("linear", 0.0, 1, 10)), scaletrain::Error,
                        [](const scaletrain::Error& e) { return message_has(e, "'linear'", "cosine, poly, step"); });
  LrScheduleOptions o = make("cosine", 0.0, 1, 10);
  o.base_lr = 0.0;
  BOOST_CHECK_EXCEPTION(LrSchedule{o}, scaletrain::Error,
                        [](const scaletrain::Error& e) { return message_has(e, "--base-lr"); });
  BOOST_CHECK_EXCEPTION(LrSchedule(make("cosine", -1.0, 1, 10)), scaletrain::Error,
                        [](const scaletrain::Error& e) { return message_has(e, "--warmup-epochs"); });
  LrSchedule s(make("cosine", 0.0, 1, 10));
  BOOST_CHECK_THROW(s.at(-1), scaletrain::Error);
  LrScheduleOptions p = make("poly", 0.0, 1, 10);
  p.poly_power = 0.0;
  BOOST_CHECK_EXCEPTION(LrSchedule{p}, scaletrain::Error,
                        [](const scaletrain::Error& e) { return message_has(e, "--lr-poly-power"); });
}

// The MLPerf Transformer reference's schedule (transformer_main.py's get_learning_rate):
// 2.0 * d^-0.5 * min(1, step / 16000) * max(step, 16000)^-0.5 for the big model (d = 1024), with
// base_lr its peak 2 / sqrt(1024 * 16000) = 4.941e-4 at step 16000.
BOOST_AUTO_TEST_CASE(rsqrt_is_the_transformer_reference) {
  LrScheduleOptions o = make("rsqrt", 0.0, 1000, 100000);
  o.warmup_steps = 16000;
  o.base_lr = 2.0 / std::sqrt(1024.0 * 16000.0);
  LrSchedule s(o);
  for (int64_t step : {0, 1, 800, 15999, 16000, 16001, 40000, 99999}) {
    const double d = static_cast<double>(step);
    const double reference = 2.0 / std::sqrt(1024.0) * std::min(1.0, d / 16000.0) / std::sqrt(std::max(d, 16000.0));
    BOOST_TEST(s.at(step) == reference, tt::tolerance(1e-12));
  }
  BOOST_TEST(s.at(0) == 0.0);  // the reference's first update uses learning rate 0
  BOOST_TEST(std::abs(s.at(16000) - 4.941e-4) < 1e-7);
  o.warmup_steps = 0;
  BOOST_CHECK_EXCEPTION(LrSchedule{o}, scaletrain::Error,
                        [](const scaletrain::Error& e) { return message_has(e, "rsqrt", "--warmup-steps"); });
}

BOOST_AUTO_TEST_SUITE_END()
