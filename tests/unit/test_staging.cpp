// Tests for shard checksums and node-local staging on one rank (MPI as a singleton): the
// checksum is stable, independent of the attribute and sensitive to one flipped image byte or
// label; stamping and verifying; stage_split copies every shard, re-runs keep valid copies, a
// corrupted staged copy is detected and copied again (the documented choice), and a corrupted
// source fails with an error naming the file.
#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/staging.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "support/one_rank_mpi.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;

namespace {

fs::path scratch() { return fs::temp_directory_path() / ("scaletrain_test_staging_" + std::to_string(::getpid())); }

struct Scratch {
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(scratch(), ec);
  }
};

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = scratch() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A shard of n 4x4x3 images with pixel (i * 7 + j) % 251 and labels i % 3.
void write_shard(const std::string& path, int64_t n, int64_t offset) {
  Tensor images = Tensor::empty({n, 4, 4, 3}, DType::u8);
  Tensor labels = Tensor::empty({n}, DType::i32);
  uint8_t* p = images.data<uint8_t>();
  for (int64_t i = 0; i < images.numel(); ++i) p[i] = static_cast<uint8_t>((offset * 48 + i * 7) % 251);
  for (int64_t i = 0; i < n; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>((offset + i) % 3);
  data::write_image_shard(path, images, labels, 3, {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25}, 4);
}

// Changes one image byte of `row` by rewriting the shard (it stays valid HDF5, without a
// checksum attribute).
void flip_image_byte(const std::string& path, int64_t row) {
  Tensor images, labels;
  {
    io::H5File f(path, io::H5File::Mode::read);
    images = f.read("images", DType::u8);
    labels = f.read("labels", DType::i32);
  }
  images.data<uint8_t>()[row * 48 + 5] ^= 0x01;
  data::write_image_shard(path, images, labels, 3, {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25}, 4);
}

// One rank as an MPI singleton, initialised once for the whole binary.
const comm::Topology& topology() {
  static const comm::Topology topo = comm::Topology::build(test::one_rank_world(), 1);
  return topo;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(staging)

BOOST_AUTO_TEST_CASE(checksum_is_stable_and_sensitive) {
  Scratch cleanup;
  io::h5_silence_errors();
  const fs::path dir = fresh_dir("checksum");
  const std::string a = (dir / "a.h5").string(), b = (dir / "b.h5").string();
  write_shard(a, 10, 0);
  write_shard(b, 10, 0);
  const std::string sum = data::shard_checksum(a);
  BOOST_TEST(sum.rfind("crc32:", 0) == 0u);
  BOOST_TEST(sum.size() == 6u + 8u);
  BOOST_TEST(data::shard_checksum(a) == sum);  // stable
  BOOST_TEST(data::shard_checksum(b) == sum);  // same contents, another file
  {
    // The definition for raw shards: CRC-32 of the labels (int32 LE), then the image bytes.
    io::H5File f(a, io::H5File::Mode::read);
    const Tensor images = f.read("images", DType::u8), labels = f.read("labels", DType::i32);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(labels.data<int32_t>()), static_cast<uInt>(4 * labels.numel()));
    crc = crc32(crc, images.data<uint8_t>(), static_cast<uInt>(images.numel()));
    char expected[32];
    std::snprintf(expected, sizeof expected, "crc32:%08lx", crc);
    BOOST_TEST(sum == std::string(expected));
  }
  // Stamping adds the attribute, which is not part of the checksum.
  data::stamp_shard_checksum(a);
  BOOST_TEST(io::H5File(a, io::H5File::Mode::read).get_string_attribute("checksum") == sum);
  BOOST_TEST(data::shard_checksum(a) == sum);
  // One image bit changes it.
  flip_image_byte(b, 7);
  BOOST_TEST(data::shard_checksum(b) != sum);
  // One label changes it.
  const std::string c = (dir / "c.h5").string();
  write_shard(c, 10, 0);
  {
    Tensor images, labels;
    {
      io::H5File f(c, io::H5File::Mode::read);
      images = f.read("images", DType::u8);
      labels = f.read("labels", DType::i32);
    }
    labels.data<int32_t>()[3] = (labels.data<int32_t>()[3] + 1) % 3;
    data::write_image_shard(c, images, labels, 3, {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25}, 4);
  }
  BOOST_TEST(data::shard_checksum(c) != sum);
  BOOST_CHECK_THROW(data::shard_checksum((dir / "missing.h5").string()), Error);
}

// The documented definition, computed here independently with zlib: CRC-32 of the labels
// (int32 little-endian), then per sample its length (uint64 little-endian) and its bytes.
BOOST_AUTO_TEST_CASE(jpeg_checksum_follows_the_definition) {
  Scratch cleanup;
  io::h5_silence_errors();
  const fs::path dir = fresh_dir("jpeg");
  const std::string path = (dir / "j.h5").string();
  std::vector<std::vector<uint8_t>> jpegs = {{0xFF, 0xD8, 1, 2, 3, 0xFF, 0xD9}, {0xFF, 0xD8, 9, 0xFF, 0xD9}};
  Tensor labels = Tensor::empty({2}, DType::i32);
  labels.data<int32_t>()[0] = 1;
  labels.data<int32_t>()[1] = 0;
  data::write_jpeg_shard(path, jpegs, labels, 2, {0.5, 0.5, 0.5}, {0.25, 0.25, 0.25});
  uLong crc = crc32(0L, Z_NULL, 0);
  const uint8_t label_bytes[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  crc = crc32(crc, label_bytes, 8);
  for (const auto& j : jpegs) {
    uint8_t len[8] = {static_cast<uint8_t>(j.size()), 0, 0, 0, 0, 0, 0, 0};
    crc = crc32(crc, len, 8);
    crc = crc32(crc, j.data(), static_cast<uInt>(j.size()));
  }
  char expected[32];
  std::snprintf(expected, sizeof expected, "crc32:%08lx", crc);
  BOOST_TEST(data::shard_checksum(path) == std::string(expected));
  // The writer stamped it.
  BOOST_TEST(io::H5File(path, io::H5File::Mode::read).get_string_attribute("checksum") == std::string(expected));
}

BOOST_AUTO_TEST_CASE(stage_split_copies_verifies_and_skips) {
  Scratch cleanup;
  io::h5_silence_errors();
  const fs::path src = fresh_dir("data") / "train";
  fs::create_directories(src);
  for (int i = 0; i < 3; ++i) {
    const std::string path = (src / data::shard_file_name(i, 3)).string();
    write_shard(path, 8 + i, i * 100);
    data::stamp_shard_checksum(path);
  }
  const data::SplitInfo split = data::open_split((src.parent_path()).string(), "train");
  const fs::path stage = fresh_dir("stage");
  const comm::Topology& topo = topology();

  data::StagingResult r = data::stage_split(split, stage.string(), topo);
  BOOST_TEST(r.split.shards.size() == 3u);
  BOOST_TEST(r.split.samples == split.samples);
  int64_t expected_bytes = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const fs::path staged = stage / "train" / data::shard_file_name(static_cast<int64_t>(i), 3);
    BOOST_TEST(r.split.shards[i].path == staged.string());
    BOOST_TEST(fs::file_size(staged) == fs::file_size(split.shards[i].path));
    BOOST_TEST(data::shard_checksum(staged.string()) == data::shard_checksum(split.shards[i].path));
    expected_bytes += static_cast<int64_t>(fs::file_size(staged));
  }
  BOOST_TEST(r.bytes == expected_bytes);
  BOOST_TEST(r.seconds >= 0.0);
  // The staged split opens like the original.
  const data::SplitInfo reopened = data::open_split(stage.string(), "train");
  BOOST_TEST(reopened.samples == split.samples);
  // No temporary files left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(stage / "train")) files += e.is_regular_file() ? 1 : 0;
  BOOST_TEST(files == 3);

  // Re-run: everything is valid, nothing copied.
  r = data::stage_split(split, stage.string(), topo);
  BOOST_TEST(r.bytes == 0);

  // A corrupted staged copy (still valid HDF5, one pixel changed) is detected and copied again.
  const std::string second = (stage / "train" / data::shard_file_name(1, 3)).string();
  flip_image_byte(second, 2);
  BOOST_TEST(data::shard_checksum(second) != data::shard_checksum(split.shards[1].path));
  r = data::stage_split(split, stage.string(), topo);
  BOOST_TEST(r.bytes == static_cast<int64_t>(fs::file_size(split.shards[1].path)));
  BOOST_TEST(data::shard_checksum(second) == data::shard_checksum(split.shards[1].path));

  // A staged copy truncated to half is copied again too.
  fs::resize_file(second, fs::file_size(second) / 2);
  r = data::stage_split(split, stage.string(), topo);
  BOOST_TEST(r.bytes == static_cast<int64_t>(fs::file_size(split.shards[1].path)));

  // A source whose contents no longer match its stored checksum: the copy fails verification,
  // the error names the shard, and no file is left under the final name.
  const std::string third_src = split.shards[2].path;
  const std::string stored = io::H5File(third_src, io::H5File::Mode::read).get_string_attribute("checksum");
  flip_image_byte(third_src, 0);
  {
    io::H5File f(third_src, io::H5File::Mode::read_write);
    f.set_attribute("checksum", stored);  // the old checksum, as if the file rotted after stamping
  }
  const fs::path stage2 = fresh_dir("stage2");
  try {
    data::stage_split(split, stage2.string(), topo);
    BOOST_FAIL("expected a checksum mismatch");
  } catch (const Error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find(third_src) != std::string::npos, what);
    BOOST_TEST(what.find("checksum") != std::string::npos, what);
  }
  BOOST_TEST(!fs::exists(stage2 / "train" / data::shard_file_name(2, 3)));
}

BOOST_AUTO_TEST_CASE(shard_without_checksum_is_copied) {
  Scratch cleanup;
  io::h5_silence_errors();
  const fs::path src = fresh_dir("plain") / "val";
  fs::create_directories(src);
  const std::string shard = (src / data::shard_file_name(0, 1)).string();
  write_shard(shard, 5, 0);
  {
    io::H5File f(shard, io::H5File::Mode::read_write);  // the writer may have stamped it: remove
    if (f.has_attribute("checksum")) BOOST_REQUIRE(H5Adelete(f.id(), "checksum") >= 0);
  }
  const data::SplitInfo split = data::open_split(src.parent_path().string(), "val");
  const fs::path stage = fresh_dir("stage_plain");
  const auto& topo = topology();
  data::StagingResult r = data::stage_split(split, stage.string(), topo);
  const int64_t size = static_cast<int64_t>(fs::file_size(split.shards[0].path));
  BOOST_TEST(r.bytes == size);
  // Nothing to verify against: copied again on every run.
  r = data::stage_split(split, stage.string(), topo);
  BOOST_TEST(r.bytes == size);
  // An unwritable staging directory names the path.
  BOOST_CHECK_THROW(data::stage_split(split, "/proc/no-such-dir", topo), Error);
}

BOOST_AUTO_TEST_SUITE_END()
