// Entry points of the binaries. Each parses its subcommand with Boost.Program_options,
// runs it inside an MPI session, and turns any scaletrain::Error into a clear message on
// stderr and MPI_Abort, so that no rank is left waiting.
#pragma once

namespace scaletrain::cli {

int scaletrain_main(int argc, char** argv);
int scaletrain_data_main(int argc, char** argv);
int scaletrain_comm_bench_main(int argc, char** argv);
int scaletrain_advisor_main(int argc, char** argv);

}  // namespace scaletrain::cli
