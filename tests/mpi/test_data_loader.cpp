// The loader across ranks: with shuffle and drop_last every rank runs the same number of steps
// (also with pad_last, which covers every sample, and in shard mode)
// and the ranks' samples are distinct, P * floor(floor(N / P) / B) * B of them; the order is a
// function of (seed, epoch); evaluation (no shuffle, no drop) sees every sample exactly once.
// The dataset is written by rank 0 with the C++ writer; each sample's pixels encode its id.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <set>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;

namespace {
constexpr int kClasses = 10;
constexpr int kH = 3, kW = 2, kC = 1;
// Shards of uneven sizes (one smaller than a batch) so that batches straddle shard borders.
const std::vector<int64_t> kShardSizes{300, 5, 417, 281};
constexpr int64_t kTotal = 1003;

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Rank 0 writes the dataset into a fresh directory whose name it broadcasts.
struct IndexedDataset {
  std::string dir;
  IndexedDataset() {
    io::h5_silence_errors();
    std::string path;
    if (rank() == 0) {
      path = (fs::temp_directory_path() / ("scaletrain_test_data_loader_" + std::to_string(::getpid()))).string();
      fs::remove_all(path);
      fs::create_directories(fs::path(path) / "train");
      int64_t first = 0;
      for (std::size_t i = 0; i < kShardSizes.size(); ++i) {
        const int64_t n = kShardSizes[i];
        Tensor images = Tensor::empty({n, kH, kW, kC}, DType::u8);
        Tensor labels = Tensor::empty({n}, DType::i32);
        for (int64_t s = 0; s < n; ++s) {
          const int64_t id = first + s;
          uint8_t* px = images.data<uint8_t>() + s * kH * kW * kC;
          px[0] = id & 0xff;
          px[1] = (id >> 8) & 0xff;
          for (int k = 2; k < kH * kW * kC; ++k) px[k] = static_cast<uint8_t>(id * 31 + k);
          labels.data<int32_t>()[s] = static_cast<int32_t>(id % kClasses);
        }
        data::write_image_shard((fs::path(path) / "train" / data::shard_file_name(i, kShardSizes.size())).string(),
                                images, labels, kClasses, {0.0}, {1.0}, 16);
        first += n;
      }
    }
    int len = static_cast<int>(path.size());
    MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
    path.resize(len);
    MPI_Bcast(path.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
    dir = path;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  ~IndexedDataset() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0) fs::remove_all(dir);
  }
};

// Ids of every sample one epoch yields on this rank, checking each sample's pixels and label.
std::vector<int64_t> epoch_ids(data::Loader& loader, int epoch, int64_t batch, bool drop_last, int64_t* steps) {
  loader.start_epoch(epoch);
  std::vector<int64_t> ids;
  Tensor images, labels;
  *steps = 0;
  while (loader.next(images, labels)) {
    ++*steps;
    const int64_t b = labels.numel();
    if (drop_last) BOOST_TEST(b == batch);
    BOOST_TEST((images.shape() == Shape{b, kH, kW, kC}));
    for (int64_t s = 0; s < b; ++s) {
      const uint8_t* x = images.data<uint8_t>() + s * kH * kW * kC;
      const int64_t id = x[0] | (int64_t(x[1]) << 8);
      for (int k = 2; k < kH * kW * kC; ++k) BOOST_TEST(int(x[k]) == int(static_cast<uint8_t>(id * 31 + k)));
      BOOST_TEST(labels.data<int32_t>()[s] == id % kClasses);
      ids.push_back(id);
    }
  }
  return ids;
}

// Every rank's ids, concatenated in rank order, on every rank.
std::vector<int64_t> gather_all(const std::vector<int64_t>& mine) {
  const int p = world();
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(p), offsets(p, 0);
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 1; r < p; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
  std::vector<int64_t> all(offsets[p - 1] + counts[p - 1]);
  MPI_Allgatherv(mine.data(), n, MPI_INT64_T, all.data(), counts.data(), offsets.data(), MPI_INT64_T, MPI_COMM_WORLD);
  return all;
}

int64_t global_min(int64_t v) {
  int64_t r = 0;
  MPI_Allreduce(&v, &r, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  return r;
}
int64_t global_max(int64_t v) {
  int64_t r = 0;
  MPI_Allreduce(&v, &r, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return r;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(data_loader)

BOOST_AUTO_TEST_CASE(training_epochs_are_equal_and_disjoint) {
  IndexedDataset ds;
  const data::SplitInfo split = data::open_split(ds.dir, "train");
  BOOST_TEST(split.samples == kTotal);
  const int p = world();
  for (int64_t batch : {int64_t(7), int64_t(25)}) {
    data::LoaderOptions o;
    o.batch_size = batch;
    o.seed = 42;
    o.shuffle = true;
    o.drop_last = true;
    data::Loader loader(split, rank(), p, o);
    const int64_t expected_steps = (kTotal / p) / batch;
    BOOST_TEST(loader.steps_per_epoch() == expected_steps);
    BOOST_TEST(global_min(loader.steps_per_epoch()) == global_max(loader.steps_per_epoch()));

    std::vector<std::vector<int64_t>> epochs;
    for (int epoch = 0; epoch < 2; ++epoch) {
      int64_t steps = 0;
      const std::vector<int64_t> mine = epoch_ids(loader, epoch, batch, true, &steps);
      BOOST_TEST(steps == expected_steps);
      BOOST_TEST(global_min(steps) == global_max(steps));
      const std::vector<int64_t> all = gather_all(mine);
      const std::set<int64_t> distinct(all.begin(), all.end());
      BOOST_TEST(all.size() == size_t(p * expected_steps * batch));
      BOOST_TEST(distinct.size() == all.size());
      BOOST_TEST(*distinct.begin() >= 0);
      BOOST_TEST(*distinct.rbegin() < kTotal);
      epochs.push_back(all);
    }
    // A new epoch, a new order.
    BOOST_TEST(epochs[0] != epochs[1]);
    // The same seed gives the same order; another seed another.
    {
      data::Loader again(split, rank(), p, o);
      int64_t steps = 0;
      BOOST_TEST(gather_all(epoch_ids(again, 1, batch, true, &steps)) == epochs[1]);
      BOOST_TEST(gather_all(epoch_ids(again, 0, batch, true, &steps)) == epochs[0]);
    }
    {
      data::LoaderOptions other = o;
      other.seed = 43;
      data::Loader reseeded(split, rank(), p, other);
      int64_t steps = 0;
      BOOST_TEST(gather_all(epoch_ids(reseeded, 0, batch, true, &steps)) != epochs[0]);
    }
  }
}

BOOST_AUTO_TEST_CASE(shuffled_slices_are_disjoint_when_batches_divide) {
  // With B dividing floor(N / P) nothing is dropped but the remainder N mod P: the union is
  // exactly P * floor(N / P) distinct samples.
  IndexedDataset ds;
  const data::SplitInfo split = data::open_split(ds.dir, "train");
  const int p = world();
  data::LoaderOptions o;
  o.batch_size = kTotal / p;  // one batch per rank
  o.seed = 3;
  data::Loader loader(split, rank(), p, o);
  int64_t steps = 0;
  const std::vector<int64_t> all = gather_all(epoch_ids(loader, 0, o.batch_size, true, &steps));
  BOOST_TEST(steps == 1);
  BOOST_TEST(all.size() == size_t(p * (kTotal / p)));
  BOOST_TEST(std::set<int64_t>(all.begin(), all.end()).size() == all.size());
}

BOOST_AUTO_TEST_CASE(evaluation_sees_every_sample_once) {
  IndexedDataset ds;
  const data::SplitInfo split = data::open_split(ds.dir, "train");
  const int p = world();
  data::LoaderOptions o;
  o.batch_size = 64;
  o.shuffle = false;
  o.drop_last = false;
  data::Loader loader(split, rank(), p, o);
  int64_t steps = 0;
  const std::vector<int64_t> mine = epoch_ids(loader, 0, o.batch_size, false, &steps);
  BOOST_TEST(static_cast<int64_t>(mine.size()) == loader.samples_per_epoch());
  BOOST_TEST(steps == loader.steps_per_epoch());
  BOOST_TEST(steps == (static_cast<int64_t>(mine.size()) + 63) / 64);
  // Contiguous slice in file order: every rank reads a run of its own.
  for (std::size_t i = 1; i < mine.size(); ++i) BOOST_TEST(mine[i] == mine[i - 1] + 1);
  const std::vector<int64_t> all = gather_all(mine);
  BOOST_TEST(all.size() == size_t(kTotal));
  for (int64_t i = 0; i < static_cast<int64_t>(all.size()); ++i) BOOST_TEST(all[i] == i);
  // Each rank read only its own rows: image (6 bytes) and label (4 bytes) per sample.
  BOOST_TEST(loader.bytes_read() == static_cast<int64_t>(mine.size()) * (kH * kW * kC + 4));
}

BOOST_AUTO_TEST_CASE(pad_last_gives_every_rank_full_batches_covering_everything) {
  // Every rank yields M = ceil(ceil(N / P) / B) * B samples: the epoch order extended
  // cyclically, so the union is every sample, the first P * M - N of the order once more.
  IndexedDataset ds;
  const data::SplitInfo split = data::open_split(ds.dir, "train");
  const int p = world();
  for (const char* mode : {"global", "shard"}) {
    data::LoaderOptions o;
    o.batch_size = 16;
    o.seed = 9;
    o.pad_last = true;
    o.shuffle_mode = mode;
    o.shuffle_buffer = 50;
    o.data_threads = 2;
    data::Loader loader(split, rank(), p, o);
    const int64_t m = ((kTotal + p - 1) / p + 15) / 16 * 16;
    BOOST_TEST(loader.samples_per_epoch() == m);
    for (int epoch = 0; epoch < 2; ++epoch) {
      int64_t steps = 0;
      const std::vector<int64_t> mine = epoch_ids(loader, epoch, 16, true, &steps);
      BOOST_TEST(mine == loader.plan(epoch));
      BOOST_TEST(steps == m / 16);
      BOOST_TEST(global_min(steps) == global_max(steps));
      const std::vector<int64_t> all = gather_all(mine);
      BOOST_TEST(all.size() == size_t(p * m));
      const std::set<int64_t> distinct(all.begin(), all.end());
      BOOST_TEST(distinct.size() == size_t(kTotal), mode);
      BOOST_TEST(*distinct.begin() == 0);
      BOOST_TEST(*distinct.rbegin() == kTotal - 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(shard_mode_reads_few_shards_with_equal_steps) {
  // Shards permuted and dealt as contiguous slices of the shard sequence: equal steps, no sample
  // twice, and a rank touches at most (its share of the shards) + 2 shards.
  IndexedDataset ds;
  const data::SplitInfo split = data::open_split(ds.dir, "train");
  const int p = world();
  data::LoaderOptions o;
  o.batch_size = 10;
  o.seed = 4;
  o.shuffle_mode = "shard";
  o.shuffle_buffer = 64;
  data::Loader loader(split, rank(), p, o);
  const int64_t expected_steps = (kTotal / p) / 10;
  std::vector<std::vector<int64_t>> epochs;
  for (int epoch = 0; epoch < 2; ++epoch) {
    int64_t steps = 0;
    const std::vector<int64_t> mine = epoch_ids(loader, epoch, 10, true, &steps);
    BOOST_TEST(steps == expected_steps);
    BOOST_TEST(global_min(steps) == global_max(steps));
    std::set<int64_t> shards;
    for (int64_t id : mine) {
      int64_t first = 0, s = 0;
      while (first + kShardSizes[s] <= id) first += kShardSizes[s++];
      shards.insert(s);
    }
    BOOST_TEST(static_cast<int64_t>(shards.size()) <= static_cast<int64_t>(kShardSizes.size()) / p + 2);
    const std::vector<int64_t> all = gather_all(mine);
    BOOST_TEST(all.size() == size_t(p * expected_steps * 10));
    BOOST_TEST(std::set<int64_t>(all.begin(), all.end()).size() == all.size());
    epochs.push_back(all);
  }
  BOOST_TEST(epochs[0] != epochs[1]);
}

BOOST_AUTO_TEST_SUITE_END()
