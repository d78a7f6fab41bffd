// Which GPU each rank drives, decided from the GPUs themselves, and how the ranks sit next to
// them: the plain-data half of --device's choice (device_choice.cpp gathers the data and calls
// these), so that every Slurm and CUDA_VISIBLE_DEVICES layout is a unit test.
//
// The rule. The ranks of one physical host exchange the UUIDs of the GPUs each can see (a UUID
// names a GPU whatever its ordinal in a rank's CUDA_VISIBLE_DEVICES, and tells MIG instances of
// one GPU apart, which PCI bus ids do not). In rank order, each rank takes, of the GPUs it sees,
// the one the fewest ranks before it have taken, the lowest PCI bus id (then UUID) first. So:
// - ranks that see the same set divide it among themselves in rank order, one GPU each, as long
//   as there are enough (a DGX-1 under srun --gpu-bind=closest: the ranks of each socket share
//   out that socket's four GPUs, whatever Slurm's task distribution);
// - a rank that sees one GPU takes it;
// - sets that overlap without being equal are served the same way: a rank shares a GPU only when
//   every GPU it sees is taken already, and then the least shared one;
// - more ranks than GPUs share them evenly, and a warning names who shares what.
// The old rule (local rank modulo the visible GPUs) put ranks 0 and 4 of a DGX-1 on one GPU
// under --gpu-bind=closest and Slurm's default block:cyclic distribution.
#pragma once

#include <string>
#include <vector>

#include "scaletrain/core/json.hpp"

namespace scaletrain::train {

// What one rank sees: its physical host and its visible GPUs, in its CUDA ordinal order.
struct RankGpuView {
  std::string host;
  std::vector<std::string> uuids;    // [ordinal]
  std::vector<std::string> bus_ids;  // [ordinal], "0000:3b:00.0"
};

struct GpuAssignment {
  int ordinal = -1;  // in the rank's own ordinals (its CUDA_VISIBLE_DEVICES); -1: it sees none
  std::string uuid, bus_id;
  std::vector<int> sharing;  // the ranks given this GPU, ascending, this one included
};

// Every rank's GPU (index: rank), by the rule above. Deterministic: every rank computes the same.
std::vector<GpuAssignment> assign_gpus(const std::vector<RankGpuView>& ranks);

// One warning per GPU given to more than one rank: "warning: ranks 0 and 4 on host n1 share a
// GPU, 0000:07:00.0 (GPU-...): ..."; none when every rank has its own.
std::vector<std::string> sharing_warnings(const std::vector<RankGpuView>& ranks,
                                          const std::vector<GpuAssignment>& assignments);

// A view as one line of text for the ranks' exchange, and back (throws on a malformed line).
std::string encode_view(const RankGpuView& view);
RankGpuView decode_view(const std::string& text);

// One rank's place: its GPU and the cores it may run on, with their NUMA nodes.
struct BindingRow {
  int rank = 0;
  std::string host, bus_id, uuid;
  int gpu_numa_node = -1;           // -1: not known (no sysfs entry, a VM)
  std::vector<int> cpus;            // the cores the rank may run on (its affinity)
  std::vector<int> cpu_numa_nodes;  // their NUMA nodes, ascending; empty: not known
};

std::string encode_row(const BindingRow& row);
BindingRow decode_row(const std::string& text);

// The start-up table: a header and one line per rank, at most `max_rows` of them (then a line
// saying how many more, and that report.json has them all).
std::vector<std::string> binding_table(const std::vector<BindingRow>& rows, std::size_t max_rows);
// A warning per rank none of whose cores is on its GPU's NUMA node (host-device copies then cross
// the sockets); nothing where either side's node is not known.
std::vector<std::string> binding_warnings(const std::vector<BindingRow>& rows);
// The ranks of `group` (world ranks: the members of one would-be NCCL communicator, such as a
// node's) that share a GPU with another member: NCCL refuses such a communicator ("Duplicate GPU
// detected"), so a caller refuses first with this text, one clause per shared GPU: "ranks 0 and 1
// share GPU 0000:3b:00.0 (GPU-...) on host n1". A GPU is its UUID on its host (a MIG instance has
// its own UUID), the bus id where the UUID is not known. "" when every member has a GPU of its own
// (a rank of `group` missing from rows is an error).
std::string gpus_shared_within(const std::vector<BindingRow>& rows, const std::vector<int>& group);
// report.json's device.binding: one object per rank.
Json binding_json(const std::vector<BindingRow>& rows);

// "0-4,20-24" from a set of core numbers; "" for none.
std::string cpu_list(std::vector<int> cpus);
// The inverse, as sysfs writes it ("0-3,8,10-11"); throws on anything else.
std::vector<int> parse_cpu_list(const std::string& text);

// This process's cores (sched_getaffinity), ascending.
std::vector<int> affinity_cpus();
// The NUMA node of a PCI device from sysfs (ROOT/bus/pci/devices/BUS/numa_node); -1 if unknown.
int pci_numa_node(const std::string& bus_id, const std::string& sysfs_root = "/sys");
// The NUMA nodes holding any of `cpus` (ROOT/devices/system/node/nodeN/cpulist), ascending.
std::vector<int> numa_nodes_of(const std::vector<int>& cpus, const std::string& sysfs_root = "/sys");

}  // namespace scaletrain::train
