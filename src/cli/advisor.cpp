// scaletrain-advisor: its dispatch and `predict` (docs/scaling-model.md).
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/advisor_commands.hpp"
#include "cli/subcommand.hpp"
#include "scaletrain/advisor/calibration.hpp"
#include "scaletrain/advisor/machine.hpp"
#include "scaletrain/advisor/scaling_model.hpp"
#include "scaletrain/cli/commands.hpp"
#include "scaletrain/cli/guard.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"

namespace po = boost::program_options;

namespace scaletrain::cli {
namespace {

constexpr const char* kProgram = "scaletrain-advisor";
constexpr unsigned kHelpWidth = 110;

const char* const kAdvisorUsage =
    "usage: scaletrain-advisor <command> [options]\n"
    "  predict    step time, throughput and efficiency of a calibrated model on a machine, 1 GPU to N\n"
    "             nodes, strong and weak scaling, and how to share a node budget between jobs\n"
    "  calibrate  a short sweep on one rank that measures a model: writes a calibration file\n"
    "Run 'scaletrain-advisor <command> --help' for its options; docs/scaling-model.md explains the model.\n";

std::string default_machine() { return std::string(SCALETRAIN_SHARE_DIR) + "/advisor/machines/dgx1-4xedr.json"; }

struct PredictOptions {
  std::string calibration, machine, gpus, scaling = "both", algorithm = "auto", json;
  std::vector<std::string> comm_bench;
  int max_nodes = 0;      // 0: the machine's max_nodes
  int gpus_per_node = 0;  // 0: the machine's
  int budget_nodes = 1;   // the budget shared between jobs
  double batch = 0;       // per GPU; 0: the calibration's default
  double job_batch = 0;   // the global batch of each job sharing the budget; 0: batch x a node's GPUs
  double efficiency = 0.7;
};

// "1,2,4,8,16": GPU counts, increasing.
std::vector<int> parse_gpu_list(const std::string& text) {
  const std::vector<int64_t> counts = parse_count_list("--gpus", text, "GPU count", int64_t{1} << 20);
  if (!std::is_sorted(counts.begin(), counts.end()))
    throw UsageError("--gpus '" + text + "': list the GPU counts in increasing order");
  return std::vector<int>(counts.begin(), counts.end());
}

// 1, 2, 4 ... up to a node's GPUs, then 2, 4, 8 ... nodes and the largest count.
std::vector<int> default_gpu_list(const advisor::Machine& m, int max_nodes) {
  std::vector<int> list;
  for (int g = 1; g < m.gpus_per_node; g *= 2)
    if (m.gpus_per_node % g == 0) list.push_back(g);
  for (int n = 1; n < max_nodes; n *= 2) list.push_back(n * m.gpus_per_node);
  list.push_back(max_nodes * m.gpus_per_node);
  return list;
}

advisor::Machine load_machine(const PredictOptions& o) {
  if (!o.comm_bench.empty()) {
    if (!o.machine.empty()) throw UsageError("predict: give --machine or --comm-bench, not both");
    return advisor::machine_from_comm_bench(o.comm_bench, "fitted to comm-bench runs");
  }
  return advisor::read_machine(o.machine.empty() ? default_machine() : o.machine);
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// A duration in the unit that keeps 3 significant digits readable: "812 ms", "1.42 s", "3.1 h".
std::string duration(double s) {
  if (s < 1.0) return fmt("%.1f ms", s * 1e3);
  if (s < 120.0) return fmt("%.2f s", s);
  if (s < 7200.0) return fmt("%.1f min", s / 60.0);
  return fmt("%.1f h", s / 3600.0);
}

// unit: the calibration's batch_unit ("samples", "tokens"), which the throughput counts.
void print_series(const char* title, const std::vector<advisor::Point>& series, const std::string& unit) {
  std::printf(
      "%s\n   GPUs  nodes  batch/GPU     step  compute  exposed comm  data wait  %12s  speedup  "
      "efficiency  all-reduce    epoch\n",
      title, (unit + "/s").c_str());
  for (const advisor::Point& p : series) {
    std::printf("  %5d  %5d  %9.1f  %7.1f  %7.1f  %12.2f  %9.2f  %12.0f  %7.2f  %9.0f%%  %-12s  %s\n", p.gpus, p.nodes,
                p.per_rank_batch, p.step_s * 1e3, p.compute_s * 1e3, p.exposed_comm_s * 1e3, p.data_wait_s * 1e3,
                p.samples_per_s, p.speedup, p.efficiency * 100, p.algorithm.c_str(), duration(p.epoch_s).c_str());
  }
  std::cout << "  (step, compute, exposed comm and data wait in ms per step)\n";
}

Json series_json(const std::vector<advisor::Point>& series) {
  Json list = Json::array();
  for (const advisor::Point& p : series) list.push_back(advisor::to_json(p));
  return list;
}

// "up to 640 GPUs (80 nodes)" or "not even 2 GPUs".
Json largest_json(const std::vector<advisor::Point>& series, double threshold, const advisor::Machine& m) {
  const int g = advisor::largest_efficient(series, threshold);
  Json j = Json::object();
  j.set("gpus", g);
  j.set("nodes", g > m.gpus_per_node ? g / m.gpus_per_node : (g > 0 ? 1 : 0));
  return j;
}

std::string largest_text(const std::vector<advisor::Point>& series, double threshold, const advisor::Machine& m) {
  const int g = advisor::largest_efficient(series, threshold);
  if (g == 0) return "none";
  return std::to_string(g) + " GPUs" +
         (g > m.gpus_per_node ? " (" + std::to_string(g / m.gpus_per_node) + " nodes)" : "");
}

Json sharing_json(const std::vector<advisor::Sharing>& choices, int budget_gpus) {
  Json list = Json::array();
  const advisor::Sharing* best = &choices.front();
  for (const advisor::Sharing& s : choices) {
    list.push_back(advisor::to_json(s));
    if (s.samples_per_s > best->samples_per_s) best = &s;
  }
  Json j = Json::object();
  j.set("budget_gpus", budget_gpus);
  j.set("choices", list);
  j.set("best", advisor::to_json(*best));
  return j;
}

void print_sharing(const std::vector<advisor::Sharing>& choices, int budget_gpus, double job_batch,
                   const advisor::Machine& m, const std::string& unit) {
  std::cout << "sharing " << budget_gpus << " GPUs (" << budget_gpus / m.gpus_per_node
            << (budget_gpus / m.gpus_per_node == 1 ? " node" : " nodes")
            << ") between independent jobs, each with a global batch of " << fmt("%g", job_batch)
            << (unit == "samples" ? "" : " " + unit) << ":\n";
  const advisor::Sharing* best = &choices.front();
  for (const advisor::Sharing& s : choices) {
    std::printf("  %3d job%s of %4d GPU%s (%9.1f per GPU) %12.0f %s/s in all  (%.2fx one wide job)\n", s.jobs,
                s.jobs == 1 ? " " : "s", s.gpus_per_job, s.gpus_per_job == 1 ? " " : "s", s.per_gpu_batch,
                s.samples_per_s, unit.c_str(), s.vs_one_job);
    if (s.samples_per_s > best->samples_per_s) best = &s;
  }
  if (best->jobs == 1)
    std::cout << "  advice: give the budget to one wide job\n";
  else if (best->vs_one_job < 1.05)
    std::cout << "  advice: one wide job does about as much work (within 5%): choose by the time to a result\n";
  else
    std::printf("  advice: run %d jobs of %d GPU%s side by side: %.0f%% more work done than one wide job\n", best->jobs,
                best->gpus_per_job, best->gpus_per_job == 1 ? "" : "s", (best->vs_one_job - 1.0) * 100.0);
}

void write_json(const Json& j, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  ST_CHECK(out, "--json: cannot write " << path << " (no such directory or no permission?)");
  out << j.dump(2) << "\n";
  out.close();
  ST_CHECK(out, "--json: cannot write " << path << " (disk full?)");
}

int dispatch(int argc, char** argv) {
  if (argc < 2) throw UsageError(std::string("no command given\n") + kAdvisorUsage);
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    if (log_rank() == 0) std::cout << kAdvisorUsage;
    return 0;
  }
  if (command == "predict") return cmd_advisor_predict(argc - 1, argv + 1);
  if (command == "calibrate") return cmd_advisor_calibrate(argc - 1, argv + 1);
  throw UsageError("unknown command '" + command + "' (commands: predict, calibrate)");
}

}  // namespace

int cmd_advisor_predict(int argc, char** argv) {
  PredictOptions o;
  po::options_description desc("predict", kHelpWidth);
  desc.add_options()("help,h", "print this help")(
      "calibration", po::value(&o.calibration)->required(),
      "the model's calibration file (scaletrain-advisor calibrate, or share/advisor/calibrations/)")(
      "machine", po::value(&o.machine), ("machine file (default: " + default_machine() + ")").c_str())(
      "comm-bench", po::value(&o.comm_bench)->multitoken(),
      "instead of --machine: scaletrain-comm-bench --json files, inside one node and across nodes (one rank per "
      "node), fitted to the alpha-beta model")("max-nodes", po::value(&o.max_nodes)->default_value(o.max_nodes),
                                               "the largest node count (0: the machine's)")(
      "gpus-per-node", po::value(&o.gpus_per_node)->default_value(o.gpus_per_node),
      "ranks per node (0: the machine's), e.g. 1 for emulated nodes of one rank each")(
      "gpus", po::value(&o.gpus),
      "GPU counts to predict, e.g. 1,4,8,16 (default: 1, 2, 4 .. a node, then 2, 4, 8 .. nodes)")(
      "batch", po::value(&o.batch)->default_value(o.batch),
      "samples per GPU (tokens for a calibration whose batch_unit is tokens): the weak series' batch, and the strong "
      "series' at its first point (0: the calibration's default)")(
      "scaling", po::value(&o.scaling)->default_value(o.scaling), "strong | weak | both")(
      "efficiency", po::value(&o.efficiency)->default_value(o.efficiency, "0.7"),
      "the parallel efficiency threshold: the advice names the largest count that meets it")(
      "budget-nodes", po::value(&o.budget_nodes)->default_value(o.budget_nodes),
      "a node budget to share: one wide job against k narrower jobs")(
      "job-batch", po::value(&o.job_batch)->default_value(o.job_batch),
      "the global batch every job sharing the budget trains with (0: --batch x a node's GPUs)")(
      "algorithm", po::value(&o.algorithm)->default_value(o.algorithm),
      "all-reduce algorithm: auto (the cheapest at each size) | ring | tree | hierarchical")(
      "json", po::value(&o.json), "also write the prediction as JSON to this file");
  po::variables_map vm;
  if (!parse_subcommand(kProgram, "predict", argc, argv, desc, vm, "--calibration FILE [options]")) return 0;
  if (o.scaling != "both" && o.scaling != "strong" && o.scaling != "weak")
    throw UsageError("--scaling: '" + o.scaling + "' is not strong, weak or both");
  if (!(o.efficiency > 0.0 && o.efficiency <= 1.0))
    throw UsageError("--efficiency: " + fmt("%g", o.efficiency) + " is not in (0, 1]");
  if (o.batch < 0) throw UsageError("--batch must not be negative");
  if (o.job_batch < 0) throw UsageError("--job-batch must not be negative");
  std::optional<advisor::Algorithm> forced;
  if (o.algorithm != "auto") {
    try {
      forced = advisor::algorithm_from_name(o.algorithm);
    } catch (const UsageError& e) {
      throw UsageError(std::string("--algorithm: ") + e.what() + " or auto");
    }
  }

  const std::vector<int> listed_gpus = vm.count("gpus") ? parse_gpu_list(o.gpus) : std::vector<int>();

  const advisor::Calibration c = advisor::read_calibration(o.calibration);
  advisor::Machine m = load_machine(o);
  if (o.gpus_per_node > 0) m.gpus_per_node = o.gpus_per_node;
  const int max_nodes = o.max_nodes > 0 ? o.max_nodes : m.max_nodes;
  const std::vector<int> gpus = listed_gpus.empty() ? default_gpu_list(m, max_nodes) : listed_gpus;
  for (int g : gpus)
    if (g > m.gpus_per_node && g % m.gpus_per_node != 0)
      throw UsageError("--gpus: " + std::to_string(g) + " GPUs do not fill whole nodes of " +
                       std::to_string(m.gpus_per_node) + " GPUs (" + m.name + ")");
  const double batch = o.batch > 0 ? o.batch : static_cast<double>(c.default_batch);

  std::cout << kProgram << ": " << c.model << " (" << c.device << ", " << c.precision << ") on " << m.name << "\n"
            << "calibration: " << o.calibration << "\n";
  Json out = Json::object();
  out.set("format", "scaletrain-advice");
  out.set("version", 1);
  Json cal = Json::object();
  cal.set("file", o.calibration);
  cal.set("model", c.model);
  cal.set("device", c.device);
  cal.set("precision", c.precision);
  cal.set("source", c.source);
  cal.set("batch_unit", c.batch_unit);
  out.set("calibration", cal);
  // What per_rank_batch, global_batch, samples_per_s and job_batch count (the keys keep their names).
  out.set("batch_unit", c.batch_unit);
  out.set("machine", advisor::to_json(m));
  out.set("batch_per_gpu", batch);
  out.set("efficiency_threshold", o.efficiency);
  Json series = Json::object(), largest = Json::object();
  for (const char* kind : {"weak", "strong"}) {
    if (o.scaling != "both" && o.scaling != kind) continue;
    const bool weak = std::string(kind) == "weak";
    const auto points =
        advisor::predict_series(c, m, weak ? advisor::Scaling::weak : advisor::Scaling::strong, gpus, batch, forced);
    std::cout << "\n";
    const std::string& unit = c.batch_unit;
    print_series(weak ? ("weak scaling: " + fmt("%g", batch) + " " + unit + " per GPU").c_str()
                      : ("strong scaling: a global batch of " + fmt("%g", batch * gpus.front()) + " " + unit).c_str(),
                 points, unit);
    if (points.size() < gpus.size())
      std::cout << "  (ends at " << points.back().gpus << " GPUs: beyond, a GPU would get less than one "
                << unit.substr(0, unit.size() - 1) << ")\n";
    std::cout << "  largest count at >= " << fmt("%g", o.efficiency * 100)
              << "% efficiency: " << largest_text(points, o.efficiency, m) << "\n";
    series.set(kind, series_json(points));
    largest.set(kind, largest_json(points, o.efficiency, m));
  }
  out.set("series", series);
  out.set("largest_efficient", largest);
  const int budget = o.budget_nodes * m.gpus_per_node;
  const double job_batch = o.job_batch > 0 ? o.job_batch : batch * m.gpus_per_node;
  const auto choices = advisor::share_budget(c, m, budget, job_batch, forced);
  std::cout << "\n";
  print_sharing(choices, budget, job_batch, m, c.batch_unit);
  Json sharing = sharing_json(choices, budget);
  sharing.set("job_batch", job_batch);
  out.set("sharing", sharing);
  if (!o.json.empty()) {
    write_json(out, o.json);
    std::cout << "wrote " << o.json << "\n";
  }
  return 0;
}

int scaletrain_advisor_main(int argc, char** argv) { return run_guarded(kProgram, argc, argv, dispatch); }

}  // namespace scaletrain::cli
