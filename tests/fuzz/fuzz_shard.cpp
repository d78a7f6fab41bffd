// Fuzz target: one damaged shard file. The bytes become the only shard of DATA/train and go
// through what `scaletrain-data inspect`, `scaletrain train` and `scaletrain eval` do with a
// shard: open_split (validation of every attribute and dataset, labels read), then every sample
// read by the loader's reader (posix, as --io's default) and decoded by the split's decoder
// (raw pixels or JPEG) once with the training augmentation and once as evaluation does.
#include <filesystem>
#include <memory>

#include "fuzz/fuzz_target.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"

namespace scaletrain::fuzz {
namespace {

std::string dataset_dir() { return scratch_dir() + "/data"; }
std::string shard_path() { return dataset_dir() + "/train/shard-00000-of-00001.h5"; }

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

}  // namespace

const char* target_name() { return "fuzz_shard"; }

void target_init() {
  init_mpi_once();
  std::filesystem::create_directories(dataset_dir() + "/train");
}

Result run_input(const uint8_t* data, std::size_t size) {
  const std::string path = shard_path();
  write_file(path, data, size);
  try {
    const data::SplitInfo split = data::open_split(dataset_dir(), "train");
    read_all(split, /*augment=*/true);
    read_all(split, /*augment=*/false);
    return {};
  } catch (...) {
    return classify_current_exception(path);
  }
}

}  // namespace scaletrain::fuzz
