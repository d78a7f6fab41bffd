// The frame every binary runs in: MPI up (MPI_Init_thread, MPI_THREAD_MULTIPLE), error identity set,
// HDF5's own error printing silenced, and any scaletrain::Error (or std::exception) turned into
//   <program>: error: <message>
// on stderr followed by MPI_Abort, so that every rank exits non-zero within seconds rather than
// hanging in a collective. Errors found before MPI matters (bad options) print once, on rank 0.
#pragma once

#include <exception>
#include <functional>
#include <string>

#include "scaletrain/core/error.hpp"

namespace scaletrain::cli {

// Runs body(argc, argv) guarded as above and returns its exit code (0 on success).
int run_guarded(const char* program, int argc, char** argv, const std::function<int(int, char**)>& body);

// A usage error (core/error.hpp): printed by rank 0 only, with a hint to run --help; every rank
// exits with code 2.
using scaletrain::UsageError;

}  // namespace scaletrain::cli
