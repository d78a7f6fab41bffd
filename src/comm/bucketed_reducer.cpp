// The bucketed, overlapped gradient reducer. Gradients of consecutive parameters, in backward
// order, are fused into buckets (plan_buckets); since the flat gradient buffer is laid out in
// forward order, every bucket is a contiguous range of it and is all-reduced in place. During
// backward, on_grad_ready counts each bucket's finished members; a complete bucket is handed to
// the AllReducer (its communication thread runs the all-reduce while backward goes on). Buckets
// start strictly in bucket order, so every rank starts the same sequence of all-reduces.
//
// A small completion thread waits for the started buckets in order, notes when each completes,
// and divides it by the world size right away (overlapped too). The times give the
// communication thread's busy time honestly: requests run one after another in start order, so
// bucket k occupies it from max(start_k, done_{k-1}) to done_k (staged, that includes the wait
// for the bucket's copy to the host). finish() waits only for buckets still in flight.
//
// Staged (a DeviceStaging, the gradients on a GPU): the main thread queues a complete bucket's
// copy to the host mirror, behind the backward work that wrote it, and hands the AllReducer the
// mirror's range with a hook that waits for that copy on the communication thread, right before
// the all-reduce; so neither backward nor the buckets before it wait for the copy. The completion
// thread divides the mirror's range and queues its copy back; finish() orders the compute stream
// after every copy back. The hook runs in request order, so ranks still start the same sequence.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "comm/bucket_readiness.hpp"
#include "comm/gradient_staging.hpp"
#include "scaletrain/comm/gradient_reducer.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/core/trace.hpp"

namespace scaletrain::comm {

std::vector<GradientBucket> plan_buckets(const FlatLayout& gradients, double bucket_mb) {
  ST_CHECK(bucket_mb > 0, "--bucket-mb must be positive, got " << bucket_mb);
  const double capacity = bucket_mb * 1024.0 * 1024.0;  // bytes
  std::vector<GradientBucket> buckets;
  double bytes = 0.0;  // of the bucket being filled
  for (int i = gradients.num_segments() - 1; i >= 0; --i) {
    const FlatSegment& info = gradients.segments[static_cast<std::size_t>(i)];
    const int64_t count = info.count;
    const double param_bytes = static_cast<double>(count) * sizeof(float);
    if (buckets.empty() || bytes + param_bytes > capacity) {
      buckets.push_back({i, i, info.offset, 0});
      bytes = 0.0;
    }
    GradientBucket& b = buckets.back();
    b.first_param = i;
    b.offset = info.offset;
    b.count += count;
    bytes += param_bytes;
  }
  return buckets;
}

namespace {

class BucketedReducer final : public GradientReducer {
 public:
  // `owned` (may be null) is the AllReducer `reducer` refers to, when this reducer owns it.
  BucketedReducer(AllReducer& reducer, const FlatLayout& gradients, const BucketOptions& options,
                  std::shared_ptr<DeviceStaging> staging, std::unique_ptr<AllReducer> owned = nullptr)
      : owned_(std::move(owned)),
        reducer_(reducer),
        grads_(gradients),
        options_(options),
        staging_(std::move(staging)),
        readiness_(grads_, options.bucket_mb),
        buckets_(readiness_.buckets()) {
    check_staging(grads_, staging_.get(), "bucketed");
    world_size_ = reducer.topology().world().size();
    completion_thread_ = std::thread([this] { complete_in_order(); });
  }

  ~BucketedReducer() override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    // Buckets still in flight (an error unwinding mid-step) are completed first, as the
    // AllReducer's own destructor completes every started request: the other ranks start them too.
    completion_thread_.join();
  }

  std::string name() const override { return reducer_.requested(); }

  void begin_step() override {
    ST_CHECK(!in_step_, "internal error: begin_step() twice without finish() in between");
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ST_CHECK(launched_ == completed_, "internal error: begin_step() with all-reduces still in flight");
      launched_ = completed_ = 0;
    }
    readiness_.reset();
    next_to_start_ = 0;
    in_step_ = true;
  }

  void on_grad_ready(int index) override {
    ST_CHECK(in_step_, "internal error: gradient of parameter " << index << " marked ready outside a step");
    const int b = readiness_.mark(index);
    if (options_.overlap && readiness_.complete(b)) start_ready_buckets();
  }

  void finish() override {
    ST_CHECK(in_step_, "internal error: finish() without begin_step()");
    in_step_ = false;
    start_ready_buckets();  // without overlap: all of them, now
    // Backward is over: nothing left to protect from a polling communication thread.
    reducer_.set_caller_idle(true);
    struct Busy {
      AllReducer& r;
      ~Busy() { r.set_caller_idle(false); }
    } busy{reducer_};
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [this] { return completed_ == launched_ || error_; });
    if (error_) std::rethrow_exception(error_);
    if (next_to_start_ == static_cast<int>(buckets_.size()) && staging_) {
      // Every bucket's copy back is queued (completion thread, before it counted the bucket).
      lock.unlock();
      staging_->device_ready_for_compute();
      return;
    }
    // Some gradient never arrived: its bucket (and every later one) was never started.
    if (next_to_start_ < static_cast<int>(buckets_.size())) readiness_.throw_missing();
  }

  int64_t bytes_per_step() const override { return grads_.elements() * static_cast<int64_t>(sizeof(float)); }

  Json layout() const override {
    const Json list = readiness_.list(
        [this](Json& j, int64_t bytes) { j.set("algorithm", algorithm_name(reducer_.algorithm_for(bytes))); });
    Json j = Json::object();
    j.set("reducer", "bucketed");
    j.set("algorithm", reducer_.requested());
    j.set("overlap", options_.overlap);
    j.set("bucket_mb", options_.bucket_mb);
    j.set("buckets", static_cast<int64_t>(buckets_.size()));
    j.set("bytes", bytes_per_step());
    j.set("list", list);
    return j;
  }

  double communication_seconds() const override {
    std::unique_lock<std::mutex> lock(mutex_);
    return busy_seconds_;
  }

  // "hierarchical, 12 buckets of <= 25 MiB overlapped with backward (hierarchical x10, flat x2), 102.23 MB per step"
  std::string describe() const override {
    std::ostringstream os;
    os << reducer_.requested();
    if (reducer_.compression() != Compression::none)
      os << " (" << compression_name(reducer_.compression()) << " on the wire)";
    os << ", " << buckets_.size() << " bucket" << (buckets_.size() == 1 ? "" : "s") << " of <= " << options_.bucket_mb
       << " MiB " << (options_.overlap ? "overlapped with backward" : "after backward (no overlap)");
    if (staging_) os << " through pinned host buffers";
    int flat = 0, hierarchical = 0;
    for (const auto& b : buckets_) {
      if (reducer_.algorithm_for(b.count * static_cast<int64_t>(sizeof(float))) == Algorithm::flat)
        ++flat;
      else
        ++hierarchical;
    }
    os << " (";
    if (hierarchical) os << "hierarchical x" << hierarchical << (flat ? ", " : "");
    if (flat) os << "flat x" << flat;
    char mb[32];
    std::snprintf(mb, sizeof mb, "%.2f", bytes_per_step() / 1e6);
    os << "), " << mb << " MB per step";
    return os.str();
  }

  Json options() const override {
    Json j = Json::object();
    j.set("algorithm", reducer_.requested());
    j.set("compression", compression_name(reducer_.compression()));
    j.set("bucket_mb", options_.bucket_mb);
    j.set("overlap", options_.overlap);
    j.set("calibration", reducer_.to_json());
    return j;
  }

  std::string algorithm_for(int64_t bytes) const override { return algorithm_name(reducer_.algorithm_for(bytes)); }

  void allreduce_now(float* data, int64_t count) override {
    ST_CHECK(!in_step_, "internal error: allreduce_now() during a step");
    reducer_.wait(reducer_.start(data, count));
  }

 private:
  struct Started {
    int bucket;
    AllReducer::Request request;
    double start;
  };

  // Where the all-reduces run: the staging's host mirror, or the gradients themselves.
  float* gradients() { return staging_ ? staging_->host() : grads_.flat->data<float>(); }

  // Starts every complete bucket from next_to_start_ on, in bucket order.
  void start_ready_buckets() {
    if (next_to_start_ >= static_cast<int>(buckets_.size()) || !readiness_.complete(next_to_start_)) return;
    float* grads = gradients();
    while (next_to_start_ < static_cast<int>(buckets_.size()) && readiness_.complete(next_to_start_)) {
      const GradientBucket& b = buckets_[next_to_start_];
      const double start = now_seconds();
      AllReducer::Request request;
      if (staging_) {
        // Queued now, in the order of backward's work; waited for on the communication thread.
        // The hook holds the staging too: a request outlives this reducer in an AllReducer it
        // does not own.
        staging_->copy_to_host_after_compute(b.offset, b.count);
        request = reducer_.start(grads + b.offset, b.count, [staging = staging_, offset = b.offset, count = b.count] {
          staging->wait_host(offset, count);
        });
      } else {
        request = reducer_.start(grads + b.offset, b.count);
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        started_.push_back({next_to_start_, request, start});
        ++launched_;
      }
      work_cv_.notify_one();
      ++next_to_start_;
    }
  }

  // The completion thread: waits for started buckets in order, records the communication
  // thread's busy time and averages each bucket.
  void complete_in_order() {
    float* grads = nullptr;  // looked up on the first bucket: an error there is the bucket's
    const float size = static_cast<float>(world_size_);
    double last_done = 0.0;
    for (;;) {
      Started item{};
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_cv_.wait(lock, [this] { return stop_ || !started_.empty(); });
        if (started_.empty()) return;  // stopping, nothing left
        item = started_.front();
        started_.pop_front();
      }
      try {
        reducer_.wait(item.request);
        const double done = now_seconds();
        if (grads == nullptr) grads = gradients();
        const GradientBucket& b = buckets_[item.bucket];
        // Divide rather than multiply by 1/P, as the flat reducer and PyTorch DDP: the mean is
        // correctly rounded, and the same on every rank since the sums are.
        if (world_size_ > 1) {
          float* g = grads + b.offset;
          for (int64_t i = 0; i < b.count; ++i) g[i] /= size;
        }
        // Queued before the bucket counts as completed, so finish() finds every copy queued.
        if (staging_) staging_->copy_to_device(b.offset, b.count);
        if (trace::enabled()) {
          Json args = Json::object();
          args.set("bytes", buckets_[item.bucket].count * static_cast<int64_t>(sizeof(float)));
          trace::record("allreduce bucket " + std::to_string(item.bucket), "communication", trace::kCommThread,
                        std::max(item.start, last_done), done, args);
        }
        std::unique_lock<std::mutex> lock(mutex_);
        busy_seconds_ += done - std::max(item.start, last_done);
        last_done = done;
        ++completed_;
      } catch (...) {
        std::unique_lock<std::mutex> lock(mutex_);
        error_ = std::current_exception();
        done_cv_.notify_all();
        return;  // later requests may never complete; finish() rethrows
      }
      done_cv_.notify_all();
    }
  }

  std::unique_ptr<AllReducer> owned_;  // first: destroyed after the completion thread is joined
  AllReducer& reducer_;
  const FlatLayout grads_;
  const BucketOptions options_;
  const std::shared_ptr<DeviceStaging> staging_;  // null: all-reduce flat_grads in place
  BucketReadiness readiness_;
  const std::vector<GradientBucket>& buckets_;  // readiness_'s
  int world_size_ = 1;
  int next_to_start_ = 0;
  bool in_step_ = false;

  // Shared with the completion thread.
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Started> started_;
  int64_t launched_ = 0, completed_ = 0;
  double busy_seconds_ = 0.0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread completion_thread_;
};

}  // namespace

std::unique_ptr<GradientReducer> make_bucketed_reducer(AllReducer& reducer, const FlatLayout& gradients,
                                                       const BucketOptions& options,
                                                       std::shared_ptr<DeviceStaging> staging) {
  return std::make_unique<BucketedReducer>(reducer, gradients, options, std::move(staging));
}

std::unique_ptr<GradientReducer> make_gradient_reducer(const Topology& topology, const FlatLayout& gradients,
                                                       const AllReduceOptions& allreduce_options,
                                                       const BucketOptions& bucket_options,
                                                       std::shared_ptr<DeviceStaging> staging) {
  auto allreducer = std::make_unique<AllReducer>(topology, allreduce_options);
  AllReducer& ref = *allreducer;
  return std::make_unique<BucketedReducer>(ref, gradients, bucket_options, std::move(staging), std::move(allreducer));
}

}  // namespace scaletrain::comm
