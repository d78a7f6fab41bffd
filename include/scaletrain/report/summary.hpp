// Cross-rank summaries for report.json (min / mean / max over ranks and which rank was slowest:
// at scale the slowest rank sets the pace of every collective) and the atomic JSON writer.
// Functions marked "collective" must be called by every rank; each returns the same result on
// every rank.
#pragma once

#include <string>
#include <vector>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/report/phase_timer.hpp"

namespace scaletrain::report {

// One value's spread over ranks. slowest_rank is the rank holding the maximum (the lowest such
// rank on a tie).
struct RankStats {
  double min = 0.0;
  double mean = 0.0;
  double max = 0.0;
  int slowest_rank = 0;
};

// Collective: the stats of `value` over ranks.
RankStats rank_stats(const comm::Communicator& comm, double value);
// Collective: the stats of every phase's total seconds, indexed like all_phases() (one
// all-gather for all phases).
std::vector<RankStats> phase_stats(const comm::Communicator& comm, const PhaseTimers& timers);

// Collective: per phase name, {"min_s", "mean_s", "max_s", "slowest_rank"} over ranks of total seconds.
Json phase_summary(const comm::Communicator& comm, const PhaseTimers& timers);
// Collective: {"min", "mean", "max", "slowest_rank"} of one value over ranks (generic helper).
Json stats_over_ranks(const comm::Communicator& comm, double value);

// Writes JSON (pretty-printed, 2 spaces) to path atomically: a temporary name in the same
// directory, fsync, rename, so a reader never sees a half-written file. Not collective: call it
// on one rank.
void write_json_atomic(const std::string& path, const Json& json);

}  // namespace scaletrain::report
