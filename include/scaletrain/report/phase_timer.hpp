// Per-phase wall-clock timing of the training loop on one rank: total seconds and number of
// intervals per phase. The phases are those report.json breaks a step into; summary.hpp turns
// them into min/mean/max over ranks. Timing is host wall clock (steady clock): on a GPU the
// caller must synchronise the stream at phase ends for the numbers to mean anything.
#pragma once

#include <array>
#include <cstdint>

namespace scaletrain::report {

enum class Phase { data_wait, forward, backward, allreduce, optimizer, evaluation };
constexpr int kNumPhases = 6;

// "data_wait", "forward", "backward", "allreduce", "optimizer", "evaluation" (report.json keys).
const char* phase_name(Phase phase);
// Every phase, in the order above.
const std::array<Phase, kNumPhases>& all_phases();

class PhaseTimers {
 public:
  void add(Phase p, double seconds);
  double total(Phase p) const { return totals_[static_cast<int>(p)]; }
  int64_t count(Phase p) const { return counts_[static_cast<int>(p)]; }
  void reset();

 private:
  std::array<double, kNumPhases> totals_{};
  std::array<int64_t, kNumPhases> counts_{};
};

// Adds the time from construction to destruction to one phase (RAII, exception-safe), and tells
// the progress beacon (core/progress.hpp) which phase the rank is in.
class ScopedPhase {
 public:
  ScopedPhase(PhaseTimers& timers, Phase phase);
  ~ScopedPhase();
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  PhaseTimers& timers_;
  Phase phase_;
  double start_;
};

}  // namespace scaletrain::report
