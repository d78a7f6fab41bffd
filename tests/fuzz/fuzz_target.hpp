// What every fuzz target provides (tests/fuzz/fuzz_*.cpp) and what they share. A target takes
// one input's bytes, puts them where the real code reads them (a shard file, a checkpoint file,
// a config file, a JPEG sample) and runs the path the binaries run on them. It reports whether
// the input was accepted, refused with a clear error (scaletrain::Error or UsageError naming the
// input file, or for the JPEG decoder the decoder's own message), or refused with some other
// exception. Crashes, sanitizer reports and hangs are not caught here: the seeded driver
// (driver.cpp) sees them from outside the process, libFuzzer from its own handlers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace scaletrain::fuzz {

enum class Outcome { ok, clear_error, other_error };

struct Result {
  Outcome outcome = Outcome::ok;
  std::string message;  // the error's text (empty when ok)
};

// Implemented by each target.
const char* target_name();
// Once per process, before any input: MPI (single rank), models, scratch files.
void target_init();
Result run_input(const uint8_t* data, std::size_t size);
// A worker that an input ended with a sanitizer report or hung on (`report`: its stderr, with the
// sanitizer's report or, for a hang, gdb's stacks of its threads; the input's bytes in the file
// `input_path`) hit a documented limit rather than a bug when this returns the limit's name:
// counted as known_limit, not a finding. nullptr for everything else; every target but
// fuzz_shard has no such limit.
const char* known_limit(const std::string& input_path, const std::string& report);

// Shared helpers (fuzz_common.cpp).
// A scratch directory of this process, made on first use and removed at exit.
const std::string& scratch_dir();
// Writes bytes to path (replacing it); throws std::runtime_error when it cannot.
void write_file(const std::string& path, const uint8_t* data, std::size_t size);
// MPI_Init for a single rank, once (the library's error identity names rank and host).
void init_mpi_once();
// Classifies the exception in flight (call from a catch block): a scaletrain::Error or
// UsageError whose message contains `path` is a clear error; anything else is other_error.
Result classify_current_exception(const std::string& path);
// Whether the first stack of a sanitizer report starts inside libhdf5: its first frame that is
// not the sanitizer's own (an interceptor such as memcpy) or libc's is in a libhdf5 library.
bool report_starts_in_libhdf5(const std::string& report);

}  // namespace scaletrain::fuzz
