// SIGUSR1 and SIGTERM as requests to checkpoint and stop: what Slurm sends before a time limit
// (sbatch --signal) and on preemption or scancel. The handlers only record the signal; the
// training loop looks at step boundaries and every rank agrees there (train/trainer.cpp), so a
// signal that reaches one rank stops all of them at the same step.
#pragma once

namespace scaletrain {

class StopSignals {
 public:
  // Installs the handlers, remembering the ones they replace. One instance at a time.
  StopSignals();
  // Restores the previous handlers.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first stop signal received since construction (SIGUSR1 or SIGTERM), 0 if none.
  int received() const;
  // "SIGUSR1", "SIGTERM", or "another signal".
  static const char* name(int signal);
};

// The first stop signal this process received while a StopSignals was installed, 0 if none (for
// observers such as the stall watchdog).
int stop_signal_received();

}  // namespace scaletrain
