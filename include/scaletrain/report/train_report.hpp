// report.json of `scaletrain train` (docs/report.md): what a scaling study compares, for the
// whole logical run across restarts (its segments and totals) and, per rank, for the job segment
// that writes it (phases, all-reduce and input pipeline times).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/report/phase_timer.hpp"

namespace scaletrain::report {

// The checkpoints a segment wrote (report.json "checkpoints").
struct CheckpointTotals {
  int written = 0;
  double seconds = 0.0;
  int64_t bytes = 0;
  std::string last;  // the path of the last one written
  void add(const std::string& path, int64_t file_bytes, double write_seconds) {
    ++written;
    seconds += write_seconds;
    bytes += file_bytes;
    last = path;
  }
};

// What report.json is built from. Its parts are filled by those who own them: the run's set-up,
// its state (position, history, results), the input pipeline, the checkpoints, and the loop's
// observers (training_observer.hpp) their own.
struct TrainSummary {
  // The run, the same on every rank.
  std::string model;
  std::string task;            // train/task.hpp: image_classification | recommendation
  std::string quality_metric;  // what val_accuracy and final_val_accuracy measure: top1 | hr@10
  int64_t parameters = 0;
  std::vector<std::string> hosts;  // of this segment's ranks
  int threads_per_rank = 0;
  Json config, dataset, topology, preflight, staging;
  int64_t global_batch = 0, steps_per_epoch = 0;
  int accumulate_steps = 1;                  // micro-batches per optimizer step
  Json optimizer;                            // the optimizer's describe(): name (sgd | lars) and hyper-parameters
  Json loss_scale;                           // the loss scaler's state at the end (LossScaler::to_json), or null
  Json op_times;                             // --op-times: rank 0's time per op (train/op_times.hpp), or null
  std::string precision = "fp32";            // --precision
  std::string fuse = "none";                 // --fuse as it ran (auto resolved)
  std::string activation_dtype = "float32";  // Context::activation_dtype: float16 or bfloat16 under a mixed precision
  int64_t steps = 0;                         // optimizer steps of the whole run
  int64_t samples_trained = 0;               // training samples of the whole run, all ranks
  int64_t units_trained = 0;                 // in the task's unit (work_unit): samples, or tokens for translation
  std::string work_unit = "samples";
  std::string status;     // completed | target_reached | max_steps | interrupted
  Json epochs, segments;  // history, this segment included
  double final_val_accuracy = -1.0, target_accuracy = 0.0, time_to_target_s = -1.0;
  double start_time_unix_ms = 0.0;  // of the run's first segment
  double train_time_s = 0.0;        // training steps, every segment (slowest rank of each)
  double total_time_s = 0.0;        // training loop (the time-to-target clock), every segment

  // This segment on this rank (summarised over ranks when the report is built).
  const comm::GradientReducer* reducer = nullptr;
  Json transports;  // the all-reduce's transports (train::TransportChoice::to_json), into allreduce_options
  const PhaseTimers* timers = nullptr;
  double segment_train_s = 0.0;
  const std::vector<double>* step_seconds = nullptr;  // wall time of each optimizer step
  const PhaseTimers* first_step_timers = nullptr;     // the timers after the segment's first step
  int64_t segment_samples = 0;
  Json input;  // io, encoding, data_threads, prefetch
  int64_t bytes_read = 0;
  bool skip_bad_samples = false;
  int64_t skipped_samples = 0;
  CheckpointTotals checkpoints;

  // The device (report.json "device"), the same kind on every rank: "cpu", or "cuda" with this
  // rank's GPU (train/device_metrics.hpp). Ranks with the same host and PCI bus id share a GPU.
  std::string device_kind = "cpu";
  Json gpu;  // name, memory_bytes, compute_capability, driver, runtime, cudnn, nccl, gpus_per_node
  std::string gpu_pci_bus_id;
  const PhaseTimers* gpu_timers = nullptr;             // GPU time of forward, backward and optimizer
  const PhaseTimers* first_step_gpu_timers = nullptr;  // gpu_timers after the first step (the warm-up)
  int64_t peak_memory_bytes = 0;                       // the allocator's peak reserved bytes
  int64_t peak_in_use_bytes = 0;                       // the allocator's peak handed out (tensors)
  int64_t allocations_after_first_step = -1;           // underlying allocations since step 1; -1: not counted
  double energy_joules = -1.0;                         // the GPU's over the segment; -1 where not read, and why:
  std::string energy_reason;
};

// Collective: report.json's "device": {"kind": "cpu"}, or on GPUs rank 0's GPU and versions, the
// GPU time of the compute phases, each rank's peak device memory and each GPU's energy.
Json device_report(const comm::Communicator& comm, const TrainSummary& summary);

// Collective: the report, the same on every rank (rank 0 writes it with write_json_atomic).
Json build_train_report(const comm::Communicator& comm, const TrainSummary& summary);

}  // namespace scaletrain::report
