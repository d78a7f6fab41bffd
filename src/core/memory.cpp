// Available memory (memory.hpp): /proc/meminfo and the cgroup files, read as text. Decisions:
// cgroup v2 first (Debian 12, current Slurm), v1's memory controller as a fallback; a limit of
// "max" or a v1 limit near 2^63 means none.
#include "scaletrain/core/memory.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <fstream>
#include <sstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "scaletrain/core/error.hpp"

namespace scaletrain {
namespace {

// The first number in `path` after `key` (a line "key value"), or -1.
int64_t read_keyed(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  int64_t v = -1;
  while (in >> k) {
    if (k == key && in >> v) return v;
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

// A file holding one number (or "max"): the number, or -1.
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  return in >> v ? v : -1;
}

// The process's cgroup path for v2 ("0::/path") or for v1's memory controller.
std::string cgroup_path(bool v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? line.compare(0, a, "0") == 0 && controllers.empty()
           : ("," + controllers + ",").find(",memory,") != std::string::npos)
      return line.substr(b + 1);
  }
  return "";
}

// Room left under the cgroup's limit, or -1 when there is no limit.
int64_t cgroup_room() {
  constexpr int64_t kNoLimit = int64_t{1} << 60;
  const std::string v2 = cgroup_path(true);
  if (!v2.empty()) {
    const int64_t limit = read_number("/sys/fs/cgroup" + v2 + "/memory.max");
    const int64_t used = read_number("/sys/fs/cgroup" + v2 + "/memory.current");
    if (limit > 0 && limit < kNoLimit && used >= 0) return std::max<int64_t>(0, limit - used);
  }
  const std::string v1 = cgroup_path(false);
  if (!v1.empty()) {
    const int64_t limit = read_number("/sys/fs/cgroup/memory" + v1 + "/memory.limit_in_bytes");
    const int64_t used = read_number("/sys/fs/cgroup/memory" + v1 + "/memory.usage_in_bytes");
    if (limit > 0 && limit < kNoLimit && used >= 0) return std::max<int64_t>(0, limit - used);
  }
  return -1;
}

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB", bytes / 1e9);
  return text;
}

}  // namespace

int64_t available_memory_bytes() {
  const int64_t kib = read_keyed("/proc/meminfo", "MemAvailable:");
  const int64_t machine = kib >= 0 ? kib * 1024 : -1;
  const int64_t cgroup = cgroup_room();
  if (machine < 0) return cgroup;
  return cgroup < 0 ? machine : std::min(machine, cgroup);
}

void check_memory_request(int64_t bytes, int ranks_on_node, const std::string& what, const std::string& advice) {
  const int64_t available = available_memory_bytes();
  const int ranks = std::max(1, ranks_on_node);
  if (available < 0 || static_cast<double>(bytes) * ranks <= static_cast<double>(available)) return;
  std::ostringstream os;
  os << what << ": " << gigabytes(static_cast<double>(bytes)) << " per rank";
  if (ranks > 1)
    os << " (" << gigabytes(static_cast<double>(bytes) * ranks) << " for the node's " << ranks << " ranks)";
  os << ", " << gigabytes(static_cast<double>(available))
     << " available (MemAvailable, and the room under the job's cgroup limit); " << advice;
  ST_THROW(os.str());
}

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

}  // namespace scaletrain
