// Tests for the HDF5 layer: round trips of tensors and attributes with exact values, partial and
// scattered row reads, and clear errors for missing, non-HDF5 and truncated files.
#include <hdf5.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <memory>

#include "scaletrain/core/error.hpp"
#include "scaletrain/io/file_checksum.hpp"
#include "scaletrain/io/hdf5.hpp"

namespace fs = std::filesystem;
using scaletrain::DType;
using scaletrain::Error;
using scaletrain::Shape;
using scaletrain::Tensor;
using scaletrain::io::H5Dataset;
using scaletrain::io::H5File;

namespace {
std::string temp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("scaletrain_test_hdf5_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

// True when f() throws scaletrain::Error whose message contains every needle.
template <typename F>
bool throws_with(F f, std::initializer_list<std::string> needles) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& n : needles) {
      if (what.find(n) == std::string::npos) {
        BOOST_TEST_MESSAGE("message '" << what << "' lacks '" << n << "'");
        return false;
      }
    }
    return true;
  }
  return false;
}

// HDF5 prints its error stack unless told not to; the tests provoke errors on purpose.
struct SilenceHdf5 {
  SilenceHdf5() { scaletrain::io::h5_silence_errors(); }
  // Removes this process's scratch directory when the suite ends.
  ~SilenceHdf5() {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("scaletrain_test_hdf5_" + std::to_string(::getpid())), ec);
  }
};

Tensor iota_u8(const Shape& shape) {
  Tensor t = Tensor::empty(shape, DType::u8);
  auto* p = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>((i * 7 + 3) % 251);
  return t;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(hdf5, *boost::unit_test::fixture<SilenceHdf5>())

BOOST_AUTO_TEST_CASE(tensor_round_trip_exact) {
  const std::string path = temp_path("round_trip.h5");
  Tensor f = Tensor::empty({3, 5}, DType::f32);
  for (int i = 0; i < 15; ++i) f.data<float>()[i] = 0.25f * i - 1.5f;  // exactly representable
  Tensor n = Tensor::empty({4}, DType::i32);
  for (int i = 0; i < 4; ++i) n.data<int32_t>()[i] = -2 + 1000000 * i;
  Tensor l = Tensor::empty({2}, DType::i64);
  l.data<int64_t>()[0] = int64_t(1) << 40;
  l.data<int64_t>()[1] = -7;
  Tensor u = iota_u8({10, 2, 3, 1});
  Tensor s = Tensor::empty({}, DType::f32);
  s.data<float>()[0] = 42.5f;
  {
    H5File file(path, H5File::Mode::create_truncate);
    file.write("model/layer1.0.conv1.weight", f);  // parent group created on the fly
    file.write("n", n);
    file.write("l", l);
    file.write("u", u, 4);
    file.write("scalar", s);
    file.create_group("optimizer/momentum");
  }
  H5File file(path, H5File::Mode::read);
  BOOST_TEST(file.has("model"));
  BOOST_TEST(file.has("model/layer1.0.conv1.weight"));
  BOOST_TEST(file.has("/model/layer1.0.conv1.weight"));
  BOOST_TEST(!file.has("model/missing"));
  BOOST_TEST(!file.has("nothing/at/all"));
  BOOST_TEST(file.is_dataset("n"));
  BOOST_TEST(!file.is_dataset("model"));
  BOOST_TEST(file.has("optimizer/momentum"));
  BOOST_TEST((file.list("/") == std::vector<std::string>{"l", "model", "n", "optimizer", "scalar", "u"}));
  BOOST_TEST((file.list("model") == std::vector<std::string>{"layer1.0.conv1.weight"}));

  BOOST_TEST(file.dataset_type("model/layer1.0.conv1.weight") == "float32");
  BOOST_TEST(file.dataset_type("n") == "int32");
  BOOST_TEST(file.dataset_type("l") == "int64");
  BOOST_TEST(file.dataset_type("u") == "uint8");
  BOOST_TEST((file.dataset_shape("u") == Shape{10, 2, 3, 1}));
  BOOST_TEST((file.dataset_shape("scalar") == Shape{}));

  Tensor f2 = file.read("model/layer1.0.conv1.weight", DType::f32);
  BOOST_TEST((f2.shape() == Shape{3, 5}));
  for (int i = 0; i < 15; ++i) BOOST_TEST(f2.data<float>()[i] == 0.25f * i - 1.5f);
  Tensor n2 = file.read("n", DType::i32);
  for (int i = 0; i < 4; ++i) BOOST_TEST(n2.data<int32_t>()[i] == -2 + 1000000 * i);
  Tensor l2 = file.read("l", DType::i64);
  BOOST_TEST(l2.data<int64_t>()[0] == int64_t(1) << 40);
  BOOST_TEST(l2.data<int64_t>()[1] == -7);
  Tensor u2 = file.read("u", DType::u8);
  for (int i = 0; i < 60; ++i) BOOST_TEST(u2.data<uint8_t>()[i] == u.data<uint8_t>()[i]);
  BOOST_TEST(file.read("scalar", DType::f32).data<float>()[0] == 42.5f);
  // Integer data is not silently read as float, nor float as integer.
  BOOST_TEST(throws_with([&] { file.read("n", DType::f32); }, {path, "'n'", "int32", "float32"}));
  BOOST_TEST(throws_with([&] { file.read("model/layer1.0.conv1.weight", DType::i32); }, {"float32", "int32"}));
  BOOST_TEST(throws_with([&] { file.read("missing", DType::f32); }, {path, "'missing'"}));
}

BOOST_AUTO_TEST_CASE(overwrite_dataset_and_attribute) {
  const std::string path = temp_path("overwrite.h5");
  H5File file(path, H5File::Mode::create_truncate);
  file.write("x", Tensor::zeros({4}, DType::f32));
  Tensor y = Tensor::empty({2}, DType::f32);
  y.fill(3.0f);
  file.write("x", y);
  BOOST_TEST((file.dataset_shape("x") == Shape{2}));
  BOOST_TEST(file.read("x", DType::f32).data<float>()[1] == 3.0f);
  file.set_attribute("epoch", int64_t(1));
  file.set_attribute("epoch", int64_t(2));
  BOOST_TEST(file.get_int_attribute("epoch") == 2);
}

BOOST_AUTO_TEST_CASE(attributes_round_trip) {
  const std::string path = temp_path("attrs.h5");
  {
    H5File file(path, H5File::Mode::create_truncate);
    file.set_attribute("scaletrain_format", int64_t(1));
    file.set_attribute("big", int64_t(-(int64_t(1) << 50)));
    file.set_attribute("task", "image_classification");
    file.set_attribute("mean", std::vector<double>{0.1, 0.2, 0.30000000000000004});
    file.set_double_attribute("lr", 0.125);
    file.write("model/w", Tensor::zeros({2}, DType::f32));
    file.set_attribute("model", std::string("resnet20"), "model/w");
  }
  H5File file(path, H5File::Mode::read);
  BOOST_TEST(file.has_attribute("task"));
  BOOST_TEST(!file.has_attribute("nope"));
  BOOST_TEST(!file.has_attribute("model", "not/there"));
  BOOST_TEST(file.has_attribute("model", "model/w"));
  BOOST_TEST(file.get_int_attribute("scaletrain_format") == 1);
  BOOST_TEST(file.get_int_attribute("big") == -(int64_t(1) << 50));
  BOOST_TEST(file.get_string_attribute("task") == "image_classification");
  BOOST_TEST(file.get_string_attribute("model", "model/w") == "resnet20");
  BOOST_TEST((file.get_double_array_attribute("mean") == std::vector<double>{0.1, 0.2, 0.30000000000000004}));
  BOOST_TEST(file.get_double_attribute("lr") == 0.125);
  BOOST_TEST(file.attribute_type("scaletrain_format") == "int64");
  BOOST_TEST(file.attribute_type("task") == "string");
  BOOST_TEST(file.attribute_type("mean") == "float64");
  BOOST_TEST(throws_with([&] { file.get_int_attribute("task"); }, {path, "'task'", "expected an integer"}));
  BOOST_TEST(throws_with([&] { file.get_string_attribute("mean"); }, {"'mean'", "float64", "expected a string"}));
  BOOST_TEST(throws_with([&] { file.get_int_attribute("mean"); }, {"'mean'", "expected an integer"}));
  BOOST_TEST(throws_with([&] { file.get_int_attribute("absent"); }, {path, "missing attribute 'absent'"}));
  BOOST_TEST(throws_with([&] { file.get_double_attribute("mean"); }, {"'mean'", "3 values"}));
}

BOOST_AUTO_TEST_CASE(row_reads) {
  const std::string path = temp_path("rows.h5");
  const Tensor u = iota_u8({100, 3, 2, 2});  // 12 bytes per row
  for (int64_t chunk : {0, 8, 64}) {
    {
      H5File file(path, H5File::Mode::create_truncate);
      file.write("images", u, chunk);
    }
    H5File file(path, H5File::Mode::read);
    Tensor part = Tensor::empty({5, 3, 2, 2}, DType::u8);
    file.read_rows("images", 37, 5, part);
    for (int i = 0; i < 60; ++i) BOOST_TEST(part.data<uint8_t>()[i] == u.data<uint8_t>()[37 * 12 + i]);

    H5Dataset ds(file, "images");
    BOOST_TEST(ds.rows() == 100);
    BOOST_TEST(ds.row_elements() == 12);
    // Runs and isolated rows across chunk boundaries, ending at the last row.
    const std::vector<int64_t> rows = {0, 1, 2, 7, 8, 9, 10, 33, 63, 64, 65, 98, 99};
    std::vector<uint8_t> out(rows.size() * 12);
    ds.read_row_list(rows, DType::u8, out.data());
    for (std::size_t k = 0; k < rows.size(); ++k)
      for (int e = 0; e < 12; ++e) BOOST_TEST(out[k * 12 + e] == u.data<uint8_t>()[rows[k] * 12 + e]);
    // Reading uint8 into float converts exactly.
    std::vector<float> f(2 * 12);
    ds.read_rows(98, 2, DType::f32, f.data());
    for (int e = 0; e < 24; ++e) BOOST_TEST(f[e] == float(u.data<uint8_t>()[98 * 12 + e]));
    BOOST_TEST(throws_with([&] { ds.read_rows(99, 2, DType::u8, out.data()); }, {path, "out of range"}));
    BOOST_TEST(throws_with([&] { ds.read_row_list({5, 4}, DType::u8, out.data()); }, {path, "not increasing"}));
    BOOST_TEST(throws_with([&] { ds.read_row_list({100}, DType::u8, out.data()); }, {path, "out of range"}));
    BOOST_TEST(throws_with([&] { H5Dataset(file, "labels"); }, {path, "missing dataset 'labels'"}));
  }
}

// Layouts the pread fast path cannot serve (compressed; chunks that split rows; a byte order
// other than the machine's) go through HDF5 and give the same values.
BOOST_AUTO_TEST_CASE(row_reads_of_other_layouts) {
  const std::string path = temp_path("layouts.h5");
  const Tensor u = iota_u8({50, 4, 3, 1});
  Tensor big = Tensor::empty({50}, DType::i32);
  for (int i = 0; i < 50; ++i) big.data<int32_t>()[i] = 1000 * i - 7;
  {
    H5File file(path, H5File::Mode::create_truncate);
    file.write("ours", u, 16);
    file.write("contiguous", u);
    // Raw HDF5 for what our writer never produces.
    const hsize_t dims[4] = {50, 4, 3, 1}, chunk[4] = {8, 2, 3, 1};
    hid_t space = H5Screate_simple(4, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 4, chunk);
    H5Pset_deflate(dcpl, 4);
    hid_t ds = H5Dcreate2(file.id(), "gzip_split_rows", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, u.raw());
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    const hsize_t n = 50;
    space = H5Screate_simple(1, &n, nullptr);
    ds = H5Dcreate2(file.id(), "big_endian", H5T_STD_I32BE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, big.raw());
    H5Dclose(ds);
    H5Sclose(space);
    // While the file is open for writing, reads go through HDF5 (data may sit in its caches).
    H5Dataset writing(file, "ours");
    BOOST_TEST(!writing.direct(DType::u8));
    std::vector<uint8_t> row(12);
    writing.read_row_list({49}, DType::u8, row.data());
    for (int e = 0; e < 12; ++e) BOOST_TEST(row[e] == u.data<uint8_t>()[49 * 12 + e]);
  }
  H5File file(path, H5File::Mode::read);
  BOOST_TEST(file.dataset_chunk("ours") == (Shape{16, 4, 3, 1}));
  BOOST_TEST(file.dataset_chunk("gzip_split_rows") == (Shape{8, 2, 3, 1}));
  BOOST_TEST(file.dataset_chunk("contiguous").empty());
  BOOST_TEST(file.dataset_chunk("big_endian").empty());
  BOOST_TEST(throws_with([&] { file.dataset_chunk("absent"); }, {path, "'absent'"}));
  BOOST_TEST(H5Dataset(file, "ours").direct(DType::u8));
  BOOST_TEST(!H5Dataset(file, "ours").direct(DType::f32));
  BOOST_TEST(H5Dataset(file, "contiguous").direct(DType::u8));
  BOOST_TEST(!H5Dataset(file, "gzip_split_rows").direct(DType::u8));
  BOOST_TEST(!H5Dataset(file, "big_endian").direct(DType::i32));
  const std::vector<int64_t> rows = {0, 3, 4, 5, 15, 16, 17, 30, 49};
  for (const char* name : {"ours", "contiguous", "gzip_split_rows"}) {
    H5Dataset ds(file, name);
    std::vector<uint8_t> out(rows.size() * 12);
    ds.read_row_list(rows, DType::u8, out.data());
    for (std::size_t k = 0; k < rows.size(); ++k)
      for (int e = 0; e < 12; ++e) BOOST_TEST(out[k * 12 + e] == u.data<uint8_t>()[rows[k] * 12 + e], name);
  }
  H5Dataset be(file, "big_endian");
  std::vector<int32_t> got(rows.size());
  be.read_row_list(rows, DType::i32, got.data());
  for (std::size_t k = 0; k < rows.size(); ++k) BOOST_TEST(got[k] == 1000 * rows[k] - 7);
}

// The fast path reads through the descriptor HDF5 already holds: no open() per read (a metadata
// request on Lustre or GPFS), so reads go on even once the path is gone, and after the H5File
// object that opened the file is destroyed (the dataset keeps the file open).
BOOST_AUTO_TEST_CASE(fast_path_reads_do_not_reopen_the_file) {
  const std::string path = temp_path("no_reopen.h5");
  const Tensor u = iota_u8({40, 5, 2, 3});
  {
    H5File file(path, H5File::Mode::create_truncate);
    file.write("images", u, 8);
  }
  std::unique_ptr<H5Dataset> ds;
  {
    H5File file(path, H5File::Mode::read);
    ds = std::make_unique<H5Dataset>(file, "images");
  }
  BOOST_REQUIRE(ds->direct(DType::u8));
  std::filesystem::remove(path);
  const std::vector<int64_t> rows = {1, 2, 3, 9, 17, 39};
  std::vector<uint8_t> out(rows.size() * 30);
  ds->read_row_list(rows, DType::u8, out.data());
  for (std::size_t k = 0; k < rows.size(); ++k)
    for (int e = 0; e < 30; ++e) BOOST_TEST(out[k * 30 + e] == u.data<uint8_t>()[rows[k] * 30 + e]);
}

BOOST_AUTO_TEST_CASE(bad_files_name_the_file) {
  const std::string missing = temp_path("does_not_exist.h5");
  BOOST_TEST(throws_with([&] { H5File(missing, H5File::Mode::read); }, {missing, "no such file"}));

  const std::string text = temp_path("text.h5");
  std::ofstream(text) << "this is not an HDF5 file, just some text that is long enough to look like data\n";
  BOOST_TEST(throws_with([&] { H5File(text, H5File::Mode::read); }, {text, "not an HDF5 file"}));

  const std::string good = temp_path("truncated.h5");
  {
    H5File file(good, H5File::Mode::create_truncate);
    file.write("images", iota_u8({1000, 8, 8, 1}), 100);
  }
  fs::resize_file(good, fs::file_size(good) / 2);
  BOOST_TEST(throws_with([&] { H5File(good, H5File::Mode::read); }, {good, "truncated"}));

  const std::string dir = temp_path("a_directory.h5");
  fs::create_directories(dir);
  BOOST_TEST(throws_with([&] { H5File(dir, H5File::Mode::read); }, {dir, "not a regular file"}));
}

// A dataset whose shape claims more than the file can hold (sparse chunked datasets, as damaged
// metadata would claim) is refused naming the file before anything of that size is allocated or
// multiplied: more than 2^48 elements, or more bytes than the file stores.
BOOST_AUTO_TEST_CASE(shapes_larger_than_the_file_are_refused) {
  const std::string path = temp_path("sparse.h5");
  H5File(path, H5File::Mode::create_truncate).close();
  auto add_sparse = [&](const char* name, hsize_t rows) {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hsize_t dims[1] = {rows}, chunk[1] = {1024};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, chunk);
    const hid_t ds = H5Dcreate2(file, name, H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    BOOST_REQUIRE(ds >= 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(file);
  };
  add_sparse("huge", hsize_t(1) << 50);
  add_sparse("big", hsize_t(1) << 32);
  const H5File f(path, H5File::Mode::read);
  BOOST_TEST(throws_with([&] { (void)f.dataset_shape("huge"); }, {path, "'huge'", "more than 281474976710656"}));
  BOOST_TEST(throws_with([&] { (void)f.read("big", DType::i32); },
                         {path, "'big'", "17179869184 bytes", "more than the", "the file is damaged"}));
}

// The superblock version, read from the bytes: what h5py writes by default (version 0, no
// metadata checksums), with libver latest (3), after a user block, and what we write (>= 2).
BOOST_AUTO_TEST_CASE(superblock_version_without_hdf5) {
  using scaletrain::io::hdf5_metadata_checksummed;
  using scaletrain::io::hdf5_superblock_version;
  const std::string ours = temp_path("sb_ours.h5");
  {
    H5File f(ours, H5File::Mode::create_truncate);
    f.write("x", Tensor::zeros({3}, DType::f32));
  }
  BOOST_TEST(hdf5_superblock_version(ours) >= 2);
  BOOST_TEST(hdf5_metadata_checksummed(hdf5_superblock_version(ours)));
  const std::string sealed = temp_path("sb_sealed.h5");
  {
    H5File f(sealed, H5File::Mode::create_truncate, 512);
    f.write("x", Tensor::zeros({3}, DType::f32));
  }
  BOOST_TEST(hdf5_superblock_version(sealed) >= 2);

  const std::string text = temp_path("sb_text.h5"), empty = temp_path("sb_empty.h5");
  std::ofstream(text) << std::string(3000, 'x');
  std::ofstream(empty).close();
  BOOST_TEST(hdf5_superblock_version(text) == -1);
  BOOST_TEST(hdf5_superblock_version(empty) == -1);
  BOOST_TEST(throws_with([&] { hdf5_superblock_version(temp_path("sb_missing.h5")); }, {"sb_missing.h5"}));

  const std::string plain = temp_path("sb_h5py.h5"), latest = temp_path("sb_h5py_latest.h5"),
                    v110 = temp_path("sb_h5py_v110.h5"), userblock = temp_path("sb_h5py_ub.h5");
  const std::string script =
      "import h5py, numpy as np, sys\n"
      "def w(p, **kw):\n"
      "    with h5py.File(p, 'w', **kw) as f: f['x'] = np.zeros(3)\n"
      "w('" +
      plain +
      "')\n"
      "w('" +
      latest +
      "', libver='latest')\n"
      "w('" +
      v110 +
      "', libver=('v110', 'latest'))\n"
      "w('" +
      userblock + "', userblock_size=512)\n";
  const std::string script_path = temp_path("sb_write.py");
  std::ofstream(script_path) << script;
  if (std::system("/usr/bin/python3 -c 'import h5py' 2> /dev/null") != 0) {
    BOOST_TEST_MESSAGE("skipping the h5py files: /usr/bin/python3 has no h5py");
    return;
  }
  BOOST_REQUIRE(std::system(("/usr/bin/python3 " + script_path).c_str()) == 0);
  BOOST_TEST(hdf5_superblock_version(plain) == 0);
  BOOST_TEST(!hdf5_metadata_checksummed(hdf5_superblock_version(plain)));
  BOOST_TEST(hdf5_superblock_version(latest) == 3);
  BOOST_TEST(hdf5_superblock_version(v110) == 3);
  BOOST_TEST(hdf5_superblock_version(userblock) == 0);
  // The signature really is after the user block, not at byte 0.
  std::ifstream in(userblock, std::ios::binary);
  char head[4] = {};
  in.read(head, 4);
  BOOST_TEST(std::string(head, 4) != std::string("\x89HDF", 4));
}

BOOST_AUTO_TEST_SUITE_END()
