// Topology: groups the world's ranks into nodes, either as MPI sees shared memory or, to emulate
// several nodes on one machine, in consecutive blocks of --ranks-per-node ranks. Everything that
// decides an algorithm (node sizes, uniform()) is computed from gathered data, so it is identical
// on every rank and a refusal never leaves some ranks waiting in a collective.
#include "scaletrain/comm/topology.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "comm/mpi_impl.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::comm {
namespace {

constexpr const char* kRanksPerNodeEnv = "SCALETRAIN_RANKS_PER_NODE";

// SCALETRAIN_RANKS_PER_NODE as a positive integer; 0 when unset or empty.
int ranks_per_node_from_env() {
  const char* text = std::getenv(kRanksPerNodeEnv);
  if (text == nullptr || *text == '\0') return 0;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  ST_CHECK(errno == 0 && end != text && *end == '\0' && value > 0 && value <= (1L << 30),
           kRanksPerNodeEnv << "='" << text << "' is not a positive integer (ranks per node)");
  return static_cast<int>(value);
}

std::string plural(int n, const char* word) {
  std::ostringstream os;
  os << n << ' ' << word << (n == 1 ? "" : "s");
  return os.str();
}

}  // namespace

Topology Topology::build(const Communicator& world, int ranks_per_node) {
  ST_CHECK(ranks_per_node >= 0, "--ranks-per-node " << ranks_per_node << " must be a positive integer");
  Topology t;
  std::string source;
  if (ranks_per_node > 0) {
    source = "--ranks-per-node " + std::to_string(ranks_per_node);
  } else if ((ranks_per_node = ranks_per_node_from_env()) > 0) {
    source = std::string(kRanksPerNodeEnv) + "=" + std::to_string(ranks_per_node);
  } else {
    source = "shared memory";
  }
  t.world_ = world.dup();
  const int rank = t.world_.rank(), size = t.world_.size();

  // leader[r]: the lowest world rank on rank r's node. Nodes are numbered by their leaders.
  std::vector<int> leader(static_cast<std::size_t>(size));
  if (ranks_per_node > 0) {
    for (int r = 0; r < size; ++r) leader[r] = r / ranks_per_node * ranks_per_node;
    t.node_ = t.world_.split(rank / ranks_per_node, rank);
  } else {
    t.node_ = t.world_.split_shared();
    int my_leader = rank;
    ST_CHECK_MPI(MPI_Bcast(&my_leader, 1, MPI_INT, 0, mpi_comm(t.node_)));  // local rank 0: lowest rank
    ST_CHECK_MPI(MPI_Allgather(&my_leader, 1, MPI_INT, leader.data(), 1, MPI_INT, mpi_comm(t.world_)));
  }
  std::vector<int> leaders = leader;
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  t.num_nodes_ = static_cast<int>(leaders.size());
  t.node_sizes_.assign(leaders.size(), 0);
  for (int r = 0; r < size; ++r) {
    const int id = static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), leader[r]) - leaders.begin());
    ++t.node_sizes_[id];
    if (r == rank) t.node_id_ = id;
  }
  t.uniform_ =
      std::all_of(t.node_sizes_.begin(), t.node_sizes_.end(), [&](int n) { return n == t.node_sizes_.front(); });
  ST_CHECK(t.node_.size() == t.node_sizes_[t.node_id_],
           "topology: node communicator has " << t.node_.size() << " ranks, expected " << t.node_sizes_[t.node_id_]);
  // Ranks with the same local rank, one per node (fewer where nodes are smaller), by node id.
  t.cross_ = t.world_.split(t.node_.rank(), t.node_id_);
  t.source_ = std::move(source);
  return t;
}

std::string Topology::describe() const {
  std::ostringstream os;
  if (uniform_) {
    os << plural(num_nodes_, "node") << " x " << plural(node_sizes_.front(), "rank");
  } else {
    os << num_nodes_ << " nodes of ";
    for (std::size_t i = 0; i < node_sizes_.size(); ++i) os << (i ? ", " : "") << node_sizes_[i];
    os << " ranks";
  }
  os << " (" << source_ << ")";
  return os.str();
}

Json Topology::to_json() const {
  Json j = Json::object();
  j.set("world_size", world_.size());
  j.set("num_nodes", num_nodes_);
  j.set("ranks_per_node", Json::array_of(node_sizes_));
  j.set("uniform", uniform_);
  j.set("source", source_);
  j.set("node_id", node_id_);
  j.set("local_rank", local_rank());
  j.set("local_size", local_size());
  j.set("description", describe());
  return j;
}

}  // namespace scaletrain::comm
