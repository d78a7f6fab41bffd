// All-reduce algorithms over a Topology and the asynchronous AllReducer.
// Decisions:
// - hierarchical works through the message in chunks of kRingChunkBytes. Each chunk is split
//   into L blocks (L = ranks per node; the first n % L blocks one element longer), so any count
//   and any L work without padding: a ring reduce-scatter inside the node (MPI_Sendrecv, summing
//   in place), MPI_Allreduce of the own block across nodes, a ring all-gather inside the node.
//   Each block is summed once, by one rank, in a fixed order, and then copied to everyone, so
//   every rank ends with the same bytes. The rings are ours rather than MPI_Reduce_scatter /
//   MPI_Allgatherv: Open MPI 4.1's reduce-scatter with counts was 3-5x slower than the whole
//   MPI_Allreduce at 64 MiB on this machine, and the rings let us chunk for cache and, later,
//   put NCCL in their place.
// - flat sends in pieces of at most kMaxChunk elements, as MPI counts are int.
// - Compression converts the message to 16 bits, reduces with a user-defined MPI_Op that adds in
//   float32 and rounds the sum back (round to nearest even), and converts the result to float32.
// - Scratch buffers are per thread and grow only, so repeated calls do not page-fault.
// - AllReducer: one communication thread runs the requests in order; it is the only thread in MPI
//   while requests are in flight, so MPI_THREAD_SERIALIZED is enough (the binaries ask for
//   MPI_THREAD_MULTIPLE). The first error fails that request and every later one.
#include "scaletrain/comm/allreduce.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "comm/mpi_impl.hpp"
#include "comm/size_classes.hpp"
#include "comm/wire.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/half.hpp"
#include "scaletrain/core/log.hpp"

namespace scaletrain::comm {
namespace {

// Elements per round of collectives: far below INT_MAX, so every count and displacement fits.
constexpr int64_t kMaxChunk = int64_t{1} << 28;
// The hierarchical algorithm works through the message in chunks of this size, so that what a
// ring step sends and adds is still in cache (2x faster than 64 MiB at once on 4 ranks, 2 cores).
constexpr int64_t kRingChunkBytes = int64_t{1} << 20;
// Tag of the point-to-point messages of the intra-node rings (on the node communicator only).
constexpr int kTag = 7301;

// True on AllReducer's communication thread. There, waits back off instead of spinning: the
// peer is usually still in backward, and a polling thread would take a core from this rank's
// compute (on a CPU node every core computes; measured in docs/performance.md).
thread_local bool t_background = false;
// Set while the caller waits idle for results (AllReducer::set_caller_idle): then spinning costs
// no compute and the communication thread polls at full speed.
thread_local const std::atomic<bool>* t_caller_idle = nullptr;

// Completes `n` requests: at full speed in the foreground (MPI_Waitall); on the communication
// thread, a short spin, then sched_yield, then sleeps of up to 100 us between MPI_Testall calls.
void complete(MPI_Request* requests, int n) {
  if (!t_background || (t_caller_idle && t_caller_idle->load(std::memory_order_relaxed))) {
    ST_CHECK_MPI(MPI_Waitall(n, requests, MPI_STATUSES_IGNORE));
    return;
  }
  for (int tries = 0;; ++tries) {
    int done = 0;
    ST_CHECK_MPI(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (tries < 32 || (t_caller_idle && t_caller_idle->load(std::memory_order_relaxed))) continue;
    if (tries < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(100, 5 * (tries - 63))));
    }
  }
}

void sendrecv(const void* send, int send_count, void* recv, int recv_count, MPI_Datatype type, int next, int prev,
              MPI_Comm comm) {
  MPI_Request r[2];
  ST_CHECK_MPI(MPI_Irecv(recv, recv_count, type, prev, kTag, comm, &r[0]));
  ST_CHECK_MPI(MPI_Isend(send, send_count, type, next, kTag, comm, &r[1]));
  complete(r, 2);
}

// In-place all-reduce; non-blocking (so that complete() can back off) on the communication thread.
void allreduce_in_place(void* data, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (!t_background) {
    ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, data, n, type, op, comm));
    return;
  }
  MPI_Request r;
  ST_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, data, n, type, op, comm, &r));
  complete(&r, 1);
}

// ---- 16-bit sums: add in float32, round back once per addition. ----

void fp16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) b[i] = float_to_fp16(fp16_to_float(a[i]) + fp16_to_float(b[i]));
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

// The operations live until MPI_Finalize frees them.
MPI_Op sum_op(Compression c) {
  static std::once_flag once;
  static MPI_Op fp16 = MPI_OP_NULL, bf16 = MPI_OP_NULL;
  std::call_once(once, [] {
    ST_CHECK_MPI(MPI_Op_create(&fp16_sum, 1, &fp16));
    ST_CHECK_MPI(MPI_Op_create(&bf16_sum, 1, &bf16));
  });
  switch (c) {
    case Compression::fp16:
      return fp16;
    case Compression::bf16:
      return bf16;
    default:
      return MPI_SUM;
  }
}

// What travels on the wire: float32 with MPI_SUM, or 16-bit words with our sum.
struct Wire {
  MPI_Datatype type;
  MPI_Op op;
  std::size_t elem;
  void (*local_sum)(const void* in, void* inout, int n);  // inout += in, as op does
};

void float_sum(const void* in, void* inout, int n) {
  const float* a = static_cast<const float*>(in);
  float* b = static_cast<float*>(inout);
  for (int i = 0; i < n; ++i) b[i] += a[i];
}

void fp16_local_sum(const void* in, void* inout, int n) { fp16_sum(const_cast<void*>(in), inout, &n, nullptr); }
void bf16_local_sum(const void* in, void* inout, int n) { bf16_sum(const_cast<void*>(in), inout, &n, nullptr); }

Wire wire_for(Compression c) {
  switch (c) {
    case Compression::fp16:
      return {MPI_UINT16_T, sum_op(c), sizeof(uint16_t), &fp16_local_sum};
    case Compression::bf16:
      return {MPI_UINT16_T, sum_op(c), sizeof(uint16_t), &bf16_local_sum};
    default:
      return {MPI_FLOAT, MPI_SUM, sizeof(float), &float_sum};
  }
}

// Per-thread scratch that only grows.
struct Scratch {
  std::vector<unsigned char> received;  // hierarchical: the block a ring step receives
  std::vector<uint16_t> packed;         // compression: the message in 16 bits
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

void* received_buffer(std::size_t bytes) {
  auto& v = scratch().received;
  if (v.size() < bytes) v.resize(bytes);
  return v.data();
}

void compress(const float* in, uint16_t* out, int64_t n, Compression c) {
  if (c == Compression::fp16) {
    for (int64_t i = 0; i < n; ++i) out[i] = float_to_fp16(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
  }
}

void decompress(const uint16_t* in, float* out, int64_t n, Compression c) {
  if (c == Compression::fp16) {
    for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_float(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(in[i]);
  }
}

// One all-reduce over `comm` in pieces of at most kMaxChunk elements.
void wire_over(MPI_Comm comm, void* data, int64_t count, const Wire& w) {
  char* bytes = static_cast<char*>(data);
  for (int64_t start = 0; start < count; start += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, count - start));
    allreduce_in_place(bytes + start * w.elem, n, w.type, w.op, comm);
  }
}

void flat_wire(const Topology& topo, void* data, int64_t count, const Wire& w) {
  wire_over(mpi_comm(topo.world()), data, count, w);
}

// Block i of an n-element chunk split over L ranks: the first n % L blocks one element longer.
struct Blocks {
  std::vector<int> counts, displs;
  void split(int n, int parts) {
    counts.resize(static_cast<std::size_t>(parts));
    displs.resize(counts.size());
    for (int i = 0, offset = 0; i < parts; ++i) {
      counts[i] = n / parts + (i < n % parts ? 1 : 0);
      displs[i] = offset;
      offset += counts[i];
    }
  }
};

// Ring reduce-scatter inside the node, in place: afterwards block `me` of chunk holds the node's
// sum. Step s sends the block accumulated at step s - 1 to the next rank and adds the block
// received from the previous one, so each block is summed along the ring in a fixed order.
void ring_reduce_scatter(char* chunk, const Blocks& b, const Wire& w, MPI_Comm node, int me, int size, void* tmp) {
  const int next = (me + 1) % size, prev = (me + size - 1) % size;
  for (int s = 0; s < size - 1; ++s) {
    const int send = (me - 1 - s + 2 * size) % size, recv = (me - 2 - s + 2 * size) % size;
    sendrecv(chunk + b.displs[send] * w.elem, b.counts[send], tmp, b.counts[recv], w.type, next, prev, node);
    w.local_sum(tmp, chunk + b.displs[recv] * w.elem, b.counts[recv]);
  }
}

// Ring all-gather inside the node, in place: every rank passes on the block it received last.
void ring_allgather(char* chunk, const Blocks& b, const Wire& w, MPI_Comm node, int me, int size) {
  const int next = (me + 1) % size, prev = (me + size - 1) % size;
  for (int s = 0; s < size - 1; ++s) {
    const int send = (me - s + size) % size, recv = (me - s - 1 + 2 * size) % size;
    sendrecv(chunk + b.displs[send] * w.elem, b.counts[send], chunk + b.displs[recv] * w.elem, b.counts[recv], w.type,
             next, prev, node);
  }
}

void hierarchical_wire(const Topology& topo, void* data, int64_t count, const Wire& w) {
  MPI_Comm node = mpi_comm(topo.node()), cross = mpi_comm(topo.cross());
  const int local_size = topo.local_size(), me = topo.local_rank();
  const bool across = topo.cross().size() > 1;
  char* bytes = static_cast<char*>(data);
  const int64_t chunk =
      local_size == 1 ? kMaxChunk : std::max<int64_t>(local_size, kRingChunkBytes / static_cast<int64_t>(w.elem));
  Blocks b;
  void* tmp = received_buffer(static_cast<std::size_t>(std::min(chunk, count) / local_size + 1) * w.elem);
  for (int64_t start = 0; start < count; start += chunk) {
    const int n = static_cast<int>(std::min(chunk, count - start));
    char* part = bytes + start * w.elem;
    if (local_size == 1) {  // one rank per node: only the cross-node all-reduce remains
      if (across) allreduce_in_place(part, n, w.type, w.op, cross);
      continue;
    }
    b.split(n, local_size);
    ring_reduce_scatter(part, b, w, node, me, local_size, tmp);
    if (across && b.counts[me] > 0) allreduce_in_place(part + b.displs[me] * w.elem, b.counts[me], w.type, w.op, cross);
    ring_allgather(part, b, w, node, me, local_size);
  }
}

void check_uniform(const Topology& topo, const char* what) {
  ST_CHECK(topo.uniform(), what << " needs the same number of ranks on every node, but the " << topo.describe()
                                << " are unequal; use --allreduce flat or auto, or a --ranks-per-node that divides "
                                   "the number of ranks ("
                                << topo.world().size() << ")");
}

// Runs `algorithm` on float data, through 16 bits when compressed.
void run_allreduce(Algorithm algorithm, const Topology& topo, float* data, int64_t count, Compression compression) {
  ST_CHECK(count >= 0, "all-reduce of a negative count (" << count << ")");
  ST_CHECK(count == 0 || data != nullptr, "all-reduce of " << count << " elements from a null buffer");
  // Decided from the topology alone, so every rank throws here, before any collective.
  if (algorithm == Algorithm::hierarchical) check_uniform(topo, "hierarchical all-reduce");
  if (count == 0 || topo.world().size() == 1) return;  // nothing to exchange: no rounding either
  const Wire w = wire_for(compression);
  void* payload = data;
  if (compression != Compression::none) {
    auto& packed = scratch().packed;
    if (static_cast<int64_t>(packed.size()) < count) packed.resize(static_cast<std::size_t>(count));
    compress(data, packed.data(), count, compression);
    payload = packed.data();
  }
  if (algorithm == Algorithm::flat) {
    flat_wire(topo, payload, count, w);
  } else {
    hierarchical_wire(topo, payload, count, w);
  }
  if (compression != Compression::none) decompress(scratch().packed.data(), data, count, compression);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_bytes(int64_t bytes) {
  std::ostringstream os;
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
    os << (bytes >> 20) << " MiB";
  } else if (bytes >= 1024 && bytes % 1024 == 0) {
    os << (bytes >> 10) << " KiB";
  } else {
    os << bytes << " B";
  }
  return os.str();
}

}  // namespace

const char* algorithm_name(Algorithm a) { return a == Algorithm::flat ? "flat" : "hierarchical"; }

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::fp16:
      return "fp16";
    case Compression::bf16:
      return "bf16";
    default:
      return "none";
  }
}

Compression parse_compression(const std::string& text) {
  if (text == "none") return Compression::none;
  if (text == "fp16") return Compression::fp16;
  if (text == "bf16") return Compression::bf16;
  ST_THROW("unknown --grad-compression '" << text << "' (known: none, fp16, bf16)");
}

void check_algorithm_name(const std::string& text) {
  ST_CHECK(text == "flat" || text == "hierarchical" || text == "auto",
           "unknown --allreduce '" << text << "' (known: flat, hierarchical, auto)");
}

void allreduce_wire(const Communicator& group, void* data, int64_t count, Compression compression) {
  ST_CHECK(count >= 0 && (count == 0 || data != nullptr), "all-reduce of " << count << " elements from " << data);
  if (count == 0 || group.size() == 1) return;
  wire_over(mpi_comm(group), data, count, wire_for(compression));
}

void allreduce_flat(const Topology& topo, float* data, int64_t count, Compression compression) {
  run_allreduce(Algorithm::flat, topo, data, count, compression);
}

void allreduce_hierarchical(const Topology& topo, float* data, int64_t count, Compression compression) {
  run_allreduce(Algorithm::hierarchical, topo, data, count, compression);
}

// ---- AllReducer ----

namespace {

struct CalibrationRow {
  int64_t bytes = 0;
  double flat_us = 0.0, hierarchical_us = 0.0;
  Algorithm chosen = Algorithm::flat;
};

struct Job {
  AllReducer::Request id;
  float* data;
  int64_t count;
  std::function<void()> before;  // may be empty
};

}  // namespace

struct AllReducer::Impl {
  const Topology& topo;
  AllReduceOptions options;
  Algorithm fixed = Algorithm::flat;  // when not calibrated
  std::vector<CalibrationRow> table;  // auto: one row per size class, ascending
  std::string note;                   // why auto did not calibrate, if it did not

  std::mutex mutex;
  std::condition_variable work_ready, work_done;
  std::deque<Job> queue;
  Request next_id = 0;
  Request completed = 0;     // requests [0, completed) are finished
  Request failed_from = -1;  // first failed request, -1 when none
  std::exception_ptr error;
  bool stopping = false;
  std::atomic<bool> caller_idle{false};
  std::thread thread;

  Impl(const Topology& t, const AllReduceOptions& o) : topo(t), options(o) {}

  Algorithm algorithm_for(int64_t bytes) const {
    if (table.empty()) return fixed;
    return nearest_size_class(table, bytes).chosen;
  }

  void calibrate();
  void loop();
};

void AllReducer::Impl::calibrate() {
  // 4 KiB .. 64 MiB by 4x; one warm-up and a few timed repetitions, flat and hierarchical
  // alternating so that both see the same background load. A repetition's time is the maximum
  // over ranks; the class's time is the best repetition.
  std::vector<int64_t> sizes;
  for (int64_t b = 4 << 10; b <= (int64_t{64} << 20); b *= 4) sizes.push_back(b);
  const int64_t max_count = sizes.back() / static_cast<int64_t>(sizeof(float));
  std::vector<float> buffer(static_cast<std::size_t>(max_count), 0.0f);
  std::vector<int> reps;
  std::vector<double> times;  // [size][rep][algorithm]
  const Communicator& world = topo.world();
  for (int64_t bytes : sizes) {
    const int rep_count = bytes >= (int64_t{16} << 20) ? 2 : 4;  // the first is the warm-up
    reps.push_back(rep_count);
    for (int rep = 0; rep < rep_count; ++rep) {
      for (Algorithm a : {Algorithm::flat, Algorithm::hierarchical}) {
        world.barrier();
        const double t0 = now_seconds();
        run_allreduce(a, topo, buffer.data(), bytes / static_cast<int64_t>(sizeof(float)), options.compression);
        times.push_back(now_seconds() - t0);
      }
    }
  }
  ST_CHECK_MPI(
      MPI_Allreduce(MPI_IN_PLACE, times.data(), static_cast<int>(times.size()), MPI_DOUBLE, MPI_MAX, mpi_comm(world)));
  std::vector<int> choice(sizes.size());
  std::size_t at = 0;
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    CalibrationRow row;
    row.bytes = sizes[s];
    row.flat_us = row.hierarchical_us = 1e300;
    at += 2;  // skip the warm-up
    for (int rep = 1; rep < reps[s]; ++rep, at += 2) {
      row.flat_us = std::min(row.flat_us, times[at] * 1e6);
      row.hierarchical_us = std::min(row.hierarchical_us, times[at + 1] * 1e6);
    }
    choice[s] = row.hierarchical_us < row.flat_us ? 1 : 0;
    table.push_back(row);
  }
  // Timings are already identical everywhere; rank 0's decision is broadcast all the same, so
  // that no rounding difference could ever make ranks choose differently.
  ST_CHECK_MPI(MPI_Bcast(choice.data(), static_cast<int>(choice.size()), MPI_INT, 0, mpi_comm(world)));
  for (std::size_t s = 0; s < sizes.size(); ++s)
    table[s].chosen = choice[s] ? Algorithm::hierarchical : Algorithm::flat;
}

void AllReducer::Impl::loop() {
  t_background = true;
  t_caller_idle = &caller_idle;
  for (;;) {
    Job job;
    bool failed = false;
    {
      std::unique_lock<std::mutex> lock(mutex);
      work_ready.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and everything started has been done
      job = std::move(queue.front());
      queue.pop_front();
      failed = failed_from >= 0;
    }
    if (!failed) {
      try {
        if (job.before) job.before();
        run_allreduce(algorithm_for(job.count * static_cast<int64_t>(sizeof(float))), topo, job.data, job.count,
                      options.compression);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        failed_from = job.id;
        error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      completed = job.id + 1;
    }
    work_done.notify_all();
  }
}

AllReducer::AllReducer(const Topology& topo, const AllReduceOptions& options)
    : impl_(std::make_unique<Impl>(topo, options)) {
  check_algorithm_name(options.algorithm);
  int provided = MPI_THREAD_SINGLE;
  ST_CHECK_MPI(MPI_Query_thread(&provided));
  ST_CHECK(provided >= MPI_THREAD_SERIALIZED,
           "the asynchronous all-reduce runs MPI on a communication thread and needs MPI initialised with "
           "MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (the library provides level "
               << provided << ")");
  Impl& m = *impl_;
  if (options.algorithm == "flat") {
    m.fixed = Algorithm::flat;
  } else if (options.algorithm == "hierarchical") {
    check_uniform(topo, "--allreduce hierarchical");
    m.fixed = Algorithm::hierarchical;
  } else if (!topo.uniform()) {
    m.fixed = Algorithm::flat;
    m.note = "using flat, as the nodes have unequal rank counts: " + topo.describe();
    ST_LOG("all-reduce auto: " << m.note);
  } else if (topo.world().size() == 1) {
    m.fixed = Algorithm::flat;
    m.note = "one rank: nothing to exchange";
  } else {
    m.calibrate();
    if (options.log_calibration) {
      ST_LOG("all-reduce auto calibration on " << topo.describe() << ", compression "
                                               << compression_name(options.compression)
                                               << " (time: max over ranks, best of repetitions):");
      for (const auto& row : m.table) {
        ST_LOG("  " << std::setw(7) << format_bytes(row.bytes) << "  flat " << std::fixed << std::setprecision(1)
                    << std::setw(10) << row.flat_us << " us  hierarchical " << std::setw(10) << row.hierarchical_us
                    << " us  -> " << algorithm_name(row.chosen));
      }
    }
  }
  m.thread = std::thread([&m] { m.loop(); });
}

AllReducer::~AllReducer() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->work_ready.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

AllReducer::Request AllReducer::start(float* data, int64_t count) { return start(data, count, {}); }

AllReducer::Request AllReducer::start(float* data, int64_t count, std::function<void()> before) {
  ST_CHECK(count >= 0, "all-reduce of a negative count (" << count << ")");
  Request id;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    id = impl_->next_id++;
    impl_->queue.push_back(Job{id, data, count, std::move(before)});
  }
  impl_->work_ready.notify_one();
  return id;
}

void AllReducer::wait(Request request) {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  ST_CHECK(request >= 0 && request < impl_->next_id,
           "AllReducer::wait: request " << request << " was never started (" << impl_->next_id << " started)");
  impl_->work_done.wait(lock, [&] { return impl_->completed > request; });
  if (impl_->failed_from >= 0 && request >= impl_->failed_from) std::rethrow_exception(impl_->error);
}

void AllReducer::wait_all() {
  Request last;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    last = impl_->next_id - 1;
  }
  if (last >= 0) wait(last);
}

void AllReducer::set_caller_idle(bool idle) { impl_->caller_idle.store(idle, std::memory_order_relaxed); }

Algorithm AllReducer::algorithm_for(int64_t bytes) const { return impl_->algorithm_for(bytes); }

const std::string& AllReducer::requested() const { return impl_->options.algorithm; }

const Topology& AllReducer::topology() const { return impl_->topo; }

Compression AllReducer::compression() const { return impl_->options.compression; }

Json AllReducer::to_json() const {
  const Impl& m = *impl_;
  Json j = Json::object();
  j.set("requested", m.options.algorithm);
  j.set("compression", compression_name(m.options.compression));
  if (m.table.empty()) j.set("algorithm", algorithm_name(m.fixed));
  if (!m.note.empty()) j.set("note", m.note);
  if (!m.table.empty()) {
    Json rows = Json::array();
    for (const auto& row : m.table) {
      Json r = Json::object();
      r.set("bytes", row.bytes);
      r.set("flat_us", row.flat_us);
      r.set("hierarchical_us", row.hierarchical_us);
      r.set("algorithm", algorithm_name(row.chosen));
      rows.push_back(std::move(r));
    }
    j.set("calibration", std::move(rows));
  }
  return j;
}

}  // namespace scaletrain::comm
