// The pre-flight all-reduce benchmark (preflight.hpp). Rounds of growing length until about
// kPreflightSeconds and at least kPreflightMinIters iterations have been timed. A round's time is
// the maximum over ranks, so the number of rounds and the verdict come from numbers every rank
// shares: all ranks decide alike and none is left waiting.
#include "scaletrain/comm/preflight.hpp"

#include <algorithm>
#include <cstdio>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/timer.hpp"

namespace scaletrain::comm {
namespace {
constexpr double kPreflightSeconds = 2.0;
constexpr int64_t kPreflightMinIters = 3;
}  // namespace

Json run_preflight(const Communicator& comm, GradientReducer& reducer, int64_t count, double min_busbw) {
  const int world = comm.size();
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  // Zeros stay zeros: no overflow however many sums. Where the reducer works on GPU memory (NCCL),
  // the buffer is there too, so that the time is the all-reduce's, not a copy's.
  Tensor buffer = Tensor::zeros({count}, DType::f32, reducer.data_device());
  float* data = static_cast<float*>(buffer.raw());
  reducer.allreduce_now(data, count);  // warm-up: first-touch, connections
  int64_t iters = 0, round = 1;
  double elapsed = 0.0;
  while (elapsed < kPreflightSeconds || iters < kPreflightMinIters) {
    comm.barrier();
    Stopwatch clock;
    for (int64_t i = 0; i < round; ++i) reducer.allreduce_now(data, count);
    elapsed += comm.allreduce_max(clock.elapsed());
    iters += round;
    // Next round: double, but no longer than what is left of the budget.
    const double per_iter = elapsed / iters;
    const double left = std::max(kPreflightSeconds - elapsed, 0.0);
    round = std::clamp<int64_t>(static_cast<int64_t>(left / std::max(per_iter, 1e-9)), 1, 2 * round);
  }
  const double time = elapsed / iters;
  const double algbw = bytes / std::max(time, 1e-12) / 1e9;
  const double busbw = algbw * 2.0 * (world - 1) / world;
  const std::string algorithm = reducer.algorithm_for(bytes);

  char line[256];
  std::snprintf(line, sizeof line,
                "pre-flight: all-reduce of %.2f MB (%s) on %d ranks, %lld iterations: %.1f us, algbw %.3f GB/s, busbw "
                "%.3f GB/s",
                bytes / 1e6, algorithm.c_str(), world, static_cast<long long>(iters), time * 1e6, algbw, busbw);
  ST_LOG(line);
  Json j = Json::object();
  j.set("bytes", bytes);
  j.set("algorithm", algorithm);
  j.set("iterations", iters);
  j.set("time_us", time * 1e6);
  j.set("algbw_gbps", algbw);
  j.set("busbw_gbps", busbw);
  j.set("min_busbw_gbps", min_busbw > 0 ? Json(min_busbw) : Json());
  if (min_busbw > 0 && world == 1) {
    ST_LOG("pre-flight: --min-busbw not checked on 1 rank (no fabric to measure)");
  } else if (min_busbw > 0 && busbw < min_busbw) {
    char message[320];
    std::snprintf(message, sizeof message,
                  "pre-flight: all-reduce bus bandwidth %.3f GB/s is below --min-busbw %g GB/s (%lld bytes, %s, %d "
                  "ranks, %.1f us per all-reduce); check the fabric or lower --min-busbw",
                  busbw, min_busbw, static_cast<long long>(bytes), algorithm.c_str(), world, time * 1e6);
    ST_THROW(message);
  }
  return j;
}

}  // namespace scaletrain::comm
