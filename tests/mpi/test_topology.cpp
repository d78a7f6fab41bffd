// Topology on 1 to 8 ranks: for every --ranks-per-node N, node ids, local ranks, node sizes and
// the members of the node and cross-node communicators follow "ranks k*N ... k*N+N-1 form node
// k"; the environment variable does the same and the argument wins over it; describe() and
// to_json() say what was built; bad values are errors naming the value; without an override the
// shared-memory grouping puts every rank of this one machine on one node.
// ST_MPI_RANKS: 1 2 3 4 6 8
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "scaletrain/comm/topology.hpp"
#include "scaletrain/core/error.hpp"

using scaletrain::Error;
using scaletrain::comm::Communicator;
using scaletrain::comm::Topology;

namespace {

constexpr const char* kEnv = "SCALETRAIN_RANKS_PER_NODE";

// World ranks of the members of `group`, in the group's rank order.
std::vector<int> members(const Communicator& group, int world_rank) {
  std::vector<double> all = group.allgather(static_cast<double>(world_rank));
  return std::vector<int>(all.begin(), all.end());
}

bool message_has(const Error& e, const std::string& text) {
  const bool ok = std::string(e.what()).find(text) != std::string::npos;
  if (!ok) BOOST_TEST_MESSAGE("error message without '" << text << "': " << e.what());
  return ok;
}

// Sets the environment variable for one scope.
struct EnvGuard {
  EnvGuard(const char* value) { setenv(kEnv, value, 1); }
  ~EnvGuard() { unsetenv(kEnv); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(topology)

BOOST_AUTO_TEST_CASE(every_ranks_per_node) {
  unsetenv(kEnv);
  Communicator world = Communicator::world();
  const int p = world.size(), r = world.rank();
  for (int n = 1; n <= p + 1; ++n) {
    BOOST_TEST_CONTEXT("world " << p << ", ranks per node " << n) {
      Topology t = Topology::build(world, n);
      const int nodes = (p + n - 1) / n;
      BOOST_TEST(t.num_nodes() == nodes);
      BOOST_TEST(t.node_id() == r / n);
      BOOST_TEST(t.local_rank() == r % n);
      BOOST_TEST(t.world().rank() == r);
      BOOST_TEST(t.world().size() == p);
      std::vector<int> sizes(static_cast<std::size_t>(nodes), n);
      sizes.back() = p - (nodes - 1) * n;
      BOOST_TEST(t.ranks_per_node() == sizes, boost::test_tools::per_element());
      BOOST_TEST(t.local_size() == sizes[r / n]);
      BOOST_TEST(t.uniform() == (sizes.back() == sizes.front()));
      BOOST_TEST(t.source() == "--ranks-per-node " + std::to_string(n));

      // Node: the consecutive block, in world order. Cross: same local rank on every node
      // that has one, by node id.
      std::vector<int> node_expected, cross_expected;
      for (int q = r / n * n; q < std::min(p, r / n * n + n); ++q) node_expected.push_back(q);
      for (int q = r % n; q < p; q += n) cross_expected.push_back(q);
      BOOST_TEST(members(t.node(), r) == node_expected, boost::test_tools::per_element());
      BOOST_TEST(members(t.cross(), r) == cross_expected, boost::test_tools::per_element());
      BOOST_TEST(t.cross().rank() == r / n);
    }
  }
}

BOOST_AUTO_TEST_CASE(describe_and_json) {
  unsetenv(kEnv);
  Communicator world = Communicator::world();
  const int p = world.size();
  {
    Topology t = Topology::build(world, 1);
    const std::string nodes = p == 1 ? "1 node" : std::to_string(p) + " nodes";
    BOOST_TEST(t.describe() == nodes + " x 1 rank (--ranks-per-node 1)");
  }
  if (p % 2 == 0) {
    Topology t = Topology::build(world, 2);
    const std::string nodes = p == 2 ? "1 node" : std::to_string(p / 2) + " nodes";
    BOOST_TEST(t.describe() == nodes + " x 2 ranks (--ranks-per-node 2)");
    const std::string json = t.to_json().dump();
    BOOST_TEST(json.find("\"num_nodes\": " + std::to_string(p / 2)) != std::string::npos, json);
    BOOST_TEST(json.find("\"uniform\": true") != std::string::npos, json);
    BOOST_TEST(json.find("\"local_size\": 2") != std::string::npos, json);
    BOOST_TEST(json.find("\"source\": \"--ranks-per-node 2\"") != std::string::npos, json);
  }
  if (p == 3 || p == 8) {  // unequal nodes: 2, 1 and 3, 3, 2
    Topology t = Topology::build(world, p == 3 ? 2 : 3);
    BOOST_TEST(!t.uniform());
    BOOST_TEST(t.describe() == (p == 3 ? "2 nodes of 2, 1 ranks (--ranks-per-node 2)"
                                       : "3 nodes of 3, 3, 2 ranks (--ranks-per-node 3)"));
    const std::string json = t.to_json().dump();
    BOOST_TEST(json.find(p == 3 ? "\"ranks_per_node\": [2, 1]" : "\"ranks_per_node\": [3, 3, 2]") != std::string::npos,
               json);
    BOOST_TEST(json.find("\"uniform\": false") != std::string::npos, json);
  }
}

BOOST_AUTO_TEST_CASE(shared_memory_default_is_one_node) {
  unsetenv(kEnv);
  Communicator world = Communicator::world();
  const int p = world.size();
  Topology t = Topology::build(world);
  BOOST_TEST(t.source() == "shared memory");
  BOOST_TEST(t.num_nodes() == 1);
  BOOST_TEST(t.node_id() == 0);
  BOOST_TEST(t.local_size() == p);
  BOOST_TEST(t.local_rank() == world.rank());
  BOOST_TEST(t.uniform());
  BOOST_TEST(t.cross().size() == 1);
  BOOST_TEST(t.describe() == "1 node x " + std::to_string(p) + (p == 1 ? " rank" : " ranks") + " (shared memory)");
}

BOOST_AUTO_TEST_CASE(environment_variable) {
  Communicator world = Communicator::world();
  const int p = world.size(), r = world.rank();
  {
    EnvGuard env("2");
    Topology t = Topology::build(world);
    BOOST_TEST(t.source() == "SCALETRAIN_RANKS_PER_NODE=2");
    BOOST_TEST(t.num_nodes() == (p + 1) / 2);
    BOOST_TEST(t.node_id() == r / 2);
    // The argument wins over the environment.
    Topology u = Topology::build(world, 1);
    BOOST_TEST(u.num_nodes() == p);
    BOOST_TEST(u.source() == "--ranks-per-node 1");
  }
  {
    EnvGuard env("");  // empty counts as unset
    BOOST_TEST(Topology::build(world).source() == "shared memory");
  }
}

BOOST_AUTO_TEST_CASE(bad_values_are_clear_errors) {
  Communicator world = Communicator::world();
  unsetenv(kEnv);
  BOOST_CHECK_EXCEPTION(Topology::build(world, -2), Error,
                        [](const Error& e) { return message_has(e, "--ranks-per-node -2"); });
  for (const char* bad : {"abc", "0", "-4", "2x", "1.5"}) {
    EnvGuard env(bad);
    BOOST_CHECK_EXCEPTION(Topology::build(world), Error, [&](const Error& e) {
      return message_has(e, std::string("SCALETRAIN_RANKS_PER_NODE='") + bad + "' is not a positive integer");
    });
  }
  // Nothing was left half-collective: the world still works.
  BOOST_TEST(world.allreduce_sum(int64_t{1}) == world.size());
}

BOOST_AUTO_TEST_SUITE_END()
