// Fuzz target: one damaged shard file. The bytes become the only shard of DATA/train and go
// through what `scaletrain-data inspect`, `scaletrain train` and `scaletrain eval` do with a
// shard, in their order:
//   1. the checks before any HDF5 call: which shards have unchecksummed metadata (the start-up
//      warning, read from the file's bytes), and --require-checksums, which must refuse the split
//      (it has no manifest) with an error naming it; then --require-checksums once more with a
//      manifest of the damaged bytes, whose string check opens checksummed files with libhdf5;
//   2. the task of the split (its first shard's `task` attribute), then the reader of that task:
//      open_split (validation of every attribute and dataset, labels read), then every sample read
//      by the loader's reader (posix, as --io's default) and decoded by the split's decoder (raw
//      pixels or JPEG) once with the training augmentation and once as evaluation does; or, for
//      the recommendation task, open_recommendation_split (every id read and checked).
// Step 2 hands the file to libhdf5 as the default path does, where libhdf5 1.10 may read out of
// bounds or hang: known_limit names those cases (docs/reliability.md, "Unchecked shards";
// --require-checksums is the way out, checked in step 1 for the case without a manifest).
#include <exception>
#include <filesystem>
#include <memory>

#include "fuzz/fuzz_target.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/data/manifest.hpp"
#include "scaletrain/data/recommendation.hpp"
#include "scaletrain/io/file_checksum.hpp"

namespace scaletrain::fuzz {
namespace {

std::string dataset_dir() { return scratch_dir() + "/data"; }
std::string split_dir() { return dataset_dir() + "/train"; }
std::string shard_path() { return split_dir() + "/shard-00000-of-00001.h5"; }

// Every sample of the split through a loader: one rank, file order, all samples once.
void read_all(const data::SplitInfo& split, bool augment) {
  data::LoaderOptions options;
  options.batch_size = 8;
  options.shuffle = false;
  options.drop_last = false;
  options.augment = augment;
  options.crop_padding = augment ? 2 : 0;
  options.prefetch = 1;
  options.data_threads = 1;
  options.image_height = options.image_width = 16;  // JPEG shards: a small model input
  data::Loader loader(split, 0, 1, options);
  loader.start_epoch(0);
  Tensor images, labels;
  while (loader.next(images, labels)) {
  }
}

// Step 1. Throws a scaletrain::Error (not naming the file: an other_error) when --require-checksums
// lets the split through without a manifest, which it never may. Then, with a manifest of these
// bytes (a user who wrote one for a damaged file), --require-checksums either refuses the file or
// lets it through (checksummed metadata, fixed-length strings): its string check opens such files
// with libhdf5, and that must end cleanly too. The manifest is removed again before step 2.
void check_before_hdf5() {
  (void)data::unchecked_shards_of_split(split_dir());
  bool refused = false;
  try {
    data::require_checksums(split_dir(), /*verify_data=*/false);
  } catch (const UsageError&) {
    refused = true;
  }
  if (!refused) ST_THROW("--require-checksums accepted a split without a manifest");
  data::write_manifest(split_dir(), comm::Communicator::world());
  struct RemoveManifest {
    ~RemoveManifest() {
      std::error_code ec;
      std::filesystem::remove(split_dir() + "/" + data::kManifestFile, ec);
    }
  } remove_manifest;
  try {
    data::require_checksums(split_dir(), /*verify_data=*/false);
  } catch (const UsageError&) {
  }  // a scaletrain::Error (libhdf5 refused the file) goes on to run_input's classification
}

}  // namespace

const char* target_name() { return "fuzz_shard"; }

void target_init() {
  init_mpi_once();
  std::filesystem::create_directories(split_dir());
}

Result run_input(const uint8_t* data, std::size_t size) {
  const std::string path = shard_path();
  write_file(path, data, size);
  try {
    check_before_hdf5();
    if (data::split_task(dataset_dir(), "train") == data::kTaskRecommendation) {
      (void)data::open_recommendation_split(dataset_dir(), "train");
      return {};
    }
    const data::SplitInfo split = data::open_split(dataset_dir(), "train");
    read_all(split, /*augment=*/true);
    read_all(split, /*augment=*/false);
    return {};
  } catch (...) {
    return classify_current_exception(path);
  }
}

// Two limits of libhdf5 1.10.8 that scaletrain cannot prevent on the default path
// (docs/reliability.md, "Unchecked shards"), each refused by --require-checksums unless
// --verify-data has checked the bytes:
// - unchecked_hdf5: a sanitizer report inside libhdf5 on a file whose metadata has no checksums;
// - hdf5_global_heap: a hang reading a variable-length string attribute (h5py's default for str),
//   whose value lives in HDF5's global heap, which no file format version checksums.
const char* known_limit(const std::string& input_path, const std::string& report) {
  const bool hang_in_global_heap = report.find("ERROR: AddressSanitizer") == std::string::npos &&
                                   report.find("H5HG_read") != std::string::npos &&
                                   report.find("H5Aread") != std::string::npos;
  if (hang_in_global_heap) return "hdf5_global_heap";
  if (io::hdf5_metadata_checksummed(io::hdf5_superblock_version(input_path))) return nullptr;
  return report_starts_in_libhdf5(report) ? "unchecked_hdf5" : nullptr;
}

}  // namespace scaletrain::fuzz
