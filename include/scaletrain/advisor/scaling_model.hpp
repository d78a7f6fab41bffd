// The scaling model (docs/scaling-model.md has each formula and its source): a step's time on P
// ranks is compute (forward, backward and optimizer at the per-rank batch, from the
// calibration's batch curves) + the all-reduce time left exposed after overlapping the buckets
// with backward + the wait for input the pipeline cannot hide.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scaletrain/advisor/calibration.hpp"
#include "scaletrain/advisor/machine.hpp"
#include "scaletrain/core/json.hpp"

namespace scaletrain::advisor {

// ring: one ring over all ranks; tree: chains inside the nodes and a binary tree between them
// (NCCL's tree); hierarchical: reduce-scatter in the node, all-reduce across nodes on 1/G of
// the data per rank (all G at once), all-gather in the node (Horovod's, and scaletrain's).
enum class Algorithm { ring, tree, hierarchical };
const char* algorithm_name(Algorithm a);
Algorithm algorithm_from_name(const std::string& name);  // throws UsageError naming the value
const std::vector<Algorithm>& all_algorithms();

// Seconds to all-reduce `bytes` over nodes x ranks_per_node ranks with algorithm `a`.
double allreduce_seconds(Algorithm a, const Machine& m, int nodes, int ranks_per_node, double bytes);

// Buckets overlapped with backward: bucket k (backward order) starts when it is ready and the
// one before it has finished; times from backward's start. exposed_s: what remains after
// backward ends.
struct Overlap {
  double comm_s = 0.0;     // the buckets' all-reduce times, summed
  double exposed_s = 0.0;  // max(0, end of the last bucket - backward_s)
};
Overlap overlap_buckets(double backward_s, const std::vector<double>& ready_s, const std::vector<double>& comm_s);

struct Point {
  int gpus = 1;  // ranks
  int nodes = 1;
  int ranks_per_node = 1;
  double per_rank_batch = 0.0;
  double global_batch = 0.0;
  std::string algorithm;  // the one used (the cheapest, unless forced); "none" on one rank
  double forward_s = 0.0, backward_s = 0.0, optimizer_s = 0.0, compute_s = 0.0;
  double comm_s = 0.0, exposed_comm_s = 0.0, data_wait_s = 0.0, step_s = 0.0;
  double samples_per_s = 0.0, epoch_s = 0.0;
  double speedup = 1.0, efficiency = 1.0;  // against the first point of its series
};

// One configuration: `gpus` ranks (a divisor of the node's GPUs, or whole nodes) at a per-rank
// batch; the algorithm is the one with the least exposed time unless `forced`.
Point predict_point(const Calibration& c, const Machine& m, int gpus, double per_rank_batch,
                    std::optional<Algorithm> forced = std::nullopt);

enum class Scaling { strong, weak };
// strong: the global batch of `batch` per rank on the first point, split over more ranks;
// weak: `batch` per rank at every point. Fills speedup and efficiency against the first point.
// A strong series ends before the first count that would leave a rank less than one sample.
std::vector<Point> predict_series(const Calibration& c, const Machine& m, Scaling s, const std::vector<int>& gpus,
                                  double batch, std::optional<Algorithm> forced = std::nullopt);

// The largest GPU count of a series whose efficiency is at least `threshold`; 0 if none.
int largest_efficient(const std::vector<Point>& series, double threshold);

// A budget of GPUs as one wide job or as k narrower independent jobs of budget/k GPUs each, every
// job training with the same global batch `job_batch` (its hyperparameters do not change with the
// GPUs it gets, so a narrow job has more samples per GPU): the total throughput of each choice.
// Splits: k = 1, 2, 4 .. jobs whose budget/k GPUs are a divisor of a node's GPUs or whole nodes,
// with at least one sample per GPU. `forced`: the algorithm every job uses (else the cheapest).
struct Sharing {
  int jobs = 1;
  int gpus_per_job = 1;
  double per_gpu_batch = 0.0;
  double samples_per_s = 0.0;  // all jobs together
  double vs_one_job = 1.0;
};
std::vector<Sharing> share_budget(const Calibration& c, const Machine& m, int budget_gpus, double job_batch,
                                  std::optional<Algorithm> forced = std::nullopt);

Json to_json(const Point& p);
Json to_json(const Sharing& s);

}  // namespace scaletrain::advisor
