// Private to src/comm: the all-reduce of a message already in its wire format, over any
// communicator, for the GPU reducer's level across nodes (nccl/nccl_reducer.cpp), which casts to
// 16 bits on the GPU and hands MPI the result.
#pragma once

#include <cstdint>

#include "scaletrain/comm/allreduce.hpp"
#include "scaletrain/comm/communicator.hpp"

namespace scaletrain::comm {

// Sums `count` elements in place over `group`: floats (Compression::none) with MPI_SUM, or 16-bit
// words (fp16 / bf16) with allreduce.cpp's sum (each addition in fp32, rounded back). Blocking;
// results bitwise equal on every rank. A group of one rank, or a count of 0, changes nothing.
// MPI's 16-bit sum is a host function: `data` is host memory unless compression is none and
// the MPI is CUDA-aware.
void allreduce_wire(const Communicator& group, void* data, int64_t count, Compression compression);

}  // namespace scaletrain::comm
