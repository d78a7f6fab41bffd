// Shard checksums and node-local staging (--stage-to). The converters stamp every shard with a
// checksum of its datasets' contents (root attribute `checksum`); before training, one rank per
// node copies the shards its node needs to the staging directory and verifies each copy against
// that checksum, and the node's ranks then read from there.
#pragma once

#include <cstdint>
#include <string>

#include "scaletrain/core/json.hpp"
#include "scaletrain/data/dataset.hpp"

namespace scaletrain::comm {
class Topology;
}

namespace scaletrain::data {

// Checksum of a shard's datasets (labels and images or jpeg), as stored in the attribute.
std::string shard_checksum(const std::string& path);
// Computes the checksum and writes it as the root attribute `checksum` (used by the writers).
void stamp_shard_checksum(const std::string& path);

struct StagingResult {
  SplitInfo split;       // the same split, its shard paths now under the staging directory
  double seconds = 0.0;  // wall time of the staging on this rank (including waiting for the node)
  int64_t bytes = 0;     // bytes this rank copied (0 on ranks that did not copy)
  Json to_json() const;
};

// Collective over topo.world(): one rank per node copies (and verifies) the shards into
// <stage_dir>/<split name>/, the others wait; all return the staged SplitInfo.
StagingResult stage_split(const SplitInfo& split, const std::string& stage_dir, const comm::Topology& topo);

}  // namespace scaletrain::data
