// The per-rank data loader: who reads what each epoch (the plan, plan.hpp), reading through a
// SampleReader, decoding through a SampleDecoder (pipeline.hpp), and a prefetch queue.
//
// Plan: see plan.hpp (global or shard shuffling, drop_last / pad_last / evaluation counts). With
// drop_last or pad_last every rank runs the same number of steps, with full batches.
//
// Threads: one I/O thread runs the reader (HDF5 is not thread-safe; HDF5 calls hold
// io::h5_mutex, and the raw fast path reads with pread without it); each batch's ids are sorted
// (shard, row) before reading so that a shard's rows come in one pass. `data_threads` workers
// decode the samples straight into the batch buffer (they never take the HDF5 lock); the I/O
// thread decodes too while every buffer is busy. With a mapping reader (--io mmap) the I/O thread
// only looks up row addresses and the workers' decode is the one copy out of the page cache. Up to
// `prefetch` batches are read/decoded ahead into prefetch + 1 reusable buffers. Batches carry
// sequence numbers and next() hands them out in plan order, so the result never depends on
// thread timing. With a collective reader (mpiio-collective) every rank makes the same number of
// read() calls per epoch (a rank with one batch fewer in an evaluation plan makes an empty one);
// abandoning an epoch early (start_epoch before the end, or destroying the loader) must then
// happen on every rank alike, after the same number of next() calls: every I/O thread then makes
// read() calls (empty ones past what it has read) up to the same batch, however far its prefetch
// had run.
//
// Reading ahead across epochs (options.read_ahead, the training loader's): once an epoch's last
// batch is read, the I/O thread goes on with the next epoch's first batches (its plan depends on
// the seed and the epoch only) into the buffers the last steps free. start_epoch(e + 1) adopts
// them; any other start (another epoch, or a first_step > 0) drops them and reads afresh. An
// epoch's first step then finds its batch ready, as every other step does: with epochs of a few
// steps (a strong-scaling series at many nodes) the wait would otherwise recur every few steps.
// Nothing is read ahead past options.last_epoch (the run's last). Collective readers never read
// ahead (their reads go in lockstep on every rank). A batch's buffer may be refilled as soon as
// the next next() returns, false included: a batch is not to be read after that.
//
// Batches are uint8 pixels (B, H, W, C), not normalised: the model's first op normalises
// (ops::normalize_images with the split's mean and std, or Caffe's: LoaderOptions::preprocess),
// so the pipeline moves one byte per value.
//
// Augmentation (training, options.augment): each sample's random numbers come from
// (seed, epoch, sample id), so they do not depend on threads, ranks or batch composition. Raw
// datasets: random crop with zero padding as torchvision's RandomCrop(size, padding=p) applied to
// the raw pixels before Normalize (padded pixels are raw 0, normalised to (0 - mean[c]) / std[c]),
// then a random horizontal flip with probability 1/2.
//
// Bad samples: a read or decode error is rethrown by next() (and start_epoch()) naming the file
// and the sample index. With skip_bad_samples the sample is dropped and counted
// (skipped_samples()); its slot in the batch is filled with a copy of the next good sample of
// the same batch (cyclically), so batch sizes and step counts never change and every rank still
// runs the same number of steps. A batch whose samples all fail is an error. (A failed read of a
// batch is retried sample by sample to find the bad ones.)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/data/dataset.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::comm {
class Communicator;
}

namespace scaletrain::data {

class SampleReader;
class SampleDecoder;

struct LoaderOptions {
  int64_t batch_size = 32;  // per rank
  bool shuffle = true;      // false: file order (--no-shuffle), whatever shuffle_mode says
  // "global": a permutation of all samples per epoch, seeded by (seed, epoch), identical on every
  // rank and independent of the number of ranks, cut into equal contiguous rank slices.
  // "shard": shards permuted and dealt to ranks, then shuffled within a buffer (--shuffle-buffer).
  std::string shuffle_mode = "global";
  int64_t shuffle_buffer = 10000;  // samples, for shuffle_mode "shard"
  uint64_t seed = 0;
  bool augment = false;      // random horizontal flip; plus random crop when crop_padding > 0
  int crop_padding = 0;      // pixels of zero padding (raw value 0, before normalisation) for the crop
  bool drop_last = true;     // true: equal full batches on every rank (training); false: every sample once
  bool pad_last = false;     // repeat samples so that every rank gets ceil(N / P) rounded up to full batches
  int prefetch = 2;          // batches prepared ahead
  bool read_ahead = false;   // read the next epoch's first batches before its start_epoch (above)
  int last_epoch = -1;       // with read_ahead: the last epoch a run starts (-1: no last), none read past it
  int data_threads = 1;      // decode/augment workers
  std::string io = "posix";  // posix | mmap | mpiio | mpiio-collective
  int image_height = 0, image_width = 0;  // JPEG datasets: the model's input size (--image-size)
  // --preprocess (is_preprocess_mode): JPEG datasets' crops; raw datasets do not depend on it.
  std::string preprocess = "torchvision";
  bool skip_bad_samples = false;             // skip (and count) samples that fail to read or decode
  const comm::Communicator* comm = nullptr;  // the world, for the MPI-IO readers
  // Ranks on this node, each with a loader like this one: the batch buffers of all of them must
  // fit in the node's available memory (checked before they are allocated).
  int ranks_on_node = 1;
};

// The shard readers (LoaderOptions::io, --io): whether `io` names one, and all of them for
// messages ("posix, mmap, mpiio, mpiio-collective").
bool is_io_mode(const std::string& io);
std::string io_mode_list();

// How images become the model's input (--preprocess; "torchvision, caffe" for messages):
// - torchvision (the default): RGB, pixel / 255 normalised with the dataset's mean and std; JPEG
//   datasets: torchvision's ImageNet transforms (jpeg_decoder.cpp).
// - caffe: BGR, pixel (0..255) minus Caffe's ImageNet mean per channel (kCaffeMeanBgr), no
//   division; JPEG datasets: Caffe's ImageNet recipe, the image squashed to kCaffeSquashSize
//   square (aspect not kept, as examples/imagenet/create_imagenet.sh stores it), then a random
//   crop of the input size and a random mirror in training, the centre crop in evaluation.
// Raw datasets keep their augmentation (--no-augment, --crop-padding) in both.
bool is_preprocess_mode(const std::string& preprocess);
std::string preprocess_mode_list();
// bvlc_googlenet's mean_value (B, G, R) on the 0..255 scale; bvlc_alexnet's per-pixel mean file
// (imagenet_mean.binaryproto) is replaced by the same per-channel values.
constexpr double kCaffeMeanBgr[3] = {104.0, 117.0, 123.0};
constexpr int kCaffeSquashSize = 256;

// The global sample ids (0 .. total-1, in shard order) that `rank` yields in `epoch`, in order;
// the loader's plan, exposed for tests and tools. In shard mode this sees the split as one shard:
// use plan_epoch (plan.hpp) with the shard sizes, or Loader::plan().
std::vector<int64_t> rank_samples(int64_t total, int rank, int world_size, const LoaderOptions& options, int epoch);

class Loader {
 public:
  Loader(const SplitInfo& split, int rank, int world_size, const LoaderOptions& options);
  // With a given reader and/or decoder (null: make_sample_reader / make_sample_decoder), e.g. a
  // test decoder. The decoder's output size must be the batch's image size.
  Loader(const SplitInfo& split, int rank, int world_size, const LoaderOptions& options,
         std::unique_ptr<SampleReader> reader, std::unique_ptr<SampleDecoder> decoder);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t steps_per_epoch() const;    // identical on every rank when drop_last
  int64_t samples_per_epoch() const;  // yielded by this rank per epoch
  // Epochs are numbered from 0. Starts prefetching; abandons what is left of the previous epoch.
  // first_step > 0 starts the epoch at that batch (a resumed run): the batches before it are
  // neither read nor decoded, and the ones after are exactly those of an epoch started at 0.
  void start_epoch(int epoch, int64_t first_step = 0);
  // Next batch: images (B, H, W, C) u8 pixels (normalise with ops::normalize_images), labels (B) i32. Returns false at
  // the end of the epoch. B == batch_size except possibly the last batch when !drop_last. The tensors are views of
  // reusable buffers, valid until the next call to next() (one that returns false included) or start_epoch(). An error
  // on the I/O or decode threads (say, an unreadable shard) is rethrown here.
  bool next(Tensor& images, Tensor& labels);
  double wait_seconds() const;                 // total time next() spent blocked waiting for data
  int64_t bytes_read() const;                  // bytes of image and label rows read from the shards
  int64_t skipped_samples() const;             // samples dropped by skip_bad_samples in the batches handed out
  std::vector<int64_t> plan(int epoch) const;  // the sample ids this rank yields in `epoch`, in order
  int image_height() const;                    // of the batches (the decoder's output)
  int image_width() const;
  int image_channels() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaletrain::data
