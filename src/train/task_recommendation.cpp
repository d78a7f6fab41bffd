// The recommendation task (task.hpp), MLPerf's NCF: implicit-feedback positives read whole into
// memory, 4 fresh negatives per positive every epoch, NeuMF, sigmoid cross-entropy; evaluation
// ranks each user's held-out item among its 999 negatives (HR@10, NDCG@10).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <utility>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/data/negative_sampler.hpp"
#include "scaletrain/data/recommendation.hpp"
#include "scaletrain/data/recommendation_batches.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/models/model.hpp"
#include "scaletrain/models/neumf.hpp"
#include "scaletrain/models/registry.hpp"
#include "scaletrain/ops/sigmoid_bce.hpp"
#include "scaletrain/train/ranking_evaluation.hpp"
#include "train/model_input.hpp"
#include "train/tasks.hpp"

namespace scaletrain::train {
namespace {

// HR@10: the MLPerf NCF reference's quality metric (target 0.635 on ml-20m).
constexpr int kTopK = 10;

models::NeuMF& neumf(models::Network& network) { return static_cast<models::NeuMF&>(network); }

// What predict writes beside the logits.
constexpr const char* kLogitsDescription =
    "NeuMF's output for the pair (users[i], items[i]) before the sigmoid: sigmoid(logit) is the predicted "
    "probability that the user interacts with the item (scaletrain eval ranks items by it)";

// predict's ids: dataset `name` of the file `input`, i32 (N), every id in [0, count) (count: the
// checkpoint's users or items).
Tensor read_ids(const io::H5File& in, const std::string& input, const std::string& name, int64_t count,
                const std::string& checkpoint) {
  ST_CHECK(in.has(name),
           "--input " << input << " has no dataset '" << name
                      << "' (a recommendation model predicts from datasets 'users' and 'items', int32 [N])");
  ST_CHECK(in.dataset_type(name) == "int32",
           "--input " << input << ": dataset '" << name << "' is " << in.dataset_type(name) << ", expected int32");
  ST_CHECK(in.dataset_shape(name).size() == 1, "--input " << input << ": dataset '" << name << "' has shape "
                                                          << shape_string(in.dataset_shape(name)) << ", expected [N]");
  Tensor ids = in.read(name, DType::i32);
  const int32_t* id = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    ST_CHECK(id[i] >= 0 && id[i] < count,
             "--input " << input << ": " << name << "[" << i << "] = " << id[i] << " is out of range [0, " << count
                        << "): the model in checkpoint " << checkpoint << " has " << count << " " << name);
  return ids;
}

// The epoch's (user, item, label) samples as the training loop's batch source.
class RecommendationSource : public BatchSource {
 public:
  RecommendationSource(const data::RecommendationSplit& train, int rank, int world, int64_t batch_size, uint64_t seed,
                       bool shuffle)
      : batches_(train, rank, world, batch_size, data::kDefaultNegativesPerPositive, seed, shuffle) {}
  int64_t steps_per_epoch() const override { return batches_.steps_per_epoch(); }
  void start_epoch(int epoch, int64_t first_step) override { batches_.start_epoch(epoch, first_step); }
  bool next(Batch& batch) override {
    return batches_.next(batch.slot("users"), batch.slot("items"), batch.slot("labels"));
  }

 private:
  data::RecommendationBatches batches_;
};

class Recommendation : public Task {
 public:
  explicit Recommendation(const TrainConfig& c)
      : cfg_(c),
        train_(data::open_recommendation_split(c.data_dir, "train")),
        val_(data::open_recommendation_split(c.data_dir, "val")) {
    data::check_train_and_eval_agree(train_, val_);
  }
  // A dataset known by its shape alone (task.hpp: train and val without files or rows), or its val
  // split alone (the training split then only its users and items).
  Recommendation(const TrainConfig& c, data::RecommendationSplit train, data::RecommendationSplit val)
      : cfg_(c), train_(std::move(train)), val_(std::move(val)) {}

  const char* name() const override { return models::kTaskRecommendation; }
  const char* quality_metric() const override { return "hr@10"; }
  std::string describe_quality(double value) const override {
    char text[32] = "hr@10 -";
    if (!std::isnan(value)) std::snprintf(text, sizeof text, "hr@10 %.4f", value);
    return text;
  }
  std::string mlperf_benchmark() const override { return "ncf"; }
  // The NCF keys of MLPerf v0.5's tags (mlperf_compliance's NCF_TAGS).
  Json mlperf_keys(int64_t /*micro_batch*/) const override {
    Json keys = Json::object();
    keys.set("preproc_hp_num_eval", val_.negatives_per_user);
    keys.set("input_hp_num_neg", static_cast<int64_t>(data::kDefaultNegativesPerPositive));
    keys.set("eval_hp_num_users", val_.rows());
    keys.set("eval_hp_num_neg", val_.negatives_per_user);
    keys.set("model_hp_mf_dim", static_cast<int64_t>(models::kNeuMFDefaultMfDim));
    const std::vector<int>& sizes = models::neumf_default_layers();
    const std::vector<int64_t> layers(sizes.begin(), sizes.end());
    keys.set("model_hp_mlp_layer_sizes", Json::array_of(layers));
    keys.set("model_hp_loss_fn", "binary_cross_entropy");
    return keys;
  }
  // An epoch's samples: every positive and its sampled negatives.
  int64_t train_samples() const override { return train_.rows() * (1 + data::kDefaultNegativesPerPositive); }
  int64_t eval_samples() const override { return val_.rows(); }

  // The splits are read whole into memory at start-up: nothing to stage.
  Json stage(const comm::Communicator&, const comm::Topology&) override {
    ST_LOG("--stage-to " << cfg_.stage_to << ": recommendation data is read whole into memory; nothing is staged");
    return Json();
  }

  std::string describe_data() const override {
    std::ostringstream out;
    out << train_.rows() << " positives of " << train_.num_users << " users x " << train_.num_items << " items ("
        << train_samples() << " training samples per epoch with " << data::kDefaultNegativesPerPositive
        << " negatives each), " << val_.rows() << " held-out items ranked against " << val_.negatives_per_user
        << " negatives";
    return out.str();
  }

  std::string describe_input() const override {
    return std::string("int32 shards read whole into memory, negatives sampled per epoch, shuffle ") +
           (cfg_.shuffle ? "global" : "off");
  }

  Json dataset_json() const override {
    Json d = Json::object();
    d.set("dir", cfg_.data_dir);
    d.set("task", name());
    d.set("train_samples", train_samples());
    d.set("val_samples", val_.rows());
    d.set("train_positives", train_.rows());
    d.set("num_users", train_.num_users);
    d.set("num_items", train_.num_items);
    d.set("negatives_per_positive", static_cast<int64_t>(data::kDefaultNegativesPerPositive));
    d.set("eval_negatives", val_.negatives_per_user);
    d.set("unchecked_shards", unchecked_shards_json(unchecked()));
    return d;
  }

  UncheckedShards unchecked() const {
    return {{train_.dir, train_.unchecked_shards}, {val_.dir, val_.unchecked_shards}};
  }

  Json input_json() const override {
    Json in = Json::object();
    in.set("io", "memory");
    in.set("encoding", "int32");
    return in;
  }

  void add_identity(Json& j) const override {
    j.set("dataset train positives", train_.rows());
    j.set("dataset users x items", Json::array_of(std::vector<int64_t>{train_.num_users, train_.num_items}));
    j.set("dataset eval users", val_.rows());
    j.set("dataset eval negatives", val_.negatives_per_user);
    j.set("negatives per positive", static_cast<int64_t>(data::kDefaultNegativesPerPositive));
  }

  std::unique_ptr<BatchSource> training_batches(const comm::Communicator& comm, int64_t batch_size,
                                                int /*ranks_on_node*/) const override {
    require_files(train_.dir, "training batches");
    return std::make_unique<RecommendationSource>(train_, comm.rank(), comm.size(), batch_size, cfg_.seed,
                                                  cfg_.shuffle);
  }

  // The step reads them on the device only (on_context_device).
  std::vector<std::string> device_batch_keys() const override { return {"users", "items", "labels"}; }

  // Random users and items, one label in 1 + negatives per positive a positive, as an epoch's
  // samples are.
  Batch synthetic_batch(int64_t size, uint64_t seed) const override {
    Batch b;
    Tensor& users = b.slot("users");
    Tensor& items = b.slot("items");
    Tensor& labels = b.slot("labels");
    users = Tensor::empty({size}, DType::i32);
    items = Tensor::empty({size}, DType::i32);
    labels = Tensor::empty({size}, DType::f32);
    int32_t* user = users.data<int32_t>();
    int32_t* item = items.data<int32_t>();
    float* label = labels.data<float>();
    Rng rng = Rng::derive(seed, static_cast<uint64_t>(size));
    for (int64_t i = 0; i < size; ++i) {
      user[i] = static_cast<int32_t>(rng.below(train_.num_users));
      item[i] = static_cast<int32_t>(rng.below(train_.num_items));
      label[i] = rng.below(1 + data::kDefaultNegativesPerPositive) == 0 ? 1.0f : 0.0f;
    }
    return b;
  }

  std::unique_ptr<models::Network> make_network(uint64_t seed) const override {
    auto model = std::make_unique<models::NeuMF>(train_.num_users, train_.num_items);
    model->initialize(seed);
    return model;
  }

  std::string describe_shape() const override {
    return std::to_string(train_.num_users) + " users x " + std::to_string(train_.num_items) + " items";
  }

  Json describe_network(models::Network& network) const override {
    Json d = Json::object();
    d.set("model", network.name());
    d.set("task", name());
    d.set("parameters", network.params().parameter_count());
    d.set("num_users", train_.num_users);
    d.set("num_items", train_.num_items);
    d.set("tensors", models::describe_tensors(network.params()));
    return d;
  }

  // NeuMF's (from a one-user, one-item instance: its ops do not depend on its sizes) and the
  // loss in training; the evaluation scores with the model's forward alone.
  ops::OpNames ops(bool training) const override {
    ops::OpNames all = models::NeuMF(1, 1).ops(training);
    if (training) all.insert("sigmoid_bce_with_logits");
    return all;
  }

  // The embedding tables' rows are the dataset's users and items.
  void check_fits(const checkpoint::CheckpointData& data) const override {
    struct Table {
      const char* name;
      int64_t rows;
      const char* what;
    };
    const Table tables[] = {{"model/mf_user_embed.weight", train_.num_users, "users"},
                            {"model/mf_item_embed.weight", train_.num_items, "items"}};
    for (const auto& [name, rows, what] : tables) {
      const auto it = data.tensors.find(name);
      if (it == data.tensors.end()) continue;  // restore_model names what is missing
      ST_CHECK(it->second.ndim() == 2 && it->second.dim(0) == rows,
               "dataset " << cfg_.data_dir << " has " << rows << " " << what << " but " << name << " in checkpoint "
                          << data.path << " has " << (it->second.ndim() == 2 ? it->second.dim(0) : -1) << " rows");
    }
  }

  // The batch's ids and labels copied to the context's device (they stay where they are on the
  // CPU), then the model and the loss there.
  double forward_and_loss(Context& ctx, models::Network& network, const Batch& batch) override {
    const Tensor& users = on_context_device(ctx, batch.at("users"), device_users_);
    const Tensor& items = on_context_device(ctx, batch.at("items"), device_items_);
    const Tensor& labels = on_context_device(ctx, batch.at("labels"), device_labels_);
    Tensor logits = neumf(network).forward(ctx, users, items);
    if (!dlogits_.defined() || dlogits_.shape() != logits.shape() || dlogits_.device() != ctx.device())
      dlogits_ = Tensor::empty(logits.shape(), DType::f32, ctx.device());
    return ops::sigmoid_bce_with_logits(ctx, logits, labels, dlogits_, loss_scale());
  }

  void backward(Context& ctx, models::Network& network) override { neumf(network).backward(ctx, dlogits_); }

  // Users per forward: about 16000 scored pairs (16 users at 999 negatives), each user bringing
  // its held-out item and its negatives. A property of the dataset alone, not of the batch size or
  // the number of ranks, so that HR@10 is the same number in every run of a scaling study
  // (evaluate_ranking scores every user in the same forward whatever the number of ranks).
  Evaluation evaluate(const comm::Communicator& comm, Context& ctx, models::Network& network, int64_t /*batch_size*/,
                      int /*ranks_on_node*/) const override {
    require_files(val_.dir, "evaluation");
    constexpr int64_t kPairsPerForward = 16000;
    const int64_t users_per_batch = std::max<int64_t>(1, kPairsPerForward / (1 + val_.negatives_per_user));
    const RankingResult r = evaluate_ranking(comm, ctx, neumf(network), val_, users_per_batch, kTopK);
    Evaluation e;
    e.quality = r.hit_rate();
    e.loss = std::numeric_limits<double>::quiet_NaN();
    e.metrics.set("hr@10", r.hit_rate());
    e.metrics.set("ndcg@10", r.ndcg());
    e.samples = val_.rows();
    return e;
  }

  // The pairs scored as the evaluation scores its own (score_pairs), batch_size per forward.
  Prediction predict(Context& ctx, models::Network& network, const std::string& input, const std::string& checkpoint,
                     int64_t batch_size) const override {
    Batch pairs;
    {
      io::H5File in(input, io::H5File::Mode::read);
      pairs.slot("users") = read_ids(in, input, "users", train_.num_users, checkpoint);
      pairs.slot("items") = read_ids(in, input, "items", train_.num_items, checkpoint);
    }
    const int64_t n = pairs.at("users").dim(0);
    ST_CHECK(pairs.at("items").dim(0) == n, "--input " << input << ": datasets 'users' and 'items' differ in length ("
                                                       << n << " and " << pairs.at("items").dim(0) << ")");
    Prediction p;
    p.logits = Tensor::empty({n});
    p.attributes = {{"description", kLogitsDescription}};
    Tensor device_users, device_items;
    for (int64_t start = 0; start < n; start += batch_size) {
      const Batch b = pairs.rows(start, std::min(batch_size, n - start));
      const Tensor logits = score_pairs(ctx, neumf(network), b.at("users"), b.at("items"), device_users, device_items);
      std::copy(logits.data<float>(), logits.data<float>() + logits.numel(), p.logits.data<float>() + start);
    }
    return p;
  }

  std::string describe_evaluation(const Evaluation& e, const std::string& where) const override {
    std::string metrics;
    for (const auto& [name, value] : e.metrics.items()) {
      char part[64];
      std::snprintf(part, sizeof part, "%s%s %.4f", metrics.empty() ? "" : ", ", name.c_str(), value.as_double());
      metrics += part;
    }
    return metrics + " on " + where + " (" + std::to_string(e.samples) + " users)";
  }

 private:
  const TrainConfig& cfg_;
  data::RecommendationSplit train_, val_;
  Tensor dlogits_;
  Tensor device_users_, device_items_, device_labels_;  // the batch on a GPU
};

}  // namespace

std::unique_ptr<Task> open_recommendation_task(const TrainConfig& config, const comm::Communicator&) {
  return std::make_unique<Recommendation>(config);
}

std::unique_ptr<Task> recommendation_of_shape(const TrainConfig& config, const DataShape& shape) {
  ST_CHECK(shape.num_users > 0 && shape.num_items > 0,
           "internal: a recommendation dataset of " << shape.num_users << " users and " << shape.num_items << " items");
  data::RecommendationSplit split;
  split.num_users = shape.num_users;
  split.num_items = shape.num_items;
  return std::make_unique<Recommendation>(config, split, split);
}

// The embedding tables' rows are the users and items (restore_model checks the other tables).
DataShape recommendation_shape_of(const TrainConfig&, const checkpoint::CheckpointData& data) {
  DataShape shape;
  shape.num_users = checkpoint_tensor_shape(data, "model/mf_user_embed.weight", {"users", "factors"})[0];
  shape.num_items = checkpoint_tensor_shape(data, "model/mf_item_embed.weight", {"items", "factors"})[0];
  return shape;
}

std::unique_ptr<Task> recommendation_for_evaluation(const TrainConfig& config, const std::string& split) {
  data::RecommendationSplit val = data::open_recommendation_split(config.data_dir, split);
  data::RecommendationSplit users_and_items;  // what the network and check_fits read of train
  users_and_items.num_users = val.num_users;
  users_and_items.num_items = val.num_items;
  return std::make_unique<Recommendation>(config, std::move(users_and_items), std::move(val));
}

}  // namespace scaletrain::train
