// --device: the collective choice of device and GPU (device_choice.hpp).
#include "scaletrain/train/device_choice.hpp"

#include <cstdio>
#include <map>

#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::train {

DeviceRequest parse_device_request(const std::string& text) {
  if (text == "auto") return DeviceRequest::automatic;
  if (text == "cpu") return DeviceRequest::cpu;
  if (text == "cuda") return DeviceRequest::cuda;
  throw UsageError("--device " + text + ": use auto (a GPU where every rank sees one, else the CPU), cpu or cuda");
}

const char* device_request_name(DeviceRequest request) {
  switch (request) {
    case DeviceRequest::automatic:
      return "auto";
    case DeviceRequest::cpu:
      return "cpu";
    case DeviceRequest::cuda:
      return "cuda";
  }
  return "?";
}

std::vector<std::string> describe_gpus(const GpuInventory& inventory) {
  std::vector<std::string> lines;
  for (const GpuInfo& g : inventory.gpus) {
    char line[256];
    std::snprintf(line, sizeof line, "GPU %d: %s, %.1f GiB, compute %d.%d, %d SMs (%s)", g.index, g.name.c_str(),
                  static_cast<double>(g.memory_bytes) / (1u << 30), g.compute_major, g.compute_minor, g.multiprocessors,
                  g.pci_bus_id.c_str());
    lines.push_back(line);
  }
  std::string versions = "driver " + cuda_version_string(inventory.driver_version) + ", runtime " +
                         cuda_version_string(inventory.runtime_version);
  if (*SCALETRAIN_CUDNN_VERSION) versions += std::string(", cuDNN ") + SCALETRAIN_CUDNN_VERSION;
  if (*SCALETRAIN_NCCL_VERSION) versions += std::string(", NCCL ") + SCALETRAIN_NCCL_VERSION;
  lines.push_back(versions);
  return lines;
}

namespace {

// This rank's place among the ranks of its host, from every rank's host name.
void find_local_rank(const std::vector<std::string>& hosts, int rank, DeviceChoice& choice) {
  choice.local_rank = 0;
  choice.ranks_on_host = 0;
  for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
    if (hosts[r] != hosts[rank]) continue;
    if (r < rank) ++choice.local_rank;
    ++choice.ranks_on_host;
  }
}

// "rank 3 (host n17): no driver: cudaGetDeviceCount: ..." for the first rank without a GPU; ""
// when every rank sees one. Collective.
std::string first_rank_without_gpu(const comm::Communicator& comm, const GpuInventory& mine) {
  const bool visible = mine.availability == GpuAvailability::visible;
  if (comm.allreduce_and(visible)) return "";
  const std::vector<double> has = comm.allgather(visible ? 1.0 : 0.0);
  int first = 0;
  while (has[first] != 0.0) ++first;
  std::string why = std::string(gpu_availability_name(mine.availability)) + ": " + mine.message;
  comm.broadcast(why, first);
  std::string host = comm.host();
  comm.broadcast(host, first);
  return "rank " + std::to_string(first) + " (host " + host + "): " + why;
}

// Each host's GPUs as its first rank sees them, for rank 0's start-up lines.
void add_gpu_lines(const comm::Communicator& comm, const GpuInventory& mine, const std::vector<std::string>& hosts,
                   DeviceChoice& choice) {
  std::string text;
  if (choice.local_rank == 0)
    for (const std::string& line : describe_gpus(mine)) text += line + "; ";
  const std::vector<std::string> per_rank = comm.allgather(text);
  std::map<std::string, int> ranks_per_host;
  for (const std::string& h : hosts) ++ranks_per_host[h];
  for (int r = 0; r < comm.size(); ++r) {
    if (per_rank[r].empty()) continue;
    choice.log_lines.push_back("host " + hosts[r] + " (" + std::to_string(ranks_per_host[hosts[r]]) +
                               " ranks): " + per_rank[r].substr(0, per_rank[r].size() - 2));
  }
}

// This rank's GPU ordinal: every rank's view of its GPUs gathered, the same assignment computed
// on every rank (assign_gpus), warnings for the GPUs that ranks share. Collective.
int take_gpu(const comm::Communicator& comm, const GpuInventory& mine, const std::vector<std::string>& hosts,
             std::vector<std::string>& warnings) {
  RankGpuView view;
  view.host = hosts[comm.rank()];
  for (const GpuInfo& g : mine.gpus) {
    view.uuids.push_back(g.uuid);
    view.bus_ids.push_back(g.pci_bus_id);
  }
  std::vector<RankGpuView> views;
  for (const std::string& text : comm.allgather(encode_view(view))) views.push_back(decode_view(text));
  const std::vector<GpuAssignment> assignments = assign_gpus(views);
  warnings = sharing_warnings(views, assignments);
  return assignments[comm.rank()].ordinal;
}

// Every rank's row of the binding table (its GPU, the GPU's NUMA node, its cores and theirs), the
// table, the sharing warnings and the NUMA warnings into rank 0's start-up lines. Collective.
void add_binding(const comm::Communicator& comm, const std::vector<std::string>& sharing, DeviceChoice& choice) {
  BindingRow row;
  row.rank = comm.rank();
  row.host = comm.host();
  for (const GpuInfo& g : choice.inventory.gpus)
    if (g.index == choice.gpu_index) row.bus_id = g.pci_bus_id, row.uuid = g.uuid;
  row.gpu_numa_node = pci_numa_node(row.bus_id);
  row.cpus = affinity_cpus();
  row.cpu_numa_nodes = numa_nodes_of(row.cpus);
  for (const std::string& text : comm.allgather(encode_row(row))) choice.binding.push_back(decode_row(text));
  constexpr std::size_t kTableRows = 64;  // a larger job's table is in report.json
  for (const std::string& line : binding_table(choice.binding, kTableRows)) choice.log_lines.push_back(line);
  for (const std::string& line : sharing) choice.log_lines.push_back(line);
  for (const std::string& line : binding_warnings(choice.binding)) choice.log_lines.push_back(line);
}

}  // namespace

DeviceChoice choose_device(const comm::Communicator& comm, DeviceRequest request, const std::string& command,
                           const std::string& not_on_gpu) {
  // --device cpu never touches the driver.
  return choose_device_among(comm, request, command, not_on_gpu,
                             request == DeviceRequest::cpu ? GpuInventory{} : list_visible_gpus());
}

DeviceChoice choose_device_among(const comm::Communicator& comm, DeviceRequest request, const std::string& command,
                                 const std::string& not_on_gpu, const GpuInventory& inventory) {
  DeviceChoice choice;
  const std::vector<std::string> hosts = comm.all_hosts();
  find_local_rank(hosts, comm.rank(), choice);
  if (request == DeviceRequest::cpu) {
    choice.log_lines.push_back("device: cpu (--device cpu)");
    return choice;
  }
  choice.inventory = inventory;
  const GpuInventory& mine = choice.inventory;
  const std::string missing = first_rank_without_gpu(comm, mine);
  if (!missing.empty()) {
    if (request == DeviceRequest::cuda)
      throw UsageError(command + " --device cuda: no GPU on " + missing + "; use --device cpu or auto");
    choice.log_lines.push_back("device: cpu (--device auto: no GPU on " + missing + ")");
    return choice;
  }
  if (!not_on_gpu.empty()) {
    if (request == DeviceRequest::cuda)
      throw UsageError(command + " --device cuda: " + not_on_gpu + "; use --device cpu");
    choice.log_lines.push_back("device: cpu (--device auto: every rank sees a GPU, but " + not_on_gpu + ")");
    return choice;
  }
  choice.device = Device::cuda;
  std::vector<std::string> sharing;
  choice.gpu_index = take_gpu(comm, mine, hosts, sharing);
  choice.log_lines.push_back(std::string("device: cuda (--device ") + device_request_name(request) +
                             "), each rank its own GPU among those it sees, shared out by UUID in rank order");
  add_gpu_lines(comm, mine, hosts, choice);
  add_binding(comm, sharing, choice);
  return choice;
}

void check_gpu_precision(const comm::Communicator& comm, const DeviceChoice& choice, Precision precision,
                         const std::string& command) {
  // The device and the precision are every rank's alike: only amp-bf16 on GPUs exchanges anything.
  if (choice.device != Device::cuda || precision != Precision::amp_bf16) return;
  std::string mine;  // this rank's reason, "" where its GPU can
  for (const GpuInfo& g : choice.inventory.gpus)
    if (g.index == choice.gpu_index && g.compute_major < 8)
      mine = "GPU " + std::to_string(g.index) + " of rank " + std::to_string(comm.rank()) + " (host " + comm.host() +
             "), " + g.name + ", compute " + std::to_string(g.compute_major) + "." + std::to_string(g.compute_minor) +
             ", has no bf16 tensor cores (compute 8.0 or newer: A100, H100)";
  for (const std::string& reason : comm.allgather(mine))
    if (!reason.empty()) throw UsageError(command + " --precision amp-bf16: " + reason + "; use --precision amp-fp16");
}

}  // namespace scaletrain::train
