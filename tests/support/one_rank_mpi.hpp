// The unit-test binary as a one-rank MPI job (an MPI singleton), for the code under test that
// takes a Communicator: MPI is initialised on first use and finalised at exit.
#pragma once

#include "scaletrain/comm/communicator.hpp"

namespace scaletrain::test {

const comm::Communicator& one_rank_world();

}  // namespace scaletrain::test
