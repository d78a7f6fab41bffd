// The stall watchdog (stall_watchdog.hpp). One thread per rank wakes every `period` (a tenth of
// the warning time, between 50 ms and 1 s), exchanges heartbeats with rank 0 and judges. Sends
// are MPI_Isend of a few dozen bytes (eager: they complete locally even when the receiver is
// stopped); a new one to a rank is posted only once the previous one completed, so a stopped
// receiver costs one message, not a queue.
#include "scaletrain/comm/stall_watchdog.hpp"

#include <mpi.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include "comm/mpi_impl.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/progress.hpp"
#include "scaletrain/core/stop_signals.hpp"
#include "scaletrain/core/timer.hpp"

namespace scaletrain::comm {
namespace {

constexpr int kBeatTag = 7101;
// A rank silent this long while the job is stopping (a stop signal came) has died or been
// stopped: under srun the survivors of a killed rank get SIGTERM and would otherwise wait in a
// collective until SIGKILL, KillWait (30 s by default) later. Heartbeats come every second or
// faster, so a live rank is never silent this long.
constexpr double kSilentWhileStopping = 5.0;
constexpr int kMaxListed = 4;  // ranks named per group in a message

// One heartbeat: a rank's progress beacon as it sends it.
struct Beat {
  int64_t step = 0;
  double since_s = 0.0;
  int32_t waiting = 0;
  char activity[36] = "start-up";
  double busy_s = -1.0;  // age of the oldest read or decode in flight (progress::BusyScope); < 0: none
  char busy[256] = "";   // what it is, e.g. "reading DIR/train/shard-00003-of-00008.h5: sample 1200 (row 176)"
};

Beat beat_now() {
  const progress::Snapshot s = progress::now();
  Beat b;
  b.step = s.step;
  b.since_s = s.since_s;
  b.waiting = s.waiting ? 1 : 0;
  std::snprintf(b.activity, sizeof b.activity, "%s", s.activity);
  const progress::Busy busy = progress::oldest_busy();
  b.busy_s = busy.since_s;
  std::snprintf(b.busy, sizeof b.busy, "%s", busy.what.c_str());
  return b;
}

std::string seconds(double s) { return std::to_string(static_cast<long long>(s + 0.5)) + " s"; }

// A read or decode running this long is named in the message (a hung read is the likely cause).
constexpr double kBusyNamedAfter = 1.0;

std::string where(const RankProgress& r) {
  return r.activity + (r.step > 0 ? " of step " + std::to_string(r.step) : std::string());
}

// ", its data loader reading SHARD: sample N (row R) for 62 s", or "".
std::string busy_note(const RankProgress& r) {
  return r.busy_s >= kBusyNamedAfter ? ", its data loader " + r.busy + " for " + seconds(r.busy_s) : std::string();
}

// How long a rank has been stuck: its main thread without progress, or a read or decode in flight
// for longer (the main thread may still be using batches prepared before that read hung).
double stuck_for(const Beat& b) { return std::max(b.since_s, b.busy_s); }

void set_busy(RankProgress& p, const Beat& b) {
  p.busy = b.busy;
  p.busy_s = b.busy_s;
}

void list_group(std::ostringstream& os, const std::vector<const RankProgress*>& group, bool arrived) {
  for (std::size_t i = 0; i < group.size() && i < kMaxListed; ++i) {
    const RankProgress& r = *group[i];
    os << (i ? "; " : "") << "rank " << r.rank << " on " << r.host << " (";
    if (r.silent && !r.heard)
      os << "silent for " << seconds(r.silent_s) << ", never heard since the watchdog started";
    else if (r.silent)
      os << "silent for " << seconds(r.silent_s) << ", last heard in " << where(r) << busy_note(r);
    else if (arrived)
      os << where(r) << busy_note(r);
    else
      os << where(r) << " for " << seconds(r.stuck_s) << busy_note(r);
    os << ")";
  }
  if (group.size() > kMaxListed) os << "; and " << group.size() - kMaxListed << " more";
}

}  // namespace

std::string describe_stall(const std::vector<RankProgress>& ranks, double limit_s, const std::string& limit_option) {
  double stuck = 0.0;
  std::vector<const RankProgress*> behind, waiting;
  for (const RankProgress& r : ranks) {
    stuck = std::max(stuck, r.stuck_s);
    (r.silent || !r.waiting ? behind : waiting).push_back(&r);
  }
  // The silent ones first: they are the likeliest cause.
  std::stable_sort(behind.begin(), behind.end(),
                   [](const RankProgress* a, const RankProgress* b) { return a->silent > b->silent; });
  std::ostringstream os;
  os << "no progress for " << seconds(stuck) << " (" << limit_option << " " << limit_s << ")";
  os << "; not arrived: ";
  if (behind.empty())
    os << "none (every rank waits in a collective)";
  else
    list_group(os, behind, false);
  if (!waiting.empty()) {
    os << "; waiting in a collective: ";
    list_group(os, waiting, true);
  }
  return os.str();
}

struct StallWatchdog::Impl {
  Communicator comm;
  StallOptions options;
  std::vector<std::string> hosts;
  double period = 1.0;
  double start = 0.0;

  // Rank 0: the last heartbeat of every rank and when it came.
  struct Peer {
    Beat beat;
    bool heard = false;
    double received_at = 0.0;
    MPI_Request ping = MPI_REQUEST_NULL;
    Beat sent;  // the buffer of the ping in flight
  };
  std::vector<Peer> peers;
  // Other ranks: their heartbeat in flight and rank 0's last answer.
  MPI_Request beat_request = MPI_REQUEST_NULL;
  Beat beat_sent, root_beat;
  double root_heard_at = 0.0;
  bool root_heard = false;

  bool warned = false;
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;

  Impl(const Communicator& world, const StallOptions& o) : comm(world.dup()), options(o) {}

  void run() {
    try {
      std::unique_lock<std::mutex> lock(mutex);
      while (!cv.wait_for(lock, std::chrono::duration<double>(period), [this] { return stop; })) {
        lock.unlock();
        abort_on_communication_error();
        if (comm.rank() == 0)
          serve_as_root();
        else
          report_to_root();
        lock.lock();
      }
    } catch (const std::exception& e) {
      ST_WARN("stall watchdog stopped: " << error_text(e));
    }
    cancel_pending();
  }

  // Rank 0: collect heartbeats, answer every rank, judge.
  void serve_as_root() {
    const MPI_Comm c = mpi_comm(comm);
    for (;;) {
      int flag = 0;
      MPI_Status status;
      ST_CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, kBeatTag, c, &flag, &status));
      if (!flag) break;
      Beat b;
      ST_CHECK_MPI(MPI_Recv(&b, sizeof b, MPI_BYTE, status.MPI_SOURCE, kBeatTag, c, MPI_STATUS_IGNORE));
      Peer& peer = peers[status.MPI_SOURCE];
      peer.beat = b;
      peer.heard = true;
      peer.received_at = now_seconds();
    }
    const Beat mine = beat_now();
    for (int r = 1; r < comm.size(); ++r) post(peers[r].ping, peers[r].sent, mine, r);
    judge(rank_table(mine), "--stall-warn-s", "--stall-abort-s");
  }

  std::vector<RankProgress> rank_table(const Beat& mine) const {
    const double now = now_seconds(), silent_after = std::max(3 * period, 1.0);
    std::vector<RankProgress> table(comm.size());
    for (int r = 0; r < comm.size(); ++r) {
      const Beat& b = r == 0 ? mine : peers[r].beat;
      RankProgress& p = table[r];
      p.rank = r;
      p.host = hosts[r];
      p.activity = b.activity;
      p.step = b.step;
      p.waiting = b.waiting != 0;
      p.silent_s = r == 0 ? 0.0 : now - peers[r].received_at;
      p.stuck_s = stuck_for(b) + p.silent_s;
      p.silent = p.silent_s > silent_after;
      p.heard = r == 0 || peers[r].heard;
      set_busy(p, b);
    }
    return table;
  }

  // Others: send a heartbeat, note rank 0's answers; speak only when rank 0 is silent too.
  void report_to_root() {
    const MPI_Comm c = mpi_comm(comm);
    for (;;) {
      int flag = 0;
      ST_CHECK_MPI(MPI_Iprobe(0, kBeatTag, c, &flag, MPI_STATUS_IGNORE));
      if (!flag) break;
      ST_CHECK_MPI(MPI_Recv(&root_beat, sizeof root_beat, MPI_BYTE, 0, kBeatTag, c, MPI_STATUS_IGNORE));
      root_heard_at = now_seconds();
      root_heard = true;
    }
    const Beat mine = beat_now();
    post(beat_request, beat_sent, mine, 0);
    const double root_silent = now_seconds() - root_heard_at;
    RankProgress root;
    root.rank = 0;
    root.host = hosts[0];
    root.activity = root_beat.activity;
    root.step = root_beat.step;
    root.silent = root_silent > std::max(3 * period, 1.0);
    root.heard = root_heard;
    root.silent_s = root_silent;
    root.stuck_s = stuck_for(root_beat) + root_silent;
    set_busy(root, root_beat);
    const int signal = stop_signal_received();
    if (signal != 0 && root.silent && root_silent > kSilentWhileStopping) abort_for_silence(root, signal);
    if (std::min(stuck_for(mine), root_silent) <= options.warn_s) {
      warned = false;
      return;
    }
    RankProgress me;
    me.rank = comm.rank();
    me.host = hosts[comm.rank()];
    me.activity = mine.activity;
    me.step = mine.step;
    me.waiting = mine.waiting != 0;
    me.stuck_s = stuck_for(mine);
    set_busy(me, mine);
    judge({root, me}, "--stall-warn-s", "--stall-abort-s");
  }

  // Warns once per stall, aborts past the abort limit, or at once when a rank is gone while the
  // job is stopping.
  void judge(const std::vector<RankProgress>& table, const char* warn_option, const char* abort_option) {
    if (const int signal = stop_signal_received())
      for (const RankProgress& r : table)
        if (r.silent && r.silent_s > kSilentWhileStopping) abort_for_silence(r, signal);
    double stuck = 0.0;
    for (const RankProgress& r : table) stuck = std::max(stuck, r.stuck_s);
    if (stuck <= options.warn_s) {
      if (warned) ST_WARN("stall over: every rank is making progress again");
      warned = false;
      return;
    }
    if (options.abort_s > 0 && stuck > options.abort_s) {
      std::fprintf(stderr, "scaletrain: error: [rank %d on %s] stalled, aborting the job: %s\n", comm.rank(),
                   hosts[comm.rank()].c_str(), describe_stall(table, options.abort_s, abort_option).c_str());
      std::fflush(stderr);
      std::fflush(stdout);
      say_last_words("stalled: " + describe_stall(table, options.abort_s, abort_option));
      abort_job(kExitStalled);
    }
    if (!warned) {
      ST_WARN("stall: " << describe_stall(table, options.warn_s, warn_option)
                        << (options.abort_s > 0
                                ? "; the job is aborted after " + seconds(options.abort_s) + " (" + abort_option + ")"
                                : std::string()));
      warned = true;
    }
  }

  // StallOptions::poll_error: a failure found on this rank ends the job now.
  void abort_on_communication_error() {
    if (!options.poll_error) return;
    const std::string error = options.poll_error();
    if (error.empty()) return;
    std::fprintf(stderr, "scaletrain: error: [rank %d on %s] %s; aborting the job\n", comm.rank(),
                 hosts[comm.rank()].c_str(), error.c_str());
    std::fflush(stderr);
    std::fflush(stdout);
    say_last_words("rank " + std::to_string(comm.rank()) + ": " + error);
    abort_job(kExitStalled);
  }

  [[noreturn]] void abort_for_silence(const RankProgress& r, int signal) {
    std::fprintf(stderr,
                 "scaletrain: error: [rank %d on %s] rank %d on %s has been silent for %s while the job stops for %s "
                 "(%s): it died or was stopped; ending the job\n",
                 comm.rank(), hosts[comm.rank()].c_str(), r.rank, r.host.c_str(), seconds(r.silent_s).c_str(),
                 StopSignals::name(signal),
                 r.heard ? ("last heard in " + where(r)).c_str() : "never heard since the watchdog started");
    std::fflush(stderr);
    std::fflush(stdout);
    say_last_words("rank " + std::to_string(r.rank) + " on " + r.host + " went silent while the job stopped for " +
                   StopSignals::name(signal));
    abort_job(kExitStalled);
  }

  void post(MPI_Request& request, Beat& buffer, const Beat& beat, int to) {
    if (request != MPI_REQUEST_NULL) {
      int done = 0;
      ST_CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (!done) return;  // the receiver has not taken the last one: it knows nothing newer is lost
    }
    buffer = beat;
    ST_CHECK_MPI(MPI_Isend(&buffer, sizeof buffer, MPI_BYTE, to, kBeatTag, mpi_comm(comm), &request));
  }

  // At the end: never wait for another rank. Completed sends are freed, others cancelled, and
  // heartbeats that arrived are received so that none is left unmatched.
  void cancel_pending() {
    auto drop = [](MPI_Request& r) {
      if (r == MPI_REQUEST_NULL) return;
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (!done) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
      r = MPI_REQUEST_NULL;
    };
    drop(beat_request);
    for (Peer& p : peers) drop(p.ping);
    for (;;) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kBeatTag, mpi_comm(comm), &flag, &status) != MPI_SUCCESS || !flag) break;
      Beat b;
      MPI_Recv(&b, sizeof b, MPI_BYTE, status.MPI_SOURCE, kBeatTag, mpi_comm(comm), MPI_STATUS_IGNORE);
    }
  }
};

StallWatchdog::StallWatchdog(const Communicator& comm, const StallOptions& options)
    : impl_(std::make_unique<Impl>(comm, options)) {
  ST_CHECK(options.warn_s > 0, "--stall-warn-s must be positive, got " << options.warn_s);
  Impl& m = *impl_;
  m.hosts = m.comm.all_hosts();
  int level = 0;
  ST_CHECK_MPI(MPI_Query_thread(&level));
  if (level < MPI_THREAD_MULTIPLE) {
    ST_LOG("stall watchdog off: the MPI library does not provide MPI_THREAD_MULTIPLE");
    return;
  }
  m.period = std::clamp(options.warn_s / 10.0, 0.05, 1.0);
  progress::tick();  // the watchdog measures from now, not from a long set-up (staging, say)
  m.start = m.root_heard_at = now_seconds();
  m.peers.resize(m.comm.size());
  for (auto& p : m.peers) p.received_at = m.start;
  m.thread = std::thread([&m] { m.run(); });
}

StallWatchdog::~StallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace scaletrain::comm
