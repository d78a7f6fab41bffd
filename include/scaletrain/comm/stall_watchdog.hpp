// The stall watchdog (train --stall-warn-s, --stall-abort-s): a thread on every rank that notices
// when a step or collective has made no progress for too long, says which ranks have not
// arrived and where they are, and, later, aborts the job with that message, so that a stopped
// process or a read hung on a file system never holds hundreds of GPUs silently.
//
// How: every rank's thread sends rank 0 a heartbeat (its progress beacon, core/progress.hpp)
// a few times per warning period, on a private duplicate of the world; rank 0 answers with its
// own. Rank 0 sees when a rank has made no progress for warn_s and prints who has not arrived:
// ranks that are silent (a stopped or dead process: its heartbeats stopped) and ranks that are
// not waiting in a collective (say, still in data_wait), with their hosts, activity and step,
// in the spirit of Horovod's stall inspector. When rank 0 itself is silent, the others say so.
// After abort_s (0: never) the rank that saw it prints the message again and calls MPI_Abort.
// While the job is stopping (a SIGTERM or SIGUSR1 came), a rank silent for 5 s is taken for dead
// and the job is aborted at once, naming it: under srun the survivors of a killed rank get
// SIGTERM while they wait for it in a collective, and would otherwise wait for SIGKILL.
// A communication library's own error (NCCL's asynchronous errors, StallOptions::poll_error) aborts
// the job as soon as a rank's thread sees it, with the same exit code.
// Only point-to-point messages with MPI_Test/MPI_Iprobe: nothing here blocks on another rank.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/comm/communicator.hpp"

namespace scaletrain::comm {

// The exit code of a job the watchdog aborted (docs/checkpoint-format.md lists every exit code).
constexpr int kExitStalled = 3;

struct StallOptions {
  double warn_s = 60.0;
  double abort_s = 600.0;  // 0: never abort
  // Polled by every rank's thread with each heartbeat: "" while the communication is well, else
  // what failed (the NCCL reducer's ncclCommGetAsyncError). A failure aborts the job at once,
  // naming the rank and the error: NCCL's kernels wait forever for a peer that is gone, and the
  // stall limit would otherwise hold the GPUs for abort_s. Empty: nothing to poll.
  std::function<std::string()> poll_error;
};

class StallWatchdog {
 public:
  // Collective (duplicates comm). Needs MPI_THREAD_MULTIPLE; without it the watchdog logs that
  // it is off and does nothing. warn_s must be > 0.
  StallWatchdog(const Communicator& comm, const StallOptions& options);
  // Not collective: stops the thread without waiting for any other rank.
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What rank 0 knows of one rank, for the stall message.
struct RankProgress {
  int rank = 0;
  std::string host;
  std::string activity;
  int64_t step = 0;
  bool waiting = false;   // in a collective
  double stuck_s = 0.0;   // seconds without progress
  double silent_s = 0.0;  // seconds since its last heartbeat (0 for rank 0 itself)
  bool silent = false;    // no heartbeat for several periods: stopped, dead or cut off
  bool heard = true;      // false: no heartbeat at all since the watchdog started
  std::string busy;       // its oldest read or decode in flight (progress::BusyScope), if any
  double busy_s = -1.0;   // for how long; < 0: none
};

// The stall message: "no progress for 63 s at step 124; not arrived: rank 1 on node02 (silent for
// 63 s, last heard in backward of step 124); waiting in a collective: rank 0 on node01 (allreduce
// of step 124)". A rank whose data loader has had a read or decode in flight for a second or more
// says so: "rank 1 on node02 (data_wait of step 124, its data loader reading DIR/train/shard-
// 00003-of-00008.h5: sample 1200 (row 176) and 63 more for 62 s)". Lists at most a few ranks per group, then counts the
// rest.
std::string describe_stall(const std::vector<RankProgress>& ranks, double limit_s, const std::string& limit_option);

}  // namespace scaletrain::comm
