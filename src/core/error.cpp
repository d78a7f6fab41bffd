// Error formatting: rank and host in front of every message, library messages appended. The
// MPI and HDF5 messages are fetched where those libraries are linked (comm/mpi_error.cpp,
// io/h5_error.cpp), so that the bottom layer links neither.
#include "scaletrain/core/error.hpp"

#include <atomic>
#include <mutex>

namespace scaletrain {
namespace {
std::string g_identity;  // "rank R on HOST", empty before MPI is up

std::string prefix() { return g_identity.empty() ? std::string() : "[" + g_identity + "] "; }

std::string basename_of(const char* path) {
  std::string p(path);
  auto pos = p.rfind('/');
  return pos == std::string::npos ? p : p.substr(pos + 1);
}
}  // namespace

void set_error_identity(int rank, const std::string& host) {
  g_identity = "rank " + std::to_string(rank) + " on " + host;
}
std::string error_identity() { return g_identity; }

namespace {
std::atomic<bool> g_agreed_error{false};
}  // namespace

AgreedError::AgreedError(const std::string& what) : Error(what) { g_agreed_error = true; }
bool agreed_error_thrown() { return g_agreed_error; }

namespace {
std::mutex g_last_words_mutex;
std::function<void(const std::string&)> g_last_words;
}  // namespace

void set_last_words(std::function<void(const std::string& why)> hook) {
  std::lock_guard<std::mutex> lock(g_last_words_mutex);
  g_last_words = std::move(hook);
}

void say_last_words(const std::string& why) {
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard<std::mutex> lock(g_last_words_mutex);
    hook.swap(g_last_words);  // at most once
  }
  if (hook) {
    try {
      hook(why);
    } catch (...) {  // the job ends anyway; last words are best effort
    }
  }
}

std::string error_text(const std::exception& e) {
  const std::string what = e.what(), p = prefix();
  return !p.empty() && what.rfind(p, 0) == 0 ? what.substr(p.size()) : what;
}

namespace detail {
// The message first, for the user; where in the source it was raised last, for the developer
// reading a job log ("... got 0 (at trainer.cpp:123)").
void throw_error(const char* file, int line, const std::string& message) {
  throw Error(prefix() + message + " (at " + basename_of(file) + ":" + std::to_string(line) + ")");
}

void throw_library_error(const char* library, const char* file, int line, const char* expr,
                         const std::string& message) {
  throw Error(prefix() + library + " call failed at " + basename_of(file) + ":" + std::to_string(line) + ": " + expr +
              ": " + message);
}
}  // namespace detail
}  // namespace scaletrain
