// Machine files and machines fitted to comm-bench runs (machine.hpp; docs/scaling-model.md,
// "Machine files"). Files use the units people quote (µs, GB/s = 1e9 bytes/s); the struct
// holds seconds and bytes per second.
#include "scaletrain/advisor/machine.hpp"

#include <fstream>
#include <sstream>
#include <utility>

#include "scaletrain/advisor/calibration.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::advisor {
namespace {
constexpr const char* kFormat = "scaletrain-machine";
constexpr int64_t kVersion = 1;

Json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  ST_CHECK(in, "cannot open " << what << " " << path << " (no such file or no permission?)");
  std::ostringstream os;
  os << in.rdbuf();
  try {
    return Json::parse(os.str());
  } catch (const Error& e) {
    ST_THROW(what << " " << path << " is not JSON: " << error_text(e));
  }
}

Link link_from_json(const Json& j, const char* level) {
  Link l{j.at("latency_us").as_double() * 1e-6, j.at("bandwidth_GBps").as_double() * 1e9};
  ST_CHECK(l.alpha_s >= 0 && l.bandwidth_Bps > 0, level << ": latency_us must be >= 0 and bandwidth_GBps > 0");
  return l;
}

Json link_json(const Link& l) {
  Json j = Json::object();
  j.set("latency_us", l.alpha_s * 1e6);
  j.set("bandwidth_GBps", l.bandwidth_Bps / 1e9);
  return j;
}

// A ring all-reduce of S bytes over n ranks takes 2(n-1) alpha + 2(n-1)/n S/B: the straight
// line through (S, t) of the runs gives alpha from its intercept and B from its slope.
Link fit_ring(const std::vector<std::pair<double, double>>& bytes_seconds, int n) {
  const LinearCurve line = fit_linear(bytes_seconds);
  const double steps = 2.0 * (n - 1);
  ST_CHECK(line.per_sample_s > 0, "the all-reduce times do not grow with the message size");
  return {std::max(0.0, line.fixed_s / steps), steps / n / line.per_sample_s};
}

}  // namespace

Machine machine_from_json(const Json& j, const std::string& where) {
  Machine m;
  try {
    ST_CHECK(j.contains("format") && j.at("format").as_string() == kFormat,
             "not a machine file (\"format\" is not \"" << kFormat << "\")");
    ST_CHECK(j.at("version").as_int() == kVersion,
             "machine format version " << j.at("version").as_int() << ", this build reads " << kVersion);
    m.name = j.at("name").as_string();
    m.gpus_per_node = static_cast<int>(j.at("gpus_per_node").as_int());
    m.max_nodes = static_cast<int>(j.at("max_nodes").as_int());
    ST_CHECK(m.gpus_per_node >= 1 && m.gpus_per_node <= 1024, "gpus_per_node must be 1 to 1024");
    ST_CHECK(m.max_nodes >= 1 && m.max_nodes <= 100000, "max_nodes must be 1 to 100000");
    m.intra = link_from_json(j.at("intra_node"), "intra_node");
    m.inter = link_from_json(j.at("inter_node"), "inter_node");
    m.host_copy_Bps = j.contains("host_copy_GBps") ? j.at("host_copy_GBps").as_double() * 1e9 : 0.0;
    ST_CHECK(m.host_copy_Bps >= 0, "host_copy_GBps must not be negative");
    m.sources = j.contains("sources") ? j.at("sources") : Json::object();
  } catch (const Error& e) {
    ST_THROW("machine file " << where << ": " << error_text(e));
  }
  return m;
}

Json to_json(const Machine& m) {
  Json j = Json::object();
  j.set("format", kFormat);
  j.set("version", kVersion);
  j.set("name", m.name);
  j.set("gpus_per_node", m.gpus_per_node);
  j.set("max_nodes", m.max_nodes);
  j.set("intra_node", link_json(m.intra));
  j.set("inter_node", link_json(m.inter));
  j.set("host_copy_GBps", m.host_copy_Bps / 1e9);
  j.set("sources", m.sources);
  return j;
}

Machine read_machine(const std::string& path) { return machine_from_json(read_json_file(path, "machine file"), path); }

Machine machine_from_comm_bench(const std::vector<std::string>& paths, const std::string& name) {
  ST_CHECK(!paths.empty(), "no comm-bench --json files given");
  std::vector<std::pair<double, double>> intra, inter;
  int intra_n = 0, inter_n = 0, gpus_per_node = 1;
  std::string list;
  for (const std::string& path : paths) {
    list += (list.empty() ? "" : ", ") + path;
    const Json rows = read_json_file(path, "comm-bench --json file");
    try {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const Json& r = rows.at(i);
        // The "flat" algorithm is one ring over all ranks: the pure form of each level.
        if (r.at("algorithm").as_string() != "flat" || r.at("compression").as_string() != "none") continue;
        const int nodes = static_cast<int>(r.at("nodes").as_int());
        const int per_node = static_cast<int>(r.at("ranks_per_node").as_int());
        const std::pair<double, double> point{r.at("bytes").as_double(), r.at("time_us").as_double() * 1e-6};
        if (nodes == 1 && per_node > 1) {
          ST_CHECK(intra_n == 0 || intra_n == per_node, "runs inside a node with different rank counts");
          intra_n = per_node;
          intra.push_back(point);
        } else if (nodes > 1 && per_node == 1) {
          ST_CHECK(inter_n == 0 || inter_n == nodes, "runs across nodes with different node counts");
          inter_n = nodes;
          inter.push_back(point);
        }
        gpus_per_node = std::max(gpus_per_node, per_node);
      }
    } catch (const Error& e) {
      ST_THROW("comm-bench --json file " << path << ": " << error_text(e));
    }
  }
  ST_CHECK(intra.size() >= 2, "no 'flat' runs inside one node with 2 or more ranks (at two sizes at least) in "
                                  << list << ": run scaletrain-comm-bench --json on one node");
  ST_CHECK(inter.size() >= 2,
           "no 'flat' runs with one rank per node across 2 or more nodes (at two sizes at "
           "least) in "
               << list << ": run scaletrain-comm-bench --json with --ranks-per-node 1");
  Machine m;
  m.name = name;
  m.gpus_per_node = gpus_per_node;
  m.intra = fit_ring(intra, intra_n);
  m.inter = fit_ring(inter, inter_n);
  Json sources = Json::object();
  sources.set("fitted_from", Json::array_of(paths));
  m.sources = sources;
  return m;
}

}  // namespace scaletrain::advisor
