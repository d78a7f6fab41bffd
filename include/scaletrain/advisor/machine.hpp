// The machine the scaling model predicts for: nodes of G GPUs, and the two levels of its fabric
// in an alpha-beta model (a step of a collective that moves S bytes over a link costs
// alpha + S / bandwidth). Read from a machine file (machines/dgx1-4xedr.json ships with the
// project, with the source of each figure) or fitted to `scaletrain-comm-bench --json` runs.
#pragma once

#include <string>
#include <vector>

#include "scaletrain/core/json.hpp"

namespace scaletrain::advisor {

struct Link {
  double alpha_s = 0.0;        // latency of one step of a ring or tree
  double bandwidth_Bps = 0.0;  // bytes per second of one step: a ring's bus bandwidth
};

struct Machine {
  std::string name;
  int gpus_per_node = 1;
  int max_nodes = 80;
  Link intra;  // between the ranks of one node (NVLink on a DGX-1)
  Link inter;  // between nodes: one node's whole injection bandwidth (all its NICs)
  // Hierarchical all-reduce stages each rank's 1/G share through host memory (Debian's Open MPI
  // is not CUDA-aware): copies at this rate each way; 0: no staging (CPU ranks, or CUDA-aware MPI).
  double host_copy_Bps = 0.0;
  Json sources;  // where each figure comes from (free-form object, kept in the JSON output)
};

Machine machine_from_json(const Json& j, const std::string& where);
Json to_json(const Machine& m);
Machine read_machine(const std::string& path);

// A machine fitted to comm-bench runs (`scaletrain-comm-bench --json` output files, several
// message sizes each): `intra` from the runs inside one node, `inter` from the runs with one
// rank per node across nodes; a level with no runs is an error naming the files.
Machine machine_from_comm_bench(const std::vector<std::string>& paths, const std::string& name);

}  // namespace scaletrain::advisor
