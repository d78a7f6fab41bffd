// The op profiler (ops/op_profiler.hpp) behind train --op-times, on the CPU's host clock, through
// the dispatch point: test-only ops that sleep known times, one calling another (nesting) and
// itself (recursion). The times are checked from below by the sleeps and against each other, not
// against a clock reading of their own.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "ops/op.hpp"
#include "scaletrain/ops/op_profiler.hpp"

namespace st = scaletrain;

namespace {

using SleepFn = void(st::Context& ctx, int depth);
void inner_kernel(st::Context&, int) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }
void outer_kernel(st::Context& ctx, int depth);
const st::ops::Op<SleepFn> inner_op{"test_only_profiler_inner", {inner_kernel}, {}};
const st::ops::Op<SleepFn> outer_op{"test_only_profiler_outer", {outer_kernel}, {}};
// outer(d): 1 ms, inner (2 ms), then outer(d - 1): a call inside a call of the same op.
void outer_kernel(st::Context& ctx, int depth) {
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  inner_op(ctx, 0);
  if (depth > 0) outer_op(ctx, depth - 1);
}
// outer(d) without sleeping: to go deeper than the profiler's stack quickly.
using CountFn = void(st::Context& ctx, int depth);
void deep_kernel(st::Context& ctx, int depth);
const st::ops::Op<CountFn> deep_op{"test_only_profiler_deep", {deep_kernel}, {}};
void deep_kernel(st::Context& ctx, int depth) {
  if (depth > 0) deep_op(ctx, depth - 1);
}

const st::ops::OpTime* find(const std::vector<st::ops::OpTime>& totals, const std::string& op) {
  for (const auto& t : totals)
    if (t.op == op) return &t;
  return nullptr;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(op_profiler)

BOOST_AUTO_TEST_CASE(nested_and_recursive_calls) {
  st::Context ctx;
  st::ops::OpProfiler profiler(ctx);
  BOOST_TEST(st::ops::OpProfiler::current() == &profiler);
  BOOST_TEST(std::string(profiler.clock()) == "host_clock");
  outer_op(ctx, 1);          // outer { inner, outer { inner } }: 6 ms
  profiler.end_step(false);  // a warm-up step: dropped
  BOOST_TEST(profiler.steps() == 0);
  BOOST_TEST(profiler.totals().empty());
  outer_op(ctx, 1);
  profiler.end_step(true);
  BOOST_TEST(profiler.steps() == 1);
  const auto totals = profiler.totals();
  const st::ops::OpTime* outer = find(totals, "test_only_profiler_outer");
  const st::ops::OpTime* inner = find(totals, "test_only_profiler_inner");
  BOOST_REQUIRE(outer != nullptr);
  BOOST_REQUIRE(inner != nullptr);
  BOOST_TEST(outer->calls == 2);  // the recursive call is counted...
  BOOST_TEST(inner->calls == 2);
  BOOST_TEST(!outer->always_nested);
  BOOST_TEST(inner->always_nested);
  // ...but not timed again: outer's time is its outermost call's, all 6 ms, which holds inner's 4.
  BOOST_TEST(outer->seconds >= 6e-3);
  BOOST_TEST(inner->seconds >= 4e-3);
  BOOST_TEST(inner->seconds <= outer->seconds);
  // The outermost time is outer's own interval, the same moments by the same clock: had the
  // recursive call been timed again (3 ms more), outer's time would exceed it.
  BOOST_TEST(profiler.top_level_seconds() >= outer->seconds);
  BOOST_TEST(profiler.top_level_seconds() <= outer->seconds + 1e-3);
  BOOST_TEST(totals.front().op == "test_only_profiler_outer");  // the longest first
}

BOOST_AUTO_TEST_CASE(paused_and_deeper_than_the_stack) {
  st::Context ctx;
  st::ops::OpProfiler profiler(ctx);
  profiler.set_paused(true);  // evaluation
  outer_op(ctx, 0);
  profiler.set_paused(false);
  profiler.end_step(true);
  BOOST_TEST(find(profiler.totals(), "test_only_profiler_outer") == nullptr);
  // 200 nested calls, deeper than the profiler's stack: those beyond are neither counted nor
  // timed, and the calls after them pair as before.
  deep_op(ctx, 199);
  const st::ops::OpTime* deep = find(profiler.totals(), "test_only_profiler_deep");
  BOOST_TEST(deep == nullptr);  // not added before end_step
  profiler.end_step(false);
  outer_op(ctx, 0);
  profiler.end_step(true);
  const auto totals = profiler.totals();
  const st::ops::OpTime* outer = find(totals, "test_only_profiler_outer");
  BOOST_REQUIRE(outer != nullptr);
  BOOST_TEST(outer->calls == 1);
  BOOST_TEST(find(totals, "test_only_profiler_inner")->calls == 1);
  BOOST_TEST(outer->seconds >= 3e-3);
  BOOST_TEST(profiler.steps() == 2);
}

BOOST_AUTO_TEST_CASE(one_per_thread) {
  st::Context ctx;
  {
    st::ops::OpProfiler profiler(ctx);
    BOOST_CHECK_THROW(st::ops::OpProfiler second(ctx), st::Error);
  }
  BOOST_TEST(st::ops::OpProfiler::current() == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
