// The NCCL communicators' members and the check before NCCL is asked (src/comm/nccl/, issue 27),
// on any machine: no GPU and no NCCL call is needed for either. On every emulated layout of the
// world size (nodes of 1, 2 and 4 ranks where they divide it): each rank's node members are its
// node's world ranks, its cross-node members the ranks with its local rank; a check that finds two
// members on one GPU makes every rank refuse with the first failing rank's reason, whichever rank
// found it; one that finds none lets the constructor go on to NCCL (or, in a build without NCCL,
// to the answer that it is not built, after the same check). Nodes of unequal size refuse --inter
// nccl's cross-node communicator, naming the layout. Where NCCL is built (CI's CUDA build), its
// library loads on demand and gives its version without a GPU.
// ST_MPI_RANKS: 1 2 3 4
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "comm/nccl/nccl_communicators.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/core/error.hpp"

namespace st = scaletrain;
using st::comm::NcclCommunicators;
using st::comm::NcclNeeds;
using st::comm::Topology;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The message the constructor throws on this rank ("" if it did not throw).
std::string refusal(const Topology& topo, NcclNeeds needs, const NcclCommunicators::SharedGpuCheck& check) {
  try {
    NcclCommunicators::refuse_shared_gpus(topo, needs, check);
  } catch (const st::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(nccl_members)

BOOST_AUTO_TEST_CASE(members_of_each_communicator_on_every_layout) {
  const auto world = st::comm::Communicator::world();
  const int size = world.size(), rank = world.rank();
  for (int per_node : {1, 2, 4}) {
    if (size % per_node != 0) continue;
    BOOST_TEST_CONTEXT(size << " ranks in nodes of " << per_node) {
      const Topology topo = Topology::build(world, per_node);
      const int first = rank / per_node * per_node;
      std::vector<int> node, cross;
      for (int r = first; r < first + per_node; ++r) node.push_back(r);
      for (int r = rank % per_node; r < size; r += per_node) cross.push_back(r);
      BOOST_TEST(NcclCommunicators::node_members(topo) == node, boost::test_tools::per_element());
      BOOST_TEST(NcclCommunicators::cross_members(topo) == cross, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_shared_gpu_found_by_one_rank_is_refused_by_every_rank) {
  const auto world = st::comm::Communicator::world();
  const Topology topo = Topology::build(world, world.size());  // one node of every rank
  // Only the last rank finds the shared GPU (its view of the node); every rank must refuse with
  // its words.
  const int last = world.size() - 1;
  const auto last_finds = [&](const std::vector<int>& members) {
    return world.rank() == last && members.size() > 1 ? "ranks 0 and 1 share GPU 0000:3b:00.0 on host n1"
                                                      : std::string();
  };
  const std::string text = refusal(topo, NcclNeeds{true, false, false}, last_finds);
  if (world.size() > 1) {
    BOOST_TEST(contains(text, "NCCL needs one GPU per rank in each of its communicators"), text);
    BOOST_TEST(contains(text, "ranks 0 and 1 share GPU 0000:3b:00.0 on host n1"), text);
  } else {
    BOOST_TEST(text == "");  // one rank: nothing shared
  }
  // The world communicator is checked with every rank as a member.
  std::vector<int> seen;
  const auto record = [&](const std::vector<int>& members) {
    seen = members;
    return std::string();
  };
  BOOST_TEST(refusal(topo, NcclNeeds{false, true, false}, record) == "");
  BOOST_TEST(static_cast<int>(seen.size()) == world.size());
}

BOOST_AUTO_TEST_CASE(without_a_shared_gpu_the_constructor_goes_on_past_the_check) {
  const auto world = st::comm::Communicator::world();
  if (st::comm::nccl_built()) return;  // with NCCL it would ask NCCL for a GPU: gpu.nccl_communicators
  const Topology topo = Topology::build(world, 1);
  try {
    NcclCommunicators comms(topo, NcclNeeds{true, false, false}, [](const std::vector<int>&) { return std::string(); });
    BOOST_FAIL("a build without NCCL made NCCL communicators");
  } catch (const st::Error& e) {
    BOOST_TEST(contains(e.what(), "this scaletrain has no NCCL transport"), e.what());
  }
}

// With NCCL built, its library is loaded on the first call (no GPU needed to ask its version): the
// version of a 2.x NCCL. Without, the answer says it is not built.
BOOST_AUTO_TEST_CASE(the_loaded_librarys_version_or_why_there_is_none) {
  if (!st::comm::nccl_built()) {
    BOOST_CHECK_THROW(st::comm::nccl_runtime_version(), st::Error);
    return;
  }
  const std::string version = st::comm::nccl_runtime_version();
  BOOST_TEST_MESSAGE("NCCL " << version << " loaded");
  BOOST_TEST(version.rfind("2.", 0) == 0, version);
  BOOST_TEST(std::count(version.begin(), version.end(), '.') == 2, version);
}

BOOST_AUTO_TEST_CASE(the_cross_node_communicator_needs_equal_nodes) {
  const auto world = st::comm::Communicator::world();
  if (world.size() != 3) return;  // nodes of 2 and 1
  const Topology topo = Topology::build(world, 2);
  const std::string text = refusal(topo, NcclNeeds{false, false, true}, [](const std::vector<int>&) { return ""; });
  BOOST_TEST(contains(text, "--inter nccl) needs nodes of equal size"), text);
}

BOOST_AUTO_TEST_SUITE_END()
