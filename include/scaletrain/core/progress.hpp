// The rank's progress beacon: what the main thread is doing (an activity and the training step
// it belongs to), whether that is a wait for the other ranks (a collective), and when it last
// changed. The training loop, evaluation and checkpoints set it at fixed points (a few relaxed
// atomic stores, nothing on the hot path beyond that); the stall watchdog's thread reads it.
// Process-wide, like logging: code that makes progress says so without knowing who watches.
#pragma once

#include <cstdint>
#include <string>

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

// Work in flight on other threads (the data loader's I/O thread and decode workers): a scope
// says what it reads or decodes ("reading DIR/train/shard-00003-of-00008.h5: sample 1200 (row
// 176) and 63 more") for as long as it runs, so that a read that never returns (a hung file
// system, a library looping on a damaged file) is named by the stall watchdog, with its shard
// and sample. One slot per thread, claimed on first use: a scope costs a thread-local lookup, one
// uncontended lock and a clock read; the text is formatted only when the watchdog asks (a reader
// opens one per run of samples). Scopes nest (a reader's precise scope inside the loader's): the
// inner one is shown while it runs, then the outer one again.
struct BusyWhat {
  const char* verb = "";              // "reading", "decoding" (a literal)
  const std::string* file = nullptr;  // must outlive the scope; nullptr: no file
  int64_t sample = 0, row = 0;        // the first sample of the run, and its row in the file
  int64_t more = 0;                   // samples after it in the same scope
};

class BusyScope {
 public:
  explicit BusyScope(const BusyWhat& what);
  ~BusyScope();
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  int slot_;
  BusyWhat outer_what_;  // the enclosing scope's, restored on exit
  double outer_since_;
};

// The longest-running scope of this process: its text and its age; since_s < 0 when none runs.
struct Busy {
  std::string what;
  double since_s = -1.0;
};
Busy oldest_busy();

}  // namespace scaletrain::progress
