// The GPU of each rank and the binding table (gpu_binding.hpp).
#include "scaletrain/train/gpu_binding.hpp"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "scaletrain/core/error.hpp"

namespace scaletrain::train {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

std::string join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? std::string(1, sep) : "") + parts[i];
  return out;
}

std::string join_ints(const std::vector<int>& values, char sep) {
  std::vector<std::string> parts;
  for (int v : values) parts.push_back(std::to_string(v));
  return join(parts, sep);
}

std::vector<int> split_ints(const std::string& text, char sep) {
  std::vector<int> values;
  if (text.empty()) return values;
  for (const std::string& p : split(text, sep)) values.push_back(std::stoi(p));
  return values;
}

// "ranks 0 and 4", "ranks 0, 2 and 4".
std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

// The rank's choice: of the GPUs it sees, the least taken, lowest bus id then UUID first.
int least_taken(const RankGpuView& view, const std::map<std::string, int>& taken) {
  std::vector<int> order(view.uuids.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::tie(view.bus_ids[a], view.uuids[a]) < std::tie(view.bus_ids[b], view.uuids[b]);
  });
  int best = -1, best_count = 0;
  for (int i : order) {
    const auto it = taken.find(view.uuids[i]);
    const int count = it == taken.end() ? 0 : it->second;
    if (best < 0 || count < best_count) best = i, best_count = count;
  }
  return best;
}

}  // namespace

std::vector<GpuAssignment> assign_gpus(const std::vector<RankGpuView>& ranks) {
  std::vector<GpuAssignment> out(ranks.size());
  std::map<std::string, std::vector<int>> ranks_of_host;  // ranks ascending
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    ST_CHECK(ranks[r].uuids.size() == ranks[r].bus_ids.size(),
             "internal error: rank " << r << " lists " << ranks[r].uuids.size() << " GPU UUIDs and "
                                     << ranks[r].bus_ids.size() << " bus ids");
    ranks_of_host[ranks[r].host].push_back(r);
  }
  for (const auto& [host, members] : ranks_of_host) {
    std::map<std::string, int> taken;  // UUID -> ranks of this host given it so far
    for (int r : members) {
      const int i = least_taken(ranks[r], taken);
      if (i < 0) continue;
      out[r].ordinal = i;
      out[r].uuid = ranks[r].uuids[i];
      out[r].bus_id = ranks[r].bus_ids[i];
      ++taken[out[r].uuid];
    }
    for (int r : members)
      for (int q : members)
        if (out[r].ordinal >= 0 && out[q].uuid == out[r].uuid) out[r].sharing.push_back(q);
  }
  return out;
}

std::vector<std::string> sharing_warnings(const std::vector<RankGpuView>& ranks,
                                          const std::vector<GpuAssignment>& assignments) {
  std::vector<std::string> lines;
  for (int r = 0; r < static_cast<int>(assignments.size()); ++r) {
    const GpuAssignment& a = assignments[r];
    if (a.sharing.size() < 2 || a.sharing.front() != r) continue;  // once per shared GPU, by its first rank
    lines.push_back("warning: " + rank_list(a.sharing) + " on host " + ranks[r].host + " share a GPU, " + a.bus_id +
                    " (" + a.uuid +
                    "): allowed (it is how the multi-rank path is tested on one GPU), but they compete for it; "
                    "launch one rank per GPU for speed");
  }
  return lines;
}

std::string encode_view(const RankGpuView& view) {
  return view.host + "\t" + join(view.uuids, ',') + "\t" + join(view.bus_ids, ',');
}

RankGpuView decode_view(const std::string& text) {
  const std::vector<std::string> f = split(text, '\t');
  ST_CHECK(f.size() == 3, "internal error: a rank's GPU list is malformed: '" << text << "'");
  RankGpuView v;
  v.host = f[0];
  if (!f[1].empty()) v.uuids = split(f[1], ',');
  if (!f[2].empty()) v.bus_ids = split(f[2], ',');
  return v;
}

std::string encode_row(const BindingRow& row) {
  return std::to_string(row.rank) + "\t" + row.host + "\t" + row.bus_id + "\t" + row.uuid + "\t" +
         std::to_string(row.gpu_numa_node) + "\t" + join_ints(row.cpus, ',') + "\t" +
         join_ints(row.cpu_numa_nodes, ',');
}

BindingRow decode_row(const std::string& text) {
  const std::vector<std::string> f = split(text, '\t');
  ST_CHECK(f.size() == 7, "internal error: a rank's binding row is malformed: '" << text << "'");
  BindingRow row;
  row.rank = std::stoi(f[0]);
  row.host = f[1];
  row.bus_id = f[2];
  row.uuid = f[3];
  row.gpu_numa_node = std::stoi(f[4]);
  row.cpus = split_ints(f[5], ',');
  row.cpu_numa_nodes = split_ints(f[6], ',');
  return row;
}

namespace {

std::string node_text(int node) { return node < 0 ? "?" : std::to_string(node); }

std::string nodes_text(const std::vector<int>& nodes) {
  if (nodes.empty()) return "?";
  return join_ints(nodes, ',');
}

}  // namespace

std::vector<std::string> binding_table(const std::vector<BindingRow>& rows, std::size_t max_rows) {
  std::vector<std::string> lines;
  lines.push_back(
      "binding: rank, host, GPU (PCI bus id, UUID), the GPU's NUMA node; the rank's cores (their NUMA nodes)");
  for (std::size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    const BindingRow& r = rows[i];
    lines.push_back("  rank " + std::to_string(r.rank) + "  " + r.host + "  " + r.bus_id + " " + r.uuid + "  NUMA " +
                    node_text(r.gpu_numa_node) + "  cores " + (r.cpus.empty() ? "?" : cpu_list(r.cpus)) + " (NUMA " +
                    nodes_text(r.cpu_numa_nodes) + ")");
  }
  if (rows.size() > max_rows)
    lines.push_back("  ... " + std::to_string(rows.size() - max_rows) +
                    " more ranks: every rank's row is in report.json (device.binding)");
  return lines;
}

std::vector<std::string> binding_warnings(const std::vector<BindingRow>& rows) {
  std::vector<std::string> lines;
  for (const BindingRow& r : rows) {
    if (r.gpu_numa_node < 0 || r.cpu_numa_nodes.empty()) continue;
    if (std::find(r.cpu_numa_nodes.begin(), r.cpu_numa_nodes.end(), r.gpu_numa_node) != r.cpu_numa_nodes.end())
      continue;
    lines.push_back("warning: rank " + std::to_string(r.rank) + " on host " + r.host + " runs on cores " +
                    cpu_list(r.cpus) + " (NUMA " + nodes_text(r.cpu_numa_nodes) + "), its GPU " + r.bus_id +
                    " is on NUMA node " + std::to_string(r.gpu_numa_node) +
                    ": its copies to and from the GPU cross the sockets; bind each rank to the cores near its GPU "
                    "(srun --gpu-bind=single:1 --distribution=block:block, as jobscripts/train.sbatch does)");
  }
  return lines;
}

std::string gpus_shared_within(const std::vector<BindingRow>& rows, const std::vector<int>& group) {
  // (host, GPU) -> the members on it, in the group's order of first appearance.
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<int>>> gpus;
  for (int rank : group) {
    const auto row = std::find_if(rows.begin(), rows.end(), [rank](const BindingRow& r) { return r.rank == rank; });
    ST_CHECK(row != rows.end(), "internal: rank " << rank << " has no row in the GPU binding");
    const std::pair<std::string, std::string> gpu{row->host, row->uuid.empty() ? row->bus_id : row->uuid};
    auto it = std::find_if(gpus.begin(), gpus.end(), [&gpu](const auto& g) { return g.first == gpu; });
    if (it == gpus.end()) {
      gpus.push_back({gpu, {rank}});
    } else {
      it->second.push_back(rank);
    }
  }
  std::string out;
  for (const auto& [gpu, ranks] : gpus) {
    if (ranks.size() < 2) continue;
    std::string names;
    for (std::size_t i = 0; i < ranks.size(); ++i)
      names += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const BindingRow& r) { return r.rank == ranks[0]; });
    out += (out.empty() ? "" : "; ") + std::string("ranks ") + names + " share GPU " + row->bus_id +
           (row->uuid.empty() ? "" : " (" + row->uuid + ")") + " on host " + gpu.first;
  }
  return out;
}

Json binding_json(const std::vector<BindingRow>& rows) {
  Json all = Json::array();
  for (const BindingRow& r : rows) {
    Json j = Json::object();
    j.set("rank", r.rank);
    j.set("host", r.host);
    j.set("gpu_pci_bus_id", r.bus_id);
    j.set("gpu_uuid", r.uuid);
    j.set("gpu_numa_node", r.gpu_numa_node < 0 ? Json() : Json(r.gpu_numa_node));
    j.set("cpus", cpu_list(r.cpus));
    Json nodes = Json::array();
    for (int n : r.cpu_numa_nodes) nodes.push_back(n);
    j.set("cpu_numa_nodes", nodes);
    all.push_back(j);
  }
  return all;
}

std::string cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::string trimmed = text;
  while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == ' ')) trimmed.pop_back();
  if (trimmed.empty()) return cpus;
  for (const std::string& part : split(trimmed, ',')) {
    const std::size_t dash = part.find('-');
    try {
      std::size_t used = 0;
      const int first = std::stoi(part.substr(0, dash), &used);
      ST_CHECK(used == (dash == std::string::npos ? part.size() : dash), "");
      int last = first;
      if (dash != std::string::npos) {
        last = std::stoi(part.substr(dash + 1), &used);
        ST_CHECK(used == part.size() - dash - 1 && last >= first, "");
      }
      for (int c = first; c <= last; ++c) cpus.push_back(c);
    } catch (const std::exception&) {
      ST_THROW("not a CPU list: '" << text << "' (expected e.g. 0-3,8,10-11)");
    }
  }
  return cpus;
}

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

int pci_numa_node(const std::string& bus_id, const std::string& sysfs_root) {
  std::string id = bus_id;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::ifstream in(sysfs_root + "/bus/pci/devices/" + id + "/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node < 0 ? -1 : node;
}

std::vector<int> numa_nodes_of(const std::vector<int>& cpus, const std::string& sysfs_root) {
  namespace fs = std::filesystem;
  std::set<int> nodes;
  const std::set<int> wanted(cpus.begin(), cpus.end());
  std::error_code ec;
  for (fs::directory_iterator it(sysfs_root + "/devices/system/node", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("node", 0) != 0 || name.size() == 4 || name.find_first_not_of("0123456789", 4) != std::string::npos)
      continue;
    std::ifstream in(it->path() / "cpulist");
    std::string text;
    std::getline(in, text);
    std::vector<int> node_cpus;
    try {
      node_cpus = parse_cpu_list(text);
    } catch (const Error&) {
      continue;  // an unreadable node: its cores stay unattributed
    }
    for (int c : node_cpus)
      if (wanted.count(c)) {
        nodes.insert(std::stoi(name.substr(4)));
        break;
      }
  }
  return {nodes.begin(), nodes.end()};
}

}  // namespace scaletrain::train
