// The dataset manifest (docs/dataset-format.md, "Manifest"): DIR/<split>/manifest.json lists every
// shard of the split with its size in bytes and the XXH3-64 of its bytes (io/file_checksum.hpp),
// written by `scaletrain-data convert|synthetic|manifest`. It lets a run know that a shard is
// whole before HDF5 reads it:
//   - opening a split compares each shard's size with the manifest (a stat per shard: a copy cut
//     short or still running is an error naming the shard, not a crash inside libhdf5);
//   - `scaletrain-data verify DIR` and `scaletrain train|eval --verify-data` compare every
//     checksum, spreading the shards over the ranks;
//   - staging (--stage-to) checks each copy against it.
// A split without a manifest (written by h5py, or before manifests existed) is read as before;
// `scaletrain-data manifest DIR` writes one.
//
// Unchecked shards (issue 28): a shard whose HDF5 metadata has no checksums (superblock 0 or 1,
// HDF5's default format, which h5py writes unless told otherwise) and that no manifest lists
// reaches libhdf5's parser with nothing checking its bytes; a damaged one can make libhdf5 1.10
// read out of bounds. They are found from the files' bytes (io::hdf5_superblock_version), named
// in a start-up warning, `inspect` and report.json, and refused by --require-checksums.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scaletrain/io/file_checksum.hpp"

namespace scaletrain::comm {
class Communicator;
}

namespace scaletrain::data {

constexpr const char* kManifestFile = "manifest.json";

struct ManifestEntry {
  std::string file;   // the shard's file name inside the split directory
  int64_t bytes = 0;  // its size
  uint64_t xxh3 = 0;  // XXH3-64 of all its bytes
};

struct Manifest {
  std::string path;  // DIR/<split>/manifest.json
  std::vector<ManifestEntry> shards;
  // The entry of a shard's file name; nullptr when not listed. A map lookup once index() ran
  // (read_manifest does): ImageNet's splits have over a thousand shards.
  const ManifestEntry* find(const std::string& file) const;
  void index();

 private:
  std::map<std::string, std::size_t> index_;  // file -> position in shards
};

// Reads split_dir/manifest.json; nullopt when there is none. A manifest that cannot be parsed is
// an error naming it.
std::optional<Manifest> read_manifest(const std::string& split_dir);

// Compares the split's shard files (paths, as listed in the directory) with the manifest: every
// shard listed, every listed shard present, sizes equal. Throws naming the shard and saying how
// to fix it. Costs one stat per shard.
void check_manifest_sizes(const Manifest& manifest, const std::vector<std::string>& shard_paths);

// Collective over comm: the digests of `paths` (the same list on every rank), path i read by rank
// i mod P; every rank gets all of them. A file that cannot be read is the same error, naming it,
// on every rank.
std::vector<io::FileDigest> digest_files(const std::vector<std::string>& paths, const comm::Communicator& comm);

// Collective: digests the split's *.h5 shards over the ranks and rank 0 writes
// split_dir/manifest.json (to a temporary name, then renamed).
void write_manifest(const std::string& split_dir, const comm::Communicator& comm);

// What verify_checksums found.
struct ChecksumReport {
  std::string manifest;              // the manifest's path
  int64_t shards = 0;                // shards read
  int64_t bytes = 0;                 // bytes read, all ranks
  double seconds = 0.0;              // wall time of the slowest rank
  std::vector<std::string> damaged;  // one line per shard that differs, is missing or is not listed
};

// Collective: reads split_dir's manifest, digests every shard over the ranks (never opening one
// with HDF5) and compares each with it. Throws when the split has no manifest (naming the command
// that writes one); damaged shards are listed in the report, not thrown.
ChecksumReport verify_checksums(const std::string& split_dir, const comm::Communicator& comm);

// Collective: verify_checksums, then rank 0 logs what was read and how fast; damaged shards are
// an error on every rank listing them (train and eval --verify-data).
ChecksumReport require_intact(const std::string& split_dir, const comm::Communicator& comm);

// The shards among shard_paths whose HDF5 metadata has no checksums (superblock version 0 or 1),
// from their first bytes: no HDF5 call. A file without HDF5's signature is not counted (HDF5
// refuses it cleanly).
std::vector<std::string> unchecksummed_shards(const std::vector<std::string>& shard_paths);

// Of those, the ones the manifest does not list (all of them when there is none): nothing checks
// their bytes before libhdf5 parses them.
std::vector<std::string> unchecked_shards(const std::vector<std::string>& shard_paths,
                                          const std::optional<Manifest>& manifest);

// The unchecked shards of DIR/<split> (its *.h5 files and its manifest, if any), from the files'
// bytes: no HDF5 call.
std::vector<std::string> unchecked_shards_of_split(const std::string& split_dir);

// The start-up warning for a split's unchecked shards (how many, the first three, the two ways
// out); empty when there are none.
std::string unchecked_shards_warning(const std::string& split_dir, const std::vector<std::string>& unchecked);

// The shards among shard_paths (checksummed metadata: libhdf5 opens them) whose root `task` or
// `encoding` attribute is a variable-length string, as "PATH ('task')": its value is in HDF5's
// global heap, which no file format version checksums (libhdf5 1.10.8 loops forever on a damaged
// one; docs/reliability.md). Reads attribute types only, never a value.
std::vector<std::string> shards_with_heap_strings(const std::vector<std::string>& shard_paths);

// --require-checksums: throws UsageError naming the split and the way out when it has no manifest,
// or, unless verify_data (the shards' bytes are then hashed against the manifest before libhdf5
// opens them), when shards have unchecksummed metadata (naming the first three); these checks make
// no HDF5 call. Then, without verify_data, when shards keep `task` or `encoding` as variable-length
// strings (shards_with_heap_strings: libhdf5 opens the shards, whose metadata is checksummed). A
// split without *.h5 files passes (open_split names that). The string check looks at shards
// rank, rank + ranks, ... only, after their sizes are compared with the manifest; every other check
// covers the whole split.
void require_checksums(const std::string& split_dir, bool verify_data, int rank = 0, int ranks = 1);

// require_checksums for the splits of a job: each rank checks its share, the verdict is agreed
// (so that no rank goes on into a collective that a refusing rank never reaches), and every rank
// throws the same UsageError; a rank other than 0 that refused prints its reason first (rank 0
// alone prints a usage error). Collective over comm.
void require_checksums_agreed(const std::vector<std::string>& split_dirs, bool verify_data,
                              const comm::Communicator& comm);

// "1006.7 MB in 0.19 s (5298 MB/s over 1 rank)": what a report read and how fast.
std::string read_rate(const ChecksumReport& report, int ranks);

}  // namespace scaletrain::data
