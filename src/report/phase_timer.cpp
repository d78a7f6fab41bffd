// Phase names and per-rank phase accumulation. Each phase is also an NVTX range named after it,
// so an Nsight Systems profile of a GPU run shows the phases above the kernels.
#include "scaletrain/report/phase_timer.hpp"

#include "scaletrain/backend/nvtx.hpp"
#include "scaletrain/core/progress.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/core/trace.hpp"

namespace scaletrain::report {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::data_wait:
      return "data_wait";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::allreduce:
      return "allreduce";
    case Phase::optimizer:
      return "optimizer";
    case Phase::evaluation:
      return "evaluation";
  }
  return "unknown";
}

const std::array<Phase, kNumPhases>& all_phases() {
  static const std::array<Phase, kNumPhases> phases = {Phase::data_wait, Phase::forward,   Phase::backward,
                                                       Phase::allreduce, Phase::optimizer, Phase::evaluation};
  return phases;
}

void PhaseTimers::add(Phase p, double seconds) {
  totals_[static_cast<int>(p)] += seconds;
  counts_[static_cast<int>(p)] += 1;
}

void PhaseTimers::reset() {
  totals_.fill(0.0);
  counts_.fill(0);
}

// Entering a phase is also progress for the stall watchdog; waiting for the gradient all-reduce
// is waiting for the other ranks.
ScopedPhase::ScopedPhase(PhaseTimers& timers, Phase phase) : timers_(timers), phase_(phase), start_(now_seconds()) {
  progress::enter(phase_name(phase), phase == Phase::allreduce);
  nvtx_push(phase_name(phase));
}

ScopedPhase::~ScopedPhase() {
  nvtx_pop();
  const double end = now_seconds();
  timers_.add(phase_, end - start_);
  if (trace::enabled()) trace::record(phase_name(phase_), "step", trace::kMainThread, start_, end);
}

}  // namespace scaletrain::report
