// `scaletrain-data verify DIR` and `scaletrain-data manifest DIR`: the dataset manifest's checks
// and its writer (data/manifest.hpp). Both read files as bytes and never open a shard with HDF5,
// so a damaged shard is reported, not decoded. Under mpirun shard i is read by rank i mod P.
#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>

#include "cli/data_subcommands.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/manifest.hpp"

namespace po = boost::program_options;

namespace scaletrain::cli {
namespace {

Json report_json(const data::ChecksumReport& r) {
  Json j = Json::object();
  j.set("manifest", r.manifest);
  j.set("shards", r.shards);
  j.set("bytes", r.bytes);
  j.set("seconds", r.seconds);
  j.set("damaged", Json::array_of(r.damaged));
  return j;
}

void print_report(const std::string& split, const data::ChecksumReport& r, int ranks) {
  std::cout << "split " << split << ": " << r.shards << " shards, " << data::read_rate(r, ranks) << ": "
            << (r.damaged.empty() ? "all match " + r.manifest : std::to_string(r.damaged.size()) + " damaged") << "\n";
  for (const std::string& line : r.damaged) std::cout << "  DAMAGED " << line << "\n";
}

}  // namespace

int verify_main(int argc, char** argv) {
  std::string dir;
  bool json = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")("dir", po::value(&dir)->required(),
                                                  "dataset directory (also the first positional argument)")(
      "json", po::bool_switch(&json),
      "print one JSON object {\"dir\", \"splits\": {name: {manifest, shards, bytes, seconds, damaged}}, \"damaged\"}");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  if (!parse_data_command("verify", argc, argv, desc, vm, "DIR [--json]", &pos)) return 0;
  const comm::Communicator world = comm::Communicator::world();
  Json splits = Json::object();
  int64_t damaged = 0;
  for (const std::string& split : data::list_splits(dir)) {
    const data::ChecksumReport r = data::verify_checksums(dir + "/" + split, world);
    damaged += static_cast<int64_t>(r.damaged.size());
    if (world.rank() == 0 && json) splits.set(split, report_json(r));
    if (world.rank() == 0 && !json) print_report(split, r, world.size());
  }
  if (world.rank() == 0 && json) {
    Json out = Json::object();
    out.set("dir", dir);
    out.set("splits", splits);
    out.set("damaged", damaged);
    std::cout << out.dump(2) << "\n";
  }
  ST_CHECK(damaged == 0, dir << ": " << damaged << " damaged shard" << (damaged == 1 ? "" : "s")
                             << " (listed above): copy them again from their source, or convert again");
  return 0;
}

int manifest_main(int argc, char** argv) {
  std::string dir;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")("dir", po::value(&dir)->required(),
                                                  "dataset directory (also the first positional argument)");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  if (!parse_data_command("manifest", argc, argv, desc, vm,
                          "DIR   (hashes the shards as they are now: run it on files you trust)", &pos))
    return 0;
  const comm::Communicator world = comm::Communicator::world();
  for (const std::string& split : data::list_splits(dir)) {
    const std::string split_dir = dir + "/" + split;
    data::write_manifest(split_dir, world);
    if (world.rank() == 0) std::cout << "wrote " << split_dir << "/" << data::kManifestFile << "\n";
  }
  return 0;
}

}  // namespace scaletrain::cli
