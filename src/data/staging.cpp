// Placeholder until staging lands.
#include "scaletrain/data/staging.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::data {
std::string shard_checksum(const std::string& path) { ST_THROW(path << ": shard checksums are not built yet"); }
void stamp_shard_checksum(const std::string&) {}
Json StagingResult::to_json() const { return Json::object(); }
StagingResult stage_split(const SplitInfo&, const std::string&, const comm::Topology&) {
  ST_THROW("--stage-to is not available in this build");
}
}  // namespace scaletrain::data
