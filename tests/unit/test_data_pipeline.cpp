// The threaded pipeline: batches are bitwise identical whatever data_threads, prefetch and the
// reader (posix, mmap) are (deterministic order and per-sample augmentation seeds); without
// augmentation every value is the exact pixel of the planned sample; the raw decoder's crop and
// flip match a direct per-pixel reference; a decoder that fails on one sample is reported with
// the file and the sample index, or skipped and counted with full batches and unchanged step
// counts. --preprocess caffe leaves raw batches as they are (only the normalisation changes).
// Reading ahead across epochs reads the next epoch's first batch before its start and changes no
// batch.
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;
using data::LoaderOptions;

namespace {
constexpr int kH = 7, kW = 5, kC = 3, kClasses = 9;
const std::vector<int64_t> kShards{40, 3, 57, 31};  // N = 131
constexpr int64_t kTotal = 131;
const std::vector<double> kMean{0.5, 0.4, 0.3}, kStd{0.2, 0.25, 0.3};

uint8_t pixel(int64_t id, int k) { return static_cast<uint8_t>(k < 2 ? (id >> (8 * k)) : id * 37 + k * 11); }

struct Dataset {
  fs::path dir;
  data::SplitInfo split;
  Dataset() {
    io::h5_silence_errors();
    dir = fs::temp_directory_path() / ("scaletrain_test_data_pipeline_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "train");
    int64_t first = 0;
    for (std::size_t i = 0; i < kShards.size(); ++i) {
      const int64_t n = kShards[i];
      Tensor images = Tensor::empty({n, kH, kW, kC}, DType::u8);
      Tensor labels = Tensor::empty({n}, DType::i32);
      for (int64_t s = 0; s < n; ++s) {
        for (int k = 0; k < kH * kW * kC; ++k) images.data<uint8_t>()[s * kH * kW * kC + k] = pixel(first + s, k);
        labels.data<int32_t>()[s] = static_cast<int32_t>((first + s) % kClasses);
      }
      data::write_image_shard((dir / "train" / data::shard_file_name(i, kShards.size())).string(), images, labels,
                              kClasses, kMean, kStd, 8);
      first += n;
    }
    split = data::open_split(dir.string(), "train");
  }
  ~Dataset() { fs::remove_all(dir); }
};

// Every batch of `epochs` epochs, images then labels, as bytes.
std::vector<uint8_t> run(data::Loader& loader, int epochs, int64_t* batches = nullptr) {
  std::vector<uint8_t> out;
  Tensor x, y;
  int64_t n = 0;
  for (int e = 0; e < epochs; ++e) {
    loader.start_epoch(e);
    while (loader.next(x, y)) {
      BOOST_REQUIRE(x.dtype() == DType::u8);
      const auto* px = x.data<uint8_t>();
      const auto* py = reinterpret_cast<const uint8_t*>(y.data<int32_t>());
      out.insert(out.end(), px, px + x.numel());
      out.insert(out.end(), py, py + y.numel() * 4);
      ++n;
    }
  }
  if (batches) *batches = n;
  return out;
}

// The raw decoder, failing on the samples whose id (pixels 0 and 1) is in `bad`.
class FailingDecoder : public data::SampleDecoder {
 public:
  FailingDecoder(const data::SplitInfo& split, const LoaderOptions& o, std::vector<int64_t> bad)
      : raw_(data::make_raw_decoder(split, o)), bad_(std::move(bad)) {
    height_ = raw_->out_height();
    width_ = raw_->out_width();
    channels_ = raw_->channels();
  }
  void decode(const uint8_t* bytes, std::size_t size, bool train, Rng& rng, uint8_t* out) const override {
    const int64_t id = bytes[0] | (int64_t(bytes[1]) << 8);
    for (int64_t b : bad_) ST_CHECK(id != b, "test decoder: sample with id " << id << " is corrupt");
    raw_->decode(bytes, size, train, rng, out);
  }

 private:
  std::unique_ptr<data::SampleDecoder> raw_;
  std::vector<int64_t> bad_;
};

// A test reader around the real one for `io` (posix or mmap): the subclasses watch or fail
// read(), and forward to `reader_`.
class WrappedReader : public data::SampleReader {
 public:
  explicit WrappedReader(const data::SplitInfo& split, const std::string& io = "posix") {
    LoaderOptions o;
    o.io = io;
    reader_ = data::make_sample_reader(split, o, nullptr);
  }
  std::string name() const override { return reader_->name(); }
  int64_t bytes_read() const override { return reader_->bytes_read(); }

 protected:
  std::unique_ptr<data::SampleReader> reader_;
};

// The reader for `io` (posix or mmap), failing (as a short read would) whenever a request holds
// an id in `bad`.
class FailingReader : public WrappedReader {
 public:
  FailingReader(const data::SplitInfo& split, std::vector<int64_t> bad, const std::string& io = "posix")
      : WrappedReader(split, io), bad_(std::move(bad)) {}
  void read(const std::vector<int64_t>& ids, data::SampleBytes& out) override {
    for (int64_t id : ids)
      for (int64_t b : bad_) ST_CHECK(id != b, "shard-x.h5: cannot read sample " << id << ": end of file (truncated?)");
    reader_->read(ids, out);
  }

 private:
  std::vector<int64_t> bad_;
};
}  // namespace

BOOST_AUTO_TEST_SUITE(data_pipeline)

BOOST_AUTO_TEST_CASE(batches_do_not_depend_on_threads_or_prefetch) {
  Dataset ds;
  for (bool augment : {false, true})
    for (const char* mode : {"global", "shard"}) {
      LoaderOptions o;
      o.batch_size = 12;
      o.seed = 3;
      o.shuffle_mode = mode;
      o.shuffle_buffer = 20;
      o.augment = augment;
      o.crop_padding = 2;
      o.data_threads = 1;
      o.prefetch = 1;
      std::vector<uint8_t> reference;
      {
        data::Loader loader(ds.split, 0, 1, o);
        reference = run(loader, 3);
      }
      BOOST_TEST(reference.size() == size_t(3 * (kTotal / 12) * 12 * (kH * kW * kC + 4)));
      for (const char* io : {"posix", "mmap"})
        for (int threads : {1, 2, 4})
          for (int prefetch : {1, 4})
            for (bool ahead : {false, true}) {
              o.io = io;
              o.data_threads = threads;
              o.prefetch = prefetch;
              o.read_ahead = ahead;
              data::Loader loader(ds.split, 0, 1, o);
              BOOST_TEST((run(loader, 3) == reference), mode << " augment " << augment << " io " << io << " threads "
                                                             << threads << " prefetch " << prefetch << " read ahead "
                                                             << ahead);
            }
    }
}

// Raw datasets: --preprocess caffe changes the model's normalisation only; the loader's batches
// (crop with padding, flip) are those of the default.
BOOST_AUTO_TEST_CASE(raw_batches_do_not_depend_on_preprocess) {
  Dataset ds;
  for (bool augment : {false, true}) {
    LoaderOptions o;
    o.batch_size = 12;
    o.seed = 3;
    o.augment = augment;
    o.crop_padding = 2;
    data::Loader torchvision(ds.split, 0, 1, o);
    o.preprocess = "caffe";
    data::Loader caffe(ds.split, 0, 1, o);
    BOOST_TEST((run(torchvision, 2) == run(caffe, 2)), "augment " << augment);
  }
}

BOOST_AUTO_TEST_CASE(values_are_the_pixels_of_the_plan) {
  Dataset ds;
  for (const char* io : {"posix", "mmap"}) {
    LoaderOptions o;
    o.batch_size = 16;
    o.seed = 11;
    o.pad_last = true;  // 131 -> 144: the order wraps around
    o.data_threads = 3;
    o.prefetch = 3;
    o.io = io;
    data::Loader loader(ds.split, 0, 1, o);
    BOOST_TEST(loader.steps_per_epoch() == 9);
    for (int epoch = 0; epoch < 2; ++epoch) {
      const std::vector<int64_t> plan = loader.plan(epoch);
      BOOST_TEST(plan.size() == 144u);
      loader.start_epoch(epoch);
      Tensor x, y;
      int64_t at = 0;
      while (loader.next(x, y)) {
        BOOST_TEST(y.numel() == 16);
        for (int64_t s = 0; s < y.numel(); ++s, ++at) {
          const int64_t id = plan[at];
          BOOST_TEST(y.data<int32_t>()[s] == id % kClasses);
          for (int k = 0; k < kH * kW * kC; ++k) {
            if (x.data<uint8_t>()[s * kH * kW * kC + k] != pixel(id, k)) {
              BOOST_TEST(int(x.data<uint8_t>()[s * kH * kW * kC + k]) == int(pixel(id, k)),
                         io << " sample " << id << " value " << k);
              break;
            }
          }
        }
      }
      BOOST_TEST(at == 144);
    }
    BOOST_TEST(loader.bytes_read() == 2 * 144 * (kH * kW * kC + 4), io);
  }
}

// The posix reader, recording every request's ids (the I/O thread reads; the test looks).
class RecordingReader : public WrappedReader {
 public:
  explicit RecordingReader(const data::SplitInfo& split) : WrappedReader(split) {}
  void read(const std::vector<int64_t>& ids, data::SampleBytes& out) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(ids);
    }
    reader_->read(ids, out);
  }
  // Whether some request was exactly these ids (in any order), waiting up to `seconds` for it.
  bool saw(std::vector<int64_t> ids, double seconds) const {
    std::sort(ids.begin(), ids.end());
    for (double waited = 0.0; waited <= seconds; waited += 0.01) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (std::vector<int64_t> r : requests_) {
          std::sort(r.begin(), r.end());
          if (r == ids) return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::size_t requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_.size();
  }
  // Whether `n` requests were made, waiting up to `seconds` for them.
  bool made(std::size_t n, double seconds) const {
    for (double waited = 0.0; waited <= seconds; waited += 0.01) {
      if (requests() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::vector<int64_t>> requests_;
};

// The batches `loader` hands out in `epoch` from `first_step`, as bytes.
std::vector<uint8_t> epoch_bytes(data::Loader& loader, int epoch, int64_t first_step = 0) {
  loader.start_epoch(epoch, first_step);
  std::vector<uint8_t> out;
  Tensor x, y;
  while (loader.next(x, y)) {
    out.insert(out.end(), x.data<uint8_t>(), x.data<uint8_t>() + x.numel());
    const auto* py = reinterpret_cast<const uint8_t*>(y.data<int32_t>());
    out.insert(out.end(), py, py + y.numel() * 4);
  }
  return out;
}

// The read-ahead tests' loader: batches of 10, augmented, 2 buffers ahead and 2 decode workers.
LoaderOptions augmenting_options(uint64_t seed) {
  LoaderOptions o;
  o.batch_size = 10;
  o.seed = seed;
  o.augment = true;
  o.crop_padding = 1;
  o.prefetch = 2;
  o.data_threads = 2;
  return o;
}

// Read ahead: the next epoch's first batch is read before its start_epoch, and handed out by it;
// a start elsewhere (another epoch, a first step > 0) drops what was read ahead and gives that
// start's own batches (those of a loader that never read ahead), augmentation included.
BOOST_AUTO_TEST_CASE(read_ahead_reads_the_next_epoch_before_it_starts) {
  Dataset ds;
  LoaderOptions o = augmenting_options(7);
  data::Loader plain(ds.split, 0, 1, o);
  o.read_ahead = true;
  auto recording = std::make_unique<RecordingReader>(ds.split);
  const RecordingReader& reader = *recording;
  data::Loader ahead(ds.split, 0, 1, o, std::move(recording), nullptr);
  const int64_t steps = ahead.steps_per_epoch();
  BOOST_TEST(steps == 13);
  auto first_batch = [&](int epoch) {
    const std::vector<int64_t> plan = ahead.plan(epoch);
    return std::vector<int64_t>(plan.begin(), plan.begin() + 10);
  };

  BOOST_TEST((epoch_bytes(ahead, 0) == epoch_bytes(plain, 0)));
  BOOST_TEST(reader.saw(first_batch(1), 10.0), "epoch 1's first batch read before start_epoch(1)");
  BOOST_TEST((epoch_bytes(ahead, 1) == epoch_bytes(plain, 1)));
  BOOST_TEST(reader.requests() <= std::size_t(2 * steps + 3));  // adopted, not read again (+ epoch 2's, ahead)
  BOOST_TEST(reader.saw(first_batch(2), 10.0));
  BOOST_TEST((epoch_bytes(ahead, 3) == epoch_bytes(plain, 3)), "epoch 2 read ahead, epoch 3 started");
  BOOST_TEST((epoch_bytes(ahead, 4, 5) == epoch_bytes(plain, 4, 5)), "epoch 4 read ahead, started at step 5");
  BOOST_TEST((epoch_bytes(ahead, 5) == epoch_bytes(plain, 5)));
}

// Batches read ahead and dropped do not count their skipped samples: only handed-out ones do.
BOOST_AUTO_TEST_CASE(skips_count_in_handed_out_batches_only) {
  Dataset ds;
  LoaderOptions o;
  o.batch_size = 10;
  o.shuffle = false;  // sample 0, bad, leads every epoch
  o.skip_bad_samples = true;
  o.read_ahead = true;
  auto recording = std::make_unique<RecordingReader>(ds.split);
  const RecordingReader& reader = *recording;
  data::Loader loader(ds.split, 0, 1, o, std::move(recording),
                      std::make_unique<FailingDecoder>(ds.split, o, std::vector<int64_t>{0}));
  epoch_bytes(loader, 0);
  BOOST_TEST(loader.skipped_samples() == 1);
  BOOST_TEST(reader.made(std::size_t(loader.steps_per_epoch() + 1), 10.0));  // epoch 1's first, read ahead
  std::this_thread::sleep_for(std::chrono::milliseconds(100));               // its decode, had it counted
  epoch_bytes(loader, 2);                                                    // epoch 1 dropped
  BOOST_TEST(loader.skipped_samples() == 2);
}

// Nothing is read ahead past the run's last epoch.
BOOST_AUTO_TEST_CASE(nothing_is_read_ahead_past_the_last_epoch) {
  Dataset ds;
  LoaderOptions o;
  o.batch_size = 10;
  o.read_ahead = true;
  o.last_epoch = 1;
  auto recording = std::make_unique<RecordingReader>(ds.split);
  const RecordingReader& reader = *recording;
  data::Loader loader(ds.split, 0, 1, o, std::move(recording), nullptr);
  const std::size_t steps = static_cast<std::size_t>(loader.steps_per_epoch());
  epoch_bytes(loader, 0);
  BOOST_TEST(reader.made(steps + 1, 10.0));  // epoch 1's first batch, read ahead
  epoch_bytes(loader, 1);
  // A read ahead would have come within milliseconds; this waits far longer for one that must not.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  BOOST_TEST(reader.requests() == 2 * steps);
}

// A gate that blocks the read or decode of one sample on its `skip`-th appearance after arm()
// (every sample appears in every epoch), until release().
class Gate {
 public:
  void arm(int64_t sample, int skip) {
    std::lock_guard<std::mutex> lock(mutex_);
    id_ = sample, skip_ = skip, armed_ = true, entered_ = false, released_ = false;
  }
  void pass(int64_t sample) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!armed_ || sample != id_) return;
    if (skip_-- > 0) return;
    armed_ = false, entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }
  bool entered_within(double seconds) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return entered_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int64_t id_ = -1;
  int skip_ = 0;
  bool armed_ = false, entered_ = false, released_ = false;
};

class GatedReader : public WrappedReader {
 public:
  GatedReader(const data::SplitInfo& split, Gate& gate) : WrappedReader(split), gate_(gate) {}
  void read(const std::vector<int64_t>& ids, data::SampleBytes& out) override {
    for (int64_t id : ids) gate_.pass(id);
    reader_->read(ids, out);
  }

 private:
  Gate& gate_;
};

class GatedDecoder : public data::SampleDecoder {
 public:
  GatedDecoder(const data::SplitInfo& split, const LoaderOptions& o, Gate& gate)
      : raw_(data::make_raw_decoder(split, o)), gate_(gate) {
    height_ = raw_->out_height();
    width_ = raw_->out_width();
    channels_ = raw_->channels();
  }
  void decode(const uint8_t* bytes, std::size_t size, bool train, Rng& rng, uint8_t* out) const override {
    gate_.pass(bytes[0] | (int64_t(bytes[1]) << 8));  // the sample's id, as pixel() writes it
    raw_->decode(bytes, size, train, rng, out);
  }

 private:
  std::unique_ptr<data::SampleDecoder> raw_;
  Gate& gate_;
};

// The moments a timing test may not reach: start_epoch (adopting, dropping, resuming) or the
// loader's destruction while the I/O thread is inside read() of a batch read ahead, or a decode
// worker inside decode() of one. The batches after are a plain loader's; destruction returns.
BOOST_AUTO_TEST_CASE(starts_and_destruction_during_a_read_ahead_read_or_decode) {
  Dataset ds;
  for (const bool in_decode : {false, true})
    for (const int action : {0, 1, 2, 3})   // start_epoch(1), start_epoch(2), start_epoch(1, 2), destroy
      for (const int64_t batch : {0, 1}) {  // epoch 1's batch gated
        BOOST_TEST_CONTEXT("in " << (in_decode ? "decode" : "read") << ", action " << action << ", batch " << batch) {
          LoaderOptions o = augmenting_options(11);
          data::Loader plain(ds.split, 0, 1, o);
          const int epoch = action == 1 ? 2 : 1;
          const int64_t first = action == 2 ? 2 : 0;
          const std::vector<uint8_t> want0 = epoch_bytes(plain, 0), want = epoch_bytes(plain, epoch, first),
                                     want_next = epoch_bytes(plain, epoch + 1);
          Gate gate;
          o.read_ahead = true;
          auto loader = std::make_unique<data::Loader>(
              ds.split, 0, 1, o, in_decode ? nullptr : std::make_unique<GatedReader>(ds.split, gate),
              in_decode ? std::make_unique<GatedDecoder>(ds.split, o, gate) : nullptr);
          gate.arm(plain.plan(1)[batch * 10 + 3], 1);  // its appearance in epoch 1, not in epoch 0
          BOOST_TEST((epoch_bytes(*loader, 0) == want0));
          BOOST_REQUIRE(gate.entered_within(10.0));
          std::thread releaser([&gate] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            gate.release();
          });
          if (action == 3) {
            loader.reset();
          } else {
            BOOST_TEST((epoch_bytes(*loader, epoch, first) == want));
            BOOST_TEST((epoch_bytes(*loader, epoch + 1) == want_next));
          }
          releaser.join();
        }
      }
}

// The reader, failing once: the first request holding `id` after `skip` such requests.
class FailOnceReader : public WrappedReader {
 public:
  FailOnceReader(const data::SplitInfo& split, int64_t id, int skip) : WrappedReader(split), id_(id), skip_(skip) {}
  void read(const std::vector<int64_t>& ids, data::SampleBytes& out) override {
    if (std::find(ids.begin(), ids.end(), id_) != ids.end() && skip_-- == 0) {
      failed_ = true;
      ST_THROW("test reader: cannot read sample " << id_);
    }
    reader_->read(ids, out);
  }
  bool failed_within(double seconds) const {
    for (double waited = 0.0; waited <= seconds; waited += 0.01) {
      if (failed_) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  int64_t id_;
  int skip_;
  std::atomic<bool> failed_{false};
};

// A batch read ahead that fails to read is the error of its turn in the epoch that adopts it, and
// nothing in an epoch that drops it.
BOOST_AUTO_TEST_CASE(a_read_ahead_error_comes_only_with_its_epoch) {
  Dataset ds;
  for (const int action : {0, 1, 2}) {  // start_epoch(1), start_epoch(2), start_epoch(1, 2)
    BOOST_TEST_CONTEXT("action " << action) {
      LoaderOptions o;
      o.batch_size = 10;
      o.seed = 4;
      o.prefetch = 3;
      data::Loader plain(ds.split, 0, 1, o);
      const int64_t bad = plain.plan(1)[1 * 10 + 2];  // in epoch 1's second batch
      o.read_ahead = true;
      auto failing = std::make_unique<FailOnceReader>(ds.split, bad, 1);  // its epoch-1 read
      const FailOnceReader& reader = *failing;
      data::Loader loader(ds.split, 0, 1, o, std::move(failing), nullptr);
      BOOST_TEST((epoch_bytes(loader, 0) == epoch_bytes(plain, 0)));
      BOOST_REQUIRE(reader.failed_within(10.0));  // the read ahead reached it
      if (action == 0) {
        loader.start_epoch(1);
        Tensor x, y;
        BOOST_TEST(loader.next(x, y));
        BOOST_CHECK_THROW(loader.next(x, y), Error);
      } else if (action == 1) {
        BOOST_TEST((epoch_bytes(loader, 2) == epoch_bytes(plain, 2)));
      } else {
        BOOST_TEST((epoch_bytes(loader, 1, 2) == epoch_bytes(plain, 1, 2)));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_bad_sample_names_the_file_and_the_index) {
  Dataset ds;
  LoaderOptions o;
  o.batch_size = 10;
  o.shuffle = false;
  o.data_threads = 2;
  // Sample 45 is row 2 of the third shard (40 + 3 + 2).
  data::Loader loader(ds.split, 0, 1, o, nullptr,
                      std::make_unique<FailingDecoder>(ds.split, o, std::vector<int64_t>{45}));
  loader.start_epoch(0);
  Tensor x, y;
  std::string message;
  try {
    while (loader.next(x, y)) {
    }
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_TEST(message.find(ds.split.shards[2].path) != std::string::npos, message);
  BOOST_TEST(message.find("sample 45 (row 2)") != std::string::npos, message);
  BOOST_TEST(message.find("is corrupt") != std::string::npos, message);
  BOOST_CHECK_THROW(loader.start_epoch(1), Error);  // stays broken
}

BOOST_AUTO_TEST_CASE(skipped_samples_keep_batches_full_and_steps_equal) {
  Dataset ds;
  const std::vector<int64_t> bad{0, 45, 46, 130};
  for (int threads : {1, 3}) {
    LoaderOptions o;
    o.batch_size = 10;
    o.seed = 5;
    o.skip_bad_samples = true;
    o.data_threads = threads;
    data::Loader loader(ds.split, 0, 1, o, nullptr, std::make_unique<FailingDecoder>(ds.split, o, bad));
    BOOST_TEST(loader.steps_per_epoch() == 13);
    int64_t expected_skips = 0;
    for (int epoch = 0; epoch < 2; ++epoch) {
      const std::vector<int64_t> plan = loader.plan(epoch);
      loader.start_epoch(epoch);
      Tensor x, y;
      int64_t batch = 0;
      while (loader.next(x, y)) {
        BOOST_TEST(y.numel() == 10);
        // A bad sample's place holds the next good sample of the batch (cyclically).
        auto is_bad = [&](int64_t pos) {
          return std::find(bad.begin(), bad.end(), plan[batch * 10 + pos]) != bad.end();
        };
        for (int64_t p = 0; p < 10; ++p) {
          int64_t q = p;
          if (is_bad(p)) {
            ++expected_skips;
            do q = (q + 1) % 10;
            while (is_bad(q));
          }
          const int64_t id = plan[batch * 10 + q];
          BOOST_TEST(y.data<int32_t>()[p] == id % kClasses);
          BOOST_TEST(int(x.data<uint8_t>()[p * kH * kW * kC + 2]) == int(pixel(id, 2)));
        }
        ++batch;
      }
      BOOST_TEST(batch == 13);
    }
    BOOST_TEST(expected_skips > 0);
    BOOST_TEST(loader.skipped_samples() == expected_skips);
  }
}

BOOST_AUTO_TEST_CASE(a_batch_of_only_bad_samples_is_an_error) {
  Dataset ds;
  LoaderOptions o;
  o.batch_size = 3;
  o.shuffle = false;
  o.skip_bad_samples = true;
  data::Loader loader(ds.split, 0, 1, o, nullptr,
                      std::make_unique<FailingDecoder>(ds.split, o, std::vector<int64_t>{3, 4, 5}));
  loader.start_epoch(0);
  Tensor x, y;
  BOOST_TEST(loader.next(x, y));  // 0, 1, 2
  BOOST_CHECK_EXCEPTION(loader.next(x, y), Error, [&](const Error& e) {
    return std::string(e.what()).find(ds.split.shards[0].path + ": sample 3") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(unknown_io_and_encoding_are_refused) {
  for (const char* io : {"posix", "mmap", "mpiio", "mpiio-collective"}) {
    BOOST_TEST(data::is_io_mode(io));
    BOOST_TEST(data::io_mode_list().find(io) != std::string::npos);
  }
  BOOST_TEST(!data::is_io_mode("nfs"));
  BOOST_TEST(!data::is_io_mode(""));
  Dataset ds;
  LoaderOptions o;
  o.io = "nfs";
  BOOST_CHECK_THROW(data::Loader(ds.split, 0, 1, o), Error);
  data::SplitInfo split = ds.split;
  split.encoding = "png";
  BOOST_CHECK_THROW(data::make_sample_decoder(split, LoaderOptions{}), Error);
  o.io = "posix";
  o.data_threads = 0;
  BOOST_CHECK_THROW(data::Loader(ds.split, 0, 1, o), Error);
}

BOOST_AUTO_TEST_CASE(raw_decoder_crop_and_flip_match_a_per_pixel_reference) {
  // torchvision's RandomCrop(padding=p) + RandomHorizontalFlip on the raw pixels, written out
  // pixel by pixel: out(y, x) = raw(y + dy - p, x' + dx - p), x' = W - 1 - x when flipped, 0
  // outside. The decoder draws dy, dx (when p > 0) and then the flip from the sample's rng.
  // Widths from 1 to past 64 pixels (the vectorised flip works in blocks of 21 RGB pixels).
  for (int c : {1, 3, 4})
    for (int w : {1, 5, 22, 23, 64, 203})
      for (int pad : {0, 1, 4}) {
        data::SplitInfo split;
        split.dir = "memory";
        split.height = 9;
        split.width = w;
        split.channels = c;
        split.mean.assign(c, 0.5);
        split.std.assign(c, 0.25);
        LoaderOptions o;
        o.augment = true;
        o.crop_padding = pad;
        if (pad >= std::max(9, w)) continue;
        const auto decoder = data::make_raw_decoder(split, o);
        const int64_t values = int64_t(9) * w * c;
        std::vector<uint8_t> src(values), out(values + 64, 0xAB), expected(values);
        for (int64_t i = 0; i < values; ++i) src[i] = static_cast<uint8_t>(1 + (i * 2654435761u >> 13) % 255);
        int flips = 0;
        for (uint64_t seed = 0; seed < 24; ++seed) {
          Rng rng(seed), draw(seed);
          const int dy = pad > 0 ? static_cast<int>(draw.below(2 * pad + 1)) : pad;
          const int dx = pad > 0 ? static_cast<int>(draw.below(2 * pad + 1)) : pad;
          const bool flip = draw.below(2) == 1;
          flips += flip;
          for (int y = 0; y < 9; ++y)
            for (int x = 0; x < w; ++x) {
              const int sy = y + dy - pad, sx = (flip ? w - 1 - x : x) + dx - pad;
              for (int ch = 0; ch < c; ++ch)
                expected[(int64_t(y) * w + x) * c + ch] =
                    sy >= 0 && sy < 9 && sx >= 0 && sx < w ? src[(int64_t(sy) * w + sx) * c + ch] : 0;
            }
          decoder->decode(src.data(), src.size(), true, rng, out.data());
          BOOST_TEST((std::vector<uint8_t>(out.begin(), out.begin() + values) == expected),
                     "channels " << c << " width " << w << " pad " << pad << " seed " << seed);
          // Nothing written past the sample (the next one in the batch may be another worker's;
          // the vectorised flip stores 64 bytes at a time).
          BOOST_TEST(std::all_of(out.begin() + values, out.end(), [](uint8_t v) { return v == 0xAB; }));
          // Without training augmentation: the pixels as stored.
          decoder->decode(src.data(), src.size(), false, rng, out.data());
          BOOST_TEST((std::vector<uint8_t>(out.begin(), out.begin() + values) == src));
        }
        BOOST_TEST(flips > 0);
        BOOST_TEST(flips < 24);
        BOOST_CHECK_THROW(decoder->decode(src.data(), src.size() - 1, false, *std::make_unique<Rng>(1), out.data()),
                          Error);
      }
}

BOOST_AUTO_TEST_CASE(mmap_reader_returns_the_rows_posix_reads) {
  Dataset ds;
  LoaderOptions o;
  o.io = "mmap";
  const auto mapped = data::make_sample_reader(ds.split, o, nullptr);
  BOOST_TEST(mapped->name() == "mmap");
  const auto posix = data::make_posix_reader(ds.split, LoaderOptions{});
  data::SampleBytes a, b;
  // Any order, repeats, every shard, first and last rows.
  const std::vector<std::vector<int64_t>> requests{
      {0, 1, 2, 39, 40, 42, 43, 99, 100, 130}, {130, 5, 5, 77, 0, 41}, {64}};
  for (const auto& ids : requests) {
    mapped->read(ids, a);
    posix->read(ids, b);
    BOOST_TEST(a.ids == ids);
    BOOST_TEST(a.labels == b.labels);
    BOOST_REQUIRE(a.mapped.size() == ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) {
      BOOST_REQUIRE(a.size(k) == std::size_t(kH * kW * kC));
      BOOST_TEST(std::memcmp(a.data(k), b.data(k), a.size(k)) == 0, "sample " << ids[k]);
      BOOST_TEST(int(a.data(k)[2]) == int(pixel(ids[k], 2)));
    }
  }
  BOOST_TEST(mapped->bytes_read() == posix->bytes_read());
  BOOST_CHECK_THROW(mapped->read({131}, a), Error);
  BOOST_CHECK_THROW(mapped->read({-1}, a), Error);
}

BOOST_AUTO_TEST_CASE(mmap_reader_reads_splits_with_empty_shards) {
  // The format allows shards of 0 samples (e.g. more shards than samples): nothing to map.
  io::h5_silence_errors();
  const fs::path dir = fs::temp_directory_path() / ("scaletrain_test_mmap_empty_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "train");
  int64_t first = 0;
  const std::vector<int64_t> sizes{5, 0, 7, 0};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Tensor images = Tensor::empty({sizes[i], kH, kW, kC}, DType::u8);
    Tensor labels = Tensor::empty({sizes[i]}, DType::i32);
    for (int64_t s = 0; s < sizes[i]; ++s) {
      for (int k = 0; k < kH * kW * kC; ++k) images.data<uint8_t>()[s * kH * kW * kC + k] = pixel(first + s, k);
      labels.data<int32_t>()[s] = static_cast<int32_t>((first + s) % kClasses);
    }
    data::write_image_shard((dir / "train" / data::shard_file_name(i, sizes.size())).string(), images, labels, kClasses,
                            kMean, kStd, 4);
    first += sizes[i];
  }
  const data::SplitInfo split = data::open_split(dir.string(), "train");
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 1;
  o.augment = true;
  o.crop_padding = 1;
  std::vector<uint8_t> posix, mapped;
  {
    data::Loader loader(split, 0, 1, o);
    posix = run(loader, 2);
  }
  o.io = "mmap";
  {
    data::Loader loader(split, 0, 1, o);
    mapped = run(loader, 2);
  }
  BOOST_TEST(posix.size() == size_t(2 * 12 / 4 * 4 * (kH * kW * kC + 4)));
  BOOST_TEST((mapped == posix));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_shard_that_does_not_open_stops_the_run_even_when_skipping) {
  // --skip-bad-samples skips samples, not shards: a truncated shard is an error naming it, with
  // either raw reader, not "every sample of a batch failed".
  for (const char* io : {"posix", "mmap"}) {
    Dataset ds;
    const std::string victim = ds.split.shards[2].path;
    fs::resize_file(victim, fs::file_size(victim) - 100);
    LoaderOptions o;
    o.batch_size = 8;
    o.skip_bad_samples = true;
    o.io = io;
    data::Loader loader(ds.split, 0, 1, o);
    loader.start_epoch(0);
    Tensor x, y;
    BOOST_CHECK_EXCEPTION(loader.next(x, y), Error, [&](const Error& e) {
      const std::string msg = e.what();
      BOOST_TEST_MESSAGE(io << ": " << msg);
      return msg.find(victim) != std::string::npos && msg.find("every sample") == std::string::npos;
    });
  }
}

BOOST_AUTO_TEST_CASE(mmap_reader_refuses_a_truncated_shard) {
  // A mapping cannot report a short read (an access past the end faults), so a truncated shard
  // must be refused when it is opened: HDF5 notices (and the reader also checks the file's size
  // against the end of the images).
  Dataset ds;
  const std::string victim = ds.split.shards[2].path;
  fs::resize_file(victim, fs::file_size(victim) - 100);
  LoaderOptions o;
  o.io = "mmap";
  const auto mapped = data::make_sample_reader(ds.split, o, nullptr);
  data::SampleBytes out;
  BOOST_CHECK_EXCEPTION(mapped->read({0}, out), Error,
                        [&](const Error& e) { return std::string(e.what()).find(victim) != std::string::npos; });
}

BOOST_AUTO_TEST_CASE(posix_and_mmap_readers_read_jpeg_byte_ranges) {
  // JPEG shards (format 2) store all samples' bytes in one uint8 dataset with N + 1 offsets
  // (docs/dataset-format.md); both readers return each sample's bytes, in the requested order
  // (any order, repeats allowed; sorted runs are read as one byte range).
  io::h5_silence_errors();
  const fs::path dir = fs::temp_directory_path() / ("scaletrain_test_jpeg_ranges_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "train");
  auto row = [](int64_t id) {
    std::vector<uint8_t> r;
    for (int64_t k = 0; k < 1 + (id * 7) % 23; ++k) r.push_back(static_cast<uint8_t>(id * 13 + k));
    return r;
  };
  int64_t first = 0;
  for (int64_t n : {int64_t(11), int64_t(6)}) {
    std::vector<std::vector<uint8_t>> rows;
    Tensor labels = Tensor::empty({n}, DType::i32);
    for (int64_t i = 0; i < n; ++i) {
      rows.push_back(row(first + i));
      labels.data<int32_t>()[i] = static_cast<int32_t>((first + i) % kClasses);
    }
    data::write_jpeg_shard((dir / "train" / ("s" + std::to_string(first) + ".h5")).string(), rows, labels, kClasses,
                           {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25});
    first += n;
  }
  const data::SplitInfo split = data::open_split(dir.string(), "train");
  for (const char* io : {"posix", "mmap"}) {
    LoaderOptions options;
    options.io = io;
    const auto reader = data::make_sample_reader(split, options, nullptr);
    BOOST_TEST(reader->name() == io);
    data::SampleBytes out;
    const std::vector<std::vector<int64_t>> requests{{0, 1, 2, 5, 6, 7, 10, 11, 16}, {16, 3, 3, 12, 0, 9, 8}, {4}};
    int64_t expected_bytes = 0;
    for (const auto& ids : requests) {
      reader->read(ids, out);
      BOOST_TEST(out.ids == ids);
      BOOST_REQUIRE(out.offsets.size() == ids.size() + 1);
      BOOST_TEST(out.offsets[0] == 0);
      // Copying readers (posix) fill out.bytes; the mapping one (mmap) hands out pointers.
      if (out.mapped.empty()) BOOST_TEST(out.offsets.back() == static_cast<int64_t>(out.bytes.size()));
      BOOST_TEST(out.mapped.empty() == (std::string(io) == "posix"));
      for (std::size_t k = 0; k < ids.size(); ++k) {
        const std::vector<uint8_t> expected = row(ids[k]);
        const std::vector<uint8_t> got(out.data(k), out.data(k) + out.size(k));
        BOOST_TEST(got == expected, "sample " << ids[k]);
        BOOST_TEST(out.labels[k] == ids[k] % kClasses);
        expected_bytes += static_cast<int64_t>(expected.size()) + 4;
      }
    }
    BOOST_TEST(reader->bytes_read() == expected_bytes);
    BOOST_CHECK_THROW(reader->read({17}, out), Error);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(read_errors_are_reported_or_skipped) {
  Dataset ds;
  const std::vector<int64_t> bad{7, 77};
  {
    LoaderOptions o;
    o.batch_size = 10;
    o.shuffle = false;
    data::Loader loader(ds.split, 0, 1, o, std::make_unique<FailingReader>(ds.split, bad), nullptr);
    loader.start_epoch(0);
    Tensor x, y;
    BOOST_CHECK_EXCEPTION(loader.next(x, y), Error, [](const Error& e) {
      return std::string(e.what()).find("cannot read sample 7") != std::string::npos;
    });
  }
  // Skipped: the batch with a bad sample is read again sample by sample; the good samples keep
  // their pixels (also from a mapping reader, whose bytes are not in SampleBytes::bytes).
  for (const char* io : {"posix", "mmap"}) {
    LoaderOptions o;
    o.batch_size = 10;
    o.seed = 2;
    o.skip_bad_samples = true;
    o.data_threads = 2;
    data::Loader loader(ds.split, 0, 1, o, std::make_unique<FailingReader>(ds.split, bad, io), nullptr);
    const std::vector<int64_t> plan = loader.plan(0);
    const int64_t expected = std::count(plan.begin(), plan.end(), 7) + std::count(plan.begin(), plan.end(), 77);
    BOOST_TEST(expected > 0);
    loader.start_epoch(0);
    Tensor x, y;
    int64_t batches = 0;
    while (loader.next(x, y)) {
      for (int64_t p = 0; p < 10; ++p) {
        int64_t q = p;  // a bad sample's place holds the next good one of the batch
        while (plan[batches * 10 + q] == 7 || plan[batches * 10 + q] == 77) q = (q + 1) % 10;
        const int64_t id = plan[batches * 10 + q];
        BOOST_TEST(int(x.data<uint8_t>()[p * kH * kW * kC + 5]) == int(pixel(id, 5)), io << " batch " << batches);
      }
      ++batches;
    }
    BOOST_TEST(batches == 13);
    BOOST_TEST(loader.skipped_samples() == expected);
  }
}

BOOST_AUTO_TEST_SUITE_END()
