// The dataset format, version 2 (docs/dataset-format.md): a directory with one sub-directory per
// split (train/, val/), each holding HDF5 shards *.h5 read in name order. This header owns the
// description of a split (open_split validates every shard up front, so that a bad file fails
// the run at start-up with a message naming it) and the shard writer used by scaletrain-data.
// Version 2 stores JPEG shards flat (`jpeg` uint8 + `jpeg_offsets`) instead of version 1's
// variable-length data in HDF5's global heap; raw shards of version 1 are still read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/data/manifest.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::io {
class H5File;
}

namespace scaletrain::data {

constexpr int kFormatVersion = 2;
// The oldest version still read: raw shards of version 1 (JPEG shards of version 1 are refused
// with the upgrade command to run).
constexpr int kOldestRawFormatVersion = 1;
constexpr const char* kTaskImageClassification = "image_classification";
// Samples per chunk of `images` when writing: per-sample reads stay cheap and chunks stay small.
constexpr int64_t kDefaultChunkSamples = 256;
// The largest raw image a shard may hold (sides and channels are ints downstream; a side of 2^31
// is damage, not an image): 65,535 pixels a side, as JPEG's own limit, and 64 channels.
constexpr int64_t kMaxImageSide = 65535;
constexpr int64_t kMaxChannels = 64;

struct ShardInfo {
  std::string path;
  int64_t samples = 0;
  // JPEG shards: sample i is bytes [o[i], o[i + 1]) of dataset `jpeg` (samples + 1 offsets, checked
  // by open_split), so that readers need no HDF5 metadata per sample. Shared: a SplitInfo is
  // copied by the trainer, the loader and its reader, and ImageNet has 10 MB of offsets.
  std::shared_ptr<const std::vector<int64_t>> jpeg_offsets;
};

struct SplitInfo {
  std::string dir;   // e.g. DATA/train
  std::string task;  // "image_classification"
  std::vector<ShardInfo> shards;
  int64_t samples = 0;  // total over shards
  int height = 0, width = 0, channels = 0;
  int num_classes = 0;
  std::vector<double> mean, std;     // length channels, pixel scale 0..1
  std::optional<Manifest> manifest;  // DIR/<split>/manifest.json, when the split has one
  // Shards with unchecksummed HDF5 metadata that the manifest does not list (manifest.hpp,
  // unchecked_shards), found before any HDF5 call; named in the start-up warning.
  std::vector<std::string> unchecked_shards;
  // "raw": dataset `images` uint8 [N, H, W, C] (height/width as stored);
  // "jpeg": dataset `jpeg` uint8 [total bytes] + `jpeg_offsets` int64 [N + 1] (height/width 0: the
  // loader's --image-size).
  std::string encoding = "raw";
};

// Split-wide sample ids run through the shards in order. shard_starts: the first id of each
// shard, then the total (throws if the shards' sizes do not add up to split.samples).
// shard_of: the shard holding `id` (throws naming the split if id is out of range).
std::vector<int64_t> shard_starts(const SplitInfo& split);
int64_t shard_of(const SplitInfo& split, const std::vector<int64_t>& starts, int64_t id);

// Opens and validates every shard of DATA/<split>. Throws scaletrain::Error naming the file for:
// a missing or empty directory, no *.h5 files, a file that is not HDF5 or is truncated, a missing
// attribute or dataset, a wrong dtype or rank, shapes or attributes inconsistent across shards,
// a label out of [0, num_classes) (with the sample index), or images and labels of different N.
// When the split has a manifest, every shard's size is checked against it before HDF5 opens the
// shard (manifest.hpp). Reads the labels (4 bytes per sample) but never the images.
// Reads the labels (4 bytes per sample) and a JPEG shard's offsets (8 bytes per sample) but never
// the images. A JPEG shard of format 1 (variable-length bytes in HDF5's global heap) is refused
// with the command that converts it (scaletrain-data upgrade).
SplitInfo open_split(const std::string& dataset_dir, const std::string& split);

// Split names (sub-directories of dataset_dir) in name order; throws if dataset_dir is missing,
// not a directory, or has no sub-directory.
std::vector<std::string> list_splits(const std::string& dataset_dir);

// "shard-00003-of-00016.h5": zero-padded so that name order is sample order.
std::string shard_file_name(int64_t index, int64_t count);

// The [begin, end) sample range of shard `index` when `total` samples are cut into `count`
// shards of (nearly) equal size, in order.
std::pair<int64_t, int64_t> shard_range(int64_t total, int64_t index, int64_t count);

// Writes one image-classification shard: images u8 (N, H, W, C), chunked along N with
// chunk_samples samples per chunk; labels i32 (N); the root attributes of format version 2.
// Written to `path + ".tmp"` and renamed, so that a reader never sees a half-written shard; then
// stamped with its checksum (stamp_shard_checksum).
void write_image_shard(const std::string& path, const Tensor& images, const Tensor& labels, int num_classes,
                       const std::vector<double>& mean, const std::vector<double>& std,
                       int64_t chunk_samples = kDefaultChunkSamples);

// Writes one JPEG-encoded shard of format 2: dataset `jpeg` uint8 [total bytes] (the samples' JPEG
// files concatenated in sample order, contiguous: the writer holds the shard in memory and readers
// read ranges of it), `jpeg_offsets` int64 [N + 1], labels i32 (N), the root attributes plus
// `encoding` = "jpeg" and `channels` = 3; mean/std of length 3. Every sample needs at least one
// byte. Same tmp/rename/checksum as above.
void write_jpeg_shard(const std::string& path, const std::vector<std::vector<uint8_t>>& jpegs, const Tensor& labels,
                      int num_classes, const std::vector<double>& mean, const std::vector<double>& std);

// A format-2 JPEG shard's `jpeg_offsets`, checked: int64 [samples + 1], offsets[0] = 0, strictly
// increasing (every sample has a byte), the last equal to the length of `jpeg`. Throws naming the
// file (and the sample where one is at fault).
std::vector<int64_t> read_jpeg_offsets(const io::H5File& f, int64_t samples);
// Readers of a JPEG split: throws unless every shard carries its offsets (as open_split leaves
// them), naming the shard.
void require_jpeg_offsets(const SplitInfo& split);

// Exact per-channel pixel statistics, accumulated in integers so that the result does not
// depend on the order of accumulation (ranks can add their partial sums).
struct PixelStats {
  std::vector<int64_t> sum, sum_sq;  // per channel, pixel values 0..255
  int64_t pixels_per_channel = 0;
  explicit PixelStats(int channels = 0) : sum(channels, 0), sum_sq(channels, 0) {}
  // images: n samples of h*w*channels bytes, channels-last.
  void add(const uint8_t* images, int64_t n, int64_t pixels_per_sample);
  // Mean and population standard deviation per channel, in the 0..1 pixel scale.
  std::vector<double> mean() const;
  std::vector<double> std() const;
};

}  // namespace scaletrain::data
