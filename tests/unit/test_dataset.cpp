// Tests for the dataset format and the loader on one rank: writer/validator round trip, every
// spec violation rejected with the file named, pixel statistics against hand-computed values,
// the epoch plan, exact normalised pixels, augmentation as a crop/flip of the source, and the
// idx and synthetic sources.
#include <unistd.h>
#include <zlib.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/data/sources.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/ops/normalize.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;
using data::LoaderOptions;
using data::SplitInfo;

namespace {
struct SilenceHdf5 {
  SilenceHdf5() { io::h5_silence_errors(); }
  // Removes this process's scratch directory when the suite ends.
  ~SilenceHdf5() {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("scaletrain_test_dataset_" + std::to_string(::getpid())), ec);
  }
};

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("scaletrain_test_dataset_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

template <typename F>
bool throws_with(F f, std::initializer_list<std::string> needles) {
  try {
    f();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& n : needles)
      if (what.find(n) == std::string::npos) {
        BOOST_TEST_MESSAGE("message '" << what << "' lacks '" << n << "'");
        return false;
      }
    BOOST_TEST_MESSAGE("ok: " << what);
    return true;
  }
  BOOST_TEST_MESSAGE("no error thrown");
  return false;
}

// Sample i has pixel bytes (i, i >> 8, i >> 16, ...) cycling over its h*w*c values and label
// i % classes, so that a loaded sample reveals its id.
void write_indexed_shard(const std::string& path, int64_t first, int64_t n, int h, int w, int c, int classes,
                         const std::vector<double>& mean, const std::vector<double>& std, int64_t chunk = 4) {
  Tensor images = Tensor::empty({n, h, w, c}, DType::u8);
  Tensor labels = Tensor::empty({n}, DType::i32);
  const int64_t bytes = int64_t(h) * w * c;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t id = first + s;
    for (int64_t k = 0; k < bytes; ++k)
      images.data<uint8_t>()[s * bytes + k] = static_cast<uint8_t>(id >> (8 * (k % 3)));
    labels.data<int32_t>()[s] = static_cast<int32_t>(id % classes);
  }
  data::write_image_shard(path, images, labels, classes, mean, std, chunk);
}

// A split directory DIR/train with shards of the given sizes, samples numbered across shards.
std::string indexed_dataset(const std::string& name, const std::vector<int64_t>& sizes, int h = 2, int w = 3, int c = 1,
                            int classes = 7) {
  const fs::path dir = fresh_dir(name);
  fs::create_directories(dir / "train");
  int64_t first = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    write_indexed_shard((dir / "train" / data::shard_file_name(i, sizes.size())).string(), first, sizes[i], h, w, c,
                        classes, std::vector<double>(c, 0.0), std::vector<double>(c, 1.0));
    first += sizes[i];
  }
  return dir.string();
}

int64_t decode_id(const uint8_t* x) { return x[0] | (int64_t(x[1]) << 8) | (int64_t(x[2]) << 16); }

// A valid shard written by hand with the H5 layer, then altered by `mutate`.
template <typename Mutate>
std::string hand_shard(const fs::path& dir, const std::string& file, Mutate mutate) {
  fs::create_directories(dir);
  const std::string path = (dir / file).string();
  io::H5File f(path, io::H5File::Mode::create_truncate);
  f.set_attribute("scaletrain_format", int64_t(1));
  f.set_attribute("task", "image_classification");
  f.set_attribute("num_classes", int64_t(3));
  f.set_attribute("mean", std::vector<double>{0.5});
  f.set_attribute("std", std::vector<double>{0.25});
  Tensor images = Tensor::zeros({5, 4, 4, 1}, DType::u8);
  Tensor labels = Tensor::zeros({5}, DType::i32);
  f.write("images", images, 2);
  f.write("labels", labels);
  mutate(f);
  return path;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(dataset, *boost::unit_test::fixture<SilenceHdf5>())

BOOST_AUTO_TEST_CASE(names_and_ranges) {
  BOOST_TEST(data::shard_file_name(3, 16) == "shard-00003-of-00016.h5");
  BOOST_TEST(data::shard_file_name(0, 1) == "shard-00000-of-00001.h5");
  // 10 samples in 3 shards: 3, 3, 4, in order, covering everything.
  BOOST_TEST((data::shard_range(10, 0, 3) == std::pair<int64_t, int64_t>{0, 3}));
  BOOST_TEST((data::shard_range(10, 1, 3) == std::pair<int64_t, int64_t>{3, 6}));
  BOOST_TEST((data::shard_range(10, 2, 3) == std::pair<int64_t, int64_t>{6, 10}));
  BOOST_TEST(throws_with([] { data::shard_range(10, 3, 3); }, {"shard 3 of 3"}));
}

BOOST_AUTO_TEST_CASE(pixel_stats_exact) {
  // One channel, pixels {0, 255, 0, 255}: mean 0.5, population std 0.5.
  const uint8_t a[] = {0, 255, 0, 255};
  data::PixelStats s(1);
  s.add(a, 2, 2);
  BOOST_TEST(s.mean()[0] == 0.5);
  BOOST_TEST(s.std()[0] == 0.5);
  // Two channels interleaved (channels-last): c0 = {51, 51, 102, 102} -> mean 76.5/255 = 0.3,
  // std 25.5/255 = 0.1; c1 = {0, 0, 0, 0} -> 0, 0. Added in two calls.
  const uint8_t b[] = {51, 0, 102, 0};
  data::PixelStats t(2);
  t.add(b, 1, 2);
  t.add(b, 1, 2);
  BOOST_TEST(std::abs(t.mean()[0] - 0.3) < 1e-15);
  BOOST_TEST(std::abs(t.std()[0] - 0.1) < 1e-15);
  BOOST_TEST(t.mean()[1] == 0.0);
  BOOST_TEST(t.std()[1] == 0.0);
  BOOST_TEST(t.pixels_per_channel == 4);
}

BOOST_AUTO_TEST_CASE(write_and_open_split) {
  const fs::path dir = fresh_dir("roundtrip");
  fs::create_directories(dir / "train");
  fs::create_directories(dir / "val");
  const std::vector<double> mean{0.1, 0.2, 0.3}, std{0.5, 0.25, 0.125};
  write_indexed_shard((dir / "train" / "shard-00000-of-00002.h5").string(), 0, 11, 5, 4, 3, 9, mean, std);
  write_indexed_shard((dir / "train" / "shard-00001-of-00002.h5").string(), 11, 6, 5, 4, 3, 9, mean, std);
  write_indexed_shard((dir / "val" / "shard-00000-of-00001.h5").string(), 0, 3, 5, 4, 3, 9, mean, std);
  std::ofstream(dir / "train" / "README.txt") << "not a shard, ignored\n";

  const SplitInfo s = data::open_split(dir.string(), "train");
  BOOST_TEST(s.dir == (dir / "train").string());
  BOOST_TEST(s.task == "image_classification");
  BOOST_TEST(s.samples == 17);
  BOOST_TEST(s.shards.size() == 2u);
  BOOST_TEST(s.shards[0].path == (dir / "train" / "shard-00000-of-00002.h5").string());
  BOOST_TEST(s.shards[0].samples == 11);
  BOOST_TEST(s.shards[1].samples == 6);
  BOOST_TEST(s.height == 5);
  BOOST_TEST(s.width == 4);
  BOOST_TEST(s.channels == 3);
  BOOST_TEST(s.num_classes == 9);
  BOOST_TEST(s.mean == mean);
  BOOST_TEST(s.std == std);
  BOOST_TEST(data::open_split(dir.string(), "val").samples == 3);
  BOOST_TEST((data::list_splits(dir.string()) == std::vector<std::string>{"train", "val"}));

  // The written file has the exact layout of the spec.
  io::H5File f(s.shards[0].path, io::H5File::Mode::read);
  BOOST_TEST(f.get_int_attribute("scaletrain_format") == 2);
  BOOST_TEST(f.dataset_type("images") == "uint8");
  BOOST_TEST((f.dataset_shape("images") == Shape{11, 5, 4, 3}));
  BOOST_TEST(f.dataset_type("labels") == "int32");
  const Tensor labels = f.read("labels", DType::i32);
  for (int i = 0; i < 11; ++i) BOOST_TEST(labels.data<int32_t>()[i] == i % 9);
  BOOST_TEST(!fs::exists(s.shards[0].path + ".tmp"));
}

BOOST_AUTO_TEST_CASE(writer_rejects_bad_input) {
  const fs::path dir = fresh_dir("writer");
  const std::string path = (dir / "x.h5").string();
  Tensor images = Tensor::zeros({2, 2, 2, 1}, DType::u8);
  Tensor labels = Tensor::zeros({2}, DType::i32);
  labels.data<int32_t>()[1] = 4;
  BOOST_TEST(throws_with([&] { data::write_image_shard(path, images, labels, 4, {0.0}, {1.0}); },
                         {path, "label 4 of sample 1", "[0, 4)"}));
  BOOST_TEST(throws_with(
      [&] {
        data::write_image_shard(path, images, labels, 5, {0.0, 0.0}, {1.0, 1.0});
      },
      {path, "one value per channel"}));
  BOOST_TEST(throws_with(
      [&] {
        data::write_image_shard(path, Tensor::zeros({2, 2, 2, 1}), labels, 5, {0.0}, {1.0});
      },
      {path, "uint8"}));
  BOOST_TEST(!fs::exists(path));
}

BOOST_AUTO_TEST_CASE(open_split_rejects_spec_violations) {
  const fs::path root = fresh_dir("bad");
  const std::string missing = (root / "nope").string();
  BOOST_TEST(throws_with([&] { data::open_split(missing, "train"); }, {missing, "does not exist"}));
  fs::create_directories(root / "empty");
  BOOST_TEST(throws_with([&] { data::open_split((root / "empty").string(), "train"); }, {"empty"}));
  BOOST_TEST(throws_with([&] { data::list_splits((root / "empty").string()); }, {"empty"}));
  fs::create_directories(root / "novalsplit" / "train");
  BOOST_TEST(throws_with([&] { data::open_split((root / "novalsplit").string(), "val"); },
                         {(root / "novalsplit" / "val").string(), "no such split directory"}));
  BOOST_TEST(throws_with([&] { data::open_split((root / "novalsplit").string(), "train"); },
                         {(root / "novalsplit" / "train").string(), "no *.h5"}));

  int n = 0;
  // Each case: a split with one (bad) shard; the error names the file and the problem.
  auto expect = [&](auto mutate, std::initializer_list<std::string> needles) {
    const fs::path ds = root / ("case" + std::to_string(n++));
    const std::string path = hand_shard(ds / "train", "shard-00000-of-00001.h5", mutate);
    std::vector<std::string> all(needles);
    all.push_back(path);
    bool ok = false;
    try {
      data::open_split(ds.string(), "train");
    } catch (const Error& e) {
      ok = true;
      for (const auto& needle : all)
        if (std::string(e.what()).find(needle) == std::string::npos) {
          ok = false;
          BOOST_TEST_MESSAGE("'" << e.what() << "' lacks '" << needle << "'");
        }
      if (ok) BOOST_TEST_MESSAGE("ok: " << e.what());
    }
    BOOST_TEST(ok, "case " << n - 1);
  };
  auto nothing = [](io::H5File&) {};
  {  // the untouched shard is valid
    const fs::path ds = root / "valid";
    hand_shard(ds / "train", "a.h5", nothing);
    BOOST_TEST(data::open_split(ds.string(), "train").samples == 5);
  }
  expect([](io::H5File& f) { f.write("labels", Tensor::zeros({5}, DType::f32)); }, {"'labels'", "float32", "int32"});
  expect([](io::H5File& f) { f.write("labels", Tensor::zeros({5}, DType::i64)); }, {"'labels'", "int64", "int32"});
  expect([](io::H5File& f) { f.write("images", Tensor::zeros({5, 4, 4, 1}, DType::f32)); }, {"'images'", "float32"});
  expect(
      [](io::H5File& f) {
        f.write("images", Tensor::zeros({5, 16}, DType::u8));
      },
      {"'images'", "[5, 16]", "[N, H, W, C]"});
  expect(
      [](io::H5File& f) {
        f.write("images", Tensor::zeros({5, 1, 70000, 1}, DType::u8));
      },
      {"'images'", "[5, 1, 70000, 1]", "at most 65535x65535x64"});
  expect([](io::H5File& f) { f.write("labels", Tensor::zeros({4}, DType::i32)); }, {"5 samples", "'labels' has 4"});
  expect([](io::H5File& f) { f.write("labels", Tensor::zeros({5, 1}, DType::i32)); }, {"'labels'", "[N]"});
  expect(
      [](io::H5File& f) {
        Tensor l = Tensor::zeros({5}, DType::i32);
        l.data<int32_t>()[3] = 3;
        f.write("labels", l);
      },
      {"label 3 of sample 3", "[0, 3)"});
  expect(
      [](io::H5File& f) {
        Tensor l = Tensor::zeros({5}, DType::i32);
        l.data<int32_t>()[4] = -1;
        f.write("labels", l);
      },
      {"label -1 of sample 4"});
  expect([](io::H5File& f) { f.set_attribute("scaletrain_format", int64_t(3)); }, {"version 3", "versions 1 to 2"});
  expect([](io::H5File& f) { f.set_attribute("scaletrain_format", int64_t(0)); }, {"version 0"});
  expect([](io::H5File& f) { f.set_attribute("scaletrain_format", "1"); }, {"'scaletrain_format'", "integer"});
  expect([](io::H5File& f) { f.set_attribute("task", "detection"); }, {"task 'detection'"});
  expect([](io::H5File& f) { f.set_attribute("num_classes", int64_t(0)); }, {"num_classes"});
  expect(
      [](io::H5File& f) {
        f.set_attribute("mean", std::vector<double>{0.5, 0.5});
      },
      {"'mean'", "2 values", "1 channels"});
  expect([](io::H5File& f) { f.set_attribute("std", std::vector<double>{0.0}); }, {"'std'", "<= 0"});
  expect([](io::H5File& f) { f.set_attribute("task", int64_t(3)); }, {"'task'", "expected a string"});

  // Missing pieces: built from scratch without them.
  auto bare = [&](const std::string& skip, std::initializer_list<std::string> needles) {
    const fs::path ds = root / ("bare_" + skip);
    fs::create_directories(ds / "train");
    const std::string path = (ds / "train" / "s.h5").string();
    {
      io::H5File f(path, io::H5File::Mode::create_truncate);
      if (skip != "scaletrain_format") f.set_attribute("scaletrain_format", int64_t(1));
      if (skip != "task") f.set_attribute("task", "image_classification");
      if (skip != "num_classes") f.set_attribute("num_classes", int64_t(3));
      if (skip != "mean") f.set_attribute("mean", std::vector<double>{0.5});
      if (skip != "std") f.set_attribute("std", std::vector<double>{0.25});
      if (skip != "images") f.write("images", Tensor::zeros({5, 4, 4, 1}, DType::u8));
      if (skip != "labels") f.write("labels", Tensor::zeros({5}, DType::i32));
    }
    std::vector<std::string> all(needles);
    all.push_back(path);
    BOOST_TEST(throws_with([&] { data::open_split(ds.string(), "train"); }, {all[0], all[1]}));
  };
  bare("labels", {"missing dataset 'labels'", "s.h5"});
  bare("images", {"missing dataset 'images'", "s.h5"});
  bare("scaletrain_format", {"missing root attribute 'scaletrain_format'", "s.h5"});
  bare("task", {"missing root attribute 'task'", "s.h5"});
  bare("num_classes", {"missing root attribute 'num_classes'", "s.h5"});
  bare("mean", {"missing root attribute 'mean'", "s.h5"});
  bare("std", {"missing root attribute 'std'", "s.h5"});

  // Inconsistent shards: the second names itself and the first.
  {
    const fs::path ds = root / "inconsistent";
    hand_shard(ds / "train", "a.h5", nothing);
    const std::string b = hand_shard(ds / "train", "b.h5", [](io::H5File& f) {
      f.write("images", Tensor::zeros({5, 4, 5, 1}, DType::u8));
    });
    BOOST_TEST(throws_with([&] { data::open_split(ds.string(), "train"); }, {b, "4x5x1", "a.h5", "4x4x1"}));
    const fs::path ds2 = root / "inconsistent_classes";
    hand_shard(ds2 / "train", "a.h5", nothing);
    const std::string b2 =
        hand_shard(ds2 / "train", "b.h5", [](io::H5File& f) { f.set_attribute("num_classes", int64_t(4)); });
    BOOST_TEST(throws_with([&] { data::open_split(ds2.string(), "train"); }, {b2, "num_classes = 4"}));
    const fs::path ds3 = root / "inconsistent_mean";
    hand_shard(ds3 / "train", "a.h5", nothing);
    const std::string b3 =
        hand_shard(ds3 / "train", "b.h5", [](io::H5File& f) { f.set_attribute("mean", std::vector<double>{0.4}); });
    BOOST_TEST(throws_with([&] { data::open_split(ds3.string(), "train"); }, {b3, "mean/std"}));
  }

  // Not HDF5, and truncated.
  {
    const fs::path ds = root / "text";
    fs::create_directories(ds / "train");
    const std::string p = (ds / "train" / "x.h5").string();
    std::ofstream(p) << "images,labels\n1,2\n";
    BOOST_TEST(throws_with([&] { data::open_split(ds.string(), "train"); }, {p, "not an HDF5 file"}));
  }
  {
    const fs::path ds = root / "truncated";
    fs::create_directories(ds / "train");
    const std::string p = (ds / "train" / "x.h5").string();
    write_indexed_shard(p, 0, 500, 8, 8, 1, 3, {0.0}, {1.0}, 64);
    fs::resize_file(p, fs::file_size(p) - 1000);
    BOOST_TEST(throws_with([&] { data::open_split(ds.string(), "train"); }, {p, "truncated"}));
  }
}

BOOST_AUTO_TEST_CASE(plan_partitions_the_epoch) {
  const int64_t n = 103, b = 4;
  for (int world : {1, 2, 3, 4}) {
    LoaderOptions o;
    o.batch_size = b;
    o.seed = 11;
    // Training: equal full batches, distinct samples, different orders per epoch.
    std::set<int64_t> seen;
    for (int r = 0; r < world; ++r) {
      const auto ids = data::rank_samples(n, r, world, o, 0);
      BOOST_TEST(static_cast<int64_t>(ids.size()) == (n / world) / b * b);
      for (auto id : ids) {
        BOOST_TEST((id >= 0 && id < n));
        BOOST_TEST(seen.insert(id).second);
      }
      BOOST_TEST(ids == data::rank_samples(n, r, world, o, 0));
      BOOST_TEST(ids != data::rank_samples(n, r, world, o, 1));
    }
    // Evaluation: the ranks' slices, concatenated, are 0..n-1.
    o.shuffle = false;
    o.drop_last = false;
    std::vector<int64_t> all;
    for (int r = 0; r < world; ++r) {
      const auto ids = data::rank_samples(n, r, world, o, 0);
      BOOST_TEST((ids.size() == size_t(n / world) || ids.size() == size_t(n / world + 1)));
      all.insert(all.end(), ids.begin(), ids.end());
    }
    BOOST_TEST(all.size() == size_t(n));
    for (int64_t i = 0; i < n; ++i) BOOST_TEST(all[i] == i);
  }
  // Without shuffling, training keeps file order too.
  LoaderOptions o;
  o.batch_size = 5;
  o.shuffle = false;
  const auto ids = data::rank_samples(23, 1, 2, o, 3);
  BOOST_TEST((ids == std::vector<int64_t>{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}));
}

BOOST_AUTO_TEST_CASE(loader_yields_exact_samples_normalised_by_the_input_op) {
  // Shards of 5, 1 and 7 samples; 3 channels with distinct mean/std. The loader hands over the
  // stored pixels; ops::normalize_images with the split's mean and std gives the model's input.
  const fs::path dir = fresh_dir("exact");
  fs::create_directories(dir / "train");
  const std::vector<double> mean{0.25, 0.5, 0.125}, std{0.5, 0.2, 2.0};
  const std::vector<int64_t> sizes{5, 1, 7};
  int64_t first = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    write_indexed_shard((dir / "train" / data::shard_file_name(i, 3)).string(), first, sizes[i], 2, 3, 3, 4, mean, std,
                        2);
    first += sizes[i];
  }
  const SplitInfo split = data::open_split(dir.string(), "train");
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = false;
  o.drop_last = false;
  o.prefetch = 1;
  data::Loader loader(split, 0, 1, o);
  BOOST_TEST(loader.steps_per_epoch() == 4);
  BOOST_TEST(loader.samples_per_epoch() == 13);
  BOOST_TEST(split.mean == mean);
  BOOST_TEST(split.std == std);
  Context ctx(Device::cpu, 1);
  for (int epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    Tensor images, labels;
    int64_t id = 0;
    int batches = 0;
    while (loader.next(images, labels)) {
      ++batches;
      const int64_t bsz = labels.numel();
      BOOST_TEST((images.shape() == Shape{bsz, 2, 3, 3}));
      BOOST_TEST((images.dtype() == DType::u8));  // pixels; the model's input op normalises
      BOOST_TEST((labels.dtype() == DType::i32));
      BOOST_TEST(bsz == (batches == 4 ? 1 : 4));
      Tensor input = Tensor::empty(images.shape());
      ops::normalize_images(ctx, images, split.mean, split.std, input);
      for (int64_t s = 0; s < bsz; ++s, ++id) {
        BOOST_TEST(labels.data<int32_t>()[s] == id % 4);
        for (int k = 0; k < 18; ++k) {
          const int pixel = static_cast<uint8_t>(id >> (8 * (k % 3)));
          BOOST_TEST(int(images.data<uint8_t>()[s * 18 + k]) == pixel);
          const int c = k % 3;
          BOOST_TEST(input.data<float>()[s * 18 + k] == static_cast<float>((pixel / 255.0 - mean[c]) / std[c]));
        }
      }
    }
    BOOST_TEST(batches == 4);
    BOOST_TEST(id == 13);
    BOOST_TEST(!loader.next(images, labels));  // stays at the end
  }
  BOOST_TEST(loader.bytes_read() == 2 * 13 * (18 + 4));
}

BOOST_AUTO_TEST_CASE(loader_shuffles_reproducibly) {
  const std::string dir = indexed_dataset("shuffle", {40, 13, 50});
  const SplitInfo split = data::open_split(dir, "train");
  auto epoch_ids = [&](uint64_t seed, int epoch, int rank, int world) {
    LoaderOptions o;
    o.batch_size = 8;
    o.seed = seed;
    data::Loader loader(split, rank, world, o);
    loader.start_epoch(epoch);
    std::vector<int64_t> ids;
    Tensor images, labels;
    while (loader.next(images, labels)) {
      BOOST_TEST(labels.numel() == 8);
      for (int64_t s = 0; s < 8; ++s) {
        const int64_t id = decode_id(images.data<uint8_t>() + s * 6);
        BOOST_TEST(labels.data<int32_t>()[s] == id % 7);
        ids.push_back(id);
      }
    }
    BOOST_TEST(static_cast<int64_t>(ids.size()) == loader.samples_per_epoch());
    return ids;
  };
  const auto a = epoch_ids(5, 0, 0, 1);
  BOOST_TEST(a.size() == 96u);  // floor(103 / 8) * 8
  BOOST_TEST(std::set<int64_t>(a.begin(), a.end()).size() == 96u);
  BOOST_TEST(a == epoch_ids(5, 0, 0, 1));
  BOOST_TEST(a != epoch_ids(5, 1, 0, 1));
  BOOST_TEST(a != epoch_ids(6, 0, 0, 1));
  // The loader yields exactly the plan.
  LoaderOptions o;
  o.batch_size = 8;
  o.seed = 5;
  BOOST_TEST(a == data::rank_samples(103, 0, 1, o, 0));
  BOOST_TEST(epoch_ids(5, 2, 1, 3) == data::rank_samples(103, 1, 3, o, 2));
}

BOOST_AUTO_TEST_CASE(augmentation_is_a_crop_and_flip_of_the_source) {
  // Random pixels so that every (dy, dx, flip) gives a different image.
  const fs::path dir = fresh_dir("augment");
  fs::create_directories(dir / "train");
  const int h = 6, w = 5, c = 2, n = 64, pad = 2;
  Tensor images = Tensor::empty({n, h, w, c}, DType::u8);
  Tensor labels = Tensor::zeros({n}, DType::i32);
  data::synthetic_samples(3, 0, 0, n, h, w, c, 2, images.data<uint8_t>(), labels.data<int32_t>());
  for (int i = 0; i < n; ++i) images.data<uint8_t>()[i * h * w * c] = static_cast<uint8_t>(i);  // id in pixel 0
  const std::vector<double> mean{0.5, 0.25}, std{0.25, 0.5};
  data::write_image_shard((dir / "train" / "s.h5").string(), images, labels, 2, mean, std);
  const SplitInfo split = data::open_split(dir.string(), "train");

  auto run = [&](int rank, int world, uint64_t seed) {
    LoaderOptions o;
    o.batch_size = 8;
    o.shuffle = false;
    o.augment = true;
    o.crop_padding = pad;
    o.seed = seed;
    data::Loader loader(split, rank, world, o);
    loader.start_epoch(0);
    std::vector<uint8_t> all;
    Tensor x, y;
    while (loader.next(x, y)) all.insert(all.end(), x.data<uint8_t>(), x.data<uint8_t>() + x.numel());
    return all;
  };
  const std::vector<uint8_t> out = run(0, 1, 9);
  BOOST_TEST(out.size() == size_t(n * h * w * c));
  std::set<std::tuple<int, int, bool>> used;
  for (int i = 0; i < n; ++i) {
    const uint8_t* src = images.data<uint8_t>() + i * h * w * c;
    const uint8_t* got = out.data() + i * h * w * c;
    int matches = 0;
    for (int dy = 0; dy <= 2 * pad; ++dy)
      for (int dx = 0; dx <= 2 * pad; ++dx)
        for (bool flip : {false, true}) {
          bool same = true;
          for (int y = 0; y < h && same; ++y)
            for (int x = 0; x < w && same; ++x)
              for (int ch = 0; ch < c && same; ++ch) {
                const int sy = y + dy - pad, sx = (flip ? w - 1 - x : x) + dx - pad;
                const int v = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? src[(sy * w + sx) * c + ch] : 0;
                same = got[(y * w + x) * c + ch] == v;
              }
          if (same) {
            ++matches;
            used.insert({dy, dx, flip});
          }
        }
    BOOST_TEST(matches == 1, "sample " << i << " matches " << matches << " crops");
  }
  BOOST_TEST(used.size() > 20u);     // 50 possibilities, 64 samples: the draws vary
  BOOST_TEST(out == run(0, 1, 9));   // reproducible
  BOOST_TEST(out != run(0, 1, 10));  // seeded
  // Draws are per sample, seeded by (seed, epoch, sample id) (issue 4): rank 1 of 2 augments its
  // samples exactly as rank 0 of 1 does.
  const std::vector<uint8_t> r1 = run(1, 2, 9);
  BOOST_TEST(std::equal(r1.begin(), r1.end(), out.begin() + out.size() / 2));
}

BOOST_AUTO_TEST_CASE(loader_restarts_and_stops_cleanly) {
  const std::string dir = indexed_dataset("restart", {200, 57});
  const SplitInfo split = data::open_split(dir, "train");
  LoaderOptions o;
  o.batch_size = 16;
  o.prefetch = 3;
  o.shuffle = false;
  Tensor images, labels;
  {
    data::Loader loader(split, 0, 1, o);
    BOOST_TEST(throws_with([&] { loader.next(images, labels); }, {"start_epoch"}));
    loader.start_epoch(0);
    BOOST_TEST(loader.next(images, labels));
    BOOST_TEST(decode_id(images.data<uint8_t>()) == 0);
    // Abandon epoch 0 after one batch; epoch 1 starts from its beginning.
    loader.start_epoch(1);
    int64_t count = 0;
    while (loader.next(images, labels)) {
      BOOST_TEST(decode_id(images.data<uint8_t>()) == count);
      count += labels.numel();
    }
    BOOST_TEST(count == 256);
    BOOST_TEST(loader.wait_seconds() >= 0.0);
    loader.start_epoch(2);
  }  // destroyed mid-epoch with full queues: must not hang
  {
    data::Loader loader(split, 0, 1, o);  // never started
  }
}

BOOST_AUTO_TEST_CASE(loader_reports_a_file_broken_after_open) {
  const std::string dir = indexed_dataset("broken", {30, 30});
  const SplitInfo split = data::open_split(dir, "train");
  const std::string victim = split.shards[1].path;
  std::ofstream(victim, std::ios::trunc) << "gone";
  LoaderOptions o;
  o.batch_size = 8;
  data::Loader loader(split, 0, 1, o);
  loader.start_epoch(0);
  Tensor images, labels;
  BOOST_TEST(throws_with(
      [&] {
        while (loader.next(images, labels)) {
        }
      },
      {victim}));
}

BOOST_AUTO_TEST_CASE(synthetic_is_deterministic_and_shard_independent) {
  const int h = 3, w = 4, c = 3, k = 5;
  std::vector<uint8_t> all(20 * h * w * c), part(6 * h * w * c);
  std::vector<int32_t> la(20), lp(6);
  data::synthetic_samples(7, 0, 0, 20, h, w, c, k, all.data(), la.data());
  data::synthetic_samples(7, 0, 9, 6, h, w, c, k, part.data(), lp.data());
  BOOST_TEST(std::equal(part.begin(), part.end(), all.begin() + 9 * h * w * c));
  BOOST_TEST(std::equal(lp.begin(), lp.end(), la.begin() + 9));
  std::set<int32_t> labels(la.begin(), la.end());
  for (auto l : la) BOOST_TEST((l >= 0 && l < k));
  BOOST_TEST(labels.size() > 1u);
  std::vector<uint8_t> other(20 * h * w * c), val(20 * h * w * c);
  data::synthetic_samples(8, 0, 0, 20, h, w, c, k, other.data(), la.data());
  data::synthetic_samples(7, 1, 0, 20, h, w, c, k, val.data(), la.data());
  BOOST_TEST(!std::equal(other.begin(), other.end(), all.begin()));
  BOOST_TEST(!std::equal(val.begin(), val.end(), all.begin()));
}

// --prototype-cell N: a class's prototype is constant on N x N blocks, so the mean of many samples
// of one class is flat within a block (up to the noise's average) and steps between blocks; with
// cell 1 (the default) it varies from pixel to pixel as much within a block as between blocks.
// The noise is uniform on 0..255, so a pixel's mean over n samples is (prototype + 127.5) / 2 with
// a standard deviation of 74 / 2 / sqrt(n): 1.3 for the ~800 samples of a class here.
BOOST_AUTO_TEST_CASE(synthetic_prototype_cells) {
  const int h = 8, w = 12, c = 2, k = 2, n = 1600, cell = 4;
  const int64_t bytes = int64_t(h) * w * c;
  // Per class and byte: the mean over the class's samples.
  const auto class_means = [&](int prototype_cell) {
    std::vector<uint8_t> images(n * bytes);
    std::vector<int32_t> labels(n);
    data::synthetic_samples(11, 0, 0, n, h, w, c, k, images.data(), labels.data(), prototype_cell);
    std::vector<std::vector<double>> mean(k, std::vector<double>(bytes, 0.0));
    std::vector<int> count(k, 0);
    for (int s = 0; s < n; ++s) {
      ++count[labels[s]];
      for (int64_t b = 0; b < bytes; ++b) mean[labels[s]][b] += images[s * bytes + b];
    }
    for (int l = 0; l < k; ++l)
      for (auto& m : mean[l]) m /= count[l];
    return mean;
  };
  // The largest spread of the means within one block and channel, and the largest step between
  // the blocks' averages, over both classes.
  const auto spreads = [&](const std::vector<std::vector<double>>& mean) {
    double within = 0, between = 0;
    for (int l = 0; l < k; ++l)
      for (int ch = 0; ch < c; ++ch) {
        std::vector<double> block_avg;
        for (int by = 0; by < h; by += cell)
          for (int bx = 0; bx < w; bx += cell) {
            double lo = 1e9, hi = -1e9, sum = 0;
            for (int y = by; y < by + cell; ++y)
              for (int x = bx; x < bx + cell; ++x) {
                const double m = mean[l][(int64_t(y) * w + x) * c + ch];
                lo = std::min(lo, m), hi = std::max(hi, m), sum += m;
              }
            within = std::max(within, hi - lo);
            block_avg.push_back(sum / (cell * cell));
          }
        for (double a : block_avg)
          for (double b : block_avg) between = std::max(between, std::abs(a - b));
      }
    return std::pair{within, between};
  };
  const auto [within_cells, between_cells] = spreads(class_means(cell));
  BOOST_TEST(within_cells < 10.0);   // about 5 standard deviations of a mean
  BOOST_TEST(between_cells > 30.0);  // 6 blocks x 2 channels x 2 classes of random bytes / 2
  const auto [within_pixels, between_pixels] = spreads(class_means(1));
  BOOST_TEST(within_pixels > 30.0);  // per-pixel prototypes: no flat blocks
  // Cell 1 is the default, bit for bit; a cell larger than the image is one block.
  std::vector<uint8_t> a(4 * bytes), b(4 * bytes), big(4 * bytes);
  std::vector<int32_t> la(4), lb(4);
  data::synthetic_samples(5, 0, 0, 4, h, w, c, k, a.data(), la.data());
  data::synthetic_samples(5, 0, 0, 4, h, w, c, k, b.data(), lb.data(), 1);
  BOOST_TEST(a == b);
  data::synthetic_samples(5, 0, 0, 4, h, w, c, k, big.data(), lb.data(), 100);
  BOOST_TEST(la == lb);  // the labels do not depend on the cell
  BOOST_CHECK_THROW(data::synthetic_samples(5, 0, 0, 4, h, w, c, k, a.data(), la.data(), 0), std::exception);
}

BOOST_AUTO_TEST_CASE(idx_reader_plain_and_gzip) {
  const fs::path dir = fresh_dir("idx");
  // 3 images of 2x2 and their labels, big-endian headers; images gzip-compressed, labels plain.
  const unsigned char img_header[] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
  const unsigned char pixels[12] = {0, 1, 2, 3, 10, 11, 12, 13, 250, 251, 252, 253};
  gzFile g = gzopen((dir / "train-images-idx3-ubyte.gz").c_str(), "wb");
  gzwrite(g, img_header, sizeof(img_header));
  gzwrite(g, pixels, sizeof(pixels));
  gzclose(g);
  const unsigned char lab[] = {0, 0, 8, 1, 0, 0, 0, 3, 9, 0, 4};
  std::ofstream((dir / "train-labels-idx1-ubyte").string(), std::ios::binary)
      .write(reinterpret_cast<const char*>(lab), sizeof(lab));
  const data::IdxSplit s = data::read_idx_split(dir.string(), "train");
  BOOST_TEST((s.images.shape() == Shape{3, 2, 2, 1}));
  for (int i = 0; i < 12; ++i) BOOST_TEST(s.images.data<uint8_t>()[i] == pixels[i]);
  BOOST_TEST(s.labels.data<int32_t>()[0] == 9);
  BOOST_TEST(s.labels.data<int32_t>()[1] == 0);
  BOOST_TEST(s.labels.data<int32_t>()[2] == 4);
  BOOST_TEST(
      throws_with([&] { data::read_idx_split(dir.string(), "t10k"); }, {"t10k-images-idx3-ubyte", dir.string()}));
  // A label file with the wrong count.
  const unsigned char lab2[] = {0, 0, 8, 1, 0, 0, 0, 2, 9, 0};
  fs::create_directories(dir / "bad");
  fs::copy(dir / "train-images-idx3-ubyte.gz", dir / "bad" / "train-images-idx3-ubyte.gz");
  std::ofstream((dir / "bad" / "train-labels-idx1-ubyte").string(), std::ios::binary)
      .write(reinterpret_cast<const char*>(lab2), sizeof(lab2));
  BOOST_TEST(throws_with([&] { data::read_idx_split((dir / "bad").string(), "train"); }, {"2 labels", "3 images"}));
}

BOOST_AUTO_TEST_SUITE_END()
