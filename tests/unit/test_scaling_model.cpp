// The scaling model's algebra (advisor/scaling_model.hpp) against cases computed by hand from the
// formulas in docs/scaling-model.md: the numbers in the comments are the hand computation, the
// literals the result of it. Also: fits that recover the known parameters synthetic
// measurements were made from, and the errors a user can cause with a calibration or a machine.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "scaletrain/advisor/calibration.hpp"
#include "scaletrain/advisor/machine.hpp"
#include "scaletrain/advisor/scaling_model.hpp"
#include "scaletrain/core/error.hpp"

using namespace scaletrain::advisor;
namespace tt = boost::test_tools;
namespace fs = std::filesystem;

namespace {

// alpha 10 us and 100 GB/s inside a node of 8; alpha 5 us and 40 GB/s between nodes.
Machine two_level_machine() {
  Machine m;
  m.name = "test machine";
  m.gpus_per_node = 8;
  m.intra = {10e-6, 100e9};
  m.inter = {5e-6, 40e9};
  return m;
}

// forward 2 ms + 0.1 ms/sample, backward 4 ms + 0.2 ms/sample, optimizer 1 ms; 100 MB of
// gradients in two buckets of 40 MB (ready at 50% of backward) and 60 MB (at the end).
Calibration test_calibration() {
  Calibration c;
  c.model = "resnet50";
  c.device = "test";
  c.precision = "fp32";
  c.source = "hand-written for the test";
  c.points = {{32, 5.2e-3, 10.4e-3, 1e-3}, {64, 8.4e-3, 16.8e-3, 1e-3}};
  c.forward = {2e-3, 0.1e-3};
  c.backward = {4e-3, 0.2e-3};
  c.optimizer_s = 1e-3;
  c.gradient_bytes = 100'000'000;
  c.buckets = {{40'000'000, 0.5}, {60'000'000, 1.0}};
  c.default_batch = 64;
  c.train_samples = 1'280'000;
  return c;
}

std::string temp_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "scaletrain-unit-scaling-model";
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

bool message_has(const std::exception& e, const std::string& a, const std::string& b = "") {
  const std::string m = e.what();
  return m.find(a) != std::string::npos && m.find(b) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(scaling_model)

BOOST_AUTO_TEST_CASE(one_bucket_one_node_ring) {
  const Machine m = two_level_machine();
  // 8 ranks, 100 MB: 2*7*10 us + 2*7/8 * 1e8 / 1e11 s = 140 us + 1750 us = 1890 us.
  BOOST_TEST(allreduce_seconds(Algorithm::ring, m, 1, 8, 1e8) == 1890e-6, tt::tolerance(1e-12));
  // Inside one node hierarchical is the ring itself; tree: 2*7*10 us + 2 * 1e8/1e11 = 2140 us.
  BOOST_TEST(allreduce_seconds(Algorithm::hierarchical, m, 1, 8, 1e8) == 1890e-6, tt::tolerance(1e-12));
  BOOST_TEST(allreduce_seconds(Algorithm::tree, m, 1, 8, 1e8) == 2140e-6, tt::tolerance(1e-12));
  // One rank: nothing to do.
  BOOST_TEST(allreduce_seconds(Algorithm::ring, m, 1, 1, 1e8) == 0.0);
}

BOOST_AUTO_TEST_CASE(two_levels) {
  const Machine m = two_level_machine();
  // Hierarchical on 4 nodes x 8, 100 MB:
  //   in the node: reduce-scatter + all-gather = 2 * (7*10 us + 7/8 * 1e8/1e11 s) = 2 * 945 us = 1890 us
  //   across: 2*3*5 us + 2*3/4 * 1e8/4e10 s = 30 us + 3750 us = 3780 us; total 5670 us.
  BOOST_TEST(allreduce_seconds(Algorithm::hierarchical, m, 4, 8, 1e8) == 5670e-6, tt::tolerance(1e-12));
  // Flat ring over 32 ranks at the slowest link (10 us, 40 GB/s): 2*31*10 us + 2*31/32 * 1e8/4e10 s
  //   = 620 us + 4843.75 us = 5463.75 us.
  BOOST_TEST(allreduce_seconds(Algorithm::ring, m, 4, 8, 1e8) == 5463.75e-6, tt::tolerance(1e-12));
  // Tree: 2*7*10 us + 2*2*5 us + 2 * 1e8/4e10 s = 140 + 20 + 5000 = 5160 us.
  BOOST_TEST(allreduce_seconds(Algorithm::tree, m, 4, 8, 1e8) == 5160e-6, tt::tolerance(1e-12));
  // Host staging at 10 GB/s adds 2 * (1e8/8) / 1e10 s = 2500 us to hierarchical.
  Machine staged = m;
  staged.host_copy_Bps = 10e9;
  BOOST_TEST(allreduce_seconds(Algorithm::hierarchical, staged, 4, 8, 1e8) == 8170e-6, tt::tolerance(1e-12));
  // A small message: latency decides. 8 bytes over 80 nodes x 8:
  //   tree: 140 us + 2*7*5 us (log2 80 -> 7) + 16/4e10 s = 210.0000004 us
  //   ring: 2*639*10 us = 12780 us + 2*639/640 * 8/4e10 s.
  BOOST_TEST(allreduce_seconds(Algorithm::tree, m, 80, 8, 8) == 210.0004e-6, tt::tolerance(1e-9));
  BOOST_TEST(allreduce_seconds(Algorithm::ring, m, 80, 8, 8) > 12780e-6);
}

BOOST_AUTO_TEST_CASE(overlap_fully_hidden_partly_and_fully_exposed) {
  // Backward 10 ms; buckets ready at 2, 5, 8 ms, 1 ms each: done at 3, 6, 9 ms: all hidden.
  Overlap o = overlap_buckets(10e-3, {2e-3, 5e-3, 8e-3}, {1e-3, 1e-3, 1e-3});
  BOOST_TEST(o.exposed_s == 0.0);
  BOOST_TEST(o.comm_s == 3e-3, tt::tolerance(1e-12));
  // The last bucket ready when backward ends: its 1 ms is exposed.
  o = overlap_buckets(10e-3, {2e-3, 5e-3, 10e-3}, {1e-3, 1e-3, 1e-3});
  BOOST_TEST(o.exposed_s == 1e-3, tt::tolerance(1e-12));
  // Serialised: 10 ms each from 2 ms: done at 12, 22, 32 ms: 22 ms exposed.
  o = overlap_buckets(10e-3, {2e-3, 5e-3, 10e-3}, {10e-3, 10e-3, 10e-3});
  BOOST_TEST(o.exposed_s == 22e-3, tt::tolerance(1e-12));
  // No overlap at all (every bucket ready at the end): everything exposed.
  o = overlap_buckets(10e-3, {10e-3, 10e-3}, {4e-3, 6e-3});
  BOOST_TEST(o.exposed_s == 10e-3, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_point_adds_compute_exposed_communication_and_data_wait) {
  const Calibration c = test_calibration();
  const Machine m = two_level_machine();
  // One GPU at batch 64: 8.4 + 16.8 + 1 = 26.2 ms, 64 / 0.0262 samples/s, no communication.
  Point p = predict_point(c, m, 1, 64);
  BOOST_TEST(p.step_s == 26.2e-3, tt::tolerance(1e-12));
  BOOST_TEST(p.algorithm == "none");
  BOOST_TEST(p.samples_per_s == 64 / 26.2e-3, tt::tolerance(1e-12));
  BOOST_TEST(p.epoch_s == 1'280'000 / (64 / 26.2e-3), tt::tolerance(1e-12));
  // 8 GPUs (one node), ring: bucket 0 (40 MB) ready at 8.4 ms takes 140 us + 1.75*4e7/1e11 s =
  // 840 us, done at 9.24 ms; bucket 1 (60 MB) ready at 16.8 ms, 140 + 1050 = 1190 us: exposed.
  p = predict_point(c, m, 8, 64);
  BOOST_TEST(p.algorithm == "ring");  // = hierarchical on one node; the first of equals
  BOOST_TEST(p.exposed_comm_s == 1190e-6, tt::tolerance(1e-9));
  BOOST_TEST(p.comm_s == 2030e-6, tt::tolerance(1e-9));
  BOOST_TEST(p.step_s == 26.2e-3 + 1190e-6, tt::tolerance(1e-9));
  // An input pipeline of 2000 samples/s per rank needs 32 ms for 64 samples: it waits 32 - 27.39 ms.
  Calibration slow_input = c;
  slow_input.input_samples_per_s = 2000;
  p = predict_point(slow_input, m, 8, 64);
  BOOST_TEST(p.data_wait_s == 32e-3 - 27.39e-3, tt::tolerance(1e-9));
  BOOST_TEST(p.step_s == 32e-3, tt::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(the_cheapest_algorithm_is_chosen_unless_forced) {
  const Calibration c = test_calibration();
  const Machine m = two_level_machine();
  // 4 nodes: the last bucket (60 MB) is exposed whole: hierarchical 0.6*5670 us (minus latency
  // share) vs tree vs ring: computed with the same functions the test checked above.
  const Point p = predict_point(c, m, 32, 64);
  double best = 1e9;
  std::string best_name;
  for (Algorithm a : all_algorithms()) {
    const double t = allreduce_seconds(a, m, 4, 8, 60e6);
    if (t < best) best = t, best_name = algorithm_name(a);
  }
  BOOST_TEST(p.algorithm == best_name);
  BOOST_TEST(p.exposed_comm_s >= best - 1e-12);
  const Point ring = predict_point(c, m, 32, 64, Algorithm::ring);
  BOOST_TEST(ring.algorithm == "ring");
  BOOST_TEST(ring.exposed_comm_s >= p.exposed_comm_s);
}

BOOST_AUTO_TEST_CASE(strong_scaling_shrinks_the_batch_and_weak_keeps_it) {
  const Calibration c = test_calibration();
  const Machine m = two_level_machine();
  const std::vector<int> gpus{1, 8, 16};
  const auto strong = predict_series(c, m, Scaling::strong, gpus, 64);
  BOOST_TEST(strong[1].per_rank_batch == 8.0);
  BOOST_TEST(strong[2].per_rank_batch == 4.0);
  BOOST_TEST(strong[2].global_batch == 64.0);
  // Efficiency = speedup / (gpus / 1); speedup = throughput ratio.
  BOOST_TEST(strong[1].speedup == strong[1].samples_per_s / strong[0].samples_per_s, tt::tolerance(1e-12));
  BOOST_TEST(strong[1].efficiency == strong[1].speedup / 8, tt::tolerance(1e-12));
  const auto weak = predict_series(c, m, Scaling::weak, gpus, 64);
  BOOST_TEST(weak[2].per_rank_batch == 64.0);
  // The fixed per-step costs make small batches inefficient: strong scales worse than weak.
  BOOST_TEST(strong[2].efficiency < weak[2].efficiency);
  BOOST_TEST(largest_efficient(weak, 0.0) == 16);
  BOOST_TEST(largest_efficient(strong, 2.0) == 0);
  // Whole nodes only beyond one node.
  BOOST_CHECK_THROW(predict_point(c, m, 12, 64), scaletrain::UsageError);
  BOOST_CHECK_THROW(predict_series(c, m, Scaling::weak, {1, 12}, 64), scaletrain::UsageError);
  // A global batch of 64 gives 128 GPUs half a sample each: the strong series stops at 64.
  BOOST_TEST(predict_series(c, m, Scaling::strong, {1, 64, 128}, 64).size() == 2u);
}

BOOST_AUTO_TEST_CASE(sharing_a_budget) {
  const Calibration c = test_calibration();
  const Machine m = two_level_machine();
  // 16 GPUs, every job at a global batch of 64: 1 x 16 (4 per GPU), 2 x 8 (8), 4 x 4 (16),
  // 8 x 2 (32), 16 x 1 (64); each choice = jobs x one job's throughput.
  const auto choices = share_budget(c, m, 16, 64);
  BOOST_TEST(choices.size() == 5u);
  BOOST_TEST(choices[4].jobs == 16);
  BOOST_TEST(choices[4].per_gpu_batch == 64.0);
  BOOST_TEST(choices[4].samples_per_s == 16 * 64 / 26.2e-3, tt::tolerance(1e-12));
  BOOST_TEST(choices[1].per_gpu_batch == 8.0);
  BOOST_TEST(choices[1].samples_per_s == 2 * predict_point(c, m, 8, 8).samples_per_s, tt::tolerance(1e-12));
  // Fixed costs per step and communication: 16 single-GPU jobs do more than one 16-GPU job.
  BOOST_TEST(choices[4].vs_one_job > 1.0);
  BOOST_TEST(choices[0].vs_one_job == 1.0);
  // A job batch of 8 would give a 16-GPU job half a sample per GPU: that split is left out.
  BOOST_TEST(share_budget(c, m, 16, 8).front().gpus_per_job == 8);
  BOOST_CHECK_THROW(share_budget(c, m, 16, 0.5), scaletrain::UsageError);
}

BOOST_AUTO_TEST_CASE(fits_recover_the_parameters_the_measurements_came_from) {
  // Batch curve: 3 ms + 0.25 ms/sample, measured with +-1% deterministic noise.
  std::vector<std::pair<double, double>> points;
  const double noise[] = {1.01, 0.99, 1.0, 1.005, 0.995};
  int k = 0;
  for (double b : {8.0, 16.0, 32.0, 64.0, 128.0}) points.push_back({b, (3e-3 + 0.25e-3 * b) * noise[k++]});
  const LinearCurve fit = fit_linear(points);
  BOOST_TEST(fit.per_sample_s == 0.25e-3, tt::tolerance(0.01));
  BOOST_TEST(fit.fixed_s == 3e-3, tt::tolerance(0.15));
  // Exact data: exact parameters.
  const LinearCurve exact = fit_linear({{10, 1.0 + 10 * 0.5}, {30, 1.0 + 30 * 0.5}, {50, 1.0 + 50 * 0.5}});
  BOOST_TEST(exact.fixed_s == 1.0, tt::tolerance(1e-9));
  BOOST_TEST(exact.per_sample_s == 0.5, tt::tolerance(1e-9));
  BOOST_CHECK_THROW(fit_linear({}), scaletrain::Error);
  BOOST_CHECK_THROW(fit_linear({{8, 1.0}, {8, 1.1}}), scaletrain::Error);

  // A machine from comm-bench runs made with alpha 20 us / 12 GB/s in the node (4 ranks) and
  // 50 us / 3 GB/s across (2 nodes x 1 rank): times from the ring formula, written as
  // scaletrain-comm-bench --json writes them.
  auto rows = [](int nodes, int per_node, double alpha, double bw) {
    std::string text = "[";
    const int n = nodes * per_node;
    for (double bytes : {1e3, 1e5, 1e7, 1e8}) {
      const double t = 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes / bw;
      char row[400];
      std::snprintf(row, sizeof row,
                    "%s{\"algorithm\": \"flat\", \"bytes\": %.0f, \"time_us\": %.6f, \"compression\": \"none\", "
                    "\"nodes\": %d, \"ranks_per_node\": %d, \"ranks\": %d}",
                    text.size() > 1 ? ", " : "", bytes, t * 1e6, nodes, per_node, n);
      text += row;
    }
    return text + "]";
  };
  const std::string intra = temp_file("intra.json", rows(1, 4, 20e-6, 12e9));
  const std::string inter = temp_file("inter.json", rows(2, 1, 50e-6, 3e9));
  const Machine m = machine_from_comm_bench({intra, inter}, "fitted");
  BOOST_TEST(m.intra.alpha_s == 20e-6, tt::tolerance(1e-6));
  BOOST_TEST(m.intra.bandwidth_Bps == 12e9, tt::tolerance(1e-6));
  BOOST_TEST(m.inter.alpha_s == 50e-6, tt::tolerance(1e-6));
  BOOST_TEST(m.inter.bandwidth_Bps == 3e9, tt::tolerance(1e-6));
  BOOST_TEST(m.gpus_per_node == 4);
  try {
    machine_from_comm_bench({intra}, "half");
    BOOST_FAIL("a machine without runs across nodes was accepted");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(message_has(e, "across", intra));
  }
}

BOOST_AUTO_TEST_CASE(calibration_files_round_trip_and_damaged_ones_are_named) {
  const Calibration c = test_calibration();
  const std::string path = temp_file("calibration.json", "");
  write_calibration(c, path);
  const Calibration back = read_calibration(path);
  BOOST_TEST(back.model == "resnet50");
  BOOST_TEST(back.backward.per_sample_s == 0.2e-3);
  BOOST_TEST(back.buckets.size() == 2u);
  BOOST_TEST(back.buckets[0].ready_fraction == 0.5);
  BOOST_TEST(back.train_samples == 1'280'000);

  Calibration bad = c;
  bad.buckets[0].bytes = 1;  // no longer sums to gradient_bytes
  try {
    write_calibration(bad, path);
    BOOST_FAIL("buckets that do not sum to gradient_bytes were accepted");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(message_has(e, path, "gradient_bytes"));
  }
  bad = c;
  bad.buckets[1].ready_fraction = 0.4;  // before the bucket ahead of it
  BOOST_CHECK_THROW(write_calibration(bad, path), scaletrain::Error);
  const std::string not_json = temp_file("not-json.json", "{\"format\": ");
  try {
    read_calibration(not_json);
    BOOST_FAIL("a truncated file was read");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(message_has(e, not_json, "not JSON"));
  }
  try {
    read_calibration("/nonexistent/calibration.json");
    BOOST_FAIL("a missing file was read");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(message_has(e, "/nonexistent/calibration.json"));
  }
  const std::string machine = temp_file("machine.json", "{\"format\": \"scaletrain-calibration\", \"version\": 1}");
  try {
    read_machine(machine);
    BOOST_FAIL("a calibration was read as a machine");
  } catch (const scaletrain::Error& e) {
    BOOST_TEST(message_has(e, machine, "not a machine file"));
  }
}

BOOST_AUTO_TEST_SUITE_END()
