// MPI tests: initialises MPI, runs the Boost.Test suites on every rank, then agrees on the
// verdict so that a failure on any rank fails the test on all of them.
#define BOOST_TEST_MODULE scaletrain_mpi_tests
#define BOOST_TEST_NO_MAIN
#include <mpi.h>

#include <boost/test/unit_test.hpp>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);  // as the binaries (cli/guard.cpp)
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  scaletrain::set_error_identity(rank, std::string(host, len));
  scaletrain::set_log_rank(rank);
  int rc = boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
