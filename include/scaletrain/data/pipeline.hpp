// The seams of the input pipeline (issue 4). A SampleReader fetches samples' stored bytes from
// the shards (posix, mmap, mpiio, mpiio-collective); a SampleDecoder turns one sample's bytes into
// the model's input pixels (raw pixels or JPEG; decode, augment) as uint8: normalisation is the
// model's first op (ops::normalize_images), so the pipeline moves one byte per value, not four.
// The Loader runs readers on
// dedicated I/O threads (HDF5 is not thread-safe) and decoders on --data-threads workers, and
// hands out batches in a deterministic order whatever the thread timing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/core/rng.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"

namespace scaletrain::comm {
class Communicator;
}

namespace scaletrain::data {

// Stored bytes of a list of samples, in the order requested: copied into `bytes`, or (a mapping
// reader, --io mmap) pointers into the reader's mappings of the shard files, valid while the
// reader lives. Sample k is size(k) bytes at data(k) either way.
struct SampleBytes {
  std::vector<int64_t> ids;            // split-wide sample index (shard order, then row)
  std::vector<int32_t> labels;         // one per id
  std::vector<uint8_t> bytes;          // all samples' bytes, concatenated (copying readers)
  std::vector<int64_t> offsets;        // ids.size() + 1 offsets into bytes (sizes, for both kinds)
  std::vector<const uint8_t*> mapped;  // one per id (mapping readers), else empty
  const uint8_t* data(std::size_t k) const { return mapped.empty() ? bytes.data() + offsets[k] : mapped[k]; }
  std::size_t size(std::size_t k) const { return static_cast<std::size_t>(offsets[k + 1] - offsets[k]); }
  void clear() {
    ids.clear();
    labels.clear();
    bytes.clear();
    offsets.assign(1, 0);
    mapped.clear();
  }
};

class SampleReader {
 public:
  virtual ~SampleReader() = default;
  virtual std::string name() const = 0;  // "posix", "mmap", "mpiio", "mpiio-collective"
  // Reads `ids` (any order, repeats allowed) into `out` (cleared first); copying readers
  // coalesce the rows of each shard into few chunk-aligned reads, a mapping reader returns
  // addresses. Called by one thread at a time. A collective reader
  // requires every rank to call read() the same number of times (with no ids if it has none).
  // Errors name the file and the sample index.
  virtual void read(const std::vector<int64_t>& ids, SampleBytes& out) = 0;
  virtual int64_t bytes_read() const = 0;  // total so far
};

// The reader for options.io. `comm` is the world (needed by the MPI-IO readers; may be null for
// posix). mpiio-collective opens every shard collectively: all ranks construct it together.
std::unique_ptr<SampleReader> make_sample_reader(const SplitInfo& split, const LoaderOptions& options,
                                                 const comm::Communicator* comm);
// Implemented in src/data/posix_reader.cpp: HDF5 shards opened on first read (on the loader's
// I/O thread); raw rows read with pread straight into out.bytes (one pread per run of
// consecutive rows within a chunk), JPEG samples as one byte range of the flat `jpeg` dataset per
// run of consecutive samples (pread; through HDF5 under io::h5_mutex where it is compressed).
// Labels are read once when the shards are opened. Rows of a shard are read in one pass when
// the ids of that shard come in increasing order (the loader sorts each batch's ids).
std::unique_ptr<SampleReader> make_posix_reader(const SplitInfo& split, const LoaderOptions& options);
// Implemented in src/data/mmap_reader.cpp: shards mapped read-only (io::MappedFile) and read
// without a copy: read() returns pointers to the samples in the mappings, and the decode workers
// copy (raw) or decode (JPEG) each sample from the page cache straight into its batch slot
// (one pass over the bytes, spread over --data-threads).
std::unique_ptr<SampleReader> make_mmap_reader(const SplitInfo& split, const LoaderOptions& options);
// Implemented in src/data/mpiio_reader.cpp.
std::unique_ptr<SampleReader> make_mpiio_reader(const SplitInfo& split, const LoaderOptions& options,
                                                const comm::Communicator& comm, bool collective);

class SampleDecoder {
 public:
  virtual ~SampleDecoder() = default;
  int out_height() const { return height_; }
  int out_width() const { return width_; }
  int channels() const { return channels_; }
  // bytes: one stored sample. out: (out_height, out_width, channels) uint8 pixels, not normalised
  // (ops::normalize_images does that in the model). train selects the training augmentation (rng: per sample, seeded
  // by the loader from (seed, epoch, sample id), so results do not depend on thread timing).
  // Thread-safe: called concurrently by the worker threads. Throws scaletrain::Error describing
  // what is wrong with the bytes (the loader adds the file and the sample index).
  virtual void decode(const uint8_t* bytes, std::size_t size, bool train, Rng& rng, uint8_t* out) const = 0;

 protected:
  int height_ = 0, width_ = 0, channels_ = 0;
};

// The decoder for split.encoding ("raw" or "jpeg").
std::unique_ptr<SampleDecoder> make_sample_decoder(const SplitInfo& split, const LoaderOptions& options);
// Implemented in src/data/raw_decoder.cpp: raw uint8 (H, W, C) pixels, copied; training
// (options.augment): random crop with options.crop_padding pixels of zero padding (raw value 0)
// and a random horizontal flip, as torchvision's RandomCrop(size, padding) + RandomHorizontalFlip
// before Normalize.
std::unique_ptr<SampleDecoder> make_raw_decoder(const SplitInfo& split, const LoaderOptions& options);
// Implemented in src/data/jpeg_decoder.cpp: libjpeg-turbo decode (with DCT scaling when the
// output is much smaller than the image); training: random resized crop (scale 0.08-1, aspect
// 3/4-4/3) + horizontal flip; evaluation: resize the shorter side to size/0.875, centre crop.
std::unique_ptr<SampleDecoder> make_jpeg_decoder(const SplitInfo& split, const LoaderOptions& options);

}  // namespace scaletrain::data
