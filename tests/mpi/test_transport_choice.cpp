// The transports of the gradient all-reduce chosen by every rank together (train/transport_choice,
// issue 27), on any machine: the GPUs are made up (choose_device_among), and NCCL is whatever this
// build has (CI's CUDA build loads libnccl without a GPU; the CPU build has none). On the CPU both
// levels are MPI and NCCL is refused on every rank. On GPUs, --intra auto takes NCCL where it loads
// and every rank has its own GPU, and falls back to host-staged MPI with a warning naming the
// reason where ranks share one (where --intra nccl is refused on every rank, naming them, unless
// each node has one rank); --allreduce auto chooses alike; one rank has nothing to reduce. --cuda-aware-mpi on is
// refused with this MPI (Debian's Open MPI is not CUDA-aware), auto does not use it. ST_MPI_RANKS: 1 2 4
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/nccl_reducer.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/train/transport_choice.hpp"

namespace st = scaletrain;
using st::comm::Transport;
using st::train::DeviceRequest;
using st::train::TrainConfig;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// This rank sees `gpus` made-up GPUs of compute 8.0, the same ones as every other rank of the host.
st::GpuInventory made_up(int gpus) {
  st::GpuInventory inv;
  inv.availability = st::GpuAvailability::visible;
  inv.runtime_version = inv.driver_version = 13000;
  for (int i = 0; i < gpus; ++i) {
    st::GpuInfo g;
    g.index = i;
    g.name = "NVIDIA A100-SXM4-40GB";
    g.compute_major = 8;
    g.pci_bus_id = "0000:0" + std::to_string(7 + i) + ":00.0";
    g.uuid = "GPU-" + std::to_string(i) + "0000000-aaaa-bbbb-cccc-dddddddddddd";
    inv.gpus.push_back(g);
  }
  return inv;
}

// What choose_transports threw on this rank ("" if nothing).
std::string refusal(const st::comm::Communicator& comm, const st::comm::Topology& topo, const TrainConfig& c,
                    const st::train::DeviceChoice& device) {
  try {
    st::train::choose_transports(comm, topo, c, device);
  } catch (const st::UsageError& e) {
    return e.what();
  }
  return "";
}

std::string notes(const st::train::TransportChoice& t) {
  std::string all;
  for (const std::string& n : t.notes) all += n + "\n";
  return all;
}

bool nccl_loads() {
  try {
    st::comm::nccl_runtime_version();
    return true;
  } catch (const st::Error&) {
    return false;
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transport_choice)

BOOST_AUTO_TEST_CASE(the_cpu_uses_mpi_at_both_levels_and_refuses_nccl_on_every_rank) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  const st::comm::Topology topo = st::comm::Topology::build(comm, 0);
  const st::train::DeviceChoice cpu = st::train::choose_device_among(comm, DeviceRequest::cpu, "train", "", {});
  TrainConfig c;
  const st::train::TransportChoice t = st::train::choose_transports(comm, topo, c, cpu);
  BOOST_TEST((t.intra == Transport::mpi && t.inter == Transport::mpi));
  BOOST_TEST(!t.cuda_aware_mpi);
  BOOST_TEST(t.nccl_version.empty());
  c.intra = "nccl";
  const std::string why = refusal(comm, topo, c, cpu);
  BOOST_TEST(contains(why, "--intra nccl: NCCL all-reduces GPU memory, but this run computes on the CPU"), why);
  BOOST_TEST(comm.allreduce_and(!why.empty()));  // every rank
}

BOOST_AUTO_TEST_CASE(gpus_of_their_own_take_nccl_inside_the_node_where_it_loads) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  const st::comm::Topology topo = st::comm::Topology::build(comm, 0);
  const st::train::DeviceChoice gpus =
      st::train::choose_device_among(comm, DeviceRequest::cuda, "train", "", made_up(comm.size()));
  TrainConfig c;
  const st::train::TransportChoice t = st::train::choose_transports(comm, topo, c, gpus);
  if (comm.size() == 1) {  // nothing to reduce: no NCCL
    BOOST_TEST((t.intra == Transport::mpi));
    BOOST_TEST(t.notes.empty(), notes(t));
  } else if (nccl_loads()) {
    BOOST_TEST((t.intra == Transport::nccl && t.inter == Transport::mpi));
    BOOST_TEST(t.nccl_version == st::comm::nccl_runtime_version());
    BOOST_TEST(!t.cuda_aware_mpi);  // auto, and this MPI says no
    BOOST_TEST(t.to_json(c).at("intra").as_string() == "nccl");
  } else {
    BOOST_TEST((t.intra == Transport::mpi));
    BOOST_TEST(contains(notes(t), "warning: all-reduce through host memory (--intra mpi), not NCCL: rank 0: "),
               notes(t));
    c.intra = "nccl";
    BOOST_TEST(contains(refusal(comm, topo, c, gpus), "--intra nccl: NCCL is not available on rank 0: "));
  }
  // --intra mpi is the host-staged path, GPUs of their own or not, and loads no NCCL.
  c.intra = "mpi";
  const st::train::TransportChoice m = st::train::choose_transports(comm, topo, c, gpus);
  BOOST_TEST((m.intra == Transport::mpi));
  BOOST_TEST(m.nccl_version.empty());
  BOOST_TEST(m.notes.empty(), notes(m));
  // --allreduce auto calibrates the NCCL shapes where NCCL is chosen (both shapes' communicators
  // form: every rank has its own GPU).
  c.intra = "auto";
  c.allreduce = "auto";
  const st::train::TransportChoice a = st::train::choose_transports(comm, topo, c, gpus);
  BOOST_TEST((a.intra == t.intra));
  // --inter auto: the calibration also times NCCL across nodes, where the cross-node communicator
  // forms (every rank its own GPU: here it does).
  c.inter = "auto";
  const st::train::TransportChoice i = st::train::choose_transports(comm, topo, c, gpus);
  BOOST_TEST(i.inter_automatic == (i.intra == Transport::nccl));
  BOOST_TEST(i.to_json(c).at("inter").as_string() == (i.inter_automatic ? "auto" : "mpi"));
  c.inter = "mpi";
}

BOOST_AUTO_TEST_CASE(ranks_that_share_a_gpu_fall_back_to_mpi_and_refuse_intra_nccl_naming_them) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  if (comm.size() == 1 || !nccl_loads()) return;  // no sharing with one rank; without NCCL: the case above
  const st::comm::Topology topo = st::comm::Topology::build(comm, 0);
  const st::train::DeviceChoice one =
      st::train::choose_device_among(comm, DeviceRequest::cuda, "train", "", made_up(1));
  TrainConfig c;
  const st::train::TransportChoice t = st::train::choose_transports(comm, topo, c, one);
  BOOST_TEST((t.intra == Transport::mpi));
  BOOST_TEST(contains(notes(t), "warning: all-reduce through host memory (--intra mpi), not NCCL: ranks 0"), notes(t));
  BOOST_TEST(contains(notes(t), " share GPU 0000:07:00.0"), notes(t));
  c.intra = "nccl";
  const std::string why = refusal(comm, topo, c, one);
  BOOST_TEST(contains(why, "--intra nccl: NCCL needs one GPU per rank in each of its communicators"), why);
  BOOST_TEST(contains(why, "share GPU 0000:07:00.0"), why);
  BOOST_TEST(comm.allreduce_and(!why.empty()));
  // Emulated nodes of one rank each: every node communicator has one member, so --intra nccl may
  // run (how one GPU tests the NCCL path), while auto still keeps to the host-staged path.
  const st::comm::Topology single = st::comm::Topology::build(comm, 1);
  const st::train::TransportChoice s = st::train::choose_transports(comm, single, c, one);
  BOOST_TEST((s.intra == Transport::nccl && s.inter == Transport::mpi));
  c.intra = "auto";
  BOOST_TEST((st::train::choose_transports(comm, single, c, one).intra == Transport::mpi));
  // --inter auto needs --allreduce auto, whose calibration chooses it.
  c.inter = "auto";
  BOOST_TEST(contains(refusal(comm, single, c, one), "--inter auto leaves the transport across nodes"));
  c.inter = "mpi";
  // --allreduce auto needs the world's communicator too, which two ranks on one GPU cannot form.
  c.intra = "nccl";
  c.allreduce = "auto";
  BOOST_TEST(contains(refusal(comm, single, c, one), "--intra nccl: NCCL needs one GPU per rank"));
}

BOOST_AUTO_TEST_CASE(cuda_aware_mpi_on_is_refused_where_the_mpi_is_not) {
  const st::comm::Communicator comm = st::comm::Communicator::world();
  const st::comm::Topology topo = st::comm::Topology::build(comm, 0);
  const st::comm::CudaAwareMpi mpi = st::comm::query_cuda_aware_mpi();
  BOOST_TEST(mpi.known);                   // Open MPI can be asked
  BOOST_TEST(!mpi.supported, mpi.detail);  // Debian's is built without CUDA
  const st::train::DeviceChoice cpu = st::train::choose_device_among(comm, DeviceRequest::cpu, "train", "", {});
  TrainConfig c;
  c.cuda_aware_mpi = "on";
  const std::string why = refusal(comm, topo, c, cpu);
  BOOST_TEST(contains(why, "--cuda-aware-mpi on: this MPI is not CUDA-aware (Open MPI: MPIX_Query_cuda_support() = 0"),
             why);
  c.cuda_aware_mpi = "off";
  BOOST_TEST(refusal(comm, topo, c, cpu).empty());
}

BOOST_AUTO_TEST_SUITE_END()
