// GradientReducer: the trainer's only view of gradient communication. It is told when each
// parameter's gradient is complete during backward (on_grad_ready) and, before the optimizer
// step, waits until the flat gradient buffer holds the average over all ranks (finish).
// Two implementations:
//   flat:     one MPI all-reduce of the whole buffer after backward (the simple baseline);
//   bucketed: gradients fused into buckets of consecutive parameters in backward order, each
//             all-reduced by an AllReducer (flat / hierarchical / auto) on its communication
//             thread as soon as the bucket is complete, overlapped with the rest of backward.
// Either reducer may stage: given a DeviceStaging (the flat gradients on a GPU), every bucket is
// copied to the staging's host mirror once backward has written it, all-reduced and averaged
// there, and copied back; finish() then returns with the compute stream ordered after those
// copies (the optimizer's ops read the averages), not with the device synchronized.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scaletrain/backend/device_staging.hpp"
#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/tensor/flat_layout.hpp"

namespace scaletrain::comm {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual std::string name() const = 0;
  // Called once per step before backward starts.
  virtual void begin_step() {}
  // Called during backward when parameter `index`'s gradient is written.
  virtual void on_grad_ready(int index) { (void)index; }
  // Returns when the flat gradients holds the mean over ranks; the time spent waiting here
  // is the exposed communication time.
  virtual void finish() = 0;
  // Bytes all-reduced per step (for the report).
  virtual int64_t bytes_per_step() const = 0;
  // For the report: how the gradients are communicated (algorithm, buckets).
  virtual Json layout() const = 0;
  // Seconds spent all-reducing over the whole run, as the implementation documents it (flat:
  // the blocking MPI call; bucketed: the communication thread's busy time).
  virtual double communication_seconds() const = 0;
  // The exposed part of it as the device saw it (the NCCL reducer: from the end of backward on the
  // compute stream to the last bucket's end on the communication stream, CUDA events), or < 0
  // where the host's wait in finish() is the measure (the MPI reducers, whose finish() waits for
  // the sums).
  virtual double exposed_seconds() const { return -1.0; }
  // One line for the start-up log: algorithm, compression, buckets and overlap.
  virtual std::string describe() const = 0;
  // For report.json's allreduce_options: the settings, and how the algorithm was chosen.
  virtual Json options() const = 0;
  // The algorithm a message of `bytes` (fp32) uses: "flat", "hierarchical" or "mpi".
  virtual std::string algorithm_for(int64_t bytes) const = 0;
  // Sums `count` floats over ranks in place with that algorithm, blocking; only between steps
  // (the pre-flight). Collective.
  virtual void allreduce_now(float* data, int64_t count) = 0;
  // Where allreduce_now's data is best placed: host memory for the MPI reducers (staged or not),
  // the GPU for the NCCL reducer.
  virtual Device data_device() const { return Device::cpu; }
  // "" while the transport is well, else what failed on it (NCCL's asynchronous errors); any
  // thread (the stall watchdog polls it). The MPI reducers report their errors where they occur.
  virtual std::string communication_error() const { return ""; }
};

// One MPI all-reduce of the whole flat gradient buffer after backward, then divide by size.
// `staging` (a mirror of the flat gradients): copy all to the host, all-reduce and divide there,
// copy back. Required when the gradients are not on the CPU.
std::unique_ptr<GradientReducer> make_flat_reducer(const Communicator& comm, const FlatLayout& gradients,
                                                   std::shared_ptr<DeviceStaging> staging = nullptr);

struct BucketOptions {
  // Bucket capacity in MiB (2^20 bytes), as PyTorch DDP's bucket_cap_mb (default 25 there too).
  double bucket_mb = 25.0;
  // true: a bucket's all-reduce starts during backward as soon as it is complete; false: every
  // bucket starts in finish(), after backward (the baseline the overlap is measured against).
  bool overlap = true;
};

// One bucket: parameters (the layout's segments) first_param..last_param (forward registration
// order, inclusive), i.e.
// elements [offset, offset + count) of the flat gradients. Buckets are numbered in backward
// order: bucket 0 holds the last parameters registered (the first gradients backward writes).
struct GradientBucket {
  int first_param = 0;
  int last_param = 0;
  int64_t offset = 0;  // elements
  int64_t count = 0;   // elements
};

// The bucket plan: walking the parameters from the last registered to the first, a parameter
// joins the current bucket while the bucket stays within bucket_mb; otherwise it starts a new
// bucket. A parameter larger than a bucket thus gets a bucket of its own. bucket_mb must be > 0.
std::vector<GradientBucket> plan_buckets(const FlatLayout& gradients, double bucket_mb);

// Bucketed, optionally overlapped reducer on `reducer` (which must outlive it, as must the
// gradients' buffer; the layout is copied). Buckets start in bucket order on every rank (a complete bucket waits for
// the ones before it), so every rank starts the same sequence of all-reduces even if gradients arrive in another order.
// finish() throws a clear error naming any parameter never marked ready. `staging` (a mirror of the flat gradients,
// DeviceStaging::create): every bucket is all-reduced through it; required when the gradients are not on the CPU.
std::unique_ptr<GradientReducer> make_bucketed_reducer(AllReducer& reducer, const FlatLayout& gradients,
                                                       const BucketOptions& options = {},
                                                       std::shared_ptr<DeviceStaging> staging = nullptr);

// The trainer's reducer: an AllReducer over `topology` (its communication thread; auto
// calibrates here, collectively) owned by a bucketed reducer on the gradients (whose buffer must
// outlive it).
std::unique_ptr<GradientReducer> make_gradient_reducer(const Topology& topology, const FlatLayout& gradients,
                                                       const AllReduceOptions& allreduce_options,
                                                       const BucketOptions& bucket_options,
                                                       std::shared_ptr<DeviceStaging> staging = nullptr);

// The reducer of a one-rank run on a GPU: the mean over one rank is the gradient itself, so
// nothing is copied to the host, all-reduced or copied back (a ResNet-50 step would otherwise move
// its 102 MB of gradients out and in for nothing). It still checks at finish() that backward
// announced every gradient, as a bucketed reducer's missing bucket would. Its report says "none".
std::unique_ptr<GradientReducer> make_single_rank_reducer(const FlatLayout& gradients);

}  // namespace scaletrain::comm
