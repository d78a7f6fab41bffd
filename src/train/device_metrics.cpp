// The device's figures for report.json (device_metrics.hpp).
#include "scaletrain/train/device_metrics.hpp"

#include "scaletrain/backend/device_info.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/ops/conv_algorithm.hpp"

namespace scaletrain::train {

DeviceMetrics::DeviceMetrics(Context& ctx, const DeviceChoice& choice) : ctx_(ctx), events_(ctx, report::kNumPhases) {
  if (ctx.device() != Device::cuda) return;
  const GpuInventory& inventory = choice.inventory;  // listed once, for the device choice
  gpu_ = Json::object();
  gpu_.set("gpus_per_node", static_cast<int64_t>(inventory.gpus.size()));
  for (const GpuInfo& g : inventory.gpus) {
    if (g.index != choice.gpu_index) continue;
    gpu_.set("name", g.name);
    gpu_.set("memory_bytes", static_cast<int64_t>(g.memory_bytes));
    gpu_.set("compute_capability", std::to_string(g.compute_major) + "." + std::to_string(g.compute_minor));
    pci_bus_id_ = g.pci_bus_id;
  }
  gpu_.set("driver", cuda_version_string(inventory.driver_version));
  gpu_.set("runtime", cuda_version_string(inventory.runtime_version));
  gpu_.set("cudnn", *SCALETRAIN_CUDNN_VERSION ? Json(SCALETRAIN_CUDNN_VERSION) : Json());
  gpu_.set("nccl", *SCALETRAIN_NCCL_VERSION ? Json(SCALETRAIN_NCCL_VERSION) : Json());
  gpu_.set("binding", binding_json(choice.binding));  // every rank's GPU, its NUMA node and the rank's cores
  energy_ = std::make_unique<GpuEnergyMeter>(pci_bus_id_);
}

bool DeviceMetrics::timed(report::Phase phase) {
  return phase == report::Phase::forward || phase == report::Phase::backward || phase == report::Phase::optimizer;
}

void DeviceMetrics::begin(report::Phase phase) noexcept {
  if (timed(phase)) events_.begin(static_cast<int>(phase));
}

void DeviceMetrics::end(report::Phase phase) noexcept {
  if (timed(phase)) events_.end(static_cast<int>(phase));
}

void DeviceMetrics::end_step() {
  // The allocator's count when the first step (the warm-up: every first allocation) has ended,
  // and at the end of each step since (so that the end of the run, a checkpoint's copies, say,
  // is left out).
  allocations_at_last_step_ = ctx_.device_memory_stats().underlying_allocations;
  if (++steps_ == 1) allocations_at_first_step_ = allocations_at_last_step_;
  if (!events_.enabled()) return;
  const std::vector<double> seconds = events_.collect();
  for (report::Phase p : report::all_phases())
    if (timed(p)) gpu_timers_.add(p, seconds[static_cast<std::size_t>(p)]);
  // The first step (cuDNN's algorithm choice, the allocator's first allocations) is kept apart,
  // so that report.json can give the GPU's time per step without it, as step_split does.
  if (gpu_timers_.count(report::Phase::forward) == 1) first_step_gpu_timers_ = gpu_timers_;
}

Json conv_algorithms_json(const std::vector<ops::ConvAlgorithmRecord>& records) {
  Json all = Json::array();
  for (const ops::ConvAlgorithmRecord& r : records) {
    Json j = Json::object();
    j.set("direction", r.direction);
    Json input = Json::array(), weight = Json::array();
    for (int v : {r.n, r.h, r.w, r.c}) input.push_back(static_cast<int64_t>(v));
    for (int v : {r.o, r.groups > 0 ? r.c / r.groups : r.c, r.kh, r.kw}) weight.push_back(static_cast<int64_t>(v));
    j.set("input_nhwc", input);
    j.set("weight_oihw", weight);
    j.set("stride", static_cast<int64_t>(r.stride));
    j.set("padding", static_cast<int64_t>(r.padding));
    j.set("stride_w", static_cast<int64_t>(r.stride_w));
    j.set("padding_w", static_cast<int64_t>(r.padding_w));
    j.set("groups", static_cast<int64_t>(r.groups));
    j.set("tf32", r.tf32);
    j.set("data", r.data);
    j.set("algo", static_cast<int64_t>(r.algo));
    j.set("math", ops::conv_math_name(r.math));
    j.set("workspace_bytes", static_cast<int64_t>(r.workspace_bytes));
    j.set("deterministic", r.deterministic);
    j.set("chosen_by", r.chosen_by);
    // A search's measured times: the chosen algorithm's, and the fastest usable one's whatever its
    // determinism (what PyTorch's cudnn.benchmark would run); null after heuristics.
    const bool timed = r.search.chosen_ms >= 0;
    j.set("search_ms", timed ? Json(r.search.chosen_ms) : Json());
    j.set("fastest_ms", timed ? Json(r.search.fastest_ms) : Json());
    j.set("fastest_algo", timed ? Json(static_cast<int64_t>(r.search.fastest_algo)) : Json());
    // The graph API's engine where one runs the shape (--conv-algo graph | graph-search; algo is
    // then -1 and fastest_algo an engine's index): null where the legacy API runs it.
    const bool engine = r.engine >= 0;
    j.set("engine", engine ? Json(static_cast<int64_t>(r.engine)) : Json());
    j.set("engine_knobs", engine ? Json(r.engine_knobs) : Json());
    j.set("engine_notes", engine ? Json(r.engine_notes) : Json());
    all.push_back(j);
  }
  return all;
}

void DeviceMetrics::fill(report::TrainSummary& s) {
  const AllocatorStats memory = ctx_.device_memory_stats();
  // Bytes handed out at most (rank 0's in the report): what PyTorch's max_memory_allocated counts,
  // where the peak reserved also holds the cache's blocks of other sizes. On the CPU the two are
  // the host tensors' peak (nothing is cached): what a GPU run of the same model would have in use,
  // less cuDNN's workspaces, plus the loader's batches.
  s.peak_memory_bytes = static_cast<int64_t>(memory.peak_reserved_bytes);
  s.peak_in_use_bytes = static_cast<int64_t>(memory.peak_in_use_bytes);
  // Underlying allocations (cudaMalloc) from the end of the first step to the end of the last:
  // none once the cache holds what a step asks for. -1 where not counted (host memory without
  // SCALETRAIN_HOST_CACHE) or after one step.
  s.allocations_after_first_step =
      memory.underlying_allocations >= 0 && steps_ > 1 ? allocations_at_last_step_ - allocations_at_first_step_ : -1;
  if (ctx_.device() != Device::cuda) return;
  s.device_kind = "cuda";
  s.gpu = gpu_;
  // What cuDNN chose per convolution shape on this rank's GPU (rank 0's in the report).
  s.gpu.set("conv_algorithms", conv_algorithms_json(ops::conv_algorithm_records()));
  s.gpu_pci_bus_id = pci_bus_id_;
  s.gpu_timers = &gpu_timers_;
  s.first_step_gpu_timers = &first_step_gpu_timers_;
  s.energy_joules = energy_->joules();
  s.energy_reason = energy_->reason();
}

}  // namespace scaletrain::train
