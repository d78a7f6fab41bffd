// The per-rank loader: the epoch plan (rank_samples), one background thread that reads, decodes
// and augments batches into a small pool of reusable buffers, and the hand-over to the trainer.
// Decisions: one reading thread because HDF5 is not thread-safe; a batch reads each shard it
// touches with one H5Dread over the union of its rows (row-by-row reads are far too slow);
// normalisation is a per-channel 256-entry lookup table, so decoding costs one load per value.
#include "scaletrain/data/loader.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace scaletrain::data {
namespace {
// Stream salts so that the shuffle and the augmentation never share random numbers.
constexpr uint64_t kShuffleSalt = 0x5348554646ULL;  // "SHUFF"
constexpr uint64_t kAugmentSalt = 0x4155474dULL;    // "AUGM"

// The first sample of this rank's slice and its length (before dropping the partial batch).
std::pair<int64_t, int64_t> rank_slice(int64_t total, int rank, int world, bool drop_last) {
  const int64_t per = total / world, extra = total % world;
  if (drop_last) return {rank * per, per};
  return {rank * per + std::min<int64_t>(rank, extra), per + (rank < extra ? 1 : 0)};
}

int64_t yielded_samples(int64_t total, int rank, int world, const LoaderOptions& o) {
  const int64_t n = rank_slice(total, rank, world, o.drop_last).second;
  return o.drop_last ? n / o.batch_size * o.batch_size : n;
}

void check_options(int rank, int world, const LoaderOptions& o) {
  ST_CHECK(world > 0 && rank >= 0 && rank < world, "loader: rank " << rank << " of " << world << " ranks");
  ST_CHECK(o.batch_size > 0, "batch size must be positive, got " << o.batch_size);
  ST_CHECK(o.crop_padding >= 0, "crop padding must not be negative, got " << o.crop_padding);
}
}  // namespace

std::vector<int64_t> rank_samples(int64_t total, int rank, int world_size, const LoaderOptions& options, int epoch) {
  check_options(rank, world_size, options);
  const auto [begin, length] = rank_slice(total, rank, world_size, options.drop_last);
  const int64_t count = yielded_samples(total, rank, world_size, options);
  (void)length;
  if (!options.shuffle) {
    std::vector<int64_t> ids(count);
    std::iota(ids.begin(), ids.end(), begin);
    return ids;
  }
  // Fisher-Yates over all samples with the same stream on every rank; each rank keeps its slice.
  std::vector<int64_t> perm(total);
  std::iota(perm.begin(), perm.end(), int64_t(0));
  Rng rng = Rng::derive(options.seed ^ kShuffleSalt, static_cast<uint64_t>(epoch));
  for (int64_t i = total - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  return std::vector<int64_t>(perm.begin() + begin, perm.begin() + begin + count);
}

struct Loader::Impl {
  struct Buffer {
    Tensor images, labels;
    int64_t count = 0;
  };

  SplitInfo split;
  int rank, world;
  LoaderOptions options;
  int64_t samples_per_epoch = 0, steps = 0;
  int64_t sample_values = 0;         // H * W * C
  std::vector<int64_t> shard_begin;  // first global sample id of each shard, plus the total
  std::vector<float> lut;            // [C][256] normalised value of each pixel value

  // Shared between the threads, guarded by mutex.
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Buffer> buffers;
  std::vector<int> free_buffers;
  std::deque<int> ready;
  int held = -1;            // buffer the trainer holds
  uint64_t generation = 0;  // incremented by every start_epoch
  uint64_t finished = 0;    // generation whose batches have all been queued
  int epoch = -1;
  bool stop = false;
  std::exception_ptr error;
  double wait_seconds = 0.0;
  std::atomic<int64_t> bytes_read{0};
  std::thread worker;

  // Reading thread only.
  std::vector<io::H5File> files;
  std::vector<io::H5Dataset> images_ds, labels_ds;
  std::vector<uint8_t> staging;
  std::vector<int32_t> label_staging;

  void run();
  void run_epoch(uint64_t gen, int ep);
  void open_files();
  void fill(Buffer& buf, const int64_t* ids, int64_t count, Rng& aug);
  void decode(const uint8_t* src, float* dst, Rng* aug) const;
};

Loader::Loader(const SplitInfo& split, int rank, int world_size, const LoaderOptions& options)
    : impl_(std::make_unique<Impl>()) {
  check_options(rank, world_size, options);
  Impl& m = *impl_;
  ST_CHECK(split.height > 0 && split.width > 0 && split.channels > 0 && !split.shards.empty(),
           "loader: split " << split.dir << " was not opened with open_split");
  ST_CHECK(options.crop_padding < std::max(split.height, split.width) || !options.augment,
           "crop padding " << options.crop_padding << " is not smaller than the images (" << split.height << "x"
                           << split.width << ")");
  m.split = split;
  m.rank = rank;
  m.world = world_size;
  m.options = options;
  m.options.prefetch = std::max(1, options.prefetch);
  m.samples_per_epoch = yielded_samples(split.samples, rank, world_size, options);
  m.steps = (m.samples_per_epoch + options.batch_size - 1) / options.batch_size;
  m.sample_values = int64_t(split.height) * split.width * split.channels;
  m.shard_begin.push_back(0);
  for (const auto& s : split.shards) m.shard_begin.push_back(m.shard_begin.back() + s.samples);
  ST_CHECK(m.shard_begin.back() == split.samples, "loader: split " << split.dir << " sample count is inconsistent");
  m.lut.resize(split.channels * 256);
  for (int c = 0; c < split.channels; ++c)
    for (int v = 0; v < 256; ++v) m.lut[c * 256 + v] = static_cast<float>((v / 255.0 - split.mean[c]) / split.std[c]);

  const int64_t b = options.batch_size;
  for (int i = 0; i < m.options.prefetch + 1; ++i) {
    Impl::Buffer buf;
    buf.images = Tensor::empty({b, split.height, split.width, split.channels}, DType::f32);
    buf.labels = Tensor::empty({b}, DType::i32);
    m.buffers.push_back(std::move(buf));
    m.free_buffers.push_back(i);
  }
  m.staging.resize(b * m.sample_values);
  m.label_staging.resize(b);
  m.worker = std::thread([&m] { m.run(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

int64_t Loader::steps_per_epoch() const { return impl_->steps; }
int64_t Loader::samples_per_epoch() const { return impl_->samples_per_epoch; }
double Loader::wait_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->wait_seconds;
}
int64_t Loader::bytes_read() const { return impl_->bytes_read.load(); }

void Loader::start_epoch(int epoch) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (m.error) std::rethrow_exception(m.error);
    ++m.generation;
    m.epoch = epoch;
    // Whatever is left of the previous epoch goes back to the pool.
    for (int i : m.ready) m.free_buffers.push_back(i);
    m.ready.clear();
    if (m.held >= 0) m.free_buffers.push_back(m.held);
    m.held = -1;
  }
  m.cv.notify_all();
}

bool Loader::next(Tensor& images, Tensor& labels) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mutex);
  ST_CHECK(m.generation > 0, "loader: start_epoch() must be called before next()");
  if (m.held >= 0) {
    m.free_buffers.push_back(m.held);
    m.held = -1;
    m.cv.notify_all();
  }
  auto available = [&m] { return m.error || !m.ready.empty() || m.finished == m.generation; };
  if (!available()) {
    Stopwatch clock;
    m.cv.wait(lock, available);
    m.wait_seconds += clock.elapsed();
  }
  if (m.error) std::rethrow_exception(m.error);
  if (m.ready.empty()) return false;
  m.held = m.ready.front();
  m.ready.pop_front();
  Impl::Buffer& buf = m.buffers[m.held];
  if (buf.count == m.options.batch_size) {
    images = buf.images;
    labels = buf.labels;
  } else {
    images = Tensor::view_of(buf.images, 0, {buf.count, m.split.height, m.split.width, m.split.channels});
    labels = Tensor::view_of(buf.labels, 0, {buf.count});
  }
  return true;
}

void Loader::Impl::run() {
  try {
    uint64_t done = 0;  // last generation this thread served
    for (;;) {
      uint64_t gen;
      int ep;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stop || generation != done; });
        if (stop) return;
        gen = generation;
        ep = epoch;
      }
      done = gen;
      run_epoch(gen, ep);
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      error = std::current_exception();
    }
    cv.notify_all();
  }
}

void Loader::Impl::run_epoch(uint64_t gen, int ep) {
  if (files.empty()) open_files();
  const std::vector<int64_t> ids = rank_samples(split.samples, rank, world, options, ep);
  Rng aug = Rng::derive(options.seed ^ kAugmentSalt, static_cast<uint64_t>(ep), static_cast<uint64_t>(rank));
  const int64_t b = options.batch_size;
  for (int64_t start = 0; start < static_cast<int64_t>(ids.size()); start += b) {
    int index;
    {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return stop || generation != gen || !free_buffers.empty(); });
      if (stop || generation != gen) return;
      index = free_buffers.back();
      free_buffers.pop_back();
    }
    // Filled without the lock: the trainer keeps consuming ready batches meanwhile.
    const int64_t count = std::min<int64_t>(b, ids.size() - start);
    try {
      fill(buffers[index], ids.data() + start, count, aug);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      free_buffers.push_back(index);
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (stop || generation != gen) {
        free_buffers.push_back(index);
        return;
      }
      ready.push_back(index);
    }
    cv.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (generation == gen) finished = gen;
  }
  cv.notify_all();
}

void Loader::Impl::open_files() {
  files.reserve(split.shards.size());
  for (const auto& s : split.shards) {
    files.emplace_back(s.path, io::H5File::Mode::read);
    images_ds.emplace_back(files.back(), "images");
    labels_ds.emplace_back(files.back(), "labels");
    ST_CHECK(images_ds.back().rows() == s.samples && labels_ds.back().rows() == s.samples,
             s.path << ": changed since the split was opened (" << images_ds.back().rows() << " samples, expected "
                    << s.samples << ")");
    ST_CHECK(images_ds.back().row_elements() == sample_values,
             s.path << ": changed since the split was opened (image size)");
  }
}

void Loader::Impl::fill(Buffer& buf, const int64_t* ids, int64_t count, Rng& aug) {
  // (shard, row, position in batch), sorted so that each shard's rows are increasing.
  struct Item {
    int64_t shard, row, pos;
  };
  std::vector<Item> items(count);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t id = ids[j];
    const int64_t s = std::upper_bound(shard_begin.begin(), shard_begin.end(), id) - shard_begin.begin() - 1;
    items[j] = {s, id - shard_begin[s], j};
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.shard != b.shard ? a.shard < b.shard : a.row < b.row; });

  // Augmentation draws follow batch order, not read order, so that they do not depend on sharding.
  float* images = buf.images.data<float>();
  int32_t* labels = buf.labels.data<int32_t>();
  std::vector<int64_t> rows;
  for (std::size_t i = 0; i < items.size();) {
    std::size_t j = i;
    rows.clear();
    while (j < items.size() && items[j].shard == items[i].shard) rows.push_back(items[j++].row);
    const int64_t s = items[i].shard;
    images_ds[s].read_row_list(rows, DType::u8, staging.data() + i * sample_values);
    labels_ds[s].read_row_list(rows, DType::i32, label_staging.data() + i);
    bytes_read += static_cast<int64_t>(rows.size()) * (sample_values + 4);
    i = j;
  }
  // staging[k] holds the sample at batch position items[k].pos.
  std::vector<int64_t> where(count);
  for (int64_t k = 0; k < count; ++k) where[items[k].pos] = k;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t k = where[j];
    decode(staging.data() + k * sample_values, images + j * sample_values, options.augment ? &aug : nullptr);
    labels[j] = label_staging[k];
  }
  buf.count = count;
}

void Loader::Impl::decode(const uint8_t* src, float* dst, Rng* aug) const {
  const int h = split.height, w = split.width, c = split.channels;
  const float* table = lut.data();
  if (!aug) {
    if (c == 1) {
      for (int64_t i = 0; i < sample_values; ++i) dst[i] = table[src[i]];
    } else {
      for (int64_t p = 0; p < int64_t(h) * w; ++p)
        for (int ch = 0; ch < c; ++ch) dst[p * c + ch] = table[ch * 256 + src[p * c + ch]];
    }
    return;
  }
  // RandomCrop(padding=p) then RandomHorizontalFlip: out(y, x) = raw(y + dy - p, x' + dx - p)
  // with x' = W - 1 - x when flipped, and raw value 0 outside the image.
  const int pad = options.crop_padding;
  const int dy = pad > 0 ? static_cast<int>(aug->below(2 * pad + 1)) : pad;
  const int dx = pad > 0 ? static_cast<int>(aug->below(2 * pad + 1)) : pad;
  const bool flip = aug->below(2) == 1;
  for (int y = 0; y < h; ++y) {
    const int sy = y + dy - pad;
    float* out = dst + int64_t(y) * w * c;
    for (int x = 0; x < w; ++x) {
      const int sx = (flip ? w - 1 - x : x) + dx - pad;
      if (sy >= 0 && sy < h && sx >= 0 && sx < w) {
        const uint8_t* in = src + (int64_t(sy) * w + sx) * c;
        for (int ch = 0; ch < c; ++ch) out[x * c + ch] = table[ch * 256 + in[ch]];
      } else {
        for (int ch = 0; ch < c; ++ch) out[x * c + ch] = table[ch * 256];
      }
    }
  }
}

}  // namespace scaletrain::data
