// The pre-flight (train --preflight, --min-busbw): before the first step, all-reduce a buffer of
// the model's gradient size with the training reducer's algorithm for about two seconds and
// report nccl-tests' bandwidths, so that a slow or misconfigured fabric shows up before hours of
// training are spent on it.
#pragma once

#include <cstdint>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/json.hpp"

namespace scaletrain::comm {

// Collective. Times all-reduces of `count` floats through reducer.allreduce_now (after one
// warm-up), logs one line, and returns {"bytes", "algorithm", "iterations", "time_us",
// "algbw_gbps", "busbw_gbps", "min_busbw_gbps"}. Throws on every rank alike when min_busbw > 0 and
// the bus bandwidth (from the maximum time over ranks) is below it (not checked on one rank).
Json run_preflight(const Communicator& comm, GradientReducer& reducer, int64_t count, double min_busbw);

}  // namespace scaletrain::comm
