// The helpers every fuzz target shares, and the libFuzzer entry points, so that each target
// links either with driver.cpp (our seeded mutation driver, GCC builds) or with libFuzzer
// (clang, -fsanitize=fuzzer; tools/fuzz.sh --libfuzzer).
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fuzz/fuzz_target.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::fuzz {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/scaletrain-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot make a scratch directory " + pattern);
    static const std::string made = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(made, ec);
    });
    return pattern;
  }();
  return dir;
}

void write_file(const std::string& path, const uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

void init_mpi_once() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

Result classify_current_exception(const std::string& path) {
  try {
    throw;
  } catch (const Error& e) {
    const std::string what = e.what();
    return {what.find(path) != std::string::npos ? Outcome::clear_error : Outcome::other_error, what};
  } catch (const UsageError& e) {
    const std::string what = e.what();
    return {what.find(path) != std::string::npos ? Outcome::clear_error : Outcome::other_error, what};
  } catch (const std::exception& e) {
    return {Outcome::other_error, std::string("std::exception: ") + e.what()};
  } catch (...) {
    return {Outcome::other_error, "an exception that is not a std::exception"};
  }
}

bool report_starts_in_libhdf5(const std::string& report) {
  std::istringstream lines(report);
  std::string line;
  bool in_report = false;
  while (std::getline(lines, line)) {
    if (line.find("ERROR: AddressSanitizer") != std::string::npos) in_report = true;
    const auto hash = line.find('#');
    if (!in_report || hash == std::string::npos || line.find(" in ", hash) == std::string::npos) continue;
    // "    #1 0x7f... in H5O__msg_iterate_real (/lib/x86_64-linux-gnu/libhdf5_openmpi.so.103+0x...)"
    const bool sanitizer_or_libc =
        line.find("libasan") != std::string::npos || line.find("libubsan") != std::string::npos ||
        line.find("__interceptor_") != std::string::npos || line.find("libc.so") != std::string::npos ||
        line.find("/sysdeps/") != std::string::npos;  // libc's memmove, named by its sources
    if (sanitizer_or_libc) continue;
    // libhdf5's module, or, where it has debug symbols, one of its functions (they all start H5).
    return line.find("libhdf5") != std::string::npos || line.find(" in H5") != std::string::npos;
  }
  return false;
}

}  // namespace scaletrain::fuzz

// libFuzzer's entry points (also called by nothing else: driver.cpp calls run_input directly).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  scaletrain::fuzz::target_init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  // Errors, clear or not, are outcomes, not crashes; libFuzzer looks for crashes and hangs.
  (void)scaletrain::fuzz::run_input(data, size);
  return 0;
}
