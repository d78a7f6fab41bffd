#include "scaletrain/cli/guard.hpp"

#include <hdf5.h>
#include <mpi.h>

#include <cstdio>
#include <string>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"

namespace scaletrain::cli {

int run_guarded(const char* program, int argc, char** argv, const std::function<int(int, char**)>& body) {
  int provided = 0;
  // The overlapped all-reduce calls MPI from its communication thread while the main thread
  // works, so ask for MPI_THREAD_MULTIPLE; AllReducer refuses to start without it.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  set_error_identity(rank, std::string(host, len));
  set_log_rank(rank);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);

  int rc = 0;
  try {
    rc = body(argc, argv);
  } catch (const UsageError& e) {
    if (rank == 0)
      std::fprintf(stderr, "%s: error: %s\nRun '%s --help' for the options.\n", program, e.what(), program);
    MPI_Finalize();
    return 2;
  } catch (const AgreedError& e) {
    if (rank == 0) std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    MPI_Finalize();
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    std::fflush(stderr);
    std::fflush(stdout);
    // One rank's failure ends the job: no rank may be left waiting in a collective.
    if (size > 1) comm::abort_job(1);
    MPI_Finalize();
    return 1;
  }
  MPI_Finalize();
  return rc;
}

}  // namespace scaletrain::cli
