// GPU time of stretches of work on a Context's compute stream, measured with CUDA events: the
// host timers of report/phase_timer.hpp see only when work was queued and when a synchronize
// returned, so on a GPU they cannot tell forward from backward. No CUDA header here; on a CPU
// context (or without the CUDA backend) every call does nothing and collect() gives zeros.
#pragma once

#include <memory>
#include <vector>

#include "scaletrain/backend/context.hpp"

namespace scaletrain {

class DeviceEventTimer {
 public:
  // Numbered slots 0..slots-1 (e.g. one per phase). Events are created as marks first need them
  // and reused by every later interval.
  DeviceEventTimer(Context& ctx, int slots);
  ~DeviceEventTimer();
  DeviceEventTimer(const DeviceEventTimer&) = delete;
  DeviceEventTimer& operator=(const DeviceEventTimer&) = delete;

  // Whether marks measure anything: ctx is a CUDA context.
  bool enabled() const;
  // Mark the start and the end of an interval of `slot` on the compute stream. They never throw
  // (they run in destructors, also while an error unwinds); a failure is reported by collect().
  void begin(int slot) noexcept;
  void end(int slot) noexcept;
  // The GPU seconds of each slot's intervals marked since the last collect(), which then starts
  // afresh. Waits for the intervals' end marks, so call it after the work was synchronised
  // (Context::synchronize) for it to cost nothing. Throws the CUDA error of a failed mark.
  std::vector<double> collect();

  struct Impl;

 private:
  int slots_;
  std::unique_ptr<Impl> impl_;  // null where nothing is measured
};

}  // namespace scaletrain
