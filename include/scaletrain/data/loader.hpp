// The per-rank data loader: who reads what each epoch, reading, decoding, augmentation and a
// prefetch queue.
//
// Plan: each epoch a permutation of all samples of the split (identical on every rank, seeded by
// (seed, epoch); identity with shuffle off) is cut into contiguous rank slices. With drop_last
// (training) every rank gets floor(N / P) samples and yields floor(floor(N / P) / B) full batches,
// so every rank runs the same number of steps; without it (evaluation) the slices cover every
// sample exactly once (sizes differ by at most one) and the last batch may be smaller.
//
// Reading: a rank reads only its own samples. A batch's samples are grouped per shard and each
// shard's rows are read with one H5Dread over a union of hyperslabs.
//
// Threads: reading, decoding (x = (pixel / 255 - mean[c]) / std[c]) and augmentation run on one
// background thread that prepares up to `prefetch` batches ahead; the main thread only hands
// out finished batches. HDF5 calls are serialised by io::h5_mutex().
//
// Augmentation (training): random crop with zero padding as torchvision's
// RandomCrop(size, padding=p) applied to the raw pixels before Normalize (so padded pixels become
// (0 - mean[c]) / std[c]), then random horizontal flip with probability 1/2; seeded by
// (seed, epoch, rank) so that runs are reproducible.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "scaletrain/data/dataset.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::comm {
class Communicator;
}

namespace scaletrain::data {

struct LoaderOptions {
  int64_t batch_size = 32;  // per rank
  bool shuffle = true;      // false: file order (--no-shuffle), whatever shuffle_mode says
  // "global": a permutation of all samples per epoch, seeded by (seed, epoch), identical on every
  // rank and independent of the number of ranks, cut into equal contiguous rank slices.
  // "shard": shards permuted and dealt to ranks, then shuffled within a buffer (--shuffle-buffer).
  std::string shuffle_mode = "global";
  int64_t shuffle_buffer = 10000;  // samples, for shuffle_mode "shard"
  uint64_t seed = 0;
  bool augment = false;   // random horizontal flip; plus random crop when crop_padding > 0
  int crop_padding = 0;   // pixels of zero padding (raw value 0, before normalisation) for the crop
  bool drop_last = true;  // true: equal full batches on every rank (training); false: every sample once
  bool pad_last = false;  // with drop_last: repeat samples to fill the last batch instead of dropping
  int prefetch = 2;       // batches prepared ahead
  int data_threads = 1;   // decode/augment workers
  std::string io = "posix";  // posix | mpiio | mpiio-collective
  int image_height = 0, image_width = 0;  // JPEG datasets: the model's input size (--image-size)
  bool skip_bad_samples = false;  // skip (and count) samples that fail to read or decode
  const comm::Communicator* comm = nullptr;  // the world, for the MPI-IO readers
};

// The global sample ids (0 .. total-1, in shard order) that `rank` yields in `epoch`, in order;
// the loader's plan, exposed for tests and tools.
std::vector<int64_t> rank_samples(int64_t total, int rank, int world_size, const LoaderOptions& options, int epoch);

class Loader {
 public:
  Loader(const SplitInfo& split, int rank, int world_size, const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t steps_per_epoch() const;    // identical on every rank when drop_last
  int64_t samples_per_epoch() const;  // yielded by this rank per epoch
  // Epochs are numbered from 0. Starts prefetching; abandons what is left of the previous epoch.
  void start_epoch(int epoch);
  // Next batch: images (B, H, W, C) f32 normalised, labels (B) i32. Returns false at the end of
  // the epoch. B == batch_size except possibly the last batch when !drop_last. The tensors are
  // views of reusable buffers, valid until the next call to next() or start_epoch().
  // An error on the reading thread (say, an unreadable shard) is rethrown here.
  bool next(Tensor& images, Tensor& labels);
  double wait_seconds() const;  // total time next() spent blocked waiting for data
  int64_t bytes_read() const;   // bytes of image and label rows read from the shards

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaletrain::data
