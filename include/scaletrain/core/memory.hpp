// What memory this process may still take, for checks made before a large allocation: a request
// that cannot fit is a clear error naming the options behind it, not an out-of-memory kill (which
// under Slurm looks like any other crash) minutes into a job.
#pragma once

#include <cstdint>
#include <string>

namespace scaletrain {

// Bytes still available: the kernel's MemAvailable (/proc/meminfo), lowered to the room left
// under the memory limit of the process's cgroup (Slurm's --mem, cgroup v2 or v1) when there is
// one. -1 when neither can be read.
int64_t available_memory_bytes();

// Throws scaletrain::Error when `ranks_on_node` ranks asking `bytes` each would not fit in what is
// available: "<what>: 12.3 GB per rank (98.4 GB for the node's 8 ranks), 64.0 GB available
// (MemAvailable, and the room under the job's cgroup limit); <advice>". Does nothing when memory
// is unknown.
void check_memory_request(int64_t bytes, int ranks_on_node, const std::string& what, const std::string& advice);

// Makes glibc's malloc keep the host memory a process frees and serve large blocks from it:
// no mmap per large block (M_MMAP_MAX 0) and no trimming of the heap's free top (M_TRIM_THRESHOLD
// at its most). Why: a training step frees and allocates the same activation gradients every step
// (nn::fresh_activation); by default glibc maps each block above its threshold afresh and unmaps it
// on free, and every new page then costs a fault: a ResNet-20 CPU step ran 9% slower so. The heap
// then stays at its peak, as a GPU's caching allocator does. Called once at start-up by scaletrain;
// a no-op where malloc is not glibc's (a sanitizer's, say).
void keep_freed_host_memory();

}  // namespace scaletrain
