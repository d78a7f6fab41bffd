// The epoch plan: which samples each rank yields in each epoch, in which order (issue 4,
// section 1). Pure functions of (shard sizes, rank, ranks, options, epoch), so that every rank
// computes its own slice without communication and tests can check the whole plan serially.
//
// Counts (the same every epoch and, except for evaluation, on every rank; N samples, P ranks,
// B = batch_size):
//   drop_last (default): each rank's slice has floor(N / P) samples, of which the first
//     floor(floor(N / P) / B) * B are yielded (full batches only); the rest is dropped.
//   pad_last (whatever drop_last says): every rank yields M = ceil(ceil(N / P) / B) * B samples;
//     the epoch's order is extended cyclically (position k >= N is position k - N, and so on),
//     so the P * M - N extra samples repeat the first ones of the order. Every sample is seen at
//     least once.
//   neither (evaluation): slices of floor(N / P) or floor(N / P) + 1 samples cover every sample
//     exactly once; the last batch may be short and ranks may differ by one step.
//
// Orders:
//   shuffle = false: file order (shard order, then row), cut into contiguous rank slices.
//   shuffle_mode "global": a permutation of all N samples seeded by (seed, epoch), identical on
//     every rank and independent of P; rank r takes the r-th contiguous slice.
//   shuffle_mode "shard": the shards are permuted (seeded by (seed, epoch)) and concatenated,
//     rows in file order; rank r takes the r-th contiguous slice of that sequence (so shards are
//     dealt to ranks in permuted order, balanced by sample count: a rank reads about N / P
//     consecutive samples from a few shards, and a shard on a slice border is split between two
//     ranks). The slice is then shuffled through a buffer of shuffle_buffer samples (seeded by
//     (seed, epoch, rank)): the buffer starts with the slice's first samples; each output is a
//     uniformly chosen buffer entry, replaced by the next sample of the slice. Counts and
//     coverage are those above; reads stay nearly sequential.
#pragma once

#include <cstdint>
#include <vector>

#include "scaletrain/data/loader.hpp"

namespace scaletrain::data {

// Checks options.shuffle_mode, batch_size, shuffle_buffer and (rank, world); throws naming the
// bad value.
void check_plan_options(int rank, int world_size, const LoaderOptions& options);

// Samples `rank` yields per epoch (see the counts above).
int64_t planned_samples(int64_t total, int rank, int world_size, const LoaderOptions& options);

// The split-wide sample ids (shard order, then row) that `rank` yields in `epoch`, in order.
// shard_sizes: samples per shard, in shard order.
std::vector<int64_t> plan_epoch(const std::vector<int64_t>& shard_sizes, int rank, int world_size,
                                const LoaderOptions& options, int epoch);

}  // namespace scaletrain::data
