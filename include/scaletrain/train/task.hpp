// Tasks: what a model learns and how it is judged. A task owns its dataset kind (format, readers,
// decoders), how a batch becomes the model's inputs, the loss, the evaluation metric and its
// quality target. The training loop (trainer.cpp), evaluation, the report and the checkpoints know
// tasks only through this interface; --model picks the model and with it the task
// (models/registry.hpp).
//
//   image_classification  images and labels in HDF5 shards (docs/dataset-format.md), a ResNet,
//                         softmax cross-entropy with label smoothing, top-1 accuracy;
//   recommendation        (user, item) positives with 4 sampled negatives each per epoch, NeuMF,
//                         sigmoid cross-entropy, HR@10 (and NDCG@10) against 999 negatives.
//
// The quality metric is what MLPerf logs as eval_accuracy and what --target-accuracy compares
// with; report.json names it (quality_metric).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/models/network.hpp"
#include "scaletrain/ops/registry.hpp"
#include "scaletrain/tensor/tensor.hpp"
#include "scaletrain/train/config.hpp"

namespace scaletrain::comm {
class Topology;
}
namespace scaletrain::checkpoint {
struct CheckpointData;
}

namespace scaletrain::train {

// A batch of named tensors, samples first: every tensor's first dimension is the batch size.
// Image classification: "images" (B, H, W, C) u8 and "labels" (B) i32; recommendation: "users",
// "items" (B) i32 and "labels" (B) f32.
class Batch {
 public:
  // The tensor called name, added (undefined) when missing, for a source to fill. The reference
  // stays valid while the batch lives (adding others does not move it).
  Tensor& slot(const std::string& name);
  // Throws naming the batch's tensors when there is none called name.
  const Tensor& at(const std::string& name) const;
  int64_t size() const;                    // samples (0 for an empty batch)
  std::vector<std::string> names() const;  // of its tensors, in the order they were added
  // Rows [first, first + count) of every tensor, as views (a micro-batch).
  Batch rows(int64_t first, int64_t count) const;

 private:
  std::deque<std::pair<std::string, Tensor>> tensors_;  // a deque: slot() references stay valid
};

// What one optimizer step trained on, over all ranks: samples (sentence pairs for translation)
// and the task's unit of work (samples, or real target tokens for translation).
struct StepWork {
  int64_t samples = 0;
  int64_t units = 0;
};

// The tokens a side of each sentence pair of translation's synthetic_batch (about the mean of
// WMT's subword-tokenized sentences, end of sentence included).
constexpr int64_t kSyntheticSentenceTokens = 25;

// One rank's training batches, epoch by epoch. Every rank gets the same number of full batches,
// so every rank runs the same steps.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t steps_per_epoch() const = 0;
  // Epochs from 0; first_step > 0 starts a resumed epoch at that batch (the batches after it are
  // those of an epoch started at 0).
  virtual void start_epoch(int epoch, int64_t first_step) = 0;
  // The next batch (views valid until the next call); false at the end of the epoch.
  virtual bool next(Batch& batch) = 0;
  virtual int64_t bytes_read() const { return 0; }       // from the dataset's files, so far
  virtual int64_t skipped_samples() const { return 0; }  // --skip-bad-samples
  // The last batch's step over all ranks, where steps differ (token batches); none where every
  // step is the global batch of samples.
  virtual std::optional<StepWork> last_step_work() const { return std::nullopt; }
};

// What scaletrain predict writes: the network's logits for every sample of the input file, in the
// file's order, on the host, and attributes of the logits dataset that say what they are.
struct Prediction {
  Tensor logits;
  std::vector<std::pair<std::string, std::string>> attributes;  // (name, text)
};

// One evaluation: the quality metric, the mean loss when the task has one (NaN otherwise) and
// every metric by name ({"top1": ...} or {"hr@10": ..., "ndcg@10": ...}).
struct Evaluation {
  double quality = 0.0;
  double loss = 0.0;
  Json metrics = Json::object();
  int64_t samples = 0;  // evaluated: images, or users
  // MLPerf's eval_accuracy is quality x this: BLEU (0-100) / 100 for translation.
  double mlperf_scale = 1.0;
  // Translation: each evaluation sentence's translation, in the split's order, on every rank
  // (scaletrain eval --translations writes them). Empty for the other tasks.
  std::vector<std::string> translations;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual const char* name() const = 0;            // models::kTask*
  virtual const char* quality_metric() const = 0;  // "top1", "hr@10", "bleu"
  // What throughput counts: "samples" (images, (user, item) pairs) or "tokens" (translation:
  // the real target tokens, as MLPerf's Transformer results count them).
  virtual const char* work_unit() const { return "samples"; }

  // The metric as the epoch log line prints it: "top-1 46.62%", "hr@10 0.6020"; NaN (not
  // evaluated this epoch): "top-1 -".
  virtual std::string describe_quality(double value) const = 0;
  // The MLPerf log's submission_benchmark ("resnet", "ncf") and the task's own hyper-parameter
  // keys (mllog.txt, docs/mllog.md); micro_batch: samples per rank and forward.
  virtual std::string mlperf_benchmark() const = 0;
  virtual Json mlperf_keys(int64_t micro_batch) const = 0;
  // Metadata some of those keys carry (key -> object), e.g. max_sequence_length's method.
  virtual Json mlperf_key_metadata() const { return Json::object(); }

  // The dataset. stage(): --stage-to, one rank per node copies the files (a task whose data is
  // read whole into memory needs none and returns null).
  virtual int64_t train_samples() const = 0;
  virtual int64_t eval_samples() const = 0;
  virtual Json stage(const comm::Communicator& comm, const comm::Topology& topology) = 0;
  virtual std::string describe_data() const = 0;   // the start-up log's lines: the data,
  virtual std::string describe_input() const = 0;  // and how it is read
  virtual Json dataset_json() const = 0;           // report.json "dataset"
  virtual Json input_json() const = 0;             // report.json "input" (how the data is read)
  // The run identity's entries for the data and the task's options (run_state.hpp).
  virtual void add_identity(Json& identity) const = 0;
  // This rank's training batches of batch_size samples (all micro-batches of a step).
  virtual std::unique_ptr<BatchSource> training_batches(const comm::Communicator& comm, int64_t batch_size,
                                                        int ranks_on_node) const = 0;
  // The batch tensors the step reads only on the device (copied there by its task otherwise):
  // with --input-copy overlap they arrive on the device ahead of their step
  // (train/device_batches.hpp). The others stay on the host. None: the task's batches are not
  // prefetched.
  virtual std::vector<std::string> device_batch_keys() const { return {}; }
  // A batch of `size` samples of the dataset's shapes with random content, from seed: what
  // scaletrain-advisor calibrate times the step on (a dense step's time does not depend on what
  // the batch holds).
  // Translation's `size` is tokens: size / kSyntheticSentenceTokens pairs of that many tokens a
  // side (at least one pair).
  virtual Batch synthetic_batch(int64_t size, uint64_t seed) const = 0;
  // The work a batch holds in work_unit(): its samples, or its real target tokens (translation).
  virtual int64_t batch_work(const Batch& batch) const { return batch.size(); }
  // One epoch's work in work_unit(): train_samples(), or the train split's target tokens.
  virtual int64_t train_work() const { return train_samples(); }

  // The model, initialised with seed; and the check that a checkpoint's weights (--init-from)
  // fit this dataset, naming both.
  virtual std::unique_ptr<models::Network> make_network(uint64_t seed) const = 0;
  // The network's input as messages name it: "32x32x3 images, 10 classes", "138493 users x 26744
  // items".
  virtual std::string describe_shape() const = 0;
  // `scaletrain info --model`'s JSON: the model, task, parameter count, the shape it was built for
  // and its state_dict's tensors (name, shape, parameter or buffer), in torchvision's order.
  virtual Json describe_network(models::Network& network) const = 0;
  // The ops a run of this task dispatches besides the optimizer's (ops/registry.hpp): its
  // network's, its input's, its loss's and its evaluation's; training false: an evaluation
  // alone (scaletrain eval). --device asks each of them of the device.
  virtual ops::OpNames ops(bool training) const = 0;
  virtual void check_fits(const checkpoint::CheckpointData& data) const = 0;

  // One micro-batch: forward and the mean loss over its samples (the gradient of the loss,
  // times loss_scale(), is kept for backward), then backward, which writes every parameter
  // gradient. The returned loss is never scaled.
  virtual double forward_and_loss(Context& ctx, models::Network& network, const Batch& batch) = 0;
  virtual void backward(Context& ctx, models::Network& network) = 0;

  // The factor of the loss's gradient (train/loss_scaler.hpp; 1 without loss scaling): the loss
  // ops take it as their gradient's scale, so that backward starts from the scaled loss without
  // a pass of its own over the logits' gradient.
  void set_loss_scale(double scale) { loss_scale_ = scale; }
  double loss_scale() const { return loss_scale_; }

  // The evaluation split, every sample (user) exactly once over the ranks, reduced. Collective.
  virtual Evaluation evaluate(const comm::Communicator& comm, Context& ctx, models::Network& network,
                              int64_t batch_size, int ranks_on_node) const = 0;
  // scaletrain eval's line: "top-1 accuracy 0.9123 (9123/10000) on DIR/val, loss 0.3456",
  // "hr@10 0.6350, ndcg@10 0.3800 on DIR/val (138493 users)"; where: the split evaluated.
  virtual std::string describe_evaluation(const Evaluation& e, const std::string& where) const = 0;

  // scaletrain predict (README.md, "Inference"): the network's logits for the samples of the HDF5
  // file `input`, batch_size samples per forward. Image classification: dataset "inputs" f32
  // (N, C, H, W), normalised, to logits (N, classes); recommendation: "users" and "items" i32 (N)
  // to NeuMF's logits (N), before the sigmoid. checkpoint: the weights' file, for messages.
  virtual Prediction predict(Context& ctx, models::Network& network, const std::string& input,
                             const std::string& checkpoint, int64_t batch_size) const = 0;

 private:
  double loss_scale_ = 1.0;
};

// Opens config.data_dir for the task of config.model (checking that the dataset is of that task,
// with a message naming the directory and both tasks). The task keeps a reference to config.
std::unique_ptr<Task> open_task(const TrainConfig& config, const comm::Communicator& comm);

// A dataset described by its shape alone, without files: enough for a task to build its model
// and make synthetic batches (scaletrain-advisor calibrate without --data). Image classification
// reads classes, channels and the image size (raw images of that size, pixels normalised with
// mean 0.5 and std 0.25); recommendation reads users and items; translation reads num_items as its
// vocabulary's size.
struct DataShape {
  int num_classes = 0, channels = 0, height = 0, width = 0;
  int64_t num_users = 0, num_items = 0;
};

// Split `split` of config.data_dir alone, for scaletrain eval: the task of config.model evaluates
// it (evaluate(); the network, its ops and check_fits); what concerns training (its batches,
// staging, the dataset's description) is not meant to be asked of it. The split must be of that
// task, and one the task evaluates (recommendation: val). The task keeps a reference to config.
std::unique_ptr<Task> open_task_for_evaluation(const TrainConfig& config, const std::string& split,
                                               const comm::Communicator& comm);

// The task of config.model on a dataset of that shape. Its data is not there: asking for its
// training batches or an evaluation throws (staging is a no-op for a task that stages nothing).
// The task keeps a reference to config.
std::unique_ptr<Task> open_task_of_shape(const TrainConfig& config, const DataShape& shape);

// The task of config.model on the network a checkpoint holds, without a dataset (scaletrain
// predict): the task reads the shape from the checkpoint's tensors (image classification: classes
// from the rows of model/fc.weight, channels from model/conv1.weight, the image size config's or
// the model's default, as the network takes any; recommendation: users and items from the rows of
// model/mf_user_embed.weight and model/mf_item_embed.weight), then open_task_of_shape. A checkpoint
// of another model, or one whose tensor is missing or of another rank, is an error naming the
// checkpoint and the tensor.
std::unique_ptr<Task> open_task_of_checkpoint(const TrainConfig& config, const checkpoint::CheckpointData& data);

}  // namespace scaletrain::train
