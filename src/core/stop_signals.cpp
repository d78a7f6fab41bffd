// Stop signals (stop_signals.hpp). The signals are blocked in the constructing (main) thread, and
// so in every thread it starts afterwards (the compute threads, OpenMP's and oneDNN's among them),
// and a watcher thread takes them with sigtimedwait: no compute thread is ever interrupted by them.
// Interrupting one is not harmless: with the Transformer's CPU kernels running, a SIGUSR1 taken
// by the main thread corrupted the heap in about half of the runs (glibc's "corrupted size vs.
// prev_size" a few ops later; never with the signal held off). Threads that libraries started
// before (MPI's progress threads) still have the signals unblocked; the kernel may deliver to
// them, so the async-signal-safe handler stays installed too: it only stores the signal number in
// a lock-free atomic.
#include "scaletrain/core/stop_signals.hpp"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <ctime>
#include <thread>

#include "scaletrain/core/error.hpp"

namespace scaletrain {
namespace {
std::atomic<int> g_received{0};
std::atomic<bool> g_installed{false};
std::atomic<bool> g_watching{false};
struct sigaction g_previous_usr1, g_previous_term;
sigset_t g_previous_mask;
std::thread g_watcher;

extern "C" void on_stop_signal(int signal) {
  int none = 0;
  g_received.compare_exchange_strong(none, signal);  // keep the first
}
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free atomic");

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  return set;
}

// Takes the blocked stop signals as they come; wakes every 50 ms to see whether to end.
void watch() {
  const sigset_t set = stop_set();
  const timespec wait{0, 50 * 1000 * 1000};
  while (g_watching.load()) {
    const int signal = sigtimedwait(&set, nullptr, &wait);
    if (signal > 0) on_stop_signal(signal);
  }
}
}  // namespace

StopSignals::StopSignals() {
  ST_CHECK(!g_installed.exchange(true), "internal error: two StopSignals at once");
  g_received = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and MPI calls go on; the loop looks at the flag
  sigaction(SIGUSR1, &action, &g_previous_usr1);
  sigaction(SIGTERM, &action, &g_previous_term);
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, &g_previous_mask);
  g_watching = true;
  g_watcher = std::thread(watch);  // inherits the block; sigtimedwait takes blocked signals
}

StopSignals::~StopSignals() {
  g_watching = false;
  if (g_watcher.joinable()) g_watcher.join();
  // A signal that came after the watcher's last look is still pending: take it so that restoring
  // the mask does not deliver it to the previous disposition (SIGTERM's would end the process).
  const sigset_t set = stop_set();
  const timespec none{0, 0};
  for (int signal; (signal = sigtimedwait(&set, nullptr, &none)) > 0;) on_stop_signal(signal);
  pthread_sigmask(SIG_SETMASK, &g_previous_mask, nullptr);
  sigaction(SIGUSR1, &g_previous_usr1, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
  g_installed = false;
}

int StopSignals::received() const { return g_received.load(); }

int stop_signal_received() { return g_received.load(); }

const char* StopSignals::name(int signal) {
  switch (signal) {
    case SIGUSR1:
      return "SIGUSR1";
    case SIGTERM:
      return "SIGTERM";
    case 0:
      return "none";
    default:
      return "another signal";
  }
}

}  // namespace scaletrain
