// What training measures of its device beyond the host timers, for report.json's "device": on a
// GPU, the GPU time of forward, backward and the optimizer (CUDA events on the compute stream),
// the GPU's description and versions, the allocator's peak and the GPU's energy over the segment
// (NVML). On the CPU it measures nothing and the report says only "cpu".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_timer.hpp"
#include "scaletrain/backend/gpu_energy.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/ops/conv_algorithm.hpp"
#include "scaletrain/report/phase_timer.hpp"
#include "scaletrain/report/train_report.hpp"
#include "scaletrain/train/device_choice.hpp"
#include "scaletrain/train/training_observer.hpp"

namespace scaletrain::train {

// report.json's device.conv_algorithms: one object per convolution shape and direction, with
// cuDNN's algorithm number, the math type set on the descriptor, its workspace and determinism.
Json conv_algorithms_json(const std::vector<ops::ConvAlgorithmRecord>& records);

// A training observer (training_observer.hpp): each step's end adds the step's GPU times.
class DeviceMetrics final : public TrainingObserver {
 public:
  // Starts the energy reading; ctx must outlive this.
  DeviceMetrics(Context& ctx, const DeviceChoice& choice);

  // Marks around one phase of a step; only forward, backward and optimizer on a GPU are timed.
  void begin(report::Phase phase) noexcept;
  void end(report::Phase phase) noexcept;
  // After the step's synchronize: adds the GPU time of the step's phases.
  void end_step();
  void on_step_end(const StepEnd&) override { end_step(); }
  // The summary's device fields (reads the energy counter and the allocator's peak now).
  void fill(report::TrainSummary& summary) override;

 private:
  static bool timed(report::Phase phase);

  Context& ctx_;
  DeviceEventTimer events_;
  report::PhaseTimers gpu_timers_;
  report::PhaseTimers first_step_gpu_timers_;  // after the first collected step: the warm-up
  int64_t steps_ = 0;
  // The allocator's underlying allocations when the first step ended and when the last one did.
  int64_t allocations_at_first_step_ = 0, allocations_at_last_step_ = 0;
  std::unique_ptr<GpuEnergyMeter> energy_;
  Json gpu_;  // on a GPU: name, memory, compute capability, versions
  std::string pci_bus_id_;
};

}  // namespace scaletrain::train
