// The scaling model (scaling_model.hpp). Every formula here is written out, with its source, in
// docs/scaling-model.md; the names below follow it: P ranks = N nodes x L ranks per node, S bytes,
// alpha and B of a level (Machine::intra, Machine::inter).
#include "scaletrain/advisor/scaling_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "scaletrain/core/error.hpp"

namespace scaletrain::advisor {
namespace {

// Ring all-reduce over n ranks on one kind of link: 2(n-1) steps, each moving S/n bytes.
double ring(int n, const Link& link, double bytes) {
  if (n <= 1) return 0.0;
  return 2.0 * (n - 1) * link.alpha_s + 2.0 * (n - 1) / n * bytes / link.bandwidth_Bps;
}

// Reduce-scatter (or all-gather) over n ranks: half a ring.
double half_ring(int n, const Link& link, double bytes) { return ring(n, link, bytes) / 2.0; }

// A ring that crosses nodes runs each step at the pace of its slowest link.
Link slowest(const Link& a, const Link& b) {
  return {std::max(a.alpha_s, b.alpha_s), std::min(a.bandwidth_Bps, b.bandwidth_Bps)};
}

double ceil_log2(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(n))); }

}  // namespace

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::ring:
      return "ring";
    case Algorithm::tree:
      return "tree";
    default:
      return "hierarchical";
  }
}

Algorithm algorithm_from_name(const std::string& name) {
  for (Algorithm a : all_algorithms())
    if (name == algorithm_name(a)) return a;
  throw UsageError("unknown all-reduce algorithm '" + name + "' (ring, tree or hierarchical)");
}

const std::vector<Algorithm>& all_algorithms() {
  static const std::vector<Algorithm> all{Algorithm::ring, Algorithm::tree, Algorithm::hierarchical};
  return all;
}

double allreduce_seconds(Algorithm a, const Machine& m, int nodes, int ranks_per_node, double bytes) {
  ST_CHECK(nodes >= 1 && ranks_per_node >= 1, "internal error: all-reduce over " << nodes << " x " << ranks_per_node);
  const int n = nodes, l = ranks_per_node;
  if (n * l == 1) return 0.0;
  switch (a) {
    case Algorithm::ring:
      return n == 1 ? ring(l, m.intra, bytes) : ring(n * l, slowest(m.intra, m.inter), bytes);
    case Algorithm::tree: {
      // Pipelined chains inside the nodes and a binary tree between them, reduce then broadcast:
      // the latency of the depth of the tree, the bandwidth of sending S up and S down once.
      const Link link = n == 1 ? m.intra : slowest(m.intra, m.inter);
      return 2.0 * (l - 1) * m.intra.alpha_s + 2.0 * ceil_log2(n) * m.inter.alpha_s + 2.0 * bytes / link.bandwidth_Bps;
    }
    default: {
      if (n == 1) return ring(l, m.intra, bytes);
      // In the node: reduce-scatter, then all-gather, over L ranks. Across nodes: the L ranks of
      // a node each all-reduce their S/L share at once, sharing the node's bandwidth, so the
      // node moves as much as one rank's ring of S would. Host staging copies S/L each way.
      const double in_node = 2.0 * half_ring(l, m.intra, bytes);
      const double across = 2.0 * (n - 1) * m.inter.alpha_s + 2.0 * (n - 1) / n * bytes / m.inter.bandwidth_Bps;
      const double staging = m.host_copy_Bps > 0 ? 2.0 * bytes / l / m.host_copy_Bps : 0.0;
      return in_node + across + staging;
    }
  }
}

Overlap overlap_buckets(double backward_s, const std::vector<double>& ready_s, const std::vector<double>& comm_s) {
  ST_CHECK(ready_s.size() == comm_s.size(),
           "internal error: " << ready_s.size() << " ready times for " << comm_s.size() << " buckets");
  Overlap o;
  double end = 0.0;
  for (std::size_t k = 0; k < ready_s.size(); ++k) {
    end = std::max(ready_s[k], end) + comm_s[k];  // waits for its gradients and the bucket before it
    o.comm_s += comm_s[k];
  }
  o.exposed_s = std::max(0.0, end - backward_s);
  return o;
}

namespace {

// The ranks' layout of `gpus` on the machine: within one node, or whole nodes.
void place(const Machine& m, int gpus, Point& p) {
  ST_CHECK(gpus >= 1, "a prediction needs at least 1 GPU, not " << gpus);
  if (gpus <= m.gpus_per_node) {
    p.nodes = 1;
    p.ranks_per_node = gpus;
  } else {
    if (gpus % m.gpus_per_node != 0)
      throw UsageError(std::to_string(gpus) + " GPUs do not fill whole nodes of " + std::to_string(m.gpus_per_node) +
                       " on " + m.name);
    p.nodes = gpus / m.gpus_per_node;
    p.ranks_per_node = m.gpus_per_node;
  }
  p.gpus = gpus;
}

// The exposed communication of one algorithm for the calibration's buckets at this point.
Overlap communication(const Calibration& c, const Machine& m, const Point& p, Algorithm a) {
  std::vector<double> ready, comm;
  for (const BucketTiming& b : c.buckets) {
    ready.push_back(b.ready_fraction * p.backward_s);
    comm.push_back(allreduce_seconds(a, m, p.nodes, p.ranks_per_node, static_cast<double>(b.bytes)));
  }
  return overlap_buckets(p.backward_s, ready, comm);
}

}  // namespace

Point predict_point(const Calibration& c, const Machine& m, int gpus, double per_rank_batch,
                    std::optional<Algorithm> forced) {
  Point p;
  place(m, gpus, p);
  if (!(per_rank_batch >= 1.0))
    throw UsageError("a per-rank batch of " + std::to_string(per_rank_batch) + " on " + std::to_string(gpus) +
                     " GPUs: less than one sample per rank");
  p.per_rank_batch = per_rank_batch;
  p.global_batch = per_rank_batch * gpus;
  p.forward_s = c.forward.at(per_rank_batch);
  p.backward_s = c.backward.at(per_rank_batch);
  p.optimizer_s = c.optimizer_s;
  p.compute_s = p.forward_s + p.backward_s + p.optimizer_s;
  p.algorithm = "none";
  if (gpus > 1) {
    double best = std::numeric_limits<double>::infinity();
    for (Algorithm a : all_algorithms()) {
      if (forced && a != *forced) continue;
      const Overlap o = communication(c, m, p, a);
      // Least exposed time; among equals (all hidden), the least traffic.
      const double cost = o.exposed_s + 1e-9 * o.comm_s;
      if (cost < best) {
        best = cost;
        p.algorithm = algorithm_name(a);
        p.comm_s = o.comm_s;
        p.exposed_comm_s = o.exposed_s;
      }
    }
  }
  const double busy = p.compute_s + p.exposed_comm_s;
  // The loader prepares the next batches while the step runs: only what it cannot hide waits.
  if (c.input_samples_per_s > 0) p.data_wait_s = std::max(0.0, per_rank_batch / c.input_samples_per_s - busy);
  p.step_s = busy + p.data_wait_s;
  p.samples_per_s = p.global_batch / p.step_s;
  p.epoch_s = static_cast<double>(c.train_samples) / p.samples_per_s;
  return p;
}

std::vector<Point> predict_series(const Calibration& c, const Machine& m, Scaling s, const std::vector<int>& gpus,
                                  double batch, std::optional<Algorithm> forced) {
  std::vector<Point> series;
  if (gpus.empty()) return series;
  const double global = batch * gpus.front();
  for (int g : gpus) {
    const double per_rank = s == Scaling::weak ? batch : global / g;
    if (per_rank < 1.0) break;  // strong scaling ends where a GPU would get less than one sample
    series.push_back(predict_point(c, m, g, per_rank, forced));
  }
  const Point& first = series.front();
  for (Point& p : series) {
    p.speedup = p.samples_per_s / first.samples_per_s;
    p.efficiency = p.speedup / (static_cast<double>(p.gpus) / first.gpus);
  }
  return series;
}

int largest_efficient(const std::vector<Point>& series, double threshold) {
  int best = 0;
  for (const Point& p : series)
    if (p.efficiency >= threshold) best = std::max(best, p.gpus);
  return best;
}

std::vector<Sharing> share_budget(const Calibration& c, const Machine& m, int budget_gpus, double job_batch,
                                  std::optional<Algorithm> forced) {
  std::vector<Sharing> choices;
  for (int jobs = 1; jobs <= budget_gpus; jobs *= 2) {
    if (budget_gpus % jobs != 0) break;
    const int per_job = budget_gpus / jobs;
    const bool placeable = per_job <= m.gpus_per_node ? m.gpus_per_node % per_job == 0 : per_job % m.gpus_per_node == 0;
    if (!placeable || job_batch / per_job < 1.0) continue;
    Sharing s;
    s.jobs = jobs;
    s.gpus_per_job = per_job;
    s.per_gpu_batch = job_batch / per_job;
    s.samples_per_s = jobs * predict_point(c, m, per_job, s.per_gpu_batch, forced).samples_per_s;
    choices.push_back(s);
  }
  if (choices.empty()) {
    std::ostringstream os;
    os << "no way to share " << budget_gpus << " GPUs on nodes of " << m.gpus_per_node
       << " between jobs with a global batch of " << job_batch << " (at least one sample per GPU)";
    throw UsageError(os.str());
  }
  for (Sharing& s : choices) s.vs_one_job = s.samples_per_s / choices.front().samples_per_s;
  return choices;
}

Json to_json(const Point& p) {
  Json j = Json::object();
  j.set("gpus", p.gpus);
  j.set("nodes", p.nodes);
  j.set("ranks_per_node", p.ranks_per_node);
  j.set("per_rank_batch", p.per_rank_batch);
  j.set("global_batch", p.global_batch);
  j.set("algorithm", p.algorithm);
  j.set("forward_s", p.forward_s);
  j.set("backward_s", p.backward_s);
  j.set("optimizer_s", p.optimizer_s);
  j.set("compute_s", p.compute_s);
  j.set("comm_s", p.comm_s);
  j.set("exposed_comm_s", p.exposed_comm_s);
  j.set("data_wait_s", p.data_wait_s);
  j.set("step_s", p.step_s);
  j.set("samples_per_s", p.samples_per_s);
  j.set("epoch_s", p.epoch_s);
  j.set("speedup", p.speedup);
  j.set("efficiency", p.efficiency);
  return j;
}

Json to_json(const Sharing& s) {
  Json j = Json::object();
  j.set("jobs", s.jobs);
  j.set("gpus_per_job", s.gpus_per_job);
  j.set("per_gpu_batch", s.per_gpu_batch);
  j.set("samples_per_s", s.samples_per_s);
  j.set("vs_one_job", s.vs_one_job);
  return j;
}

}  // namespace scaletrain::advisor
