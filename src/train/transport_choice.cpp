// The transports of a run's gradient all-reduce (transport_choice.hpp).
#include "scaletrain/train/transport_choice.hpp"

#include "scaletrain/comm/nccl_reducer.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::train {
namespace {

// "" where NCCL loads on every rank, else the first failing rank's reason. Collective.
std::string nccl_missing(const comm::Communicator& comm, std::string& version) {
  std::string why;
  try {
    version = comm::nccl_runtime_version();
  } catch (const std::exception& e) {
    why = e.what();
  }
  const std::vector<std::string> all = comm.allgather(why);
  for (std::size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) return "rank " + std::to_string(r) + ": " + all[r];
  return "";
}

// The MPI's answer, and --cuda-aware-mpi on refused where it is no. Every rank asks its own
// library (a job's ranks normally share one); one rank's no refuses on every rank.
comm::CudaAwareMpi check_cuda_aware_mpi(const comm::Communicator& comm, const TrainConfig& c) {
  const comm::CudaAwareMpi mine = comm::query_cuda_aware_mpi();
  const bool everywhere = comm.allreduce_and(mine.supported);
  if (c.cuda_aware_mpi == "on" && !everywhere && mine.known)
    throw UsageError("--cuda-aware-mpi on: this MPI is not CUDA-aware (" + mine.detail +
                     "); use --cuda-aware-mpi auto or off (GPU memory is then staged through pinned host buffers), "
                     "or an MPI built with CUDA (e.g. Open MPI with UCX and CUDA)");
  comm::CudaAwareMpi agreed = mine;
  agreed.supported = everywhere;
  return agreed;
}

comm::Algorithm shape_of(const TrainConfig& c) {
  return c.allreduce == "flat" ? comm::Algorithm::flat : comm::Algorithm::hierarchical;
}

// --inter auto with NCCL inside the node: the calibration times NCCL across nodes too, where the
// cross-node communicator can form (nodes of equal size, each of its ranks on a GPU of its own:
// not so for emulated nodes on one GPU); else MPI only, said in a note. Collective.
void choose_inter_automatically(const comm::Topology& topo, const DeviceChoice& device, TransportChoice& t) {
  std::string why = topo.uniform() ? "" : "nodes of unequal size (" + topo.describe() + ")";
  if (why.empty())
    why = comm::nccl_shared_gpus(
        topo, comm::Algorithm::hierarchical, comm::Transport::nccl,
        [&device](const std::vector<int>& members) { return gpus_shared_within(device.binding, members); });
  if (why.empty()) {
    t.inter_automatic = true;
    return;
  }
  t.notes.push_back(
      "all-reduce: --inter auto times MPI across nodes only: NCCL's cross-node communicator cannot form (" + why + ")");
}

// On GPUs: nccl or mpi inside the node, by the rules above.
void choose_intra_on_gpus(const comm::Communicator& comm, const comm::Topology& topo, const TrainConfig& c,
                          const DeviceChoice& device, TransportChoice& t) {
  if (c.intra == "mpi") return;  // the host-staged path, as asked
  const bool asked = c.intra == "nccl";
  if (!asked && comm.size() == 1) return;  // nothing to reduce: no NCCL either
  if (const std::string missing = nccl_missing(comm, t.nccl_version); !missing.empty()) {
    if (asked) throw UsageError("--intra nccl: NCCL is not available on " + missing);
    t.notes.push_back("warning: all-reduce through host memory (--intra mpi), not NCCL: " + missing);
    return;
  }
  const comm::Transport inter = c.inter == "nccl" ? comm::Transport::nccl : comm::Transport::mpi;
  if (!asked) {
    // Ranks sharing a GPU anywhere is a test or a small machine: the host-staged path, which runs
    // there, even where the communicators NCCL would need (emulated nodes of one rank) could form.
    std::vector<int> everyone(static_cast<std::size_t>(comm.size()));
    for (int r = 0; r < comm.size(); ++r) everyone[static_cast<std::size_t>(r)] = r;
    if (const std::string shared = gpus_shared_within(device.binding, everyone); !shared.empty()) {
      t.notes.push_back("warning: all-reduce through host memory (--intra mpi), not NCCL: " + shared +
                        " (NCCL needs a GPU per rank in each communicator; --intra nccl forces it where each "
                        "node's ranks have GPUs of their own)");
      t.nccl_version.clear();
      return;
    }
  }
  const std::string shared = comm::nccl_shared_gpus(
      topo, shape_of(c), inter,
      [&device](const std::vector<int>& members) { return gpus_shared_within(device.binding, members); },
      /*automatic=*/c.allreduce == "auto");
  if (!shared.empty())
    throw UsageError(
        "--intra nccl: NCCL needs one GPU per rank in each of its communicators (it refuses two ranks "
        "on one GPU): " +
        shared + "; use --intra mpi, or one rank per GPU");
  t.intra = comm::Transport::nccl;
  t.inter = inter;
  if (c.inter == "auto") choose_inter_automatically(topo, device, t);
}

}  // namespace

TransportChoice choose_transports(const comm::Communicator& comm, const comm::Topology& topo, const TrainConfig& c,
                                  const DeviceChoice& device) {
  comm::check_transport_request(c.allreduce, transport_request(c));
  TransportChoice t;
  t.mpi = check_cuda_aware_mpi(comm, c);
  if (device.device == Device::cpu) {
    for (const auto& [option, value] : {std::pair{"--intra", c.intra}, std::pair{"--inter", c.inter}})
      if (value == "nccl")
        throw UsageError(std::string(option) +
                         " nccl: NCCL all-reduces GPU memory, but this run computes on the CPU (" +
                         (device.log_lines.empty() ? "--device " + c.device : device.log_lines.front()) +
                         "); use --intra mpi, or a GPU with --device cuda");
    if (c.cuda_aware_mpi == "on") t.notes.push_back("--cuda-aware-mpi on has no effect on the CPU");
    return t;
  }
  choose_intra_on_gpus(comm, topo, c, device, t);
  // Device pointers reach MPI only on the level across nodes of --intra nccl --inter mpi.
  if (t.intra == comm::Transport::nccl && t.inter == comm::Transport::mpi &&
      shape_of(c) == comm::Algorithm::hierarchical)
    // MPI's 16-bit sum is a host function: 16-bit gradients are staged whatever the MPI.
    t.cuda_aware_mpi = allreduce_options(c).compression == comm::Compression::none &&
                       (c.cuda_aware_mpi == "on" || (c.cuda_aware_mpi == "auto" && t.mpi.supported));
  else if (c.cuda_aware_mpi == "on")
    t.notes.push_back(
        "--cuda-aware-mpi on has no effect: only --intra nccl --inter mpi (hierarchical) hands MPI "
        "GPU memory");
  return t;
}

Json TransportChoice::to_json(const TrainConfig& c) const {
  Json aware = Json::object();
  aware.set("requested", c.cuda_aware_mpi);
  aware.set("used", cuda_aware_mpi);
  aware.set("mpi_supported", mpi.supported);
  aware.set("mpi", mpi.detail);
  Json j = Json::object();
  j.set("intra", comm::transport_name(intra));
  j.set("intra_requested", c.intra);
  j.set("inter", inter_automatic ? "auto" : comm::transport_name(inter));
  j.set("cuda_aware_mpi", aware);
  j.set("nccl", nccl_version.empty() ? Json() : Json(nccl_version));
  Json list = Json::array();
  for (const std::string& note : notes) list.push_back(Json(note));
  j.set("notes", list);
  return j;
}

}  // namespace scaletrain::train
