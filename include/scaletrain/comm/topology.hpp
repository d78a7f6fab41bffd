// Topology: which ranks share a node. Built from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), or
// from --ranks-per-node N / SCALETRAIN_RANKS_PER_NODE (ranks k*N ... k*N+N-1 form node k), so
// that one machine can emulate several nodes. It owns three communicators: the world, the node
// (ranks of this node, ordered by world rank) and the cross-node one (the ranks of every node
// with this rank's local rank), which is what the hierarchical all-reduce runs on.
#pragma once

#include <string>
#include <vector>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/json.hpp"

namespace scaletrain::comm {

class Topology {
 public:
  // Collective over `world`. ranks_per_node > 0 overrides the grouping; 0 reads
  // SCALETRAIN_RANKS_PER_NODE, and without it asks MPI which ranks share memory. When
  // ranks_per_node does not divide the world size the last node is smaller (not uniform()).
  // ranks_per_node < 0, or a SCALETRAIN_RANKS_PER_NODE that is not a positive integer, is an
  // error naming the value.
  static Topology build(const Communicator& world, int ranks_per_node = 0);

  const Communicator& world() const { return world_; }
  const Communicator& node() const { return node_; }    // size local_size()
  const Communicator& cross() const { return cross_; }  // size num_nodes() when uniform()

  int node_id() const { return node_id_; }
  int num_nodes() const { return num_nodes_; }
  int local_rank() const { return node_.rank(); }
  int local_size() const { return node_.size(); }
  // Every node has the same number of ranks (the hierarchical algorithm needs this).
  bool uniform() const { return uniform_; }
  const std::vector<int>& ranks_per_node() const { return node_sizes_; }  // per node id
  // "shared memory" or "--ranks-per-node N" / "SCALETRAIN_RANKS_PER_NODE=N"
  const std::string& source() const { return source_; }
  // One line for logs: "2 nodes x 4 ranks (shared memory)" or "3 nodes of 2, 2, 1 ranks ...".
  std::string describe() const;
  Json to_json() const;

 private:
  Communicator world_, node_, cross_;
  int node_id_ = 0, num_nodes_ = 1;
  bool uniform_ = true;
  std::vector<int> node_sizes_;
  std::string source_;
};

}  // namespace scaletrain::comm
