// Naming, the `latest` pointer, retention and the newest-valid search of a run directory's
// checkpoints (run_directory.hpp). Files are recognised by their name alone (step-<digits>.h5), so
// a user's own files in the folder are never touched.
#include "scaletrain/checkpoint/run_directory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"

namespace scaletrain::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLatest = "latest";

// The step of "step-000000123.h5" (or of its ".tmp"), or -1 for any other name.
int64_t step_of(const std::string& name, bool tmp) {
  const std::string suffix = tmp ? ".h5.tmp" : ".h5";
  if (name.rfind("step-", 0) != 0 || name.size() <= 5 + suffix.size()) return -1;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return -1;
  const std::string digits = name.substr(5, name.size() - 5 - suffix.size());
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

// (step, path) of every published checkpoint, highest step first.
std::vector<std::pair<int64_t, std::string>> by_step(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(entry.path().filename().string(), false);
    if (step >= 0 && entry.is_regular_file(ec)) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

// The checkpoints folder for a run directory, or the folder itself when it holds checkpoints
// (a user may name either).
std::string folder_of(const std::string& path) {
  const std::string nested = checkpoints_dir(path);
  std::error_code ec;
  if (fs::is_directory(nested, ec)) return nested;
  return path;
}

void write_and_sync(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ST_CHECK(fd >= 0, "cannot create " << path << ": " << std::strerror(errno));
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  const bool ok = n == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  ST_CHECK(ok, "cannot write " << path << ": " << std::strerror(n < 0 ? err : errno));
}

}  // namespace

std::string checkpoints_dir(const std::string& run_dir) { return (fs::path(run_dir) / "checkpoints").string(); }

std::string checkpoint_file(const std::string& run_dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%09lld.h5", static_cast<long long>(step));
  return (fs::path(checkpoints_dir(run_dir)) / name).string();
}

std::vector<std::string> list_checkpoints(const std::string& run_dir) {
  const std::string dir = folder_of(run_dir);
  std::vector<std::string> order;
  std::ifstream pointer(fs::path(dir) / kLatest);
  std::string named;
  if (pointer && std::getline(pointer, named) && step_of(named, false) >= 0) {
    std::error_code ec;
    const std::string path = (fs::path(dir) / named).string();
    if (fs::is_regular_file(path, ec)) order.push_back(path);
  }
  for (const auto& entry : by_step(dir))
    if (order.empty() || entry.second != order.front()) order.push_back(entry.second);
  return order;
}

void publish_latest(const std::string& run_dir, const std::string& checkpoint_path) {
  const std::string dir = checkpoints_dir(run_dir);
  const std::string pointer = (fs::path(dir) / kLatest).string(), tmp = pointer + ".tmp";
  try {
    write_and_sync(tmp, fs::path(checkpoint_path).filename().string() + "\n");
    ST_CHECK(std::rename(tmp.c_str(), pointer.c_str()) == 0, "rename from " << tmp << ": " << std::strerror(errno));
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    ST_THROW("cannot update the checkpoint pointer " << pointer << ": " << error_text(e));
  }
}

std::vector<std::string> prune_checkpoints(const std::string& run_dir, int keep) {
  const std::string dir = checkpoints_dir(run_dir);
  std::vector<std::string> removed;
  std::error_code ec;
  const auto published = by_step(dir);
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < published.size(); ++i)
    if (fs::remove(published[i].second, ec)) removed.push_back(published[i].second);
  if (fs::is_directory(dir, ec))
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (step_of(entry.path().filename().string(), true) >= 0 && fs::remove(entry.path(), ec))
        removed.push_back(entry.path().string());
  return removed;
}

CheckpointData read_newest_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return read_checkpoint(path);
  const std::vector<std::string> candidates = list_checkpoints(path);
  ST_CHECK(!candidates.empty(), "no checkpoint in " << path << " (expected " << checkpoints_dir(path)
                                                    << "/step-*.h5, or a checkpoint file)");
  std::string reasons;
  for (const std::string& candidate : candidates) {
    try {
      return read_checkpoint(candidate);
    } catch (const Error& e) {
      ST_WARN("skipping checkpoint " << candidate << ": " << error_text(e));
      reasons += "\n  " + error_text(e);
    }
  }
  ST_THROW("no valid checkpoint in " << path << ": all " << candidates.size() << " are damaged:" << reasons);
}

}  // namespace scaletrain::checkpoint
