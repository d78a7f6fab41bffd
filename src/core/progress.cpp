// The progress beacon (progress.hpp): relaxed atomics, written by the main thread, read by the
// watchdog. A reader may see a new activity with the previous time stamp for an instant; the
// watchdog's thresholds are seconds, so that does not matter.
#include "scaletrain/core/progress.hpp"

#include <atomic>

#include "scaletrain/core/timer.hpp"

namespace scaletrain::progress {
namespace {
std::atomic<const char*> g_activity{"start-up"};
std::atomic<bool> g_waiting{false};
std::atomic<int64_t> g_step{0};
std::atomic<double> g_last{now_seconds()};
}  // namespace

void enter(const char* activity, bool waiting) {
  g_activity.store(activity, std::memory_order_relaxed);
  g_waiting.store(waiting, std::memory_order_relaxed);
  g_last.store(now_seconds(), std::memory_order_relaxed);
}

void set_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }

void tick() { g_last.store(now_seconds(), std::memory_order_relaxed); }

Snapshot now() {
  Snapshot s;
  s.activity = g_activity.load(std::memory_order_relaxed);
  s.waiting = g_waiting.load(std::memory_order_relaxed);
  s.step = g_step.load(std::memory_order_relaxed);
  s.since_s = now_seconds() - g_last.load(std::memory_order_relaxed);
  return s;
}

}  // namespace scaletrain::progress
