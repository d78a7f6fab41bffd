// The MPI-IO sample readers (--io mpiio, mpiio-collective) on 1, 2 and 4 ranks: random id lists
// (repeats, several shards, empty lists on some ranks) return exactly the bytes and labels of the
// generated pattern and of a plain HDF5 read; bytes_read counts distinct rows; evaluation falls
// back to independent reads (ranks may call read() different numbers of times); JPEG shards
// (flat bytes + offsets) read as byte ranges, collectively too; bad ids and truncated shards raise an error on every
// rank without a hang; a training loader with collective reads abandoned mid-epoch (a stopped or cut run), while ranks
// have prefetched different amounts, neither hangs nor loses its place. ST_MPI_RANKS: 1 2 4
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;

namespace {
constexpr int kClasses = 7;
constexpr int kH = 4, kW = 3, kC = 2;
constexpr int64_t kRow = kH * kW * kC;
// Uneven shards (one empty, one smaller than a chunk) with 16 samples per chunk.
const std::vector<int64_t> kShardSizes{100, 0, 5, 70, 41};

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

uint8_t pixel(int64_t id, int64_t k) { return static_cast<uint8_t>((id * 131 + k * 7 + (id >> 8)) & 0xff); }
int32_t label(int64_t id) { return static_cast<int32_t>((id * 5 + 3) % kClasses); }
// Variable-length samples: 1 to 60 bytes.
int64_t vlen_size(int64_t id) { return 1 + (id * 37) % 60; }

// A fresh directory named by rank 0, removed at the end.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& tag) {
    io::h5_silence_errors();
    if (rank() == 0) {
      path = (fs::temp_directory_path() / ("scaletrain_test_mpiio_" + tag + "_" + std::to_string(::getpid()))).string();
      fs::remove_all(path);
      fs::create_directories(fs::path(path) / "train");
    }
    int len = static_cast<int>(path.size());
    MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
    path.resize(len);
    MPI_Bcast(path.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  }
  ~TempDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank() == 0) fs::remove_all(path);
  }
};

// Rank 0 writes the raw dataset with the project's writer; every rank opens the split.
data::SplitInfo write_raw(const TempDir& dir) {
  if (rank() == 0) {
    int64_t first = 0;
    for (std::size_t i = 0; i < kShardSizes.size(); ++i) {
      const int64_t n = kShardSizes[i];
      Tensor images = Tensor::empty({n, kH, kW, kC}, DType::u8);
      Tensor labels = Tensor::empty({n}, DType::i32);
      for (int64_t s = 0; s < n; ++s) {
        for (int64_t k = 0; k < kRow; ++k) images.data<uint8_t>()[s * kRow + k] = pixel(first + s, k);
        labels.data<int32_t>()[s] = label(first + s);
      }
      data::write_image_shard((fs::path(dir.path) / "train" / data::shard_file_name(i, kShardSizes.size())).string(),
                              images, labels, kClasses, {0.5, 0.5}, {0.25, 0.25}, 16);
      first += n;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return data::open_split(dir.path, "train");
}

// Rank 0 writes shards holding `jpeg` (format 2: flat bytes and offsets) and `labels` with the
// project's writer; the bytes are a pattern, not JPEG, as the reader never decodes.
data::SplitInfo write_vlen(const TempDir& dir) {
  if (rank() == 0) {
    int64_t first = 0;
    for (std::size_t i = 0; i < kShardSizes.size(); ++i) {
      const int64_t n = kShardSizes[i];
      std::vector<std::vector<uint8_t>> bytes(n);
      Tensor labels = Tensor::empty({n}, DType::i32);
      for (int64_t s = 0; s < n; ++s) {
        bytes[s].resize(vlen_size(first + s));
        for (std::size_t k = 0; k < bytes[s].size(); ++k) bytes[s][k] = pixel(first + s, k);
        labels.data<int32_t>()[s] = label(first + s);
      }
      data::write_jpeg_shard((fs::path(dir.path) / "train" / data::shard_file_name(i, kShardSizes.size())).string(),
                             bytes, labels, kClasses, {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25});
      first += n;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return data::open_split(dir.path, "train");
}

// Rank 0 writes raw shards whose `images` HDF5 must read itself: compressed (deflate) in
// 16-row chunks for even shards, contiguous for odd ones, both with the generated pattern.
data::SplitInfo write_other_layouts(const TempDir& dir) {
  data::SplitInfo split;
  split.dir = (fs::path(dir.path) / "train").string();
  split.height = kH;
  split.width = kW;
  split.channels = kC;
  split.num_classes = kClasses;
  int64_t first = 0;
  for (std::size_t i = 0; i < kShardSizes.size(); ++i) {
    const int64_t n = kShardSizes[i];
    const std::string path = (fs::path(split.dir) / data::shard_file_name(i, kShardSizes.size())).string();
    if (rank() == 0) {
      std::vector<uint8_t> images(n * kRow);
      std::vector<int32_t> labels(n);
      for (int64_t s = 0; s < n; ++s) {
        for (int64_t k = 0; k < kRow; ++k) images[s * kRow + k] = pixel(first + s, k);
        labels[s] = label(first + s);
      }
      std::lock_guard<std::recursive_mutex> lock(io::h5_mutex());
      hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      BOOST_REQUIRE(f >= 0);
      hsize_t dims[4] = {hsize_t(n), kH, kW, kC}, chunk[4] = {hsize_t(std::min<int64_t>(n, 16)), kH, kW, kC};
      hid_t space = H5Screate_simple(4, dims, nullptr);
      hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
      if (i % 2 == 0 && n > 0) {
        H5Pset_chunk(dcpl, 4, chunk);
        H5Pset_deflate(dcpl, 4);
      }
      hid_t d = H5Dcreate2(f, "images", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
      BOOST_REQUIRE(d >= 0);
      if (n) BOOST_REQUIRE(H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, images.data()) >= 0);
      hsize_t ln = n;
      hid_t lspace = H5Screate_simple(1, &ln, nullptr);
      hid_t l = H5Dcreate2(f, "labels", H5T_STD_I32LE, lspace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      BOOST_REQUIRE(l >= 0);
      if (n) BOOST_REQUIRE(H5Dwrite(l, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()) >= 0);
      H5Dclose(l);
      H5Sclose(lspace);
      H5Dclose(d);
      H5Pclose(dcpl);
      H5Sclose(space);
      H5Fclose(f);
    }
    split.shards.push_back({path, n, nullptr});
    split.samples += n;
    first += n;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return split;
}

// Random ids over the whole split with deliberate repeats; empty for some (rank, round).
std::vector<int64_t> random_ids(int64_t total, int round, bool allow_empty) {
  std::mt19937_64 gen(1000 * round + rank());
  if (allow_empty && (round + rank()) % 3 == 1) return {};
  std::uniform_int_distribution<int64_t> any(0, total - 1);
  const int64_t n = 1 + static_cast<int64_t>(gen() % 90);
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(any(gen));
  ids.push_back(ids.front());  // a repeat
  if (n > 3) ids.push_back(ids[2]);
  return ids;
}

int64_t distinct(const std::vector<int64_t>& ids) {
  return static_cast<int64_t>(std::set<int64_t>(ids.begin(), ids.end()).size());
}

// Checks a raw read against the generated pattern and against H5File::read_rows.
void check_raw(const data::SplitInfo& split, const std::vector<int64_t>& ids, const data::SampleBytes& got) {
  BOOST_REQUIRE(got.ids == ids);
  BOOST_REQUIRE_EQUAL(got.labels.size(), ids.size());
  BOOST_REQUIRE_EQUAL(got.offsets.size(), ids.size() + 1);
  BOOST_REQUIRE_EQUAL(got.bytes.size(), ids.size() * kRow);
  int wrong = 0;
  for (std::size_t j = 0; j < ids.size(); ++j) {
    BOOST_REQUIRE_EQUAL(got.offsets[j], static_cast<int64_t>(j) * kRow);
    if (got.labels[j] != label(ids[j])) ++wrong;
    for (int64_t k = 0; k < kRow; ++k)
      if (got.bytes[j * kRow + k] != pixel(ids[j], k)) ++wrong;
  }
  BOOST_CHECK_EQUAL(wrong, 0);
  // Independent reference: HDF5's own read of the first id's row.
  if (!ids.empty()) {
    int64_t row = ids[0];
    std::size_t s = 0;
    while (row >= split.shards[s].samples) row -= split.shards[s++].samples;
    io::H5File f(split.shards[s].path, io::H5File::Mode::read);
    Tensor ref = Tensor::empty({1, kH, kW, kC}, DType::u8);
    f.read_rows("images", row, 1, ref);
    BOOST_CHECK(std::equal(got.bytes.begin(), got.bytes.begin() + kRow, ref.data<uint8_t>()));
  }
}

void check_mode(const std::string& io_mode) {
  TempDir dir("raw_" + io_mode);
  const data::SplitInfo split = write_raw(dir);
  comm::Communicator world = comm::Communicator::world();
  data::LoaderOptions options;
  options.io = io_mode;
  options.comm = &world;
  const bool collective = io_mode == "mpiio-collective";
  auto reader = data::make_mpiio_reader(split, options, world, collective);
  BOOST_CHECK_EQUAL(reader->name(), io_mode);
  int64_t expected_bytes = 0;
  data::SampleBytes got;
  for (int round = 0; round < 12; ++round) {
    const std::vector<int64_t> ids = random_ids(split.samples, round, true);
    reader->read(ids, got);
    check_raw(split, ids, got);
    expected_bytes += distinct(ids) * (kRow + 4);
    BOOST_CHECK_EQUAL(reader->bytes_read(), expected_bytes);
  }
  // Every sample of the split, in reverse order, in one call.
  std::vector<int64_t> all;
  for (int64_t i = split.samples - 1; i >= 0; --i) all.push_back(i);
  reader->read(all, got);
  check_raw(split, all, got);

  // An id out of range on one rank: every rank gets the error, and the reader stays usable.
  std::vector<int64_t> bad{3, 4};
  if (rank() == world.size() - 1) bad.push_back(split.samples + 5);
  bool threw = false;
  try {
    reader->read(bad, got);
  } catch (const Error& e) {
    threw = true;
    if (!collective || rank() == world.size() - 1)
      BOOST_CHECK_MESSAGE(std::string(e.what()).find("out of range") != std::string::npos, e.what());
  }
  if (collective || rank() == world.size() - 1) BOOST_CHECK(threw);
  if (collective) BOOST_CHECK(world.allreduce_and(threw));
  const std::vector<int64_t> again{0, 120, 215};
  reader->read(again, got);
  check_raw(split, again, got);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mpiio_reader)

BOOST_AUTO_TEST_CASE(independent_reads_match_the_data) { check_mode("mpiio"); }

// A run stopped mid-epoch (every rank after the same step) destroys its loader, and a run cut by
// --max-steps starts the next epoch early. The ranks' I/O threads have then issued different
// numbers of collective reads (rank 0 gives up at once, the others after their prefetch ran
// ahead): every rank must finish the same reads, and the next epoch must be read in full.
BOOST_AUTO_TEST_CASE(collective_loader_abandoned_mid_epoch) {
  TempDir dir("abandon");
  const data::SplitInfo split = write_raw(dir);
  comm::Communicator world = comm::Communicator::world();
  data::LoaderOptions options;
  options.io = "mpiio-collective";
  options.comm = &world;
  options.batch_size = 4;
  options.prefetch = 3;
  options.data_threads = 2;
  const auto pause = [&] { std::this_thread::sleep_for(std::chrono::milliseconds(rank() == 0 ? 0 : 150)); };
  Tensor images, labels;
  for (int consumed : {0, 1, 3}) {
    data::Loader loader(split, rank(), world.size(), options);
    loader.start_epoch(0);
    for (int k = 0; k < consumed; ++k) BOOST_REQUIRE(loader.next(images, labels));
    pause();
  }  // destroyed mid-epoch
  data::Loader loader(split, rank(), world.size(), options);
  loader.start_epoch(0);
  for (int k = 0; k < 2; ++k) BOOST_REQUIRE(loader.next(images, labels));
  pause();
  loader.start_epoch(1);  // epoch 0 abandoned after 2 of its steps
  const std::vector<int64_t> plan = loader.plan(1);
  int64_t at = 0;
  while (loader.next(images, labels)) {
    for (int64_t i = 0; i < labels.numel(); ++i, ++at) BOOST_CHECK_EQUAL(labels.data<int32_t>()[i], label(plan[at]));
    // Each sample's first pixel byte identifies it (the generated pattern).
    BOOST_CHECK_EQUAL(images.data<uint8_t>()[0], pixel(plan[at - labels.numel()], 0));
  }
  BOOST_CHECK_EQUAL(at, static_cast<int64_t>(plan.size()));
}

BOOST_AUTO_TEST_CASE(collective_reads_match_the_data) { check_mode("mpiio-collective"); }

// Evaluation plans give ranks different step counts: collective is refused in favour of
// independent reads, so ranks calling read() different numbers of times cannot hang.
BOOST_AUTO_TEST_CASE(evaluation_falls_back_to_independent_reads) {
  TempDir dir("eval");
  const data::SplitInfo split = write_raw(dir);
  comm::Communicator world = comm::Communicator::world();
  data::LoaderOptions options;
  options.io = "mpiio-collective";
  options.drop_last = false;
  auto reader = data::make_mpiio_reader(split, options, world, true);
  BOOST_CHECK_EQUAL(reader->name(), "mpiio");
  data::SampleBytes got;
  for (int round = 0; round <= rank(); ++round) {
    const std::vector<int64_t> ids = random_ids(split.samples, round + 50, false);
    reader->read(ids, got);
    check_raw(split, ids, got);
  }
}

// Compressed and contiguous `images`: compressed shards go through HDF5 (one hyperslab per
// run, independent even in collective mode), contiguous ones through the direct path.
BOOST_AUTO_TEST_CASE(compressed_and_contiguous_layouts) {
  TempDir dir("layouts");
  const data::SplitInfo split = write_other_layouts(dir);
  comm::Communicator world = comm::Communicator::world();
  for (bool collective : {false, true}) {
    data::LoaderOptions options;
    options.io = collective ? "mpiio-collective" : "mpiio";
    auto reader = data::make_mpiio_reader(split, options, world, collective);
    int64_t expected_bytes = 0;
    data::SampleBytes got;
    for (int round = 0; round < 8; ++round) {
      const std::vector<int64_t> ids = random_ids(split.samples, round + 200, collective);
      reader->read(ids, got);
      check_raw(split, ids, got);
      expected_bytes += distinct(ids) * (kRow + 4);
      BOOST_CHECK_EQUAL(reader->bytes_read(), expected_bytes);
    }
  }
}

// Variable-size samples (format-2 `jpeg` byte ranges) in both modes: collective reads when asked.
BOOST_AUTO_TEST_CASE(variable_length_samples) {
  TempDir dir("vlen");
  const data::SplitInfo split = write_vlen(dir);
  comm::Communicator world = comm::Communicator::world();
  for (bool collective : {false, true}) {
    data::LoaderOptions options;
    options.io = collective ? "mpiio-collective" : "mpiio";
    auto reader = data::make_mpiio_reader(split, options, world, collective);
    BOOST_CHECK_EQUAL(reader->name(), collective ? "mpiio-collective" : "mpiio");
    int64_t expected_bytes = 0;
    data::SampleBytes got;
    // Collective reads: the same number of read() calls on every rank (some with no ids).
    for (int round = 0; round < 6 + (collective ? 0 : rank()); ++round) {
      // Round 0: every sample in order (whole ranges of each shard); odd rounds sorted, as the
      // loader asks (runs of consecutive samples become one range); the rest in random order.
      std::vector<int64_t> ids = random_ids(split.samples, round + 100, true);
      if (round == 0) {
        ids.resize(split.samples);
        for (int64_t i = 0; i < split.samples; ++i) ids[i] = i;
      } else if (round % 2 == 1) {
        std::sort(ids.begin(), ids.end());
      }
      reader->read(ids, got);
      BOOST_REQUIRE(got.ids == ids);
      BOOST_REQUIRE_EQUAL(got.offsets.size(), ids.size() + 1);
      int wrong = 0;
      for (std::size_t j = 0; j < ids.size(); ++j) {
        const int64_t size = got.offsets[j + 1] - got.offsets[j];
        BOOST_REQUIRE_EQUAL(size, vlen_size(ids[j]));
        if (got.labels[j] != label(ids[j])) ++wrong;
        for (int64_t k = 0; k < size; ++k)
          if (got.bytes[got.offsets[j] + k] != pixel(ids[j], k)) ++wrong;
      }
      BOOST_CHECK_EQUAL(wrong, 0);
      for (int64_t id : std::set<int64_t>(ids.begin(), ids.end())) expected_bytes += vlen_size(id) + 4;
      BOOST_CHECK_EQUAL(reader->bytes_read(), expected_bytes);
    }
  }
}

// A shard cut short while the reader has it open: in collective mode the ranks that read it
// find a short read and every rank raises the error, naming the file.
BOOST_AUTO_TEST_CASE(shard_truncated_while_open_fails_on_every_rank) {
  TempDir dir("truncated_open");
  const data::SplitInfo split = write_raw(dir);
  comm::Communicator world = comm::Communicator::world();
  data::LoaderOptions options;
  options.io = "mpiio-collective";
  auto reader = data::make_mpiio_reader(split, options, world, true);
  const std::string victim = split.shards[4].path;  // samples 175 .. 215
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() == 0) fs::resize_file(victim, fs::file_size(victim) / 2);
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<int64_t> ids{3};
  if (rank() == 0) ids.push_back(215);  // the last sample: beyond the new end of the file
  std::string message;
  try {
    data::SampleBytes got;
    reader->read(ids, got);
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_CHECK_MESSAGE(message.find(victim) != std::string::npos, "message: " << message);
  BOOST_CHECK(world.allreduce_and(!message.empty()));
}

// A shard cut short after the split was validated: an error naming the file on every rank.
BOOST_AUTO_TEST_CASE(truncated_shard_fails_on_every_rank) {
  TempDir dir("truncated");
  const data::SplitInfo split = write_raw(dir);
  const std::string victim = split.shards[3].path;  // samples 105 .. 174
  MPI_Barrier(MPI_COMM_WORLD);                      // every rank has validated the split
  if (rank() == 0) fs::resize_file(victim, fs::file_size(victim) / 2);
  MPI_Barrier(MPI_COMM_WORLD);
  comm::Communicator world = comm::Communicator::world();
  data::LoaderOptions options;

  // Collective: the shards are opened together at construction.
  options.io = "mpiio-collective";
  std::string message;
  try {
    data::make_mpiio_reader(split, options, world, true);
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_CHECK_MESSAGE(message.find(victim) != std::string::npos, "message: " << message);
  BOOST_CHECK(world.allreduce_and(!message.empty()));

  // Independent: each rank that needs the shard finds out, with the sample index.
  options.io = "mpiio";
  auto reader = data::make_mpiio_reader(split, options, world, false);
  data::SampleBytes got;
  reader->read({0, 1, 104}, got);  // other shards still read
  check_raw(split, {0, 1, 104}, got);
  message.clear();
  try {
    reader->read({2, 110 + rank()}, got);
  } catch (const Error& e) {
    message = e.what();
  }
  BOOST_CHECK_MESSAGE(message.find(victim) != std::string::npos, "message: " << message);
  BOOST_CHECK_MESSAGE(message.find("sample " + std::to_string(110 + rank())) != std::string::npos,
                      "message: " << message);
}

BOOST_AUTO_TEST_SUITE_END()
