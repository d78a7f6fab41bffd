// `scaletrain-data`: convert | synthetic | inspect | bench | upgrade. Options come from Boost.Program_options;
// unknown options, bad values and missing arguments are usage errors (exit 2, printed once),
// anything wrong with the data is a scaletrain::Error naming the file (exit 1 on every rank).
// Under mpirun the writers share the shards (shard i is written by rank i mod P) and rank 0
// validates the result; one process works as well.
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/data_subcommands.hpp"
#include "cli/option_ranges.hpp"
#include "cli/subcommand.hpp"
#include "scaletrain/cli/commands.hpp"
#include "scaletrain/cli/guard.hpp"
#include "scaletrain/comm/agreement.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/core/timer.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/data/pipeline.hpp"
#include "scaletrain/data/recommendation.hpp"
#include "scaletrain/data/sources.hpp"
#include "scaletrain/data/translation.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/ops/normalize.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace scaletrain::cli {
namespace {

const char* kUsage =
    "usage: scaletrain-data <command> [options]\n"
    "\n"
    "commands:\n"
    "  convert fashion-mnist  convert Fashion-MNIST's idx files into the scaletrain dataset format\n"
    "  convert movielens      convert MovieLens ratings (ml-20m, ml-1m) into the recommendation task\n"
    "  translation            convert sentence pairs (two text files or a TSV) into the translation task, with the\n"
    "                         MLPerf Transformer's subword vocabulary (built, or read from a file)\n"
    "  synthetic              write a random (learnable) image-classification, recommendation or translation\n"
    "                         dataset for tests and benchmarks (--task recommendation|translation)\n"
    "  inspect DIR            validate a dataset and print its splits, shards, sample counts and shapes\n"
    "  verify DIR             compare every shard's bytes with the dataset's manifest (checksums; ranks share the "
    "work)\n"
    "  manifest DIR           write the manifest (each shard's size and checksum) of a dataset made by other tools\n"
    "  bench DIR              read a split through the training data loader and report samples/s per rank\n"
    "  upgrade DIR            rewrite a dataset (e.g. format-1 JPEG shards, or shards h5py wrote without\n"
    "                         checksummed metadata) in the current format with checksummed HDF5 metadata:\n"
    "                         scaletrain-data upgrade OLD_DIR --output NEW_DIR\n"
    "  bleu                   score a translation (--hypotheses F --references F) with MLPerf's Transformer BLEU\n"
    "\n"
    "The format is described in docs/dataset-format.md. Run 'scaletrain-data <command> --help' for a\n"
    "command's options. convert, synthetic and upgrade may run under mpirun: ranks share the shards to\n"
    "write.\n";

struct World {
  int rank = 0, size = 1;
  World() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  void barrier() const { ST_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); }
};

std::string vec_string(const std::vector<double>& v) {
  std::ostringstream os;
  os << std::setprecision(6) << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

void print_split(const data::SplitInfo& s, bool shards) {
  std::cout << "split " << fs::path(s.dir).filename().string() << ": " << s.samples << " samples in " << s.shards.size()
            << " shard" << (s.shards.size() == 1 ? "" : "s") << ", task " << s.task << ", images " << s.height << "x"
            << s.width << "x" << s.channels << " (HxWxC, uint8), " << s.num_classes << " classes\n";
  std::cout << "  mean " << vec_string(s.mean) << "  std " << vec_string(s.std) << " (pixel scale 0..1)\n";
  std::cout << "  manifest "
            << (s.manifest ? s.manifest->path + " (sizes match; 'scaletrain-data verify' checks the checksums)"
                           : std::string("none (sizes and checksums unknown; 'scaletrain-data manifest' writes one)"))
            << "\n";
  if (shards)
    for (const auto& sh : s.shards) std::cout << "  " << sh.path << "  " << sh.samples << " samples\n";
  print_unchecked_shards(s.unchecked_shards);
}

Json split_json(const data::SplitInfo& s) {
  Json j = Json::object();
  j.set("dir", s.dir);
  j.set("task", s.task);
  j.set("samples", s.samples);
  j.set("height", s.height);
  j.set("width", s.width);
  j.set("channels", s.channels);
  j.set("num_classes", s.num_classes);
  j.set("mean", Json::array_of(s.mean));
  j.set("std", Json::array_of(s.std));
  j.set("manifest", s.manifest ? Json(s.manifest->path) : Json());
  Json shards = Json::array();
  for (const auto& sh : s.shards) {
    Json o = Json::object();
    o.set("path", sh.path);
    o.set("samples", sh.samples);
    shards.push_back(o);
  }
  j.set("shards", shards);
  j.set("unchecked_shards", Json::array_of(s.unchecked_shards));
  return j;
}

// After writing: the manifests, then rank 0 re-opens what was written (every spec check) and
// prints a summary.
void verify_and_report(const World& world, const std::string& output, const std::vector<std::string>& splits,
                       double seconds) {
  write_manifests(output, splits);
  comm::on_rank0_agreed(comm::Communicator::world(), [&] {
    for (const auto& split : splits) print_split(data::open_split(output, split), false);
    std::cout << "wrote " << output << " in " << std::fixed << std::setprecision(1) << seconds << " s with "
              << world.size << " rank" << (world.size == 1 ? "" : "s") << "\n";
  });
}

// ---------------------------------------------------------------------------------------------
// convert

int convert_main(int argc, char** argv) {
  // `convert imagenet ...` has its own options (src/cli/data_imagenet.cpp).
  if (argc >= 2 && std::string(argv[1]) == "imagenet") return convert_imagenet_main(argc - 1, argv + 1);
  if (argc >= 2 && std::string(argv[1]) == "movielens") return convert_movielens_main(argc - 1, argv + 1);
  std::string dataset, source, output;
  int64_t shards = 1, chunk = data::kDefaultChunkSamples;
  bool overwrite = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")(
      "dataset", po::value(&dataset)->required(),
      "the dataset to convert: fashion-mnist, imagenet or movielens (also the first positional argument; "
      "'convert imagenet --help' and 'convert movielens --help' for their options)")(
      "source", po::value(&source)->default_value("/usr/share/datasets/fashion-mnist"),
      "directory with train-{images-idx3,labels-idx1}-ubyte[.gz] and t10k-* (Debian's dataset-fashion-mnist)")(
      "output", po::value(&output)->required(),
      "dataset directory to write: OUTPUT/train/*.h5 (60,000 samples) and "
      "OUTPUT/val/*.h5 (the 10,000 t10k samples)")(
      "shards", po::value(&shards)->default_value(shards),
      "shards per split (val gets min(shards, its samples)); ranks under mpirun write them in parallel")(
      "chunk-samples", po::value(&chunk)->default_value(chunk), "samples per HDF5 chunk of 'images'")(
      "overwrite", po::bool_switch(&overwrite), "replace shards already in OUTPUT/train and OUTPUT/val");
  po::positional_options_description pos;
  pos.add("dataset", 1);
  po::variables_map vm;
  if (!parse_data_command("convert", argc, argv, desc, vm, "fashion-mnist --output DIR [options]", &pos)) return 0;
  if (dataset != "fashion-mnist")
    throw UsageError("convert: unknown dataset '" + dataset + "' (known: fashion-mnist, imagenet, movielens)");
  if (shards < 1) throw UsageError("convert: --shards must be at least 1, got " + std::to_string(shards));
  if (chunk < 1) throw UsageError("convert: --chunk-samples must be at least 1, got " + std::to_string(chunk));

  const World world;
  Stopwatch clock;
  const data::IdxSplit train = data::read_idx_split(source, "train");
  const data::IdxSplit val = data::read_idx_split(source, "t10k");
  ST_CHECK(train.images.dim(1) == val.images.dim(1) && train.images.dim(2) == val.images.dim(2),
           source << ": train and t10k images differ in size");
  // Normalisation constants from the training images only (every rank computes the same numbers).
  data::PixelStats stats(1);
  stats.add(train.images.data<uint8_t>(), train.images.dim(0), train.images.dim(1) * train.images.dim(2));
  const std::vector<double> mean = stats.mean(), std = stats.std();

  prepare_output(world.rank, output, {"train", "val"}, overwrite);
  struct Task {
    const data::IdxSplit* source;
    std::string split;
    int64_t index, count;
  };
  std::vector<Task> tasks;
  const int64_t val_shards = std::min<int64_t>(shards, val.images.dim(0));
  for (int64_t i = 0; i < shards; ++i) tasks.push_back({&train, "train", i, shards});
  for (int64_t i = 0; i < val_shards; ++i) tasks.push_back({&val, "val", i, val_shards});
  for (std::size_t t = world.rank; t < tasks.size(); t += world.size) {
    const Task& task = tasks[t];
    const Tensor& images = task.source->images;
    const auto [begin, end] = data::shard_range(images.dim(0), task.index, task.count);
    const Shape& s = images.shape();
    const Tensor part = Tensor::view_of(images, begin * s[1] * s[2] * s[3], {end - begin, s[1], s[2], s[3]});
    const Tensor labels = Tensor::view_of(task.source->labels, begin, {end - begin});
    const std::string path = (fs::path(output) / task.split / data::shard_file_name(task.index, task.count)).string();
    data::write_image_shard(path, part, labels, 10, mean, std, chunk);
  }
  verify_and_report(world, output, {"train", "val"}, clock.elapsed());
  return 0;
}

// ---------------------------------------------------------------------------------------------
// synthetic

// --task recommendation or translation: different data, different options
// (src/cli/data_recommendation.cpp, src/cli/data_translation.cpp).
bool asks_for_task(int argc, char** argv, const std::string& task) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--task=" + task) return true;
    if (a == "--task" && i + 1 < argc && argv[i + 1] == task) return true;
  }
  return false;
}

int synthetic_main(int argc, char** argv) {
  if (asks_for_task(argc, argv, data::kTaskRecommendation)) return synthetic_recommendation_main(argc, argv);
  if (asks_for_task(argc, argv, data::kTaskTranslation)) return synthetic_translation_main(argc, argv);
  std::string task, image_size, output;
  int64_t samples = 0, val_samples = -1, shards = 1, chunk = data::kDefaultChunkSamples;
  int classes = 0, prototype_cell = 1;
  uint64_t seed = 0;
  bool overwrite = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")(
      "task", po::value(&task)->default_value(data::kTaskImageClassification),
      "image_classification, recommendation or translation ('synthetic --task recommendation --help' and "
      "'synthetic --task translation --help' for theirs)")("samples", po::value(&samples)->required(),
                                                           "training samples (OUTPUT/train)")(
      "val-samples", po::value(&val_samples), "validation samples (OUTPUT/val); default max(1, samples / 10)")(
      "image-size", po::value(&image_size)->required(), "H,W,C, e.g. 28,28,1 or 224,224,3")(
      "classes", po::value(&classes)->required(), "number of classes K (labels uniform in [0, K))")(
      "prototype-cell", po::value(&prototype_cell)->default_value(prototype_cell),
      "each sample is the mean of its class's prototype and fresh noise; the prototype has one random "
      "value per channel in each N x N block of pixels (1: per pixel). Blocks of 8 to 32 pixels give "
      "classes that ImageNet CNNs learn in minutes; per-pixel prototypes survive their strided "
      "convolutions and pooling only faintly")(
      "shards", po::value(&shards)->default_value(shards),
      "shards per split (val gets min(shards, its samples)); ranks under mpirun write them in parallel")(
      "output", po::value(&output)->required(), "dataset directory to write")(
      "seed", po::value(&seed)->default_value(seed), "the data depends only on the seed, not on shards or ranks")(
      "chunk-samples", po::value(&chunk)->default_value(chunk), "samples per HDF5 chunk of 'images'")(
      "overwrite", po::bool_switch(&overwrite), "replace shards already in OUTPUT/train and OUTPUT/val");
  po::variables_map vm;
  if (!parse_data_command("synthetic", argc, argv, desc, vm,
                          "--samples N --image-size H,W,C --classes K --output DIR [options]"))
    return 0;
  if (task != data::kTaskImageClassification)
    throw UsageError("synthetic: unknown --task '" + task +
                     "' (known: image_classification, recommendation, translation)");
  std::vector<int> hwc;
  {
    std::stringstream ss(image_size);
    std::string item;
    while (std::getline(ss, item, ',')) {
      std::size_t used = 0;
      long v = 0;
      try {
        v = std::stol(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || item.empty() || v <= 0 || v > 65536)
        throw UsageError("synthetic: --image-size '" + image_size + "' must be H,W,C with positive integers");
      hwc.push_back(static_cast<int>(v));
    }
    if (hwc.size() != 3) throw UsageError("synthetic: --image-size '" + image_size + "' must be H,W,C");
  }
  if (samples < 1) throw UsageError("synthetic: --samples must be at least 1");
  if (val_samples < 0) val_samples = std::max<int64_t>(1, samples / 10);
  if (val_samples < 1) throw UsageError("synthetic: --val-samples must be at least 1");
  if (classes < 1) throw UsageError("synthetic: --classes must be at least 1");
  if (shards < 1) throw UsageError("synthetic: --shards must be at least 1");
  if (chunk < 1) throw UsageError("synthetic: --chunk-samples must be at least 1");

  const World world;
  Stopwatch clock;
  const int h = hwc[0], w = hwc[1], c = hwc[2];
  const int64_t bytes = int64_t(h) * w * c;
  struct Task {
    int split_id;
    int64_t total, index, count;
  };
  std::vector<Task> tasks;
  const int64_t val_shards = std::min(shards, val_samples);
  for (int64_t i = 0; i < shards; ++i) tasks.push_back({0, samples, i, shards});
  for (int64_t i = 0; i < val_shards; ++i) tasks.push_back({1, val_samples, i, val_shards});

  // Pass 1: normalisation constants from the training samples, summed exactly over ranks.
  data::PixelStats stats(c);
  std::vector<uint8_t> img;
  std::vector<int32_t> lab;
  const int64_t block = std::max<int64_t>(1, (64 << 20) / bytes);  // generate in ~64 MB pieces
  for (std::size_t t = world.rank; t < tasks.size(); t += world.size) {
    if (tasks[t].split_id != 0) continue;
    const auto [begin, end] = data::shard_range(samples, tasks[t].index, tasks[t].count);
    for (int64_t s = begin; s < end; s += block) {
      const int64_t n = std::min(block, end - s);
      img.resize(n * bytes);
      lab.resize(n);
      data::synthetic_samples(seed, 0, s, n, h, w, c, classes, img.data(), lab.data(), prototype_cell);
      stats.add(img.data(), n, int64_t(h) * w);
    }
  }
  std::vector<int64_t> sums(stats.sum);
  sums.insert(sums.end(), stats.sum_sq.begin(), stats.sum_sq.end());
  sums.push_back(stats.pixels_per_channel);
  ST_CHECK_MPI(
      MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
  std::copy(sums.begin(), sums.begin() + c, stats.sum.begin());
  std::copy(sums.begin() + c, sums.begin() + 2 * c, stats.sum_sq.begin());
  stats.pixels_per_channel = sums.back();
  const std::vector<double> mean = stats.mean(), std = stats.std();

  // Pass 2: write.
  prepare_output(world.rank, output, {"train", "val"}, overwrite);
  for (std::size_t t = world.rank; t < tasks.size(); t += world.size) {
    const Task& task = tasks[t];
    const auto [begin, end] = data::shard_range(task.total, task.index, task.count);
    Tensor images = Tensor::empty({end - begin, h, w, c}, DType::u8);
    Tensor labels = Tensor::empty({end - begin}, DType::i32);
    data::synthetic_samples(seed, task.split_id, begin, end - begin, h, w, c, classes, images.data<uint8_t>(),
                            labels.data<int32_t>(), prototype_cell);
    const std::string split = task.split_id == 0 ? "train" : "val";
    const std::string path = (fs::path(output) / split / data::shard_file_name(task.index, task.count)).string();
    data::write_image_shard(path, images, labels, classes, mean, std, chunk);
  }
  verify_and_report(world, output, {"train", "val"}, clock.elapsed());
  return 0;
}

// ---------------------------------------------------------------------------------------------
// inspect

// Opens every split of `dir` (a damaged shard throws) and prints what it holds: text, or one
// JSON object with --json.
void print_splits(const std::string& dir, const std::vector<std::string>& splits, bool json) {
  Json out = Json::object();
  out.set("dir", dir);
  out.set("format", data::kFormatVersion);
  Json split_objects = Json::object();
  if (!json) std::cout << "dataset " << dir << " (scaletrain format " << data::kFormatVersion << ")\n";
  for (const auto& split : splits) {
    const std::string task = data::split_task(dir, split);
    if (task == data::kTaskRecommendation) {
      const data::RecommendationSplit rec = data::open_recommendation_split(dir, split);
      if (json)
        split_objects.set(split, recommendation_split_json(rec));
      else
        print_recommendation_split(rec, true);
      continue;
    }
    if (task == data::kTaskTranslation) {
      const data::TranslationSplit tr = data::open_translation_split(dir, split);
      if (json)
        split_objects.set(split, translation_split_json(tr));
      else
        print_translation_split(tr, true);
      continue;
    }
    const data::SplitInfo info = data::open_split(dir, split);
    if (json)
      split_objects.set(split, split_json(info));
    else
      print_split(info, true);
  }
  out.set("splits", split_objects);
  if (json) std::cout << out.dump(2) << "\n";
}

int inspect_main(int argc, char** argv) {
  std::string dir;
  bool json = false, verify_data = false, require_checksums = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")("dir", po::value(&dir)->required(),
                                                  "dataset directory (also the first positional argument)")(
      "json", po::bool_switch(&json), "print one JSON object {\"dir\", \"splits\": {name: {...}}} instead of text")(
      "verify-data", po::bool_switch(&verify_data),
      "first compare every split's shards with its manifest.json (checksums, shared by the ranks under mpirun)")(
      "require-checksums", po::bool_switch(&require_checksums),
      "refuse a split without manifest.json and, unless --verify-data, shards whose HDF5 metadata has no checksums "
      "or whose 'task'/'encoding' is a variable-length string (docs/reliability.md)");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  if (!parse_data_command("inspect", argc, argv, desc, vm, "DIR [--json]", &pos)) return 0;
  const World world;
  const std::vector<std::string> splits = data::list_splits(dir);
  // The checks first, their verdicts agreed over the ranks (no rank left in a collective).
  std::vector<std::string> split_dirs;
  for (const auto& split : splits) split_dirs.push_back((fs::path(dir) / split).string());
  if (require_checksums) data::require_checksums_agreed(split_dirs, verify_data, comm::Communicator::world());
  if (verify_data)
    for (const std::string& split_dir : split_dirs) data::require_intact(split_dir, comm::Communicator::world());
  // Validation is rank 0's job; under mpirun the others wait for its verdict, so that a damaged
  // shard stops every rank with rank 0's message (no rank in MPI_Finalize while another aborts).
  comm::on_rank0_agreed(comm::Communicator::world(), [&] { print_splits(dir, splits, json); });
  if (world.rank != 0) return 0;
  for (const char* needed : {"train", "val"})
    if (std::find(splits.begin(), splits.end(), needed) == splits.end())
      std::cerr << "scaletrain-data: note: " << dir << " has no " << needed
                << "/ split ('scaletrain train' needs train/ and val/)\n";
  return 0;
}

// ---------------------------------------------------------------------------------------------
// bench
//
// Reads epochs through the training loader (same reader, threads, decoding, plan) and, in the same
// run, the raw sequential read bandwidth of the same files: the shard files' bytes, laid end to
// end, are cut into one contiguous range per rank, read with kRawBlock preads. The raw pass runs
// before and after the pipeline and the faster one counts, so the ratio is not flattered by a
// cold first pass. Totals: sum over ranks / slowest rank's time.

constexpr std::size_t kRawBlock = 8u << 20;

// This rank's share of the files, read sequentially. Returns bytes read.
int64_t raw_read_share(const data::SplitInfo& info, int rank, int size) {
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const auto& shard : info.shards) {
    sizes.push_back(static_cast<int64_t>(fs::file_size(shard.path)));
    total += sizes.back();
  }
  const int64_t begin = total * rank / size, end = total * (rank + 1) / size;
  std::vector<char> buf(kRawBlock);
  int64_t at = 0, got = 0;
  for (std::size_t i = 0; i < info.shards.size(); at += sizes[i], ++i) {
    const int64_t lo = std::max(begin, at), hi = std::min(end, at + sizes[i]);
    if (lo >= hi) continue;
    const int fd = ::open(info.shards[i].path.c_str(), O_RDONLY | O_CLOEXEC);
    ST_CHECK(fd >= 0, "bench: cannot open " << info.shards[i].path << ": " << std::strerror(errno));
    for (int64_t off = lo - at; off < hi - at;) {
      const std::size_t want = static_cast<std::size_t>(std::min<int64_t>(kRawBlock, hi - at - off));
      const ssize_t n = ::pread(fd, buf.data(), want, off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        ST_THROW("bench: reading " << info.shards[i].path << " at byte " << off << ": "
                                   << (n == 0 ? "unexpected end of file" : std::strerror(err)));
      }
      off += n;
      got += n;
    }
    ::close(fd);
  }
  return got;
}

std::vector<double> allgather_doubles(const std::vector<double>& mine, int size) {
  std::vector<double> all(mine.size() * static_cast<std::size_t>(size));
  ST_CHECK_MPI(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                             static_cast<int>(mine.size()), MPI_DOUBLE, MPI_COMM_WORLD));
  return all;
}

int bench_main(int argc, char** argv) {
  std::string dir, split = "train", dump, json_path, image_size = "224,224";
  int epochs = 1;
  int64_t dump_batches = 1;
  bool no_shuffle = false, no_drop_last = false, no_raw = false;
  data::LoaderOptions o;
  o.batch_size = 128;
  po::options_description desc("options");
  desc.add_options()("help,h", "print this help")("dir", po::value(&dir)->required(),
                                                  "dataset directory (also the first positional argument)")(
      "split", po::value(&split)->default_value(split), "split to read")(
      "batch-size", po::value(&o.batch_size)->default_value(o.batch_size), "samples per rank per batch")(
      "epochs", po::value(&epochs)->default_value(epochs),
      "epochs to read (with more than one, the first epoch and the later ones are also reported apart)")(
      "seed", po::value(&o.seed)->default_value(o.seed), "shuffle and augmentation seed")(
      "io", po::value(&o.io)->default_value(o.io), "shard reader: posix | mmap | mpiio | mpiio-collective")(
      "data-threads", po::value(&o.data_threads)->default_value(o.data_threads), "decode/augment threads per rank")(
      "image-size", po::value(&image_size)->default_value(image_size), "H,W: output size for JPEG datasets")(
      "shuffle", po::value(&o.shuffle_mode)->default_value(o.shuffle_mode), "global | shard")(
      "shuffle-buffer", po::value(&o.shuffle_buffer)->default_value(o.shuffle_buffer),
      "samples in the buffer of --shuffle shard")("no-shuffle", po::bool_switch(&no_shuffle), "keep file order")(
      "pad-last", po::bool_switch(&o.pad_last), "repeat samples to fill the last batch")(
      "no-drop-last", po::bool_switch(&no_drop_last), "evaluation plan: every sample once, last batch smaller")(
      "augment", po::bool_switch(&o.augment), "training augmentation (flip, crop; random resized crop for JPEG)")(
      "crop-padding", po::value(&o.crop_padding)->default_value(0), "zero padding of the random crop, pixels")(
      "prefetch", po::value(&o.prefetch)->default_value(o.prefetch), "batches prepared ahead")(
      "skip-bad-samples", po::bool_switch(&o.skip_bad_samples), "skip samples that fail to read or decode")(
      "no-raw", po::bool_switch(&no_raw), "skip the raw sequential read of the files")(
      "json", po::value(&json_path),
      "rank 0 writes the results here: samples_per_s, mb_per_s, raw_read_mb_per_s, pipeline_over_raw, "
      "reader_mb_per_s (totals), first_epoch_mb_per_s, later_epochs_mb_per_s, later_epochs_over_raw, per_rank")(
      "dump", po::value(&dump),
      "rank 0 writes its first batches of epoch 0 to this HDF5 file: images (float32, "
      "normalised as the model's input op does), labels, ids (sample ids in split order)")(
      "dump-batches", po::value(&dump_batches)->default_value(dump_batches), "batches to --dump");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  if (!parse_data_command("bench", argc, argv, desc, vm, "DIR [options]", &pos)) return 0;
  if (o.batch_size < 1) throw UsageError("bench: --batch-size must be at least 1");
  if (epochs < 1) throw UsageError("bench: --epochs must be at least 1");
  if (!data::is_io_mode(o.io))
    throw UsageError("bench: unknown --io '" + o.io + "' (known: " + data::io_mode_list() + ")");
  if (o.data_threads < 1 || o.data_threads > 256)
    throw UsageError("bench: --data-threads must be between 1 and 256, got " + std::to_string(o.data_threads));
  if (o.shuffle_mode != "global" && o.shuffle_mode != "shard")
    throw UsageError("bench: unknown --shuffle '" + o.shuffle_mode + "' (known: global, shard)");
  if (o.prefetch < 1) throw UsageError("bench: --prefetch must be at least 1");
  {
    int h = 0, w = 0;
    char extra = 0;
    if (std::sscanf(image_size.c_str(), "%d,%d%c", &h, &w, &extra) != 2 || h <= 0 || w <= 0)
      throw UsageError("bench: --image-size '" + image_size + "' must be H,W with positive integers");
    o.image_height = h;
    o.image_width = w;
  }
  o.shuffle = !no_shuffle;
  o.drop_last = !no_drop_last;

  const World world;
  const comm::Communicator comm = comm::Communicator::world();
  o.comm = &comm;
  const data::SplitInfo info = data::open_split(dir, split);

  // Raw sequential read: each rank its share, between barriers; the slowest rank's time counts.
  auto raw_pass = [&](double& seconds) {
    world.barrier();
    Stopwatch c;
    const int64_t bytes = raw_read_share(info, world.rank, world.size);
    seconds = c.elapsed();
    return bytes;
  };
  int64_t raw_bytes = 0;
  double raw_seconds = 0.0, raw_seconds_after = 0.0;
  if (!no_raw) raw_bytes = raw_pass(raw_seconds);

  data::Loader loader(info, world.rank, world.size, o);
  const std::vector<int64_t> plan = loader.plan(0);  // the loader's own order, whatever the shuffle mode
  std::vector<Tensor> dumped_images, dumped_labels;
  int64_t samples = 0;
  world.barrier();
  Stopwatch clock;
  double first_seconds = 0.0;
  int64_t first_bytes = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    loader.start_epoch(epoch);
    Tensor images, labels;
    for (int64_t b = 0; loader.next(images, labels); ++b) {
      samples += labels.numel();
      if (epoch == 0 && b < dump_batches && !dump.empty() && world.rank == 0) {
        dumped_images.push_back(images.clone());
        dumped_labels.push_back(labels.clone());
      }
    }
    if (epoch == 0) {  // the epoch is drained: nothing more is read before start_epoch(1)
      first_seconds = clock.elapsed();
      first_bytes = loader.bytes_read();
    }
  }
  const double seconds = clock.elapsed();
  const int64_t bytes = loader.bytes_read();
  // The read stage alone: the same reader and epoch-0 plan in batches, no decoding. Separates
  // what the I/O path delivers from what decoding (copy, crop, flip; JPEG decode) costs. (With
  // --io mmap the reader hands out addresses: its copy is part of decoding.)
  double reader_seconds = 0.0;
  int64_t reader_bytes = 0;
  if (!no_raw) {
    auto reader = data::make_sample_reader(info, o, &comm);
    const int64_t my_batches = (static_cast<int64_t>(plan.size()) + o.batch_size - 1) / o.batch_size;
    int64_t batches = my_batches;  // collective readers: every rank calls read() alike
    ST_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &batches, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
    data::SampleBytes out;
    std::vector<int64_t> ids;
    world.barrier();
    Stopwatch c;
    for (int64_t b = 0; b < batches; ++b) {
      const std::size_t lo = std::min(plan.size(), static_cast<std::size_t>(b * o.batch_size));
      const std::size_t hi = std::min(plan.size(), lo + static_cast<std::size_t>(o.batch_size));
      ids.assign(plan.begin() + static_cast<std::ptrdiff_t>(lo), plan.begin() + static_cast<std::ptrdiff_t>(hi));
      reader->read(ids, out);
    }
    reader_seconds = c.elapsed();
    reader_bytes = reader->bytes_read();
    raw_pass(raw_seconds_after);
  }
  // Per rank, then totals; the raw figure is the faster pass (the first may have filled the page cache).
  const std::vector<double> all = allgather_doubles(
      {static_cast<double>(samples), seconds, static_cast<double>(bytes), static_cast<double>(raw_bytes), raw_seconds,
       raw_seconds_after, loader.wait_seconds(), static_cast<double>(reader_bytes), reader_seconds, first_seconds,
       static_cast<double>(first_bytes)},
      world.size);
  constexpr int kFields = 11;
  double sum_samples = 0, sum_bytes = 0, sum_raw = 0, max_seconds = 0, max_raw_before = 0, max_raw_after = 0;
  double sum_reader = 0, max_reader = 0, sum_first = 0, max_first = 0, max_later = 0;
  for (int r = 0; r < world.size; ++r) {
    const double* v = &all[static_cast<std::size_t>(r) * kFields];
    max_first = std::max(max_first, v[9]);
    max_later = std::max(max_later, v[1] - v[9]);
    sum_first += v[10];
    sum_samples += v[0];
    max_seconds = std::max(max_seconds, v[1]);
    sum_bytes += v[2];
    sum_raw += v[3];
    max_raw_before = std::max(max_raw_before, v[4]);
    max_raw_after = std::max(max_raw_after, v[5]);
    sum_reader += v[7];
    max_reader = std::max(max_reader, v[8]);
  }
  const double total_reader_mb = no_raw ? 0.0 : sum_reader / 1e6 / std::max(max_reader, 1e-9);
  const double total_rate = sum_samples / std::max(max_seconds, 1e-9);
  const double total_mb = sum_bytes / 1e6 / std::max(max_seconds, 1e-9);
  const double raw_max = std::min(max_raw_before, max_raw_after);
  const double total_raw_mb = no_raw ? 0.0 : sum_raw / 1e6 / std::max(raw_max, 1e-9);
  // The first epoch also pays one-time costs (opening the shards, first-touch page faults of the
  // batch buffers and, with --io mmap, of the mappings); later epochs show the steady state.
  const double first_mb = sum_first / 1e6 / std::max(max_first, 1e-9);
  const double later_mb = (sum_bytes - sum_first) / 1e6 / std::max(max_later, 1e-9);

  if (world.rank == 0) {
    std::cout << "bench " << info.dir << ": " << world.size << " rank" << (world.size == 1 ? "" : "s") << ", batch "
              << o.batch_size << ", " << epochs << " epoch" << (epochs == 1 ? "" : "s") << ", "
              << loader.steps_per_epoch() << " steps per epoch (rank 0)\n"
              << "  " << info.samples << " samples (" << info.encoding << "), io " << o.io << ", " << o.data_threads
              << " data thread" << (o.data_threads == 1 ? "" : "s") << "\n";
    double min_rate = 1e300, max_rate = 0;
    for (int r = 0; r < world.size; ++r) {
      const double* v = &all[static_cast<std::size_t>(r) * kFields];
      min_rate = std::min(min_rate, v[0] / std::max(v[1], 1e-9));
      max_rate = std::max(max_rate, v[0] / std::max(v[1], 1e-9));
    }
    std::cout << std::fixed << std::setprecision(0) << "  samples/s per rank: min " << min_rate << ", mean "
              << total_rate / world.size << ", max " << max_rate << "; total " << total_rate << "\n"
              << std::setprecision(3) << "  rank 0: " << samples << " samples in " << seconds << " s, waited "
              << loader.wait_seconds() << " s, read " << std::setprecision(1) << bytes / 1e6 << " MB\n";
    char line[256];
    std::snprintf(line, sizeof line, "%6s %10s %10s %12s %10s %10s %14s\n", "rank", "samples", "seconds", "samples/s",
                  "MB/s", "wait_s", "raw_read_MB/s");
    std::cout << line;
    for (int r = 0; r < world.size; ++r) {
      const double* v = &all[static_cast<std::size_t>(r) * kFields];
      const double raw_t = std::min(v[4], v[5]);
      std::snprintf(line, sizeof line, "%6d %10.0f %10.3f %12.1f %10.1f %10.3f %14.1f\n", r, v[0], v[1],
                    v[0] / std::max(v[1], 1e-9), v[2] / 1e6 / std::max(v[1], 1e-9), v[6],
                    no_raw ? 0.0 : v[3] / 1e6 / std::max(raw_t, 1e-9));
      std::cout << line;
    }
    std::snprintf(line, sizeof line, "%6s %10.0f %10.3f %12.1f %10.1f %10s %14.1f\n", "total", sum_samples, max_seconds,
                  total_rate, total_mb, "", total_raw_mb);
    std::cout << line;
    if (!no_raw)
      std::cout << std::fixed << std::setprecision(1)
                << "pipeline MB/s / raw read MB/s: " << 100.0 * total_mb / std::max(total_raw_mb, 1e-9)
                << "% (raw: " << sum_raw / 1e6
                << " MB, 8 MiB preads, faster of the passes before and after the pipeline)\n"
                << "read stage alone (" << o.io << " reader, no decoding"
                << (o.io == "mmap" && info.encoding == "raw" ? "; mmap hands out addresses, the copy is in decoding"
                                                             : "")
                << "): " << total_reader_mb << " MB/s, " << 100.0 * total_reader_mb / std::max(total_raw_mb, 1e-9)
                << "% of raw\n";
    if (epochs > 1) {
      auto of_raw = [&](double mb) {
        std::ostringstream os;
        if (!no_raw)
          os << std::fixed << std::setprecision(1) << " (" << 100.0 * mb / std::max(total_raw_mb, 1e-9) << "% of raw)";
        return os.str();
      };
      std::cout << std::fixed << std::setprecision(1) << "first epoch: " << first_mb << " MB/s" << of_raw(first_mb)
                << "; later epochs: " << later_mb << " MB/s" << of_raw(later_mb) << "\n";
    }
    if (!json_path.empty()) {
      Json j = Json::object();
      j.set("dir", info.dir);
      j.set("encoding", info.encoding);
      j.set("ranks", world.size);
      j.set("io", o.io);
      j.set("data_threads", o.data_threads);
      j.set("batch_size", o.batch_size);
      j.set("epochs", epochs);
      j.set("samples", sum_samples);
      j.set("seconds", max_seconds);
      j.set("samples_per_s", total_rate);
      j.set("mb_per_s", total_mb);
      j.set("raw_read_mb_per_s", no_raw ? Json() : Json(total_raw_mb));
      j.set("raw_read_bytes", sum_raw);
      j.set("pipeline_over_raw", no_raw ? Json() : Json(total_mb / std::max(total_raw_mb, 1e-9)));
      j.set("reader_mb_per_s", no_raw ? Json() : Json(total_reader_mb));
      j.set("first_epoch_mb_per_s", first_mb);
      j.set("later_epochs_mb_per_s", epochs > 1 ? Json(later_mb) : Json());
      j.set("later_epochs_over_raw", epochs > 1 && !no_raw ? Json(later_mb / std::max(total_raw_mb, 1e-9)) : Json());
      Json ranks = Json::array();
      for (int r = 0; r < world.size; ++r) {
        const double* v = &all[static_cast<std::size_t>(r) * kFields];
        const double raw_t = std::min(v[4], v[5]);
        Json e = Json::object();
        e.set("rank", r);
        e.set("samples", v[0]);
        e.set("seconds", v[1]);
        e.set("samples_per_s", v[0] / std::max(v[1], 1e-9));
        e.set("bytes_read", v[2]);
        e.set("mb_per_s", v[2] / 1e6 / std::max(v[1], 1e-9));
        e.set("wait_s", v[6]);
        e.set("raw_read_bytes", v[3]);
        e.set("raw_read_s", no_raw ? Json() : Json(raw_t));
        e.set("raw_read_mb_per_s", no_raw ? Json() : Json(v[3] / 1e6 / std::max(raw_t, 1e-9)));
        ranks.push_back(e);
      }
      j.set("per_rank", ranks);
      std::ofstream f(json_path);
      ST_CHECK(f, "bench: cannot write --json " << json_path);
      f << j.dump(2) << "\n";
      ST_CHECK(f.good(), "bench: writing --json " << json_path << " failed");
    }
    if (!dump.empty()) {
      // JPEG batches have the --image-size shape; raw ones the stored shape.
      const int64_t h = dumped_images.empty() ? info.height : dumped_images[0].dim(1);
      const int64_t w = dumped_images.empty() ? info.width : dumped_images[0].dim(2);
      int64_t n = 0;
      for (const auto& l : dumped_labels) n += l.numel();
      Tensor pixels = Tensor::empty({n, h, w, info.channels}, DType::u8);
      Tensor labels = Tensor::empty({n}, DType::i32);
      Tensor ids = Tensor::empty({n}, DType::i64);
      int64_t at = 0;
      for (std::size_t b = 0; b < dumped_labels.size(); ++b) {
        const int64_t k = dumped_labels[b].numel();
        Tensor::view_of(pixels, at * h * w * info.channels, dumped_images[b].shape()).copy_from(dumped_images[b]);
        Tensor::view_of(labels, at, {k}).copy_from(dumped_labels[b]);
        at += k;
      }
      for (int64_t i = 0; i < n; ++i) ids.data<int64_t>()[i] = plan[i];
      // What the model sees: the loader's pixels through the model's input op.
      Context ctx(Device::cpu, 1);
      Tensor images = Tensor::empty(pixels.shape());
      ops::normalize_images(ctx, pixels, info.mean, info.std, images);
      io::H5File f(dump, io::H5File::Mode::create_truncate);
      f.write("images", images);
      f.write("labels", labels);
      f.write("ids", ids);
      std::cout << "  dumped " << n << " samples to " << dump << "\n";
    }
  }
  world.barrier();
  return 0;
}

int data_main(int argc, char** argv) {
  if (argc < 2)
    throw UsageError(
        "missing command (convert, translation, synthetic, inspect, bench, verify, manifest, upgrade or bleu)");
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    if (World().rank == 0) std::cout << kUsage;
    return 0;
  }
  // Sub-commands parse argv[1..]: argv[1] (the command word) stands in for the program name.
  if (command == "convert") return convert_main(argc - 1, argv + 1);
  if (command == "translation") return translation_main(argc - 1, argv + 1);
  if (command == "synthetic") return synthetic_main(argc - 1, argv + 1);
  if (command == "inspect") return inspect_main(argc - 1, argv + 1);
  if (command == "bench") return bench_main(argc - 1, argv + 1);
  if (command == "verify") return verify_main(argc - 1, argv + 1);
  if (command == "manifest") return manifest_main(argc - 1, argv + 1);
  if (command == "upgrade") return upgrade_main(argc - 1, argv + 1);
  if (command == "bleu") return bleu_main(argc - 1, argv + 1);
  throw UsageError("unknown command '" + command +
                   "' (known: convert, translation, synthetic, inspect, bench, verify, manifest, upgrade, bleu)");
}

}  // namespace

bool parse_data_command(const std::string& command, int argc, char** argv, const po::options_description& desc,
                        po::variables_map& vm, const char* synopsis,
                        const po::positional_options_description* positional) {
  return parse_subcommand("scaletrain-data", command, argc, argv, desc, vm, synopsis, positional);
}

void write_manifests(const std::string& output, const std::vector<std::string>& splits) {
  const comm::Communicator world = comm::Communicator::world();
  for (const std::string& split : splits) data::write_manifest((fs::path(output) / split).string(), world);
}

// Creates DIR/<split> for every split; refuses to mix new shards with old ones unless
// `overwrite`, in which case old shards are removed. Rank 0 does it; the others wait.
void prepare_output(int rank, const std::string& output, const std::vector<std::string>& splits, bool overwrite) {
  std::string problem;
  if (rank == 0) {
    try {
      for (const auto& split : splits) {
        const fs::path dir = fs::path(output) / split;
        fs::create_directories(dir);
        for (const auto& e : fs::directory_iterator(dir)) {
          const std::string name = e.path().filename().string();
          const bool shard =
              e.path().extension() == ".h5" || (name.size() > 7 && name.substr(name.size() - 7) == ".h5.tmp");
          if (name == data::kManifestFile && overwrite) fs::remove(e.path());  // describes the old shards
          if (!shard) continue;
          if (!overwrite) {
            problem = dir.string() + " already holds shards (" + name + "); pass --overwrite to replace them";
            break;
          }
          fs::remove(e.path());
        }
        if (!problem.empty()) break;
      }
    } catch (const fs::filesystem_error& e) {
      problem = std::string("cannot prepare ") + output + ": " + e.what();
    }
  }
  // Every rank learns the verdict, so that all fail together without MPI_Abort noise.
  int length = static_cast<int>(problem.size());
  ST_CHECK_MPI(MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD));
  problem.resize(length);
  ST_CHECK_MPI(MPI_Bcast(problem.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD));
  ST_CHECK(problem.empty(), problem);
}

int scaletrain_data_main(int argc, char** argv) { return run_guarded("scaletrain-data", argc, argv, data_main); }

}  // namespace scaletrain::cli
