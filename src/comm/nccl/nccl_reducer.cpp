// The gradient reducer on GPU memory with NCCL (nccl_reducer.hpp).
//
// Threads and order:
//   main thread   on_grad_ready: when bucket b is complete (and every bucket before it), an event
//                 `ready[b]` on the compute stream, and b queued for the communication thread.
//                 finish: waits until every bucket is issued, then the compute stream waits for
//                 the communication stream's last work (a device-side wait).
//   comm thread   per bucket, in bucket order: the communication stream waits for ready[b] (on the
//                 device), then every NCCL call of the bucket is enqueued there; an MPI level across
//                 nodes blocks this thread on the bucket's share only (an event), not the device.
// All NCCL and MPI calls of the reducer come from this one thread, so every rank makes them in
// the same order on each communicator. The bucket's GPU time (events `began`, `ended` around its
// work on the communication stream) is the reducer's communication time.
//
// A bucket of n elements on a node of L ranks, as the hierarchical MPI path splits it but with
// NCCL's in-place collectives: the first (n / L) * L elements are reduce-scattered (rank i keeps
// block i), the n mod L rest (the tail) is all-reduced inside the node; across nodes each rank
// all-reduces its block and the whole tail with the ranks of its local rank; then the blocks are
// all-gathered. Every rank ends with the same bytes: each block is summed by one NCCL reduction
// and copied, the tail by the same all-reduces in every cross-node group.
#include "scaletrain/comm/nccl_reducer.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.hpp"
#include "backend/cuda/cuda_context.hpp"
#include "backend/cuda/gradient_kernels.hpp"
#include "comm/bucket_readiness.hpp"
#include "comm/nccl/nccl_check.hpp"
#include "comm/nccl/nccl_communicators.hpp"
#include "comm/size_classes.hpp"
#include "comm/wire.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/timer.hpp"

namespace scaletrain::comm {
namespace {

ncclDataType_t nccl_type(Compression c) {
  switch (c) {
    case Compression::fp16:
      return ncclFloat16;
    case Compression::bf16:
      return ncclBfloat16;
    default:
      return ncclFloat32;
  }
}

std::size_t wire_bytes(Compression c) { return c == Compression::none ? sizeof(float) : sizeof(uint16_t); }

// Device and pinned host memory the reducer owns.
struct Buffers {
  void* wire = nullptr;       // device: the 16-bit copy of the gradients (compression)
  void* pinned = nullptr;     // host: the shares staged for MPI across nodes
  void* preflight = nullptr;  // device: the pre-flight's host buffer, copied in
  ~Buffers() {
    if (preflight != nullptr) cudaFree(preflight);
    if (pinned != nullptr) cudaFreeHost(pinned);
    if (wire != nullptr) cudaFree(wire);
  }
};

class NcclReducer final : public GradientReducer {
 public:
  NcclReducer(Context& ctx, const Topology& topo, const FlatLayout& gradients, const NcclReducerOptions& options)
      : topo_(topo),
        grads_(gradients),
        options_(options),
        readiness_(grads_, options.buckets.bucket_mb),
        buckets_(readiness_.buckets()),
        gpu_(ctx.gpu_index()),
        compute_(cuda::compute_stream(ctx)) {
    ST_CHECK(grads_.flat != nullptr && grads_.flat->defined() && grads_.flat->device() == Device::cuda,
             "the NCCL gradient reducer all-reduces GPU memory: the flat gradients are not on a GPU");
    if (options_.shape == Algorithm::hierarchical && !options_.automatic)
      ST_CHECK(topo.uniform(),
               "--allreduce hierarchical --intra nccl needs the same number of ranks on every node, "
               "but the "
                   << topo.describe() << " are unequal; use --allreduce flat or auto");
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    world_size_ = topo.world().size();
    // What may fail on one rank alone (pinned memory beyond `ulimit -l`, device memory) first, and
    // every rank agrees before the communicators: a rank that threw alone would leave the others
    // waiting in NCCL for it. The destructor does not run for a constructor that throws.
    try {
      std::string failed;
      try {
        make_stream_and_events();
        allocate_buffers();
      } catch (const std::exception& e) {
        failed = e.what();
      }
      const std::vector<std::string> all = topo.world().allgather(failed);
      for (std::size_t r = 0; r < all.size(); ++r)
        if (!all[r].empty()) ST_THROW("the NCCL gradient reducer could not be set up on rank " << r << ": " << all[r]);
      comms_ = std::make_unique<NcclCommunicators>(topo, nccl_needs(options_.shape, needed_inter(), options_.automatic),
                                                   options_.shared_gpus);
    } catch (...) {
      release_stream_and_events();
      throw;
    }
    if (options_.automatic) calibrate();
    thread_ = std::thread([this] { issue_in_order(); });
  }

  ~NcclReducer() override {
    bool broken = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      stop_ = true;
      // Unwinding from an error mid-step, or after a failed bucket: NCCL's kernels may wait for
      // peers that will never come, and a synchronize would wait with them. The queued buckets are
      // dropped and the communicators aborted (ncclCommAbort may be called from another thread
      // for this), so that this rank ends; the others see NCCL's error (the stall watchdog polls it).
      broken = in_step_ || error_ != nullptr;
      if (broken) queue_.clear();
    }
    work_cv_.notify_all();
    if (broken) comms_->abort();
    thread_.join();
    release_stream_and_events();
    // comms_ and buffers_ go after: no work on the stream uses them any more.
  }

  std::string name() const override { return requested(); }

  void begin_step() override {
    ST_CHECK(!in_step_, "internal error: begin_step() twice without finish() in between");
    collect_gpu_times();
    readiness_.reset();
    next_to_start_ = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      issued_ = 0;
    }
    in_step_ = true;
  }

  void on_grad_ready(int index) override {
    ST_CHECK(in_step_, "internal error: gradient of parameter " << index << " marked ready outside a step");
    readiness_.mark(index);
    if (options_.buckets.overlap) start_ready_buckets();
  }

  void finish() override {
    ST_CHECK(in_step_, "internal error: finish() without begin_step()");
    in_step_ = false;
    start_ready_buckets();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_cv_.wait(lock, [this] { return issued_ == next_to_start_ || error_; });
      if (error_) std::rethrow_exception(error_);
    }
    if (next_to_start_ < static_cast<int>(buckets_.size())) readiness_.throw_missing();
    // The optimizer (next on the compute stream) reads the averages: it waits on the device.
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    ST_CHECK_CUDA(cudaEventRecord(backward_done_, compute_));  // where the exposed time starts
    ST_CHECK_CUDA(cudaEventRecord(step_done_, stream_));
    ST_CHECK_CUDA(cudaStreamWaitEvent(compute_, step_done_, 0));
    measured_steps_ = true;
  }

  int64_t bytes_per_step() const override { return grads_.elements() * static_cast<int64_t>(sizeof(float)); }

  Json layout() const override {
    const Json list = readiness_.list([this](Json& j, int64_t bytes) {
      const Path path = path_for(bytes);
      j.set("algorithm", algorithm_name(path.shape));
      if (path.shape == Algorithm::hierarchical) j.set("inter", transport_name(path.inter));
    });
    Json j = Json::object();
    j.set("reducer", "nccl");
    j.set("algorithm", requested());
    j.set("overlap", options_.buckets.overlap);
    j.set("bucket_mb", options_.buckets.bucket_mb);
    j.set("buckets", static_cast<int64_t>(buckets_.size()));
    j.set("bytes", bytes_per_step());
    j.set("list", list);
    return j;
  }

  double communication_seconds() const override {
    const_cast<NcclReducer*>(this)->collect_gpu_times();
    return gpu_seconds_;
  }

  double exposed_seconds() const override {
    const_cast<NcclReducer*>(this)->collect_gpu_times();
    return exposed_seconds_;
  }

  // "hierarchical on the GPU: NCCL inside the node, MPI across nodes staged through pinned host
  //  memory (fp16 on the wire), 12 buckets of <= 25 MiB overlapped with backward, 102.23 MB per step"
  std::string describe() const override {
    std::ostringstream os;
    os << requested() << " on the GPU: ";
    int flat = 0, hierarchical = 0;
    for (const GradientBucket& b : buckets_)
      ++(shape_for(b.count * static_cast<int64_t>(sizeof(float))) == Algorithm::flat ? flat : hierarchical);
    if (flat > 0) os << "one NCCL all-reduce over the " << world_size_ << " rank" << (world_size_ == 1 ? "" : "s");
    if (flat > 0 && hierarchical > 0) os << " or ";
    if (hierarchical > 0) os << "NCCL inside the node, " << across_nodes();
    if (options_.compression != Compression::none)
      os << " (" << compression_name(options_.compression) << " on the wire)";
    char mb[32];
    std::snprintf(mb, sizeof mb, "%.2f", bytes_per_step() / 1e6);
    os << ", " << buckets_.size() << " bucket" << (buckets_.size() == 1 ? "" : "s")
       << " of <= " << options_.buckets.bucket_mb << " MiB "
       << (options_.buckets.overlap ? "overlapped with backward" : "after backward (no overlap)");
    if (options_.automatic) os << " (hierarchical x" << hierarchical << ", flat x" << flat << ")";
    os << ", " << mb << " MB per step";
    return os.str();
  }

  Json options() const override {
    Json j = Json::object();
    j.set("algorithm", requested());
    j.set("compression", compression_name(options_.compression));
    j.set("bucket_mb", options_.buckets.bucket_mb);
    j.set("overlap", options_.buckets.overlap);
    Json c = Json::object();
    c.set("requested", requested());
    c.set("compression", compression_name(options_.compression));
    if (!options_.automatic) c.set("algorithm", algorithm_name(options_.shape));
    if (!calibration_note_.empty()) c.set("note", calibration_note_);
    if (!table_.empty()) {
      Json rows = Json::array();
      for (const SizeClass& row : table_) {
        Json r = Json::object();
        r.set("bytes", row.bytes);
        r.set("flat_us", row.flat_us);
        r.set("hierarchical_us", row.hierarchical_us);
        if (row.hierarchical_nccl_us >= 0) r.set("hierarchical_nccl_us", row.hierarchical_nccl_us);
        r.set("algorithm", algorithm_name(row.chosen.shape));
        if (row.chosen.shape == Algorithm::hierarchical) r.set("inter", transport_name(row.chosen.inter));
        rows.push_back(r);
      }
      c.set("calibration", rows);
    }
    j.set("calibration", c);
    return j;
  }

  std::string algorithm_for(int64_t bytes) const override { return algorithm_name(shape_for(bytes)); }

  std::string communication_error() const override { return comms_->async_error(); }

  Device data_device() const override { return Device::cuda; }

  // The pre-flight's all-reduce of `count` floats (host memory from the pre-flight, or device
  // memory: after the work queued so far on the compute stream, which may write it), between
  // steps: the communication thread is idle, so this thread may call NCCL. Returns with the
  // result in `data`.
  void allreduce_now(float* data, int64_t count) override {
    ST_CHECK(!in_step_, "internal error: allreduce_now() during a step");
    ST_CHECK(count <= grads_.elements(), "internal: allreduce_now() of " << count << " elements, more than the "
                                                                         << grads_.elements() << " gradients");
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    cudaPointerAttributes attributes{};
    ST_CHECK_CUDA(cudaPointerGetAttributes(&attributes, data));
    const bool on_device = attributes.type == cudaMemoryTypeDevice;
    ST_CHECK_CUDA(cudaEventRecord(compute_ready_, compute_));
    ST_CHECK_CUDA(cudaStreamWaitEvent(stream_, compute_ready_, 0));
    float* device = data;
    if (!on_device) {
      if (buffers_.preflight == nullptr)
        ST_CHECK_CUDA(cudaMalloc(&buffers_.preflight, static_cast<std::size_t>(grads_.elements()) * 4));
      device = static_cast<float*>(buffers_.preflight);
      ST_CHECK_CUDA(
          cudaMemcpyAsync(device, data, static_cast<std::size_t>(count) * 4, cudaMemcpyHostToDevice, stream_));
    }
    reduce(device, 0, count, /*mean=*/false);  // the interface's sum, as the MPI reducers' all-reduce
    if (!on_device)
      ST_CHECK_CUDA(
          cudaMemcpyAsync(data, device, static_cast<std::size_t>(count) * 4, cudaMemcpyDeviceToHost, stream_));
    ST_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }

 private:
  // The stream and every event; all go into events_ for the destructor.
  void make_stream_and_events() {
    ST_CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    auto event = [this](unsigned flags) {
      cudaEvent_t e = nullptr;
      ST_CHECK_CUDA(cudaEventCreateWithFlags(&e, flags));
      events_.push_back(e);
      return e;
    };
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      ready_events_.push_back(event(cudaEventDisableTiming));
      began_.push_back(event(cudaEventDefault));
      ended_.push_back(event(cudaEventDefault));
    }
    step_done_ = event(cudaEventDefault);      // timed: the exposed time ends here
    backward_done_ = event(cudaEventDefault);  // on the compute stream when finish() is called
    compute_ready_ = event(cudaEventDisableTiming);
    // The thread blocks on it (a share's copy to the host) without spinning a core.
    staged_ = event(cudaEventDisableTiming | cudaEventBlockingSync);
  }

  std::string requested() const { return options_.automatic ? "auto" : algorithm_name(options_.shape); }

  // What carries a bucket: its shape and, hierarchical, the transport across nodes.
  struct Path {
    Algorithm shape = Algorithm::flat;
    Transport inter = Transport::mpi;
  };

  // The transport across nodes the communicators must allow for.
  Transport needed_inter() const {
    return options_.automatic && options_.inter_automatic ? Transport::nccl : options_.inter;
  }

  // The path a message of `bytes` (fp32) takes: the options', or auto's nearest size class on a
  // log scale (the same rule as the host AllReducer's).
  Path path_for(int64_t bytes) const {
    if (forced_) return *forced_;
    if (!options_.automatic) return {options_.shape, options_.inter};
    if (table_.empty()) return {Algorithm::flat, options_.inter};  // unequal nodes: no calibration
    return nearest_size_class(table_, bytes).chosen;
  }
  Algorithm shape_for(int64_t bytes) const { return path_for(bytes).shape; }

  // --allreduce auto: both shapes (with --inter auto, hierarchical with each transport across
  // nodes) timed on GPU memory at 4 KiB .. 64 MiB by 4x (none above the
  // gradients' size), alternating, a warm-up and a few repetitions each; a repetition's time is
  // the maximum over ranks and a class's the best repetition, so every rank chooses alike. On this
  // thread, before the communication thread starts: it is then the only caller of NCCL and MPI.
  void calibrate() {
    if (bytes_per_step() == 0) return;  // nothing to all-reduce: flat
    if (!topo_.uniform()) {
      calibration_note_ = "flat: nodes of unequal size (" + topo_.describe() + ") have no hierarchical shape";
      return;
    }
    // No class above the gradients' size: the staging and 16-bit buffers hold that much.
    std::vector<int64_t> sizes;
    for (int64_t b = 4 << 10; b <= (int64_t{64} << 20) && b <= bytes_per_step(); b *= 4) sizes.push_back(b);
    if (sizes.empty()) sizes.push_back(bytes_per_step());
    float* scratch = nullptr;
    ST_CHECK_CUDA(cudaMalloc(&scratch, static_cast<std::size_t>(sizes.back())));
    struct Free {
      float* p;
      ~Free() { cudaFree(p); }
    } free_scratch{scratch};
    ST_CHECK_CUDA(cudaMemsetAsync(scratch, 0, static_cast<std::size_t>(sizes.back()), stream_));
    const Communicator& world = topo_.world();
    // The candidates: flat, hierarchical with the options' transport across nodes, and with
    // --inter auto hierarchical with the other one too.
    std::vector<Path> paths = {{Algorithm::flat, options_.inter}, {Algorithm::hierarchical, options_.inter}};
    if (options_.inter_automatic)
      paths = {{Algorithm::flat, Transport::mpi},
               {Algorithm::hierarchical, Transport::mpi},
               {Algorithm::hierarchical, Transport::nccl}};
    for (int64_t bytes : sizes) {
      std::vector<double> best(paths.size(), 1e300);
      const int reps = bytes >= (int64_t{16} << 20) ? 2 : 4;  // the first is the warm-up
      for (int rep = 0; rep < reps; ++rep)
        for (std::size_t k = 0; k < paths.size(); ++k) {
          forced_ = paths[k];
          world.barrier();
          const Stopwatch clock;
          reduce(scratch, 0, bytes / static_cast<int64_t>(sizeof(float)), /*mean=*/false);
          ST_CHECK_CUDA(cudaStreamSynchronize(stream_));
          const double us = world.allreduce_max(clock.elapsed()) * 1e6;
          if (rep > 0) best[k] = std::min(best[k], us);
        }
      SizeClass row;
      row.bytes = bytes;
      row.flat_us = best[0];
      row.hierarchical_us = best[1];
      if (paths.size() > 2) row.hierarchical_nccl_us = best[2];
      const std::size_t fastest = static_cast<std::size_t>(std::min_element(best.begin(), best.end()) - best.begin());
      row.chosen = paths[fastest];
      table_.push_back(row);
    }
    forced_.reset();
    if (world.rank() == 0) {
      std::ostringstream os;
      os << "all-reduce auto on the GPU (max over ranks, best of the repetitions):";
      for (const SizeClass& row : table_) {
        os << " " << (row.bytes >> 10) << " KiB flat " << static_cast<int64_t>(row.flat_us) << " us / hierarchical "
           << static_cast<int64_t>(row.hierarchical_us) << " us";
        if (row.hierarchical_nccl_us >= 0)
          os << " / hierarchical, NCCL across nodes " << static_cast<int64_t>(row.hierarchical_nccl_us) << " us";
        os << " -> " << algorithm_name(row.chosen.shape)
           << (row.chosen.shape == Algorithm::hierarchical && options_.inter_automatic
                   ? std::string(", ") + transport_name(row.chosen.inter) + " across nodes"
                   : std::string())
           << ";";
      }
      ST_LOG(os.str());
    }
  }

  // Waits for the stream's work, then destroys the events and the stream. Destructors do not throw.
  void release_stream_and_events() noexcept {
    cudaSetDevice(gpu_);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    events_.clear();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  bool stages_across_nodes() const {
    return (options_.automatic || options_.shape == Algorithm::hierarchical) &&
           (options_.inter == Transport::mpi || options_.inter_automatic) &&
           !(options_.cuda_aware_mpi && options_.compression == Compression::none) && topo_.cross().size() > 1;
  }

  std::string across_nodes() const {
    if (topo_.cross().size() == 1) return "one node: nothing crosses nodes";
    if (options_.automatic && options_.inter_automatic) return "MPI or NCCL across nodes, as calibrated";
    if (options_.inter == Transport::nccl) return "NCCL across nodes";
    if (!stages_across_nodes()) return "MPI across nodes on GPU memory (CUDA-aware)";
    return "MPI across nodes staged through pinned host memory";
  }

  void allocate_buffers() {
    const std::size_t bytes = static_cast<std::size_t>(grads_.elements()) * wire_bytes(options_.compression);
    if (options_.compression != Compression::none && world_size_ > 1 && bytes > 0)
      ST_CHECK_CUDA(cudaMalloc(&buffers_.wire, bytes));
    if (stages_across_nodes() && bytes > 0) ST_CHECK_CUDA(cudaHostAlloc(&buffers_.pinned, bytes, cudaHostAllocDefault));
  }

  // Queues every complete bucket from next_to_start_ on, in bucket order, behind the backward
  // work that wrote it.
  void start_ready_buckets() {
    bool queued = false;
    while (next_to_start_ < static_cast<int>(buckets_.size()) && readiness_.complete(next_to_start_)) {
      ST_CHECK_CUDA(cudaSetDevice(gpu_));
      ST_CHECK_CUDA(cudaEventRecord(ready_events_[next_to_start_], compute_));
      {
        std::unique_lock<std::mutex> lock(mutex_);
        queue_.push_back(next_to_start_);
      }
      ++next_to_start_;
      queued = true;
    }
    if (queued) work_cv_.notify_one();
  }

  // The communication thread.
  void issue_in_order() {
    bool failed = false;
    for (;;) {
      int b = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        b = queue_.front();
        queue_.pop_front();
      }
      try {
        if (!failed) issue_bucket(b);
      } catch (...) {
        failed = true;  // later buckets are not issued: their results would be wrong
        std::unique_lock<std::mutex> lock(mutex_);
        error_ = std::current_exception();
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ++issued_;
      }
      done_cv_.notify_all();
    }
  }

  void issue_bucket(int b) {
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    const GradientBucket& bucket = buckets_[b];
    ST_CHECK_CUDA(cudaStreamWaitEvent(stream_, ready_events_[b], 0));
    ST_CHECK_CUDA(cudaEventRecord(began_[b], stream_));
    reduce(static_cast<float*>(grads_.flat->raw()) + bucket.offset, bucket.offset, bucket.count, /*mean=*/true);
    ST_CHECK_CUDA(cudaEventRecord(ended_[b], stream_));
  }

  // The sum (mean: divided by the world size) over ranks of `count` floats at `data` (device),
  // element `offset` of the gradients (where its 16-bit copy and its staged share go), enqueued on
  // the communication stream.
  void reduce(float* data, int64_t offset, int64_t count, bool mean) {
    if (count == 0) return;
    // One rank: the all-reduce is the identity, and the host path does not round to 16 bits then.
    const bool compress = options_.compression != Compression::none && world_size_ > 1;
    const bool bf16 = options_.compression == Compression::bf16;
    const Compression wire = compress ? options_.compression : Compression::none;
    char* payload = reinterpret_cast<char*>(data);
    if (compress) {
      payload = static_cast<char*>(buffers_.wire) + offset * static_cast<int64_t>(sizeof(uint16_t));
      cuda::launch_f32_to_16bit(data, reinterpret_cast<uint16_t*>(payload), count, bf16, stream_);
    }
    const Path path = path_for(count * static_cast<int64_t>(sizeof(float)));
    if (path.shape == Algorithm::flat) {
      ncclComm_t world = static_cast<ncclComm_t>(comms_->world());
      ST_CHECK_NCCL(
          ncclAllReduce(payload, payload, static_cast<std::size_t>(count), nccl_type(wire), ncclSum, world, stream_),
          world);
    } else {
      reduce_hierarchical(payload, offset, count, wire, path.inter);
    }
    if (compress) cuda::launch_16bit_to_f32(reinterpret_cast<uint16_t*>(payload), data, count, bf16, stream_);
    if (mean && world_size_ > 1) cuda::launch_divide_f32(data, static_cast<float>(world_size_), count, stream_);
  }

  void reduce_hierarchical(char* payload, int64_t offset, int64_t count, Compression wire, Transport inter) {
    ncclComm_t node = static_cast<ncclComm_t>(comms_->node());
    const ncclDataType_t type = nccl_type(wire);
    const int64_t eb = static_cast<int64_t>(wire_bytes(wire));
    const int64_t local = topo_.local_size(), me = topo_.local_rank();
    const int64_t block = count / local, even = block * local, tail = count - even;
    char* mine = payload + me * block * eb;
    if (local > 1 && block > 0)
      ST_CHECK_NCCL(ncclReduceScatter(payload, mine, static_cast<std::size_t>(block), type, ncclSum, node, stream_),
                    node);
    if (local > 1 && tail > 0)
      ST_CHECK_NCCL(ncclAllReduce(payload + even * eb, payload + even * eb, static_cast<std::size_t>(tail), type,
                                  ncclSum, node, stream_),
                    node);
    if (topo_.cross().size() > 1) {
      across(mine, offset + me * block, block, wire, inter);
      across(payload + even * eb, offset + even, tail, wire, inter);
    }
    if (local > 1 && block > 0)
      ST_CHECK_NCCL(ncclAllGather(mine, payload, static_cast<std::size_t>(block), type, node, stream_), node);
  }

  // The sum of `count` wire elements at `device` (element `offset` of the gradients) over the
  // ranks of this local rank on every node.
  void across(char* device, int64_t offset, int64_t count, Compression wire, Transport inter) {
    if (count == 0) return;
    if (inter == Transport::nccl) {
      ncclComm_t cross = static_cast<ncclComm_t>(comms_->cross());
      ST_CHECK_NCCL(
          ncclAllReduce(device, device, static_cast<std::size_t>(count), nccl_type(wire), ncclSum, cross, stream_),
          cross);
      return;
    }
    const std::size_t bytes = static_cast<std::size_t>(count) * wire_bytes(wire);
    if (!stages_across_nodes()) {  // CUDA-aware MPI on the device pointer, once the stream has written it
      ST_CHECK_CUDA(cudaEventRecord(staged_, stream_));
      ST_CHECK_CUDA(cudaEventSynchronize(staged_));
      allreduce_wire(topo_.cross(), device, count, wire);
      return;
    }
    char* host = static_cast<char*>(buffers_.pinned) + offset * static_cast<int64_t>(wire_bytes(wire));
    ST_CHECK_CUDA(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
    ST_CHECK_CUDA(cudaEventRecord(staged_, stream_));
    ST_CHECK_CUDA(cudaEventSynchronize(staged_));
    allreduce_wire(topo_.cross(), host, count, wire);
    ST_CHECK_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  }

  // The last step's GPU time per bucket, once its events have completed (the optimizer of that
  // step waited for them, so by the next step they have in practice).
  void collect_gpu_times() {
    if (!measured_steps_) return;
    measured_steps_ = false;
    ST_CHECK_CUDA(cudaSetDevice(gpu_));
    ST_CHECK_CUDA(cudaEventSynchronize(step_done_));
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      float ms = 0.0f;
      ST_CHECK_CUDA(cudaEventElapsedTime(&ms, began_[b], ended_[b]));
      gpu_seconds_ += ms / 1e3;
    }
    // The compute stream waited from the end of backward until the last bucket was done; a
    // negative span is communication that finished before backward did: nothing exposed.
    float exposed_ms = 0.0f;
    ST_CHECK_CUDA(cudaEventElapsedTime(&exposed_ms, backward_done_, step_done_));
    exposed_seconds_ += std::max(0.0f, exposed_ms) / 1e3;
  }

  const Topology& topo_;
  const FlatLayout grads_;
  const NcclReducerOptions options_;
  BucketReadiness readiness_;
  const std::vector<GradientBucket>& buckets_;  // readiness_'s
  const int gpu_;
  cudaStream_t compute_;
  std::unique_ptr<NcclCommunicators> comms_;
  Buffers buffers_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_, ready_events_, began_, ended_;
  cudaEvent_t step_done_ = nullptr, staged_ = nullptr, compute_ready_ = nullptr, backward_done_ = nullptr;
  int world_size_ = 1;
  int next_to_start_ = 0;
  bool in_step_ = false;
  bool measured_steps_ = false;
  // --allreduce auto: one row per size class, ascending; the shape being timed while calibrating.
  struct SizeClass {
    int64_t bytes = 0;
    double flat_us = 0.0, hierarchical_us = 0.0, hierarchical_nccl_us = -1.0;  // -1: not timed
    Path chosen;
  };
  std::vector<SizeClass> table_;
  std::string calibration_note_;
  std::optional<Path> forced_;
  double gpu_seconds_ = 0.0, exposed_seconds_ = 0.0;  // CUDA-event times over the run

  std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<int> queue_;
  int issued_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<GradientReducer> make_nccl_reducer(Context& ctx, const Topology& topo, const FlatLayout& gradients,
                                                   const NcclReducerOptions& options) {
  refuse_shared_gpus_for(topo, options);
  return std::make_unique<NcclReducer>(ctx, topo, gradients, options);
}

}  // namespace scaletrain::comm
