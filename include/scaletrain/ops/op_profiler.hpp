// Time per op (train --op-times): every op this thread dispatches is timed at the one dispatch
// point (ops/op.hpp), on a GPU with CUDA events on the compute stream (the GPU's time, not the
// host's launch time), on the CPU with the host clock (its ops run synchronously). It answers
// where a step's time goes, op by op, where the phase timers say only forward, backward,
// optimizer. Ops nest (an op that calls others, the dispatch's 16-bit casts): each op's time
// includes what it calls, and the outermost ops' time (`top_level_seconds`) counts every moment
// once, so the shares of the step add up.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct OpTime {
  std::string op;
  int64_t calls = 0;           // over the kept steps
  double seconds = 0.0;        // over the kept steps, including the ops it called
  bool always_nested = false;  // every call came from inside another op
};

class OpProfiler {
 public:
  // Times the ops this thread dispatches from now on, on ctx's device (ctx must outlive this).
  // One at a time per thread.
  explicit OpProfiler(Context& ctx);
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  // The profiler of this thread, or null (the dispatch point asks at every op).
  static OpProfiler* current();
  // The dispatch point's marks around one op call; they never throw (a failed CUDA mark is
  // reported by end_step).
  void enter(const char* op) noexcept;
  void leave() noexcept;

  // While paused (evaluation) ops are not timed.
  void set_paused(bool paused) { paused_ = paused; }
  // After a step's synchronize: the step's op times are added (keep) or dropped (the warm-up
  // step: cuDNN's algorithm choice and first allocations).
  void end_step(bool keep);

  // Per op over the kept steps, the longest first.
  std::vector<OpTime> totals() const;
  // The outermost ops' time over the kept steps: the step's time in ops, each moment once.
  double top_level_seconds() const;
  int64_t steps() const { return steps_; }
  // "cuda_events" or "host_clock".
  const char* clock() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  bool paused_ = false;
  int64_t steps_ = 0;
  OpProfiler* outer_ = nullptr;
};

}  // namespace scaletrain::ops
