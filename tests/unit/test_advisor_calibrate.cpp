// scaletrain-advisor calibrate's sweep (advisor/calibrate.hpp): the bucket arithmetic on hand-made
// ready times with exact answers; a real ResNet-20 sweep whose gradient size is checked against
// the torchvision-verified parameter count, whose bucket layout is plan_buckets', whose ready
// fractions are ordered and end near the end of backward, whose step times grow with the batch,
// and whose file reads back; NeuMF through the same sweep; and the input pipeline's rate on a
// small dataset through the task's training batches.
#include <unistd.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "scaletrain/advisor/calibrate.hpp"
#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/train/task.hpp"
#include "support/one_rank_mpi.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;
using advisor::BatchPoint;
using advisor::BucketTiming;
using advisor::Calibration;
using comm::GradientBucket;

namespace {

// ResNet-20 at 10 classes: 272,186 parameters with one input channel (test_models, and PyTorch in
// tests/python/test_model_layout.py), plus conv1's 16 x 3 x 3 weights for each of two more
// channels.
constexpr int64_t kResnet20Rgb10Parameters = 272186 + 16 * 2 * 3 * 3;

bool close(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)); }

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// One sweep shared by the test cases that read it (about 2 s). One thread: an OpenMP team on a
// machine whose cores are busy with other work stalls at its barriers for far longer than a
// step, and five timed steps, so that the median is a step the machine did not interrupt.
struct Resnet20Sweep {
  train::TrainConfig config;  // the trainer's defaults (ResNet-20 brings none of its own)
  advisor::SweepOptions options;
  Calibration calibration;
  Resnet20Sweep() {
    config.model = "resnet20";
    train::DataShape shape;
    shape.num_classes = 10;
    shape.channels = 3;
    shape.height = shape.width = 32;
    const std::unique_ptr<train::Task> task = train::open_task_of_shape(config, shape);
    options.batches = {32, 2, 8};  // measured in ascending order whatever order they are given in
    options.steps = 5;
    options.warmup_steps = 1;
    options.bucket_mb = 0.1;  // ResNet-20's 1.1 MB of gradients in a dozen buckets
    Context ctx(Device::cpu, 1);
    calibration = advisor::run_sweep(ctx, {config, *task}, options);
  }
};

const Resnet20Sweep& sweep() {
  static const Resnet20Sweep s;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(advisor_calibrate)

BOOST_AUTO_TEST_CASE(median_of_odd_and_even_counts) {
  BOOST_TEST(advisor::median({3.0, 1.0, 2.0}) == 2.0);
  BOOST_TEST(advisor::median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  BOOST_TEST(advisor::median({7.0}) == 7.0);
  BOOST_CHECK_THROW(advisor::median({}), Error);
}

BOOST_AUTO_TEST_CASE(a_bucket_is_ready_with_its_last_gradient) {
  // Backward order: bucket 0 holds parameters 2..3, bucket 1 parameters 0..1.
  const std::vector<GradientBucket> buckets{{2, 3, 30, 7}, {0, 1, 0, 30}};
  const std::vector<double> ready_s{0.75, 0.5, 0.125, 0.25};  // exact in binary
  const std::vector<double> f = advisor::bucket_ready_fractions(buckets, ready_s, 1.0);
  BOOST_TEST(f == (std::vector<double>{0.25, 0.75}), boost::test_tools::per_element());
  const std::vector<double> half = advisor::bucket_ready_fractions(buckets, ready_s, 2.0);
  BOOST_TEST(half == (std::vector<double>{0.125, 0.375}), boost::test_tools::per_element());
  // A parameter backward never announced has no ready time.
  const std::string missing = message_of([&] {
    advisor::bucket_ready_fractions(buckets, {0.75, -1.0, 0.125, 0.25}, 1.0);
  });
  BOOST_TEST(missing.find("parameter 1") != std::string::npos, missing);
}

BOOST_AUTO_TEST_CASE(bucket_timings_are_clamped_and_non_decreasing) {
  const std::vector<GradientBucket> buckets{{3, 3, 60, 40}, {2, 2, 30, 30}, {1, 1, 10, 20}, {0, 0, 0, 10}};
  const std::vector<BucketTiming> t = advisor::bucket_timings(buckets, {0.0, 0.5, 0.25, 1.25});
  BOOST_TEST_REQUIRE(t.size() == 4u);
  const std::vector<int64_t> bytes{t[0].bytes, t[1].bytes, t[2].bytes, t[3].bytes};
  BOOST_TEST(bytes == (std::vector<int64_t>{160, 120, 80, 40}), boost::test_tools::per_element());
  BOOST_TEST(t[0].ready_fraction == 1e-6);  // 0 raised to the floor: a fraction is above 0
  BOOST_TEST(t[1].ready_fraction == 0.5);
  BOOST_TEST(t[2].ready_fraction == 0.5);  // not before the bucket ahead of it
  BOOST_TEST(t[3].ready_fraction == 1.0);  // at most the end of backward
  BOOST_CHECK_THROW(advisor::bucket_timings(buckets, {0.5}), Error);
}

BOOST_AUTO_TEST_CASE(batch_curves_have_no_negative_fixed_part) {
  // On a line with a positive intercept: that line (1 ms + 0.5 ms per sample).
  const advisor::LinearCurve line = advisor::fit_batch_curve({{2, 0.002}, {8, 0.005}});
  BOOST_TEST(std::abs(line.fixed_s - 0.001) < 1e-15);
  BOOST_TEST(std::abs(line.per_sample_s - 0.0005) < 1e-15);
  // Time per sample rising with the batch (a real CPU sweep's forward times): the free line would
  // cross zero at batch 1.27, so the line through the origin, slope sum(b t) / sum(b^2).
  const std::vector<std::pair<double, double>> rising{{2, 0.00247}, {8, 0.0102}, {32, 0.0537}};
  BOOST_TEST_REQUIRE(advisor::fit_linear(rising).fixed_s < 0.0);
  const advisor::LinearCurve origin = advisor::fit_batch_curve(rising);
  BOOST_TEST(origin.fixed_s == 0.0);
  const double slope = (2 * 0.00247 + 8 * 0.0102 + 32 * 0.0537) / (2 * 2 + 8 * 8 + 32 * 32);
  BOOST_TEST(std::abs(origin.per_sample_s - slope) < 1e-15);
}

BOOST_AUTO_TEST_CASE(times_that_do_not_grow_are_refused) {
  // A busy machine (a real sweep's forward medians): batch 16 timed faster than batch 8.
  const std::string busy = message_of([] {
    advisor::check_times_grow({{8, 0.0138}, {16, 0.0114}, {32, 0.170}}, "forward");
  });
  BOOST_TEST(busy.find("the forward times do not grow with the batch (0.0138 s at 8, 0.0114 s at 16, 0.17 s at 32)") !=
                 std::string::npos,
             busy);
  const std::string equal = message_of([] { advisor::check_times_grow({{8, 0.02}, {32, 0.02}}, "backward"); });
  BOOST_TEST(equal.find("the backward times") != std::string::npos, equal);
  BOOST_CHECK_NO_THROW(advisor::check_times_grow({{2, 0.00247}, {8, 0.0102}, {32, 0.0537}}, "forward"));
  BOOST_CHECK_NO_THROW(advisor::check_times_grow({{4, 0.01}}, "forward"));
}

BOOST_AUTO_TEST_CASE(gradient_bytes_and_buckets_match_the_model) {
  const Calibration& c = sweep().calibration;
  BOOST_TEST(c.gradient_bytes == 4 * kResnet20Rgb10Parameters);
  const auto model = models::make_model("resnet20", 10, 3);
  const std::vector<GradientBucket> plan = comm::plan_buckets(model->params().gradient_layout(), 0.1);
  BOOST_TEST_REQUIRE(plan.size() >= 5u, "the test needs several buckets");
  BOOST_TEST_REQUIRE(c.buckets.size() == plan.size());
  int64_t sum = 0;
  for (std::size_t k = 0; k < plan.size(); ++k) {
    BOOST_TEST(c.buckets[k].bytes == 4 * plan[k].count, "bucket " << k);
    sum += c.buckets[k].bytes;
  }
  BOOST_TEST(sum == c.gradient_bytes);
  BOOST_TEST(c.bucket_mb == 0.1);
}

BOOST_AUTO_TEST_CASE(ready_fractions_follow_backward) {
  const std::vector<BucketTiming>& b = sweep().calibration.buckets;
  BOOST_TEST_REQUIRE(!b.empty());
  for (std::size_t k = 0; k < b.size(); ++k) {
    BOOST_TEST(b[k].ready_fraction > 0.0, "bucket " << k);
    BOOST_TEST(b[k].ready_fraction <= 1.0, "bucket " << k);
    if (k > 0) BOOST_TEST(b[k].ready_fraction >= b[k - 1].ready_fraction, "bucket " << k);
  }
  // The first bucket (fc and the last block's second batch norm) is ready at the start of
  // backward; the last (conv1) as backward returns, since the input needs no gradient.
  BOOST_TEST(b.front().ready_fraction < 0.5);
  BOOST_TEST(b.back().ready_fraction > 0.9);
}

BOOST_AUTO_TEST_CASE(step_times_grow_with_the_batch) {
  const Calibration& c = sweep().calibration;
  BOOST_TEST_REQUIRE(c.points.size() == 3u);
  BOOST_TEST(c.points[0].batch == 2);
  BOOST_TEST(c.points[1].batch == 8);
  BOOST_TEST(c.points[2].batch == 32);
  for (std::size_t i = 1; i < c.points.size(); ++i) {  // 4x the samples each time
    BOOST_TEST(c.points[i].forward_s > c.points[i - 1].forward_s, "batch " << c.points[i].batch);
    BOOST_TEST(c.points[i].backward_s > c.points[i - 1].backward_s, "batch " << c.points[i].batch);
  }
  for (const BatchPoint& p : c.points) BOOST_TEST(p.optimizer_s > 0.0, "batch " << p.batch);
  BOOST_TEST(c.forward.per_sample_s > 0.0);
  BOOST_TEST(c.backward.per_sample_s > 0.0);
  BOOST_TEST(c.forward.fixed_s >= 0.0);
  BOOST_TEST(c.backward.fixed_s >= 0.0);
  // The fitted curves pass near the points they were fitted to (a third of the largest time).
  const BatchPoint& big = c.points.back();
  BOOST_TEST(std::abs(c.forward.at(32) - big.forward_s) < big.forward_s / 3);
  BOOST_TEST(std::abs(c.backward.at(32) - big.backward_s) < big.backward_s / 3);
  std::vector<double> optimizer{c.points[0].optimizer_s, c.points[1].optimizer_s, c.points[2].optimizer_s};
  std::sort(optimizer.begin(), optimizer.end());
  BOOST_TEST(c.optimizer_s == optimizer[1]);  // the median of the three points
  BOOST_TEST(c.model == "resnet20");
  BOOST_TEST(c.precision == "fp32");
  BOOST_TEST(c.default_batch == 32);  // scaletrain train's --batch-size default
}

BOOST_AUTO_TEST_CASE(the_calibration_file_reads_back) {
  Calibration c = sweep().calibration;
  c.device = advisor::cpu_device_name(2);
  c.source = "test_advisor_calibrate";
  c.train_samples = 50000;
  const fs::path path = fs::temp_directory_path() / ("scaletrain_calibration_" + std::to_string(::getpid()) + ".json");
  advisor::write_calibration(c, path.string());
  const Calibration r = advisor::read_calibration(path.string());
  fs::remove(path);
  BOOST_TEST(r.model == c.model);
  BOOST_TEST(r.device == c.device);
  BOOST_TEST(r.device.rfind("cpu (2 threads, ", 0) == 0, r.device);
  BOOST_TEST(r.source == c.source);
  BOOST_TEST_REQUIRE(r.points.size() == c.points.size());
  for (std::size_t i = 0; i < c.points.size(); ++i) {
    BOOST_TEST(r.points[i].batch == c.points[i].batch);
    BOOST_TEST(close(r.points[i].forward_s, c.points[i].forward_s));
    BOOST_TEST(close(r.points[i].backward_s, c.points[i].backward_s));
    BOOST_TEST(close(r.points[i].optimizer_s, c.points[i].optimizer_s));
  }
  BOOST_TEST(close(r.forward.per_sample_s, c.forward.per_sample_s));
  BOOST_TEST(close(r.backward.fixed_s, c.backward.fixed_s));
  BOOST_TEST(r.gradient_bytes == c.gradient_bytes);
  BOOST_TEST_REQUIRE(r.buckets.size() == c.buckets.size());
  for (std::size_t k = 0; k < c.buckets.size(); ++k) {
    BOOST_TEST(r.buckets[k].bytes == c.buckets[k].bytes);
    BOOST_TEST(close(r.buckets[k].ready_fraction, c.buckets[k].ready_fraction));
  }
  BOOST_TEST(r.train_samples == 50000);
  BOOST_TEST(r.input_samples_per_s == 0.0);
}

BOOST_AUTO_TEST_CASE(sweep_options_are_checked) {
  advisor::SweepOptions o;
  train::TrainConfig config;
  const std::unique_ptr<train::Task> task =
      train::open_task_of_shape(config, advisor::model_defaults("resnet20").shape);
  const advisor::SweepSubject subject{config, *task};
  o.batches = {8, 0};
  Context ctx(Device::cpu, 1);
  BOOST_TEST(message_of([&] { advisor::run_sweep(ctx, subject, o); }).find("batch size 0") != std::string::npos);
  o.batches = {8, 16, 8};
  BOOST_TEST(message_of([&] { advisor::run_sweep(ctx, subject, o); }).find("listed twice") != std::string::npos);
  o.batches = {};
  BOOST_TEST(message_of([&] { advisor::run_sweep(ctx, subject, o); }).find("no batch sizes") != std::string::npos);
  const std::string unknown = message_of([] { advisor::model_defaults("resnet51"); });
  BOOST_TEST(unknown.find("--model") != std::string::npos, unknown);
  BOOST_TEST(unknown.find("resnet51") != std::string::npos, unknown);
}

// NeuMF through the same sweep: its gradient size and buckets are the network's, its step is the
// trainer's with Adam (the model's optimizer), and a task of a shape alone has no data to
// evaluate.
BOOST_AUTO_TEST_CASE(an_ncf_sweep_measures_neumf) {
  train::TrainConfig config;
  config.model = "ncf";
  config.optimizer = "adam";
  train::DataShape shape;
  shape.num_users = 300;
  shape.num_items = 200;
  const std::unique_ptr<train::Task> task = train::open_task_of_shape(config, shape);
  const train::Batch batch = task->synthetic_batch(64, 5);
  BOOST_TEST_REQUIRE(batch.size() == 64);
  for (int64_t i = 0; i < 64; ++i) {
    BOOST_TEST(batch.at("users").data<int32_t>()[i] < 300);
    BOOST_TEST(batch.at("items").data<int32_t>()[i] < 200);
  }
  advisor::SweepOptions o;
  o.batches = {64, 1024};
  o.steps = 3;
  o.bucket_mb = 0.25;
  Context ctx(Device::cpu, 1);
  const Calibration c = advisor::run_sweep(ctx, {config, *task}, o);
  const std::unique_ptr<models::Network> neumf = task->make_network(0);
  BOOST_TEST(c.model == "ncf");
  BOOST_TEST(c.gradient_bytes == 4 * neumf->params().parameter_count());
  const std::vector<GradientBucket> plan = comm::plan_buckets(neumf->params().gradient_layout(), 0.25);
  BOOST_TEST_REQUIRE(c.buckets.size() == plan.size());
  BOOST_TEST(c.points.size() == 2u);
  BOOST_TEST(c.points[1].forward_s > c.points[0].forward_s);
  BOOST_TEST(task->describe_shape() == "300 users x 200 items");
  const std::string no_data = message_of([&] { task->evaluate(test::one_rank_world(), ctx, *neumf, 8, 1); });
  BOOST_TEST(no_data.find("known by its shape only") != std::string::npos, no_data);
}

// A Transformer's sweep counts tokens: the points are the real target tokens of the whole 25-token
// pairs each batch holds, the file says so and reads it back; a file without batch_unit (written
// before translation) is samples, another unit is refused; a batch below one pair is a usage error.
BOOST_AUTO_TEST_CASE(a_translation_sweep_counts_tokens) {
  train::TrainConfig config;
  config.model = "transformer-tiny";
  config.optimizer = "adam";
  const advisor::ModelDefaults wmt = advisor::model_defaults("transformer-tiny");
  BOOST_TEST(wmt.shape.num_items == 33708);
  BOOST_TEST(wmt.train_samples == 4500000LL * 31);
  const std::unique_ptr<train::Task> task = train::open_task_of_shape(config, wmt.shape);
  const train::Batch batch = task->synthetic_batch(110, 3);
  BOOST_TEST(batch.size() == 4);
  BOOST_TEST(task->batch_work(batch) == 100);
  advisor::SweepOptions o;
  o.batches = {260, 60};
  o.steps = 1;
  o.warmup_steps = 1;
  Context ctx(Device::cpu, 1);
  Calibration c = advisor::run_sweep(ctx, {config, *task}, o);
  BOOST_TEST(c.batch_unit == "tokens");
  BOOST_TEST_REQUIRE(c.points.size() == 2u);
  BOOST_TEST(c.points[0].batch == 50);
  BOOST_TEST(c.points[1].batch == 250);
  c.device = "test";
  c.source = "test_advisor_calibrate";
  c.train_samples = 1000;
  Json j = advisor::to_json(c);
  BOOST_TEST(j.at("batch_unit").as_string() == "tokens");
  BOOST_TEST(advisor::calibration_from_json(j, "tokens.json").batch_unit == "tokens");
  Json old = Json::object();
  for (const char* key :
       {"format", "version", "model", "device", "precision", "source", "points", "forward", "backward", "optimizer_s",
        "gradient_bytes", "bucket_mb", "buckets", "input_samples_per_s", "default_batch", "train_samples"})
    old.set(key, j.at(key));
  BOOST_TEST(advisor::calibration_from_json(old, "old.json").batch_unit == "samples");
  j.set("batch_unit", "pairs");
  const std::string pairs = message_of([&] { advisor::calibration_from_json(j, "pairs.json"); });
  BOOST_TEST(pairs.find("batch_unit \"pairs\"") != std::string::npos, pairs);
  const std::string small = message_of([] { advisor::check_model_batches("transformer-tiny", {24, 256}); });
  BOOST_TEST(small.find("24 tokens cannot hold one sentence pair") != std::string::npos, small);
  BOOST_TEST(message_of([] { advisor::check_model_batches("resnet20", {1, 2}); }).empty());
}

// The input rate through a task's training batches (the loader, for an image dataset).
BOOST_AUTO_TEST_CASE(input_rate_of_a_small_dataset) {
  io::h5_silence_errors();
  const fs::path dir = fs::temp_directory_path() / ("scaletrain_calibrate_input_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const char* split : {"train", "val"}) {
    fs::create_directories(dir / split);
    const int64_t n = std::string(split) == "train" ? 96 : 16;
    Tensor images = Tensor::zeros({n, 8, 8, 3}, DType::u8);
    Tensor labels = Tensor::zeros({n}, DType::i32);
    data::write_image_shard((dir / split / data::shard_file_name(0, 1)).string(), images, labels, 10, {0.5, 0.5, 0.5},
                            {0.25, 0.25, 0.25}, 16);
  }
  train::TrainConfig config;
  config.data_dir = dir.string();
  const comm::Communicator& comm = test::one_rank_world();
  const std::unique_ptr<train::Task> task = train::open_task(config, comm);
  // 12 batches of 8: 3 to fill the pipeline, then up to 9 timed.
  BOOST_TEST(advisor::measure_input_rate(*task->training_batches(comm, 8, 1), 3, 5, "DATA/train") > 0.0);
  // 3 batches of 32: none left to time after the first 3.
  const std::string too_few =
      message_of([&] { advisor::measure_input_rate(*task->training_batches(comm, 32, 1), 3, 5, "DATA/train"); });
  BOOST_TEST(too_few.find("DATA/train: 3 batches") != std::string::npos, too_few);
  BOOST_TEST(too_few.find("too few") != std::string::npos, too_few);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
