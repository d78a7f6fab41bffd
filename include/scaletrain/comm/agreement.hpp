// Work that one rank does for all, with its outcome agreed: every rank returns, or every rank
// throws rank 0's error. A failure then ends the job with every rank's own exit, not with
// MPI_Abort, which Open MPI 4.1 can leave hanging when another rank is already in MPI_Finalize.
#pragma once

#include <functional>

#include "scaletrain/comm/communicator.hpp"

namespace scaletrain::comm {

// Runs `work` on rank 0 and makes its outcome everyone's: an error there (a UsageError stays
// one) is thrown on every rank with rank 0's message. Collective.
void on_rank0_agreed(const Communicator& comm, const std::function<void()>& work);

}  // namespace scaletrain::comm
