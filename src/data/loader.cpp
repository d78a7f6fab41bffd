// The per-rank loader: the epoch plan (plan.cpp), one I/O thread running the SampleReader, a
// pool of decode workers running the SampleDecoder straight into reusable batch buffers, and the
// in-order hand-over to the trainer. Decisions: one I/O thread because HDF5 is not thread-safe;
// a batch's ids are sorted before reading so each shard's rows are one pass (the decoder writes
// sample k to its batch position, so no reordering copy); workers take a few samples at a time
// from the oldest batch so that batches complete in order; next() hands out batches strictly by
// sequence number, so thread timing never changes the result.
#include "scaletrain/data/loader.hpp"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/memory.hpp"
#include "scaletrain/core/progress.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/data/plan.hpp"

namespace scaletrain::data {
namespace {
constexpr uint64_t kAugmentSalt = 0x4155474dULL;  // "AUGM"

std::vector<int64_t> shard_sizes(const SplitInfo& split) {
  std::vector<int64_t> sizes;
  for (const auto& s : split.shards) sizes.push_back(s.samples);
  return sizes;
}
}  // namespace

std::vector<int64_t> rank_samples(int64_t total, int rank, int world_size, const LoaderOptions& options, int epoch) {
  return plan_epoch({total}, rank, world_size, options, epoch);
}

struct Loader::Impl {
  enum class State { free, reading, decoding, ready, held };
  struct Slot {
    State state = State::free;
    uint64_t gen = 0;
    int epoch = 0;
    int64_t seq = 0, count = 0;
    Tensor images, labels;
    SampleBytes bytes;              // sample k of the read (sorted) order
    std::vector<int64_t> position;  // batch position of sample k
    std::vector<uint8_t> bad;       // per batch position (skip_bad_samples)
    int64_t next_task = 0, decoded = 0;
    int64_t skipped = 0;  // samples of the batch dropped by skip_bad_samples, counted when handed out
    // A read or decode error of this batch, delivered by next() when the batch's turn comes (so
    // that errors too come in plan order); error_at: the sample (read order) it belongs to, the
    // lowest one winning so that the message does not depend on thread timing.
    std::exception_ptr error;
    int64_t error_at = 0;
  };

  SplitInfo split;
  int rank = 0, world = 1;
  LoaderOptions options;
  std::unique_ptr<SampleReader> reader;
  std::unique_ptr<SampleDecoder> decoder;
  std::vector<int64_t> sizes, shard_begin;
  int64_t per_epoch = 0, steps = 0, values = 0, task = 1;
  int64_t max_steps = 0;  // the most steps any rank runs per epoch
  int height = 0, width = 0, channels = 0;

  // Shared, guarded by mutex.
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Slot> slots;
  std::deque<int> decode_queue;  // slots with samples left to hand to workers, oldest first
  // Raised by every start_epoch: by 1 when it adopts the epoch read ahead (that epoch's batches
  // carry generation + 1), by 2 otherwise, so that the batches read ahead become stale. A batch
  // is stale once its generation is below this one.
  uint64_t generation = 0;
  int epoch = -1;
  // The epoch the I/O thread reads ahead, from its first batch, under generation + 1 (-1: none):
  // with options.read_ahead, once the current epoch is read, the next one's batches are read
  // into free buffers while the current one's last steps run, so that an epoch's first step does
  // not wait for its first batch.
  int ahead_epoch = -1;
  int64_t first_seq = 0;  // the epoch's first batch (> 0 when a resumed run starts mid-epoch)
  int64_t next_seq = 0;   // the batch next() hands out next
  // Collective readers need the same number of read() calls on every rank, also when an epoch
  // is abandoned early (start_epoch, or the loader destroyed, after the same number of next()
  // calls on every rank) while the ranks' prefetch had run ahead by different amounts, or had
  // not started. reads_owed: the calls every rank makes for the epochs ended so far, counting an
  // abandoned one up to next_seq + prefetch + 1 batches (no rank can have read further: it has
  // prefetch + 1 buffers); the I/O thread tops its own count up with empty reads to match.
  int64_t reads_owed = 0;
  int64_t reads_made = 0;  // the I/O thread's own
  int held = -1;
  bool stop = false;
  std::exception_ptr error;
  double wait_seconds = 0.0;
  int64_t skipped = 0;
  std::thread io_thread;
  std::vector<std::thread> workers;

  void io_loop();
  // Reads the batches of epoch `ep` from `first` under generation `gen` (the current one, or the
  // next one when reading ahead) into free buffers. True when every batch was read; false when
  // the epoch was abandoned (or stopped, or a read failed).
  bool read_epoch(uint64_t gen, int ep, int64_t first);
  // Under the lock: whether batches of generation `gen` are still wanted (current, or read ahead).
  bool wanted(uint64_t gen) const { return !stop && (gen == generation || gen == generation + 1); }
  void read_batch(Slot& slot, const int64_t* ids);
  void worker_loop();
  // Decodes the next few samples of the oldest batch in decode_queue (not empty); called and
  // returns with the lock held, which it releases while decoding.
  void decode_task(std::unique_lock<std::mutex>& lock);
  void finish_batch(Slot& slot);   // under the lock
  void end_epoch();                // under the lock: the epoch in progress ends (see reads_owed)
  void settle_collective_reads();  // I/O thread: empty reads up to reads_owed
  // What a busy scope names for the run of samples from `id` (-1: none) and `more` after it.
  progress::BusyWhat busy_what(const char* verb, int64_t id, int64_t more) const {
    if (id < 0) return {verb};
    const int64_t s = shard_of(split, shard_begin, id);
    return {verb, &split.shards[s].path, id, id - shard_begin[s], more};
  }
  std::string where(int64_t id) const {
    const int64_t s = shard_of(split, shard_begin, id);
    return split.shards[s].path + ": sample " + std::to_string(id) + " (row " + std::to_string(id - shard_begin[s]) +
           ")";
  }
  void fail(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = e;
    }
    cv.notify_all();
  }
};

namespace {

// The batch buffers (--prefetch + 1 batches of uint8 pixels and labels) must fit on the node
// before they are allocated: --prefetch 64 of ImageNet batches of 1024 is 10 GB per rank.
void check_batch_buffer_memory(const Loader::Impl& m) {
  const int64_t per_batch = m.options.batch_size * (m.values + static_cast<int64_t>(sizeof(int32_t)));
  const int64_t slots = m.options.prefetch + 1;
  std::ostringstream what;
  what << "the data loader's batch buffers (--prefetch " << m.options.prefetch << " + 1 batches of "
       << m.options.batch_size << " samples of " << m.height << "x" << m.width << "x" << m.channels << " bytes)";
  check_memory_request(slots * per_batch, m.options.ranks_on_node, what.str(),
                       "lower --prefetch or --batch-size (or use --accumulate-steps for the same global batch)");
}

}  // namespace

Loader::Loader(const SplitInfo& split, int rank, int world_size, const LoaderOptions& options)
    : Loader(split, rank, world_size, options, nullptr, nullptr) {}

Loader::Loader(const SplitInfo& split, int rank, int world_size, const LoaderOptions& options,
               std::unique_ptr<SampleReader> reader, std::unique_ptr<SampleDecoder> decoder)
    : impl_(std::make_unique<Impl>()) {
  check_plan_options(rank, world_size, options);
  ST_CHECK(options.data_threads >= 1, "--data-threads must be at least 1, got " << options.data_threads);
  ST_CHECK(!split.shards.empty() && split.samples > 0, "loader: split " << split.dir << " has no samples");
  Impl& m = *impl_;
  m.split = split;
  m.rank = rank;
  m.world = world_size;
  m.options = options;
  m.options.prefetch = std::max(1, options.prefetch);
  m.sizes = shard_sizes(split);
  m.shard_begin = shard_starts(split);
  m.decoder = decoder ? std::move(decoder) : make_sample_decoder(split, options);
  m.reader = reader ? std::move(reader) : make_sample_reader(split, options, options.comm);
  m.height = m.decoder->out_height();
  m.width = m.decoder->out_width();
  m.channels = m.decoder->channels();
  m.values = int64_t(m.height) * m.width * m.channels;
  m.per_epoch = planned_samples(split.samples, rank, world_size, options);
  const int64_t b = options.batch_size;
  m.steps = (m.per_epoch + b - 1) / b;
  m.max_steps = (planned_samples(split.samples, 0, world_size, options) + b - 1) / b;  // rank 0's slice is largest
  // A few tasks per worker per batch: balanced, yet one lock round trip per several samples.
  m.task = std::max<int64_t>(1, b / (4 * options.data_threads));

  check_batch_buffer_memory(m);
  m.slots.resize(m.options.prefetch + 1);
  // Pinned while a GPU Context is open: the batch's copy to the GPU is then asynchronous. A slot
  // comes back to the loader at the next next(), after the step's synchronize (or evaluation's
  // loss read-back), which the copy precedes on the compute stream.
  for (auto& slot : m.slots) {
    slot.images = Tensor::empty_pinned({b, m.height, m.width, m.channels}, DType::u8);
    slot.labels = Tensor::empty_pinned({b}, DType::i32);
  }
  m.io_thread = std::thread([&m] { m.io_loop(); });
  for (int i = 0; i < options.data_threads; ++i) m.workers.emplace_back([&m] { m.worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->end_epoch();
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->io_thread.joinable()) impl_->io_thread.join();
  for (auto& t : impl_->workers) t.join();
}

int64_t Loader::steps_per_epoch() const { return impl_->steps; }
int64_t Loader::samples_per_epoch() const { return impl_->per_epoch; }
double Loader::wait_seconds() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->wait_seconds;
}
int64_t Loader::bytes_read() const { return impl_->reader->bytes_read(); }
int64_t Loader::skipped_samples() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->skipped;
}
std::vector<int64_t> Loader::plan(int epoch) const {
  return plan_epoch(impl_->sizes, impl_->rank, impl_->world, impl_->options, epoch);
}
int Loader::image_height() const { return impl_->height; }
int Loader::image_width() const { return impl_->width; }
int Loader::image_channels() const { return impl_->channels; }

void Loader::start_epoch(int epoch, int64_t first_step) {
  Impl& m = *impl_;
  ST_CHECK(first_step >= 0 && first_step <= m.steps,
           "loader: epoch " << epoch << " cannot start at step " << first_step << " of " << m.steps);
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (m.error) std::rethrow_exception(m.error);
    m.end_epoch();
    // The batches read ahead are this epoch's when it starts at its first batch.
    const bool adopt = m.ahead_epoch == epoch && first_step == 0;
    m.generation += adopt ? 1 : 2;
    m.ahead_epoch = -1;
    m.epoch = epoch;
    m.first_seq = m.next_seq = first_step;
    // Finished batches of earlier generations go back to the pool; those being read or decoded
    // are freed by their thread when it sees they are stale.
    for (auto& slot : m.slots)
      if ((slot.state == Impl::State::ready || slot.state == Impl::State::held) && slot.gen < m.generation)
        slot.state = Impl::State::free;
    m.held = -1;
  }
  m.cv.notify_all();
}

bool Loader::next(Tensor& images, Tensor& labels) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mutex);
  ST_CHECK(m.generation > 0, "loader: start_epoch() must be called before next()");
  if (m.held >= 0) {
    m.slots[m.held].state = Impl::State::free;
    m.held = -1;
    m.cv.notify_all();
  }
  if (m.error) std::rethrow_exception(m.error);
  if (m.next_seq >= m.steps) return false;
  auto find = [&m]() -> int {
    for (std::size_t i = 0; i < m.slots.size(); ++i) {
      const Impl::Slot& s = m.slots[i];
      if (s.state == Impl::State::ready && s.gen == m.generation && s.seq == m.next_seq) return static_cast<int>(i);
    }
    return -1;
  };
  int index = find();
  if (index < 0) {
    Stopwatch clock;
    m.cv.wait(lock, [&] { return m.error || (index = find()) >= 0; });
    m.wait_seconds += clock.elapsed();
  }
  if (m.error) std::rethrow_exception(m.error);
  Impl::Slot& slot = m.slots[index];
  if (slot.error) {
    slot.state = Impl::State::free;
    m.error = slot.error;  // the loader stays broken
    std::rethrow_exception(m.error);
  }
  slot.state = Impl::State::held;
  m.held = index;
  m.skipped += slot.skipped;
  ++m.next_seq;
  if (slot.count == m.options.batch_size) {
    images = slot.images;
    labels = slot.labels;
  } else {
    images = Tensor::view_of(slot.images, 0, {slot.count, m.height, m.width, m.channels});
    labels = Tensor::view_of(slot.labels, 0, {slot.count});
  }
  return true;
}

void Loader::Impl::io_loop() {
  pthread_setname_np(pthread_self(), "st-io");
  // Collective reads go in lockstep on every rank; a read ahead that one rank abandons would
  // break the count (reads_owed), so those readers never read ahead.
  const bool may_read_ahead = options.read_ahead && reader->name() != "mpiio-collective";
  try {
    uint64_t served = 0;
    for (;;) {
      uint64_t gen;
      int ep;
      int64_t first;
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stop || generation != served; });
        lock.unlock();
        settle_collective_reads();  // for epochs abandoned before or while this thread read them
        lock.lock();
        if (stop) return;
        gen = served = generation;
        ep = epoch;
        first = first_seq;
      }
      bool complete = read_epoch(gen, ep, first);
      // Then the next epoch, ahead of its start_epoch; for as long as each is adopted.
      while (complete && may_read_ahead && (options.last_epoch < 0 || ep < options.last_epoch)) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (stop || generation != gen) break;
          ahead_epoch = ep + 1;
        }
        complete = read_epoch(gen + 1, ep + 1, 0);
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stop || generation != gen; });  // until its start_epoch, if read whole
        if (stop || generation != gen + 1) break;                  // not adopted: the outer loop serves
        served = gen = generation;
        ++ep;
      }
    }
  } catch (...) {
    fail(std::current_exception());
  }
}

bool Loader::Impl::read_epoch(uint64_t gen, int ep, int64_t first) {
  const std::vector<int64_t> ids = plan_epoch(sizes, rank, world, options, ep);
  const int64_t b = options.batch_size;
  for (int64_t seq = first; seq < steps; ++seq) {
    int index = -1;
    {
      std::unique_lock<std::mutex> lock(mutex);
      auto free_slot = [&] {
        for (std::size_t i = 0; i < slots.size(); ++i)
          if (slots[i].state == State::free) return static_cast<int>(i);
        return -1;
      };
      // While every buffer is busy the I/O thread helps decoding (reading waits for a
      // buffer anyway): one more decoder when decoding is the bottleneck.
      for (;;) {
        if (!wanted(gen) || (index = free_slot()) >= 0) break;
        if (decode_queue.empty()) {
          cv.wait(lock);
        } else {
          decode_task(lock);
        }
      }
      if (!wanted(gen)) return false;
      Slot& slot = slots[index];
      slot.state = State::reading;
      slot.gen = gen;
      slot.epoch = ep;
      slot.seq = seq;
      slot.count = std::min<int64_t>(b, static_cast<int64_t>(ids.size()) - seq * b);
      slot.skipped = 0;
      slot.error = nullptr;
      slot.error_at = slot.count;
    }
    Slot& slot = slots[index];
    std::exception_ptr failure;
    try {
      ++reads_made;
      read_batch(slot, ids.data() + seq * b);
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!wanted(gen)) {
        slot.state = State::free;
        return false;
      }
      if (failure) {  // handed out by next() in its turn; nothing more this epoch
        slot.error = failure;
        slot.state = State::ready;
        cv.notify_all();
        return false;
      }
      slot.state = State::decoding;
      slot.next_task = slot.decoded = 0;
      decode_queue.push_back(index);
    }
    cv.notify_all();
  }
  // Evaluation plans differ by at most one batch between ranks; a collective reader needs
  // the same number of read() calls everywhere: the short ranks make an empty one.
  if (reader->name() == "mpiio-collective") {
    SampleBytes none;
    for (int64_t extra = steps; extra < max_steps; ++extra, ++reads_made) reader->read({}, none);
  }
  return true;
}

void Loader::Impl::end_epoch() {
  if (generation == 0) return;  // no epoch started yet
  const int64_t bound = next_seq + options.prefetch + 1;
  // A rank that may have read every batch may also have made the evaluation plan's extra reads.
  reads_owed += (bound >= steps ? max_steps : bound) - first_seq;
}

void Loader::Impl::settle_collective_reads() {
  if (reader->name() != "mpiio-collective") return;
  int64_t owed = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    owed = reads_owed;
  }
  SampleBytes none;
  for (; reads_made < owed; ++reads_made) reader->read({}, none);
}

void Loader::Impl::read_batch(Slot& slot, const int64_t* batch_ids) {
  const int64_t n = slot.count;
  slot.position.resize(n);
  std::iota(slot.position.begin(), slot.position.end(), int64_t(0));
  std::sort(slot.position.begin(), slot.position.end(), [batch_ids](int64_t a, int64_t b) {
    return batch_ids[a] != batch_ids[b] ? batch_ids[a] < batch_ids[b] : a < b;
  });
  std::vector<int64_t> sorted(n);
  for (int64_t k = 0; k < n; ++k) sorted[k] = batch_ids[slot.position[k]];
  slot.bad.assign(n, 0);
  try {
    const progress::BusyScope busy(busy_what("reading", n == 0 ? -1 : sorted[0], n - 1));
    reader->read(sorted, slot.bytes);
    return;
  } catch (const std::exception&) {
    // A collective reader must be called the same number of times on every rank: no retries.
    if (!options.skip_bad_samples || reader->name() == "mpiio-collective") throw;
  }
  // Find the bad samples one by one; a bad one gets no bytes. When none reads, the batch cannot
  // be filled: the first sample's own error says why (say, a shard that does not open).
  SampleBytes one;
  slot.bytes.clear();
  std::exception_ptr first_failure;
  int64_t failures = 0;
  for (int64_t k = 0; k < n; ++k) {
    bool ok = true;
    try {
      const progress::BusyScope busy(busy_what("reading", sorted[k], 0));
      reader->read({sorted[k]}, one);
    } catch (const std::exception&) {
      ok = false;
      if (!first_failure) first_failure = std::current_exception();
      ++failures;
    }
    slot.bytes.ids.push_back(sorted[k]);
    slot.bytes.labels.push_back(ok ? one.labels[0] : 0);
    // Copied whatever kind the reader is (a mapping reader's bytes are in place, not in one.bytes).
    if (ok) slot.bytes.bytes.insert(slot.bytes.bytes.end(), one.data(0), one.data(0) + one.size(0));
    slot.bytes.offsets.push_back(static_cast<int64_t>(slot.bytes.bytes.size()));
    if (!ok) slot.bad[slot.position[k]] = 1;
  }
  if (failures == n) std::rethrow_exception(first_failure);
}

void Loader::Impl::worker_loop() {
  pthread_setname_np(pthread_self(), "st-decode");  // named in top -H, gdb and stall reports
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    cv.wait(lock, [&] { return stop || !decode_queue.empty(); });
    if (stop) return;
    decode_task(lock);
  }
}

void Loader::Impl::decode_task(std::unique_lock<std::mutex>& lock) {
  const int index = decode_queue.front();
  Slot& slot = slots[index];
  const int64_t first = slot.next_task, last = std::min(slot.count, first + task);
  slot.next_task = last;
  if (last == slot.count) decode_queue.pop_front();
  const bool stale = slot.gen < generation;
  lock.unlock();

  std::exception_ptr failure;
  int64_t failure_at = 0;
  if (!stale) {
    const progress::BusyScope busy(busy_what("decoding", slot.bytes.ids[first], last - first - 1));
    uint8_t* images = slot.images.data<uint8_t>();
    int32_t* labels = slot.labels.data<int32_t>();
    const bool train = options.augment;
    for (int64_t k = first; k < last; ++k) {
      const int64_t pos = slot.position[k], id = slot.bytes.ids[k];
      if (slot.bad[pos]) continue;
      try {
        Rng rng =
            Rng::derive(options.seed ^ kAugmentSalt, static_cast<uint64_t>(slot.epoch), static_cast<uint64_t>(id));
        decoder->decode(slot.bytes.data(k), slot.bytes.size(k), train, rng, images + pos * values);
        labels[pos] = slot.bytes.labels[k];
      } catch (const std::exception& e) {
        if (options.skip_bad_samples) {
          slot.bad[pos] = 1;  // one byte per position: no two workers write the same one
        } else if (!failure) {
          try {
            ST_THROW(where(id) << ": cannot decode: " << e.what());
          } catch (...) {
            failure = std::current_exception();
            failure_at = k;
          }
        }
      }
    }
  }

  lock.lock();
  if (failure && failure_at < slot.error_at) {
    slot.error = failure;
    slot.error_at = failure_at;
  }
  slot.decoded += last - first;
  if (slot.decoded == slot.count) {
    if (slot.gen < generation || stop) {
      slot.state = State::free;
    } else {
      try {
        if (!slot.error) finish_batch(slot);
      } catch (...) {
        slot.error = std::current_exception();
      }
      slot.state = State::ready;
    }
    lock.unlock();
    cv.notify_all();
    lock.lock();
  }
}

void Loader::Impl::finish_batch(Slot& slot) {
  const int64_t n = slot.count;
  int64_t bad = 0;
  for (int64_t p = 0; p < n; ++p) bad += slot.bad[p];
  if (bad == 0) return;
  ST_CHECK(bad < n, where(slot.bytes.ids[0]) << ": every sample of a batch of " << n
                                             << " failed to read or decode (--skip-bad-samples needs good ones to fill "
                                                "the batch)");
  uint8_t* images = slot.images.data<uint8_t>();
  int32_t* labels = slot.labels.data<int32_t>();
  for (int64_t p = 0; p < n; ++p) {
    if (!slot.bad[p]) continue;
    int64_t q = (p + 1) % n;
    while (slot.bad[q]) q = (q + 1) % n;
    std::memcpy(images + p * values, images + q * values, static_cast<std::size_t>(values));
    labels[p] = labels[q];
  }
  slot.skipped = bad;
}

}  // namespace scaletrain::data
