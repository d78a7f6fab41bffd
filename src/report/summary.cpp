// Cross-rank statistics (one all-gather, then identical arithmetic on every rank so that every
// rank holds the same summary) and the atomic JSON writer (temp name, fsync, rename, fsync of
// the directory so the rename itself survives a crash).
#include "scaletrain/report/summary.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "scaletrain/core/error.hpp"

namespace scaletrain::report {
namespace {

// Stats of values[first + k * stride] for k = 0..ranks-1.
RankStats stats_of(const std::vector<double>& values, int ranks, std::size_t first, std::size_t stride) {
  RankStats s;
  double sum = 0.0;
  for (int r = 0; r < ranks; ++r) {
    const double v = values[first + static_cast<std::size_t>(r) * stride];
    if (r == 0 || v < s.min) s.min = v;
    if (r == 0 || v > s.max) {
      s.max = v;
      s.slowest_rank = r;
    }
    sum += v;
  }
  s.mean = sum / ranks;
  return s;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

RankStats rank_stats(const comm::Communicator& comm, double value) {
  return stats_of(comm.allgather(value), comm.size(), 0, 1);
}

std::vector<RankStats> phase_stats(const comm::Communicator& comm, const PhaseTimers& timers) {
  std::vector<double> mine;
  for (Phase p : all_phases()) mine.push_back(timers.total(p));
  const std::vector<double> all = comm.allgather(mine);
  std::vector<RankStats> out;
  for (std::size_t i = 0; i < mine.size(); ++i) out.push_back(stats_of(all, comm.size(), i, mine.size()));
  return out;
}

Json phase_summary(const comm::Communicator& comm, const PhaseTimers& timers) {
  const std::vector<RankStats> stats = phase_stats(comm, timers);
  Json out = Json::object();
  for (std::size_t i = 0; i < stats.size(); ++i) {
    Json p = Json::object();
    p.set("min_s", stats[i].min);
    p.set("mean_s", stats[i].mean);
    p.set("max_s", stats[i].max);
    p.set("slowest_rank", stats[i].slowest_rank);
    out.set(phase_name(all_phases()[i]), std::move(p));
  }
  return out;
}

Json stats_over_ranks(const comm::Communicator& comm, double value) {
  const RankStats s = rank_stats(comm, value);
  Json out = Json::object();
  out.set("min", s.min);
  out.set("mean", s.mean);
  out.set("max", s.max);
  out.set("slowest_rank", s.slowest_rank);
  return out;
}

void write_json_atomic(const std::string& path, const Json& json) {
  namespace fs = std::filesystem;
  const std::string text = json.dump(2) + "\n";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ST_CHECK(fd >= 0, "cannot write " << path << ": cannot create " << tmp << ": " << errno_text());
  std::size_t done = 0;
  bool ok = true;
  std::string why;
  while (ok && done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      why = "write: " + errno_text();
    } else {
      done += static_cast<std::size_t>(n);
    }
  }
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    why = "fsync: " + errno_text();
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    why = "close: " + errno_text();
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    why = "rename: " + errno_text();
  }
  if (!ok) {
    std::remove(tmp.c_str());
    ST_THROW("cannot write " << path << ": " << why);
  }
  // Persist the directory entry too; failure here only weakens durability, so it is not an error.
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace scaletrain::report
