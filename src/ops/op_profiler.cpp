// The op profiler (op_profiler.hpp). Slot 0 of the event timer is the outermost ops' time, the
// others one per op name as first seen; a call inside a call of the same op is counted but not
// timed again (its outer call covers it).
#include "scaletrain/ops/op_profiler.hpp"

#include <algorithm>
#include <unordered_map>

#include "scaletrain/backend/device_timer.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/ops/registry.hpp"

namespace scaletrain::ops {

namespace {
thread_local OpProfiler* current_profiler = nullptr;
constexpr int kTopLevel = 0;
}  // namespace

struct OpProfiler::Impl {
  struct Slot {
    const char* op = nullptr;
    int64_t calls = 0, pending_calls = 0;
    int64_t top_level_calls = 0;
    double seconds = 0.0, pending_seconds = 0.0;  // pending: host clock only
    int open = 0;                                 // calls of it on the stack
  };
  struct Frame {
    int slot = -1;  // -1: not profiled (paused, or no slot left)
    bool timed = false;
    double start_s = 0.0;  // host clock
  };

  DeviceEventTimer events;
  std::unordered_map<const char*, int> slot_of;  // by the op's name, a static string of its Op
  std::vector<Slot> slots;
  // Reserved once, so that a push never allocates: enter() and leave() pair without a throw in
  // between. Calls nested deeper than its capacity are counted in `beyond` and not timed.
  std::vector<Frame> stack;
  int beyond = 0;
  double top_start_s = 0.0;

  Impl(Context& ctx, int capacity) : events(ctx, capacity) {
    slots.reserve(static_cast<std::size_t>(capacity));
    slots.push_back(Slot{"(top level)"});
    stack.reserve(kMaxDepth);
  }
  static constexpr std::size_t kMaxDepth = 64;
  bool on_device() const { return events.enabled(); }

  int slot(const char* op) {
    const auto it = slot_of.find(op);
    if (it != slot_of.end()) return it->second;
    if (slots.size() == slots.capacity()) return -1;  // more op names than the registry's: untimed
    slots.push_back(Slot{op});
    const int index = static_cast<int>(slots.size()) - 1;
    slot_of.emplace(op, index);
    return index;
  }
  void begin(int s) {
    if (on_device())
      events.begin(s);
    else if (s == kTopLevel)
      top_start_s = now_seconds();
  }
  void end(int s, double start_s) {
    if (on_device()) {
      events.end(s);
      return;
    }
    const double now = now_seconds();
    slots[static_cast<std::size_t>(s)].pending_seconds += now - (s == kTopLevel ? top_start_s : start_s);
  }
};

OpProfiler::OpProfiler(Context& ctx)
    : impl_(std::make_unique<Impl>(ctx, static_cast<int>(registered_ops().size()) + 1)), outer_(current_profiler) {
  ST_CHECK(outer_ == nullptr, "internal: one op profiler at a time per thread");
  current_profiler = this;
}

OpProfiler::~OpProfiler() { current_profiler = outer_; }

OpProfiler* OpProfiler::current() { return current_profiler; }

void OpProfiler::enter(const char* op) noexcept {
  Impl& m = *impl_;
  if (m.stack.size() == m.stack.capacity()) {
    ++m.beyond;
    return;
  }
  const bool outermost = std::none_of(m.stack.begin(), m.stack.end(), [](const Impl::Frame& f) { return f.slot >= 0; });
  m.stack.push_back(Impl::Frame{});  // within the reserved capacity: no allocation
  Impl::Frame& frame = m.stack.back();
  if (paused_) return;
  try {
    frame.slot = m.slot(op);
  } catch (...) {  // out of memory for an op's name: the op runs untimed
    frame.slot = -1;
  }
  if (frame.slot < 0) return;
  Impl::Slot& s = m.slots[static_cast<std::size_t>(frame.slot)];
  ++s.pending_calls;
  if (outermost) {
    ++s.top_level_calls;
    m.begin(kTopLevel);
  }
  if (s.open++ == 0) {
    frame.timed = true;
    frame.start_s = m.on_device() ? 0.0 : now_seconds();
    m.begin(frame.slot);
  }
}

void OpProfiler::leave() noexcept {
  Impl& m = *impl_;
  if (m.beyond > 0) {  // the innermost calls are those beyond the stack's depth
    --m.beyond;
    return;
  }
  if (m.stack.empty()) return;
  const Impl::Frame frame = m.stack.back();
  m.stack.pop_back();
  if (frame.slot < 0) return;
  Impl::Slot& s = m.slots[static_cast<std::size_t>(frame.slot)];
  --s.open;
  if (frame.timed) m.end(frame.slot, frame.start_s);
  const bool outermost = std::none_of(m.stack.begin(), m.stack.end(), [](const Impl::Frame& f) { return f.slot >= 0; });
  if (outermost) m.end(kTopLevel, 0.0);
}

void OpProfiler::end_step(bool keep) {
  Impl& m = *impl_;
  // The device's marks are always collected, so that their events are reused by the next step.
  const std::vector<double> device_seconds = m.events.collect();
  for (std::size_t i = 0; i < m.slots.size(); ++i) {
    Impl::Slot& s = m.slots[i];
    const double seconds = m.on_device() ? device_seconds[i] : s.pending_seconds;
    if (keep) {
      s.calls += s.pending_calls;
      s.seconds += seconds;
    }
    s.pending_calls = 0;
    s.pending_seconds = 0.0;
  }
  if (keep) ++steps_;
}

std::vector<OpTime> OpProfiler::totals() const {
  std::vector<OpTime> out;
  for (std::size_t i = 1; i < impl_->slots.size(); ++i) {
    const Impl::Slot& s = impl_->slots[i];
    if (s.calls == 0) continue;
    out.push_back(OpTime{s.op, s.calls, s.seconds, s.top_level_calls == 0});
  }
  std::stable_sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  return out;
}

double OpProfiler::top_level_seconds() const { return impl_->slots[kTopLevel].seconds; }

const char* OpProfiler::clock() const { return impl_->on_device() ? "cuda_events" : "host_clock"; }

}  // namespace scaletrain::ops
