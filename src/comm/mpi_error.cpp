// ST_CHECK_MPI's message (core/error.hpp): MPI's own text for the error code.
#include <mpi.h>

#include "scaletrain/core/error.hpp"

namespace scaletrain::detail {

void throw_mpi_error(const char* file, int line, const char* expr, int code) {
  char buf[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, buf, &len);
  throw_library_error("MPI", file, line, expr, std::string(buf, len));
}

}  // namespace scaletrain::detail
