// Naming, the `latest` pointer, retention and the newest-valid search of a run directory's
// checkpoints (run_directory.hpp). Readers go by step number alone: a checkpoint published just
// before a crash, before `latest` was updated, is complete and verified, and it is the newest. Files are recognised by
// their name alone (step-<digits>.h5), so a user's own files in the folder are never touched.
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
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), digit)) return -1;
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
  std::vector<std::string> order;
  for (const auto& entry : by_step(folder_of(run_dir))) order.push_back(entry.second);
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
  std::string pointed;
  std::ifstream pointer(fs::path(dir) / kLatest);
  if (pointer && std::getline(pointer, pointed)) pointed = (fs::path(dir) / pointed).string();
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < published.size(); ++i)
    if (published[i].second != pointed && fs::remove(published[i].second, ec)) removed.push_back(published[i].second);
  if (fs::is_directory(dir, ec))
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (step_of(entry.path().filename().string(), true) >= 0 && fs::remove(entry.path(), ec))
        removed.push_back(entry.path().string());
  return removed;
}

std::vector<std::string> set_aside_newer_checkpoints(const std::string& run_dir, int64_t step) {
  std::vector<std::string> moved;
  for (const auto& [s, path] : by_step(checkpoints_dir(run_dir))) {
    if (s <= step) break;
    std::error_code ec;
    fs::rename(path, path + ".damaged", ec);
    if (!ec) moved.push_back(path + ".damaged");
  }
  return moved;
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
    } catch (const std::exception& e) {  // bad_alloc too: damaged metadata may claim any size
      ST_WARN("skipping checkpoint " << candidate << ": " << error_text(e));
      reasons += "\n  " + error_text(e);
    }
  }
  ST_THROW("no valid checkpoint in " << path << ": all " << candidates.size() << " are damaged:" << reasons);
}

}  // namespace scaletrain::checkpoint
