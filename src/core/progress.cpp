// The progress beacon (progress.hpp): relaxed atomics, written by the main thread, read by the
// watchdog. A reader may see a new activity with the previous time stamp for an instant; the
// watchdog's thresholds are seconds, so that does not matter.
#include "scaletrain/core/progress.hpp"

#include <array>
#include <atomic>
#include <mutex>
#include <utility>

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

namespace {

// Busy scopes: a fixed table of per-thread slots (no allocation or registration on the hot path;
// threads beyond the table share the last slot, which only blurs which of them is named).
constexpr int kBusySlots = 256;
struct BusySlot {
  std::atomic<bool> claimed{false};
  std::mutex mutex;
  BusyWhat what;        // guarded by mutex
  double since = -1.0;  // guarded by mutex; < 0: idle
};
std::array<BusySlot, kBusySlots> g_busy;

int claim_busy_slot() {
  for (int i = 0; i < kBusySlots - 1; ++i) {
    bool expected = false;
    if (g_busy[i].claimed.compare_exchange_strong(expected, true)) return i;
  }
  g_busy[kBusySlots - 1].claimed.store(true);  // shared from now on
  return kBusySlots - 1;
}

// The calling thread's slot, given back when the thread ends.
struct ThreadSlot {
  int index = claim_busy_slot();
  ~ThreadSlot() {
    if (index < kBusySlots - 1) g_busy[index].claimed.store(false);
  }
};

// "reading DIR/train/shard-00003-of-00008.h5: sample 1200 (row 176) and 63 more".
std::string describe(const BusyWhat& w) {
  if (w.file == nullptr) return std::string(w.verb) + " (no samples: a collective read)";
  std::string text = std::string(w.verb) + " " + *w.file + ": sample " + std::to_string(w.sample) + " (row " +
                     std::to_string(w.row) + ")";
  return w.more > 0 ? text + " and " + std::to_string(w.more) + " more" : text;
}

}  // namespace

BusyScope::BusyScope(const BusyWhat& what) {
  thread_local ThreadSlot slot;
  slot_ = slot.index;
  BusySlot& s = g_busy[slot_];
  std::lock_guard<std::mutex> lock(s.mutex);
  outer_what_ = std::exchange(s.what, what);
  outer_since_ = std::exchange(s.since, now_seconds());
}

BusyScope::~BusyScope() {
  BusySlot& s = g_busy[slot_];
  std::lock_guard<std::mutex> lock(s.mutex);
  s.what = outer_what_;
  s.since = outer_since_;
}

Busy oldest_busy() {
  Busy oldest;
  const double t = now_seconds();
  for (BusySlot& s : g_busy) {
    if (!s.claimed.load(std::memory_order_relaxed)) continue;
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.since >= 0.0 && t - s.since > oldest.since_s) {
      oldest.what = describe(s.what);
      oldest.since_s = t - s.since;
    }
  }
  return oldest;
}

}  // namespace scaletrain::progress
