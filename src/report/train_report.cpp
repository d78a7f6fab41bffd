// report.json of a training run (train_report.hpp). The key order follows docs/report.md: the
// run and its results first, then communication, timing, input and checkpoints.
#include "scaletrain/report/train_report.hpp"

#include <algorithm>

#include "scaletrain/config.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/report/provenance.hpp"
#include "scaletrain/report/summary.hpp"

namespace scaletrain::report {
namespace {

Json optional_number(double v) { return v >= 0 ? Json(v) : Json(); }

// Total and exposed all-reduce time, per rank, over the segment and per step. Total: the
// communication thread's busy time (the NCCL reducer: its stream's, by CUDA events); exposed: the
// wait after backward (the allreduce phase; the NCCL reducer: the compute stream's, by events).
Json allreduce_time(const comm::Communicator& comm, const TrainSummary& s) {
  const int64_t steps_timed = std::max<int64_t>(1, s.timers->count(Phase::allreduce));
  // The NCCL reducer measures its exposed time on the GPU (its finish() does not wait for the sums).
  const double gpu_exposed = s.reducer->exposed_seconds();
  const double busy = s.reducer->communication_seconds();
  const double exposed = gpu_exposed >= 0 ? gpu_exposed : s.timers->total(Phase::allreduce);
  Json t = Json::object();
  t.set("steps", s.timers->count(Phase::allreduce));
  t.set("total_s", stats_over_ranks(comm, busy));
  t.set("per_step_s", stats_over_ranks(comm, busy / steps_timed));
  t.set("exposed_total_s", stats_over_ranks(comm, exposed));
  t.set("exposed_per_step_s", stats_over_ranks(comm, exposed / steps_timed));
  t.set("measured_by", gpu_exposed >= 0 ? "cuda events" : "host clock");
  return t;
}

// The q-quantile (0..1) of sorted values, by linear interpolation between closest ranks (numpy's
// default), so that p50 of an even count is the mean of the middle two.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// Each rank's distribution of step times in this segment, with its host: a slow node stands out
// in p50 (always slow) or p95/max (hiccups). The first step is left out: it carries the
// warm-up (allocations, first reads), which is start-up, not the rank's speed.
Json step_time(const comm::Communicator& comm, const TrainSummary& s) {
  std::vector<double> t(s.step_seconds->begin() + std::min<std::size_t>(1, s.step_seconds->size()),
                        s.step_seconds->end());
  std::sort(t.begin(), t.end());
  double mean = 0.0;
  for (double v : t) mean += v;
  mean /= std::max<std::size_t>(1, t.size());
  // One gather of this rank's five numbers: row r of `all` is rank r's.
  constexpr int kStats = 5;
  const std::vector<double> all = comm.allgather(std::vector<double>{
      static_cast<double>(t.size()), mean, quantile(t, 0.5), quantile(t, 0.95), t.empty() ? 0.0 : t.back()});
  Json per_rank = Json::array();
  std::vector<double> p50;
  for (int r = 0; r < comm.size(); ++r) {
    const double* row = &all[static_cast<std::size_t>(r) * kStats];
    Json j = Json::object();
    j.set("rank", r);
    j.set("host", s.hosts.at(r));
    j.set("steps", static_cast<int64_t>(row[0]));
    j.set("mean_s", row[1]);
    j.set("p50_s", row[2]);
    j.set("p95_s", row[3]);
    j.set("max_s", row[4]);
    per_rank.push_back(j);
    p50.push_back(row[2]);
  }
  std::sort(p50.begin(), p50.end());
  Json out = Json::object();
  out.set("excluded", "the segment's first step (warm-up)");
  out.set("median_p50_s", quantile(p50, 0.5));
  out.set("per_rank", per_rank);
  return out;
}

// Where a step's time goes, per optimizer step and as the mean over ranks: compute (forward,
// backward, optimizer), exposed communication (waiting for gradients after backward) and data
// wait. The parts add up to step_s but for the bookkeeping between phases. Like step_time, it
// leaves out the segment's first step (the warm-up), unless that is the only one.
Json step_split(const comm::Communicator& comm, const TrainSummary& s) {
  const PhaseTimers& t = *s.timers;
  const std::vector<double>& times = *s.step_seconds;
  const bool skip_first = times.size() > 1;
  const PhaseTimers none;
  const PhaseTimers& w = skip_first ? *s.first_step_timers : none;
  const double steps = static_cast<double>(std::max<std::size_t>(1, times.size() - (skip_first ? 1 : 0)));
  const auto per_step = [&](Phase p) { return (t.total(p) - w.total(p)) / steps; };
  const auto mean_over_ranks = [&](double v) { return stats_over_ranks(comm, v).at("mean").as_double(); };
  Json j = Json::object();
  j.set("step_s", mean_over_ranks((s.segment_train_s - (skip_first ? times.front() : 0.0)) / steps));
  j.set("compute_s",
        mean_over_ranks(per_step(Phase::forward) + per_step(Phase::backward) + per_step(Phase::optimizer)));
  j.set("exposed_comm_s", mean_over_ranks(per_step(Phase::allreduce)));
  j.set("data_wait_s", mean_over_ranks(per_step(Phase::data_wait)));
  return j;
}

Json throughput(const comm::Communicator& comm, const TrainSummary& s) {
  const double my_rate = s.segment_samples / std::max(s.segment_train_s, 1e-9);
  Json t = Json::object();
  t.set("samples_per_s", s.samples_trained / std::max(s.train_time_s, 1e-9));
  // Translation counts tokens too (MLPerf's Transformer throughput): both rates.
  if (s.work_unit != "samples") {
    t.set("unit", s.work_unit);
    t.set(s.work_unit + "_per_s", s.units_trained / std::max(s.train_time_s, 1e-9));
  }
  t.set("per_rank_samples_per_s", Json::array_of(comm.allgather(my_rate)));
  t.set("per_rank_summary", stats_over_ranks(comm, my_rate));
  return t;
}

// Input pipeline, per rank: how long steps waited for their batch, and what was read.
Json input_pipeline(const comm::Communicator& comm, const TrainSummary& s) {
  const int64_t steps_timed = std::max<int64_t>(1, s.timers->count(Phase::data_wait));
  const double wait = s.timers->total(Phase::data_wait), seconds = std::max(s.segment_train_s, 1e-9);
  Json d = s.input;
  d.set("steps", s.timers->count(Phase::data_wait));
  d.set("wait_total_s", stats_over_ranks(comm, wait));
  d.set("wait_per_step_s", stats_over_ranks(comm, wait / steps_timed));
  d.set("wait_fraction", stats_over_ranks(comm, wait / seconds));
  const double bytes = static_cast<double>(s.bytes_read);
  d.set("bytes_read", stats_over_ranks(comm, bytes));
  d.set("per_rank_bytes_read", Json::array_of(comm.allgather(bytes)));
  d.set("read_mb_per_s", stats_over_ranks(comm, bytes / 1e6 / seconds));
  // Samples dropped by --skip-bad-samples (null without it): the total over ranks and per rank.
  if (s.skip_bad_samples) {
    const int64_t total = comm.allreduce_sum(s.skipped_samples);
    d.set("skipped_samples", total);
    d.set("per_rank_skipped_samples", Json::array_of(comm.allgather(static_cast<double>(s.skipped_samples))));
    if (total > 0) ST_LOG("skipped " << total << " bad sample" << (total == 1 ? "" : "s") << " (--skip-bad-samples)");
  } else {
    d.set("skipped_samples", Json());
    d.set("per_rank_skipped_samples", Json());
  }
  return d;
}

}  // namespace

namespace {
// A CPU run's tensor memory: rank 0's peak in use, and each rank's peak (in use, as nothing is
// cached) with their maximum, as a GPU run's peak_memory_bytes gives its allocator's.
void set_memory_peaks(const comm::Communicator& comm, const TrainSummary& s, Json& d) {
  const std::vector<double> peaks = comm.allgather(std::vector<double>{static_cast<double>(s.peak_memory_bytes)});
  Json per_rank = Json::array();
  for (double p : peaks) per_rank.push_back(static_cast<int64_t>(p));
  d.set("peak_in_use_bytes", s.peak_in_use_bytes);
  d.set("peak_memory_bytes", static_cast<int64_t>(*std::max_element(peaks.begin(), peaks.end())));
  if (s.allocations_after_first_step >= 0) d.set("allocations_after_first_step", s.allocations_after_first_step);
  d.set("per_rank_peak_memory_bytes", per_rank);
}
}  // namespace

// Ranks that share a GPU share its energy: it is counted once, as the lowest of them read it, and
// its per-sample figure counts the samples of all of them.
Json device_report(const comm::Communicator& comm, const TrainSummary& s) {
  Json d = Json::object();
  d.set("kind", s.device_kind);
  if (s.device_kind != "cuda") {
    set_memory_peaks(comm, s, d);
    return d;
  }
  for (const auto& [key, value] : s.gpu.items()) d.set(key, value);
  d.set("peak_in_use_bytes", s.peak_in_use_bytes);
  d.set("allocations_after_first_step",
        s.allocations_after_first_step >= 0 ? Json(s.allocations_after_first_step) : Json());
  const std::vector<RankStats> gpu_time = phase_stats(comm, *s.gpu_timers);
  Json phases = Json::object();
  for (Phase p : {Phase::forward, Phase::backward, Phase::optimizer}) {
    const RankStats& t = gpu_time[static_cast<std::size_t>(p)];
    Json j = Json::object();
    j.set("min_s", t.min);
    j.set("mean_s", t.mean);
    j.set("max_s", t.max);
    j.set("slowest_rank", t.slowest_rank);
    // Per step without the first (the warm-up), this rank's, where there was more than one step.
    const int64_t count = s.gpu_timers->count(p);
    if (s.first_step_gpu_timers != nullptr && count > 1)
      j.set("per_step_after_first_s",
            (s.gpu_timers->total(p) - s.first_step_gpu_timers->total(p)) / static_cast<double>(count - 1));
    phases.set(phase_name(p), j);
  }
  d.set("phases", phases);
  // One gather of this rank's three numbers (row r of `all` is rank r's), then its GPU (host and
  // PCI bus id) and why its energy was not read.
  constexpr int kValues = 3;
  const std::vector<double> all = comm.allgather(std::vector<double>{
      static_cast<double>(s.peak_memory_bytes), s.energy_joules, static_cast<double>(s.segment_samples)});
  const std::vector<std::string> gpu_of = comm.allgather(s.hosts.at(comm.rank()) + " " + s.gpu_pci_bus_id);
  const std::vector<std::string> reasons = comm.allgather(s.energy_reason);
  Json peaks = Json::array();
  double peak = 0.0;
  for (int r = 0; r < comm.size(); ++r) {
    peaks.push_back(static_cast<int64_t>(all[static_cast<std::size_t>(r) * kValues]));
    peak = std::max(peak, all[static_cast<std::size_t>(r) * kValues]);
  }
  d.set("peak_memory_bytes", static_cast<int64_t>(peak));
  d.set("per_rank_peak_memory_bytes", peaks);
  Json gpus = Json::array();
  double joules = 0.0, samples = 0.0;
  std::string missing;  // the first reason a GPU's energy was not read
  for (int r = 0; r < comm.size(); ++r) {
    if (std::find(gpu_of.begin(), gpu_of.begin() + r, gpu_of[r]) != gpu_of.begin() + r) continue;  // counted
    Json ranks = Json::array();
    double gpu_samples = 0.0;
    for (int q = r; q < comm.size(); ++q)
      if (gpu_of[q] == gpu_of[r]) {
        ranks.push_back(q);
        gpu_samples += all[static_cast<std::size_t>(q) * kValues + 2];
      }
    const double e = all[static_cast<std::size_t>(r) * kValues + 1];
    Json g = Json::object();
    g.set("host", s.hosts.at(r));
    g.set("pci_bus_id", gpu_of[r].substr(s.hosts.at(r).size() + 1));
    g.set("ranks", ranks);
    g.set("energy_joules", e >= 0 ? Json(e) : Json());
    g.set("joules_per_sample", e >= 0 && gpu_samples > 0 ? Json(e / gpu_samples) : Json());
    g.set("energy_unavailable", e >= 0 ? Json() : Json(reasons[r]));
    gpus.push_back(g);
    if (e >= 0) {
      joules += e;
      samples += gpu_samples;
    } else if (missing.empty()) {
      missing = "rank " + std::to_string(r) + ": " + reasons[r];
    }
  }
  // Totals only where every GPU was read: a partial sum would pass for the run's energy.
  d.set("energy_joules", missing.empty() ? Json(joules) : Json());
  d.set("energy_joules_per_sample", missing.empty() && samples > 0 ? Json(joules / samples) : Json());
  d.set("energy_unavailable", missing.empty() ? Json() : Json(missing));
  d.set("gpus", gpus);
  return d;
}

namespace {

Json checkpoints(const CheckpointTotals& t) {
  Json c = Json::object();
  c.set("written", t.written);
  c.set("seconds", t.seconds);
  c.set("bytes", t.bytes);
  c.set("mb_per_s", t.seconds > 0 ? Json(t.bytes / 1e6 / t.seconds) : Json());
  c.set("last", t.last.empty() ? Json() : Json(t.last));
  return c;
}

}  // namespace

Json build_train_report(const comm::Communicator& comm, const TrainSummary& s) {
  Json r = Json::object();
  r.set("scaletrain_version", SCALETRAIN_VERSION);
  r.set("command", "train");
  r.set("status", s.status);
  r.set("model", s.model);
  r.set("task", s.task);
  r.set("quality_metric", s.quality_metric);
  r.set("parameters", s.parameters);
  r.set("world_size", comm.size());
  r.set("hosts", Json::array_of(s.hosts));
  r.set("threads_per_rank", s.threads_per_rank);
  r.set("device", device_report(comm, s));
  r.set("config", s.config);
  r.set("dataset", s.dataset);
  r.set("global_batch_size", s.global_batch);
  r.set("accumulate_steps", s.accumulate_steps);
  r.set("optimizer", s.optimizer.at("name"));
  r.set("optimizer_options", s.optimizer);
  r.set("precision", s.precision);
  r.set("activation_dtype", s.activation_dtype);
  r.set("fuse", s.fuse);
  if (!s.loss_scale.is_null()) r.set("loss_scale", s.loss_scale);
  r.set("steps_per_epoch", s.steps_per_epoch);
  r.set("steps", s.steps);
  r.set("samples_trained", s.samples_trained);
  r.set("segments", s.segments);
  r.set("restarts", static_cast<int64_t>(std::max<std::size_t>(s.segments.size(), 1) - 1));
  r.set("start_time_unix_ms", s.start_time_unix_ms);
  r.set("epochs", s.epochs);
  r.set("final_val_accuracy", optional_number(s.final_val_accuracy));
  r.set("target_accuracy", s.target_accuracy > 0 ? Json(s.target_accuracy) : Json());
  r.set("time_to_target_s", optional_number(s.time_to_target_s));
  r.set("train_time_s", s.train_time_s);
  r.set("total_time_s", s.total_time_s);
  r.set("time_per_epoch_s",
        s.steps > 0 ? Json(s.train_time_s * static_cast<double>(s.steps_per_epoch) / s.steps) : Json());
  r.set("throughput", throughput(comm, s));
  r.set("step_time", step_time(comm, s));
  r.set("step_split", step_split(comm, s));
  if (!s.op_times.is_null()) r.set("op_times", s.op_times);
  r.set("phases", phase_summary(comm, *s.timers));
  Json options = s.reducer->options();
  for (const auto& [key, value] : s.transports.items()) options.set(key, value);
  r.set("allreduce", options.at("algorithm"));
  r.set("allreduce_bytes_per_step", s.reducer->bytes_per_step());
  r.set("allreduce_options", options);
  r.set("topology", s.topology);
  r.set("bucket_layout", s.reducer->layout());
  r.set("allreduce_time", allreduce_time(comm, s));
  r.set("preflight", s.preflight);
  r.set("data", input_pipeline(comm, s));
  r.set("staging", s.staging);
  r.set("checkpoint", s.checkpoints.last.empty() ? Json() : Json(s.checkpoints.last));
  r.set("checkpoints", checkpoints(s.checkpoints));
  r.set("provenance", provenance());
  return r;
}

}  // namespace scaletrain::report
