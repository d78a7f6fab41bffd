// Private: scaletrain-data subcommands that live in files of their own. argv[0] is the
// subcommand word (e.g. "imagenet" for `scaletrain-data convert imagenet ...`).
#pragma once

#include <string>
#include <vector>

namespace scaletrain::cli {

// Creates OUTPUT/<split>/ for each split; existing shards are an error unless `overwrite`, in
// which case they are removed. Rank 0 does it; every rank learns the verdict (collective).
void prepare_output(int rank, const std::string& output, const std::vector<std::string>& splits, bool overwrite);

// `scaletrain-data convert imagenet --source DIR --output DIR --encoding raw|jpeg ...`
int convert_imagenet_main(int argc, char** argv);

// `scaletrain-data upgrade SRC --output DST [--overwrite]` (src/cli/data_upgrade.cpp): rewrites a
// dataset in the current format version.
int upgrade_main(int argc, char** argv);

}  // namespace scaletrain::cli
