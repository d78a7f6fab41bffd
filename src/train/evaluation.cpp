// Evaluation (trainer.hpp): every sample of a split exactly once, sharded over ranks, counts
// reduced at the end. Each batch is progress for the stall watchdog, so a long evaluation is not
// mistaken for a stall, while one batch that never arrives is.
#include "scaletrain/core/progress.hpp"
#include "scaletrain/data/loader.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/train/trainer.hpp"
#include "train/model_input.hpp"

namespace scaletrain::train {

EvalResult evaluate(const comm::Communicator& comm, Context& ctx, models::Model& model, const data::SplitInfo& split,
                    int64_t batch_size, const EvalDataOptions& data_options) {
  progress::enter("evaluation");
  data::LoaderOptions options;
  options.batch_size = batch_size;
  options.shuffle = false;
  options.augment = false;
  options.drop_last = false;  // every sample exactly once across ranks
  options.io = data_options.io;
  options.data_threads = data_options.data_threads;
  options.prefetch = data_options.prefetch;
  options.image_height = data_options.image_height;
  options.image_width = data_options.image_width;
  options.preprocess = data_options.preprocess;
  options.skip_bad_samples = data_options.skip_bad_samples;
  options.comm = &comm;
  options.ranks_on_node = data_options.ranks_on_node;
  const InputNormalization normalization = input_normalization(split, data_options.preprocess);
  data::Loader loader(split, comm.rank(), comm.size(), options);
  loader.start_epoch(0);
  Tensor images, labels, input, no_grad, device_images, device_labels;
  int64_t correct = 0, samples = 0;
  double loss_sum = 0.0;
  while (loader.next(images, labels)) {
    Tensor logits =
        model.forward(ctx, model_input(ctx, images, normalization, input, device_images), /*training=*/false);
    const Tensor& device_side_labels = on_context_device(ctx, labels, device_labels);
    loss_sum += ops::softmax_cross_entropy(ctx, logits, device_side_labels, 0.0f, no_grad) * labels.numel();
    correct += ops::count_correct(ctx, logits, device_side_labels);
    samples += labels.numel();
    progress::tick();
  }
  progress::enter("evaluation results", /*waiting=*/true);
  EvalResult r;
  r.correct = comm.allreduce_sum(correct);
  r.samples = comm.allreduce_sum(samples);
  r.loss = r.samples ? comm.allreduce_sum(loss_sum) / r.samples : 0.0;
  return r;
}

}  // namespace scaletrain::train
