// Private to the data layer: what the readers of whole splits in memory (recommendation,
// translation) share: finding the shards of a split, checking a dataset's dtype and rank with
// messages that name the file, and publishing a shard written to path.tmp.
#pragma once

#include <string>
#include <vector>

#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::io {
class H5File;
}

namespace scaletrain::data {

// The *.h5 files of DATA/<split> in name order; throws for a missing data or split directory or
// a split without shards (the messages of open_split).
std::vector<std::string> shard_paths(const std::string& dataset_dir, const std::string& split);

// Checks that `name` exists with dtype `dtype` ("int32", "int64", "uint8") and `rank` dimensions;
// returns its shape. `layout` (e.g. "[N]") completes the messages.
Shape typed_dataset(const io::H5File& f, const char* name, const char* dtype, int rank, const char* layout);

// Renames path.tmp to path, or throws naming both.
void publish_shard(const std::string& path);

}  // namespace scaletrain::data
