// The image classification task (task.hpp): images and labels in HDF5 shards read by the data
// loader, a ResNet, softmax cross-entropy with label smoothing, top-1 accuracy.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/comm/topology.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/data/staging.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/ops/cast.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/report/summary.hpp"
#include "scaletrain/train/checkpointing.hpp"
#include "scaletrain/train/trainer.hpp"
#include "train/model_input.hpp"
#include "train/tasks.hpp"

namespace scaletrain::train {
namespace {

void check_splits_match(const data::SplitInfo& train, const data::SplitInfo& val, const std::string& dir) {
  ST_CHECK(val.height == train.height && val.width == train.width && val.channels == train.channels &&
               val.num_classes == train.num_classes,
           "dataset " << dir << ": val images/classes (" << val.height << "x" << val.width << "x" << val.channels
                      << ", " << val.num_classes << " classes) differ from train (" << train.height << "x"
                      << train.width << "x" << train.channels << ", " << train.num_classes << " classes)");
}

models::Model& classifier(models::Network& network) { return static_cast<models::Model&>(network); }

// predict's input: dataset "inputs" f32 (N, C, H, W) of the file `input`, read whole.
Tensor read_input_images(const std::string& input) {
  io::H5File in(input, io::H5File::Mode::read);
  ST_CHECK(in.has("inputs"), "--input " << input << " has no dataset 'inputs'");
  ST_CHECK(in.dataset_type("inputs") == "float32",
           "--input " << input << ": dataset 'inputs' is " << in.dataset_type("inputs") << ", expected float32");
  ST_CHECK(in.dataset_shape("inputs").size() == 4, "--input " << input << ": dataset 'inputs' has shape "
                                                              << shape_string(in.dataset_shape("inputs"))
                                                              << ", expected [N, C, H, W]");
  return in.read("inputs", DType::f32);
}

// Samples [first, first + count) of nchw (N, C, H, W) as the model takes them: (count, H, W, C).
Tensor channels_last(const Tensor& nchw, int64_t first, int64_t count) {
  const int64_t c = nchw.dim(1), hw = nchw.dim(2) * nchw.dim(3);
  Tensor x = Tensor::empty({count, nchw.dim(2), nchw.dim(3), c});
  const float* src = nchw.data<float>() + first * c * hw;
  float* dst = x.data<float>();
  for (int64_t i = 0; i < count; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) dst[(i * hw + p) * c + ch] = src[(i * c + ch) * hw + p];
  return x;
}

// The data loader as the training loop's batch source: "images" and "labels".
class LoaderBatches : public BatchSource {
 public:
  LoaderBatches(const data::SplitInfo& split, int rank, int world, const data::LoaderOptions& options)
      : loader_(split, rank, world, options) {}
  int64_t steps_per_epoch() const override { return loader_.steps_per_epoch(); }
  void start_epoch(int epoch, int64_t first_step) override { loader_.start_epoch(epoch, first_step); }
  bool next(Batch& batch) override { return loader_.next(batch.slot("images"), batch.slot("labels")); }
  int64_t bytes_read() const override { return loader_.bytes_read(); }
  int64_t skipped_samples() const override { return loader_.skipped_samples(); }

 private:
  data::Loader loader_;
};

class ImageClassification : public Task {
 public:
  explicit ImageClassification(const TrainConfig& c) : cfg_(c) {
    train_ = data::open_split(c.data_dir, "train");
    val_ = data::open_split(c.data_dir, "val");
    check_splits_match(train_, val_, c.data_dir);
    normalization_ = input_normalization(train_, c.preprocess);
  }
  // A dataset known by its shape alone (task.hpp), or one split to evaluate: both splits that one.
  ImageClassification(const TrainConfig& c, const data::SplitInfo& split)
      : cfg_(c), train_(split), val_(split), normalization_(input_normalization(split, c.preprocess)) {}

  UncheckedShards unchecked() const {
    return {{train_.dir, train_.unchecked_shards}, {val_.dir, val_.unchecked_shards}};
  }

  const char* name() const override { return models::kTaskImageClassification; }
  const char* quality_metric() const override { return "top1"; }
  std::string describe_quality(double value) const override {
    char text[32] = "top-1 -";
    if (!std::isnan(value)) std::snprintf(text, sizeof text, "top-1 %.2f%%", 100 * value);
    return text;
  }
  // The registry's MLPerf benchmark, or for a model outside MLPerf its own name (the log keeps
  // MLPerf's keys, so that the same tools read it; such a run is never a closed submission).
  std::string mlperf_benchmark() const override {
    const models::ModelEntry& entry = models::model_entry(cfg_.model);
    return entry.mlperf_benchmark.empty() ? entry.name : entry.mlperf_benchmark;
  }
  Json mlperf_keys(int64_t micro_batch) const override {
    Json keys = Json::object();
    // Batch norm normalises over each rank's micro-batch (no synchronised batch norm).
    keys.set("model_bn_span", micro_batch);
    keys.set("label_smoothing", cfg_.label_smoothing);
    return keys;
  }
  int64_t train_samples() const override { return train_.samples; }
  int64_t eval_samples() const override { return val_.samples; }

  // --stage-to: one rank per node copies the shards to node-local storage (the topology's nodes).
  Json stage(const comm::Communicator& comm, const comm::Topology& topology) override {
    require_files(train_.dir, "staging");
    const data::StagingResult train = data::stage_split(train_, cfg_.stage_to, topology);
    const data::StagingResult val = data::stage_split(val_, cfg_.stage_to, topology);
    train_ = train.split;
    val_ = val.split;
    Json staging = Json::object();
    staging.set("dir", cfg_.stage_to);
    for (const auto* r : {&train, &val}) {
      Json s = r->to_json();
      s.set("seconds", report::stats_over_ranks(comm, r->seconds));
      s.set("bytes", report::stats_over_ranks(comm, static_cast<double>(r->bytes)));
      s.set("per_rank_bytes", Json::array_of(comm.allgather(static_cast<double>(r->bytes))));
      staging.set(r == &train ? "train" : "val", s);
    }
    staging.set("seconds", report::stats_over_ranks(comm, train.seconds + val.seconds));
    staging.set("bytes", report::stats_over_ranks(comm, static_cast<double>(train.bytes + val.bytes)));
    return staging;
  }

  std::string describe_data() const override {
    return std::to_string(train_.samples) + " train / " + std::to_string(val_.samples) + " val samples of " +
           (train_.encoding == "jpeg" ? std::string("JPEG images")
                                      : std::to_string(train_.height) + "x" + std::to_string(train_.width) + "x" +
                                            std::to_string(train_.channels)) +
           ", " + std::to_string(train_.num_classes) + " classes";
  }

  std::string describe_input() const override {
    std::ostringstream out;
    out << train_.encoding << " shards read with " << cfg_.io << ", " << cfg_.data_threads << " data thread"
        << (cfg_.data_threads == 1 ? "" : "s") << ", prefetch " << cfg_.data_prefetch << ", shuffle "
        << (cfg_.shuffle ? cfg_.shuffle_mode : std::string("off")) << (cfg_.pad_last ? ", pad last batch" : "")
        << (cfg_.preprocess == "torchvision" ? "" : ", " + cfg_.preprocess + " preprocessing")
        << (cfg_.stage_to.empty() ? "" : ", staged to " + cfg_.stage_to);
    return out.str();
  }

  Json dataset_json() const override {
    Json d = Json::object();
    d.set("dir", cfg_.data_dir);
    d.set("task", name());
    d.set("train_samples", train_.samples);
    d.set("val_samples", val_.samples);
    d.set("image_shape", Json::array_of(image_shape()));
    d.set("num_classes", train_.num_classes);
    d.set("unchecked_shards", unchecked_shards_json(unchecked()));
    return d;
  }

  Json input_json() const override {
    Json in = Json::object();
    in.set("io", cfg_.io);
    in.set("encoding", train_.encoding);
    in.set("data_threads", cfg_.data_threads);
    in.set("prefetch", cfg_.data_prefetch);
    in.set("preprocess", cfg_.preprocess);
    return in;
  }

  void add_identity(Json& j) const override {
    j.set("dataset train samples", train_.samples);
    j.set("dataset val samples", val_.samples);
    j.set("dataset image shape (H, W, C)",
          Json::array_of(std::vector<int64_t>{train_.height, train_.width, train_.channels}));
    j.set("dataset classes", train_.num_classes);
    j.set("dataset encoding", train_.encoding);
    j.set("--shuffle-buffer", cfg_.shuffle_buffer);
    j.set("--pad-last", cfg_.pad_last);
    j.set("augmentation", cfg_.augment ? "on" : "off (--no-augment)");
    j.set("--crop-padding", cfg_.crop_padding);
    // Only where it is not the default, so that older checkpoints resume.
    if (cfg_.preprocess != "torchvision") j.set("--preprocess", cfg_.preprocess);
    j.set("--image-size", Json::array_of(input_image_size(cfg_)));
    j.set("--label-smoothing", cfg_.label_smoothing);
    // Only models with auxiliary heads have it, so that older checkpoints of the others resume.
    if (models::default_aux_loss_weight(cfg_.model) > 0.0) j.set("--aux-loss-weight", cfg_.aux_loss_weight);
  }

  std::unique_ptr<BatchSource> training_batches(const comm::Communicator& comm, int64_t batch_size,
                                                int ranks_on_node) const override {
    require_files(train_.dir, "training batches");
    return std::make_unique<LoaderBatches>(train_, comm.rank(), comm.size(),
                                           train_loader_options(cfg_, batch_size, comm, ranks_on_node));
  }

  // The step reads them on the device only (model_input, on_context_device).
  std::vector<std::string> device_batch_keys() const override { return {"images", "labels"}; }

  // Pixels of the model's input size and labels of the dataset's classes, as the loader hands
  // them over.
  Batch synthetic_batch(int64_t size, uint64_t seed) const override {
    const std::vector<int64_t> hwc = image_shape();
    Batch b;
    Tensor& images = b.slot("images");
    images = Tensor::empty({size, hwc[0], hwc[1], hwc[2]}, DType::u8);
    Tensor& labels = b.slot("labels");
    labels = Tensor::empty({size}, DType::i32);
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(size));
    uint8_t* pixels = images.data<uint8_t>();
    for (int64_t i = 0; i < images.numel(); ++i) pixels[i] = static_cast<uint8_t>(rng.below(256));
    int32_t* label = labels.data<int32_t>();
    for (int64_t i = 0; i < size; ++i) label[i] = static_cast<int32_t>(rng.below(train_.num_classes));
    return b;
  }

  std::unique_ptr<models::Network> make_network(uint64_t seed) const override {
    auto model = models::make_model(cfg_.model, train_.num_classes, train_.channels);
    model->set_aux_loss_weight(cfg_.aux_loss_weight);
    check_aux_heads_fit(*model);
    model->initialize(seed);
    return model;
  }

  void check_fits(const checkpoint::CheckpointData& data) const override {
    check_checkpoint_fits(data, cfg_.model, train_.channels, train_.num_classes, cfg_.data_dir);
  }

  std::string describe_shape() const override {
    const std::vector<int64_t> hwc = image_shape();
    return std::to_string(hwc[0]) + "x" + std::to_string(hwc[1]) + "x" + std::to_string(hwc[2]) + " images, " +
           std::to_string(train_.num_classes) + " classes";
  }

  Json describe_network(models::Network& network) const override {
    const std::vector<int64_t> hwc = image_shape();
    Json d = models::describe_model(classifier(network), {hwc[2], hwc[0], hwc[1]});
    d.set("task", name());
    return d;
  }

  // The model's (from an uninitialised instance: its ops do not depend on its weights), the
  // input's normalisation, the loss, and top-1 counting in evaluation.
  ops::OpNames ops(bool training) const override {
    auto model = models::make_model(cfg_.model, train_.num_classes, train_.channels);
    model->set_aux_loss_weight(cfg_.aux_loss_weight);
    ops::OpNames all = model->ops(training);
    all.insert({"normalize_images", "softmax_cross_entropy", "count_correct"});
    return all;
  }

  // The loader's uint8 pixels, normalised as --preprocess says, through the model, then
  // cross-entropy with --label-smoothing: the main head's, plus --aux-loss-weight times each
  // auxiliary head's where they ran (as torchvision's training recipes sum them).
  double forward_and_loss(Context& ctx, models::Network& network, const Batch& batch) override {
    const Tensor& input = model_input(ctx, batch.at("images"), normalization_, input_, device_pixels_);
    const Tensor& labels = on_context_device(ctx, batch.at("labels"), device_labels_);
    models::Model& model = classifier(network);
    Tensor logits = model.forward(ctx, input, /*training=*/true);
    const float smoothing = static_cast<float>(cfg_.label_smoothing);
    double loss = ops::softmax_cross_entropy(ctx, logits, labels, smoothing, gradient_buffer(ctx, logits, dlogits_),
                                             loss_scale());
    const std::vector<Tensor> aux = model.aux_logits();
    aux_dlogits_.resize(aux.size());
    for (std::size_t i = 0; i < aux.size(); ++i) {
      const double w = model.aux_loss_weight();
      loss += w * ops::softmax_cross_entropy(ctx, aux[i], labels, smoothing,
                                             gradient_buffer(ctx, aux[i], aux_dlogits_[i]), w * loss_scale());
    }
    return loss;
  }

  void backward(Context& ctx, models::Network& network) override {
    classifier(network).backward(ctx, dlogits_, aux_dlogits_);
  }

  Evaluation evaluate(const comm::Communicator& comm, Context& ctx, models::Network& network, int64_t batch_size,
                      int ranks_on_node) const override {
    require_files(val_.dir, "evaluation");
    const EvalResult r =
        train::evaluate(comm, ctx, classifier(network), val_, batch_size, eval_data_options(cfg_, ranks_on_node));
    Evaluation e;
    e.quality = r.accuracy();
    e.loss = r.loss;
    e.metrics.set("top1", r.accuracy());
    e.samples = r.samples;
    return e;
  }

  // The images as they are in the file (already normalised), batch_size per forward, in
  // evaluation mode.
  Prediction predict(Context& ctx, models::Network& network, const std::string& input, const std::string& checkpoint,
                     int64_t batch_size) const override {
    const Tensor nchw = read_input_images(input);
    const int64_t n = nchw.dim(0), classes = train_.num_classes;
    ST_CHECK(nchw.dim(1) == train_.channels, "dataset " << input << " has " << nchw.dim(1)
                                                        << "-channel images but the model in checkpoint " << checkpoint
                                                        << " takes " << train_.channels << " channels");
    Prediction p;
    p.logits = Tensor::empty({n, classes});
    for (int64_t start = 0; start < n; start += batch_size) {
      const int64_t b = std::min(batch_size, n - start);
      const Tensor x = channels_last(nchw, start, b).to(ctx.device());
      const Tensor y = ops::as_f32(ctx, classifier(network).forward(ctx, x, /*training=*/false)).to(Device::cpu);
      std::copy(y.data<float>(), y.data<float>() + y.numel(), p.logits.data<float>() + start * classes);
    }
    return p;
  }

  std::string describe_evaluation(const Evaluation& e, const std::string& where) const override {
    char line[512];
    std::snprintf(line, sizeof line, "top-1 accuracy %.4f (%lld/%lld) on %s, loss %.4f", e.quality,
                  static_cast<long long>(std::llround(e.quality * static_cast<double>(e.samples))),
                  static_cast<long long>(e.samples), where.c_str(), e.loss);
    return line;
  }

 private:
  // Auxiliary heads that would run in training need their model's minimum input (Inception-v3's
  // 299x299): refused before the first step rather than failing inside the head.
  void check_aux_heads_fit(const models::Model& model) const {
    const int min_size = models::model_entry(cfg_.model).aux_min_image_size;
    const std::vector<int64_t> hwc = image_shape();
    ST_CHECK(model.aux_loss_weight() == 0.0 || min_size == 0 || (hwc[0] >= min_size && hwc[1] >= min_size),
             "--aux-loss-weight " << model.aux_loss_weight() << ": the auxiliary head of " << cfg_.model
                                  << " needs images of at least " << min_size << "x" << min_size << ", the input is "
                                  << hwc[0] << "x" << hwc[1] << " (train with --aux-loss-weight 0, or larger images)");
  }

  // `buffer`, (re)allocated to the shape and device of `logits`.
  static Tensor& gradient_buffer(Context& ctx, const Tensor& logits, Tensor& buffer) {
    if (!buffer.defined() || buffer.shape() != logits.shape() || buffer.device() != ctx.device())
      buffer = Tensor::empty(logits.shape(), DType::f32, ctx.device());
    return buffer;
  }

  // [H, W, C] as the report gives it: the model's input size for JPEG datasets (whose shards
  // hold images of every size).
  std::vector<int64_t> image_shape() const {
    if (train_.encoding != "jpeg") return {train_.height, train_.width, train_.channels};
    const std::vector<int64_t> hw = input_image_size(cfg_);
    return {hw[0], hw[1], train_.channels};
  }

  const TrainConfig& cfg_;
  data::SplitInfo train_, val_;
  InputNormalization normalization_;  // the model input's, from --preprocess (train_ and val_ match)
  Tensor input_, dlogits_;
  std::vector<Tensor> aux_dlogits_;       // per auxiliary head that ran
  Tensor device_pixels_, device_labels_;  // the batch's copies on a GPU
};

}  // namespace

std::unique_ptr<Task> open_image_classification_task(const TrainConfig& config, const comm::Communicator&) {
  return std::make_unique<ImageClassification>(config);
}

std::unique_ptr<Task> image_classification_for_evaluation(const TrainConfig& config, const std::string& split) {
  return std::make_unique<ImageClassification>(config, data::open_split(config.data_dir, split));
}

std::unique_ptr<Task> image_classification_of_shape(const TrainConfig& config, const DataShape& shape) {
  ST_CHECK(shape.num_classes > 0 && shape.channels > 0 && shape.height > 0 && shape.width > 0,
           "internal: an image dataset of " << shape.num_classes << " classes and " << shape.height << "x"
                                            << shape.width << "x" << shape.channels << " images");
  data::SplitInfo split;
  split.task = models::kTaskImageClassification;
  split.height = shape.height;
  split.width = shape.width;
  split.channels = shape.channels;
  split.num_classes = shape.num_classes;
  split.mean.assign(shape.channels, 0.5);  // any normalisation costs the same
  split.std.assign(shape.channels, 0.25);
  return std::make_unique<ImageClassification>(config, split);
}

// The image size is not the checkpoint's (global average pooling takes any): config's or the
// model's default stands in, as for scaletrain info.
DataShape image_classification_shape_of(const TrainConfig& config, const checkpoint::CheckpointData& data) {
  DataShape shape;
  const models::ModelEntry& entry = models::model_entry(config.model);
  shape.num_classes =
      static_cast<int>(checkpoint_tensor_shape(data, "model/" + entry.classifier_weight, {"classes", "features"})[0]);
  shape.channels = static_cast<int>(
      checkpoint_tensor_shape(data, "model/" + entry.first_conv_weight, {"filters", "channels", "height", "width"})[1]);
  const std::vector<int64_t> hw = input_image_size(config);
  shape.height = static_cast<int>(hw[0]);
  shape.width = static_cast<int>(hw[1]);
  return shape;
}

}  // namespace scaletrain::train
