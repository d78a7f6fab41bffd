// The rank's progress beacon: what the main thread is doing (an activity and the training step
// it belongs to), whether that is a wait for the other ranks (a collective), and when it last
// changed. The training loop, evaluation and checkpoints set it at fixed points (a few relaxed
// atomic stores, nothing on the hot path beyond that); the stall watchdog's thread reads it.
// Process-wide, like logging: code that makes progress says so without knowing who watches.
#pragma once

#include <cstdint>

namespace scaletrain::progress {

// A new activity (also counts as progress). `activity` must outlive the process (a string
// literal). waiting: the activity is a collective, i.e. waiting for the other ranks.
void enter(const char* activity, bool waiting = false);
// The step the following activities belong to (1-based; 0 before training starts).
void set_step(int64_t step);
// Progress within the same activity (e.g. one more evaluation batch).
void tick();

struct Snapshot {
  const char* activity = "start-up";
  bool waiting = false;
  int64_t step = 0;
  double since_s = 0.0;  // seconds since the last progress
};
Snapshot now();

}  // namespace scaletrain::progress
