// Wall-clock timing for phases and progress.
#pragma once

#include <chrono>

namespace scaletrain {

// Seconds since an arbitrary, fixed origin (steady clock).
double now_seconds();
// Milliseconds since the Unix epoch (for MLLOG time_ms and report timestamps).
double unix_time_ms();

class Stopwatch {
 public:
  Stopwatch() : start_(now_seconds()) {}
  void reset() { start_ = now_seconds(); }
  double elapsed() const { return now_seconds() - start_; }

 private:
  double start_;
};

}  // namespace scaletrain
