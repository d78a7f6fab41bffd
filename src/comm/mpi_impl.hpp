// Private to src/comm: the MPI handle behind a Communicator, so that topology and all-reduce code
// can call MPI on the communicators they own while public headers stay free of mpi.h.
#pragma once

#include <mpi.h>

#include "scaletrain/comm/communicator.hpp"

namespace scaletrain::comm {

struct Communicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
};

inline MPI_Comm mpi_comm(const Communicator& c) { return c.impl().comm; }

}  // namespace scaletrain::comm
