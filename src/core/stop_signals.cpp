// Stop signals (stop_signals.hpp): an async-signal-safe handler that stores the signal number in
// a lock-free atomic; nothing else happens in signal context.
#include "scaletrain/core/stop_signals.hpp"

#include <atomic>
#include <csignal>

#include "scaletrain/core/error.hpp"

namespace scaletrain {
namespace {
std::atomic<int> g_received{0};
std::atomic<bool> g_installed{false};
struct sigaction g_previous_usr1, g_previous_term;

extern "C" void on_stop_signal(int signal) {
  int none = 0;
  g_received.compare_exchange_strong(none, signal);  // keep the first
}
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free atomic");
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
}

StopSignals::~StopSignals() {
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
