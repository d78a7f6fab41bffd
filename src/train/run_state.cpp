// The run state (run_state.hpp): construction of a new run, its identity, and its JSON form (the
// checkpoint's /run state; the keys are listed in docs/checkpoint-format.md).
#include "scaletrain/train/run_state.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::train {
namespace {

constexpr int64_t kStateVersion = 1;

Json optional_number(double v) { return v >= 0 ? Json(v) : Json(); }
double number_or(const Json& j, double fallback) { return j.is_null() ? fallback : j.as_double(); }

}  // namespace

Json run_identity(const TrainConfig& c, const Task& task, int64_t global_batch) {
  Json j = Json::object();
  j.set("--model", c.model);
  task.add_identity(j);
  j.set("global batch (ranks x --batch-size)", global_batch);
  j.set("--epochs", c.epochs);
  j.set("--seed", static_cast<int64_t>(c.seed));
  j.set("--shuffle", c.shuffle ? c.shuffle_mode : std::string("off (--no-shuffle)"));
  j.set("--lr-schedule", c.lr_schedule);
  j.set("--base-lr", c.base_lr);
  j.set("--warmup-epochs", c.warmup_epochs);
  j.set("--end-lr", c.end_lr);
  // Only where they differ from their defaults, so that checkpoints from before them resume.
  if (c.lr_poly_power != 2.0) j.set("--lr-poly-power", c.lr_poly_power);
  if (c.warmup_steps > 0) j.set("--warmup-steps", c.warmup_steps);
  if (!c.lr_step_epochs.empty()) j.set("--lr-step-epochs", Json::array_of(c.lr_step_epochs));
  if (c.lr_step_every != 0.0) j.set("--lr-step-every", c.lr_step_every);
  if (c.lr_step_gamma != 0.1) j.set("--lr-step-gamma", c.lr_step_gamma);
  j.set("--momentum", c.momentum);
  j.set("--weight-decay", c.weight_decay);
  j.set("--nesterov", c.nesterov);
  j.set("--optimizer", c.optimizer);
  if (c.optimizer == "lars") {
    j.set("--lars-trust-coefficient", c.lars_trust_coefficient);
    j.set("--lars-epsilon", c.lars_epsilon);
  }
  if (uses_adam(c)) {
    j.set("--adam-beta1", c.adam_beta1);
    j.set("--adam-beta2", c.adam_beta2);
    j.set("--adam-epsilon", c.adam_epsilon);
  }
  return j;
}

std::vector<std::string> identity_differences(const Json& checkpoint, const Json& here) {
  std::vector<std::string> out;
  for (const auto& [key, value] : here.items()) {
    if (!checkpoint.contains(key)) {
      out.push_back(key + " is " + value.dump() + " here and absent from the checkpoint");
    } else if (checkpoint.at(key).dump() != value.dump()) {
      out.push_back(key + " is " + value.dump() + " here, " + checkpoint.at(key).dump() + " in the checkpoint");
    }
  }
  for (const auto& [key, value] : checkpoint.items())
    if (!here.contains(key)) out.push_back(key + " is " + value.dump() + " in the checkpoint and unknown here");
  return out;
}

RunState::RunState(const TrainConfig& c, const Task& task, int64_t steps_per_epoch_, int world_size_,
                   int64_t batch_size_)
    : world_size(world_size_),
      batch_size(batch_size_),
      steps_per_epoch(steps_per_epoch_),
      identity(run_identity(c, task, world_size_ * batch_size_)),
      precision(c.precision),
      loss_scaler(LossScaler::from_option(resolved_loss_scale(c))),
      model_(task.make_network(c.seed)),
      schedule_(schedule_options(c, steps_per_epoch_)) {
  optimizer_ = make_optimizer(c, model_->params());
}

double RunState::epoch_loss_sum(const comm::Communicator& comm) const {
  return position.epoch_loss_sum + comm.allreduce_sum(epoch_loss_here) / comm.size();
}

Json RunState::to_json(const Json& current_segment) const {
  Json p = Json::object();
  p.set("epoch", position.epoch);
  p.set("step_in_epoch", position.step_in_epoch);
  p.set("global_step", position.global_step);
  p.set("samples_seen", position.samples_seen);
  p.set("units_seen", position.units_seen);
  p.set("epoch_loss_sum", position.epoch_loss_sum);
  Json r = Json::object();
  r.set("best_accuracy", optional_number(results.best_accuracy));
  r.set("last_accuracy", optional_number(results.last_accuracy));
  r.set("time_to_target_s", optional_number(results.time_to_target_s));
  r.set("clock_s", results.clock_s);
  r.set("train_s", results.train_s);
  Json all_segments = segments;
  if (!current_segment.is_null()) all_segments.push_back(current_segment);

  Json j = Json::object();
  j.set("version", kStateVersion);
  j.set("identity", identity);
  j.set("world_size", world_size);
  j.set("batch_size", batch_size);
  j.set("steps_per_epoch", steps_per_epoch);
  j.set("position", p);
  j.set("results", r);
  j.set("epochs", epochs);
  j.set("precision", precision);
  j.set("loss_scale", loss_scaler.to_json());
  j.set("segments", all_segments);
  j.set("mllog_bytes", mllog_bytes);
  return j;
}

void RunState::restore(const Json& s) {
  ST_CHECK(s.at("version").as_int() == kStateVersion, "the checkpoint's run state has version "
                                                          << s.at("version").as_int() << ", this build reads "
                                                          << kStateVersion);
  const Json& p = s.at("position");
  position.epoch = p.at("epoch").as_int();
  position.step_in_epoch = p.at("step_in_epoch").as_int();
  position.global_step = p.at("global_step").as_int();
  position.samples_seen = p.at("samples_seen").as_int();
  // Checkpoints from before units counted only samples.
  position.units_seen = p.contains("units_seen") ? p.at("units_seen").as_int() : position.samples_seen;
  position.epoch_loss_sum = p.at("epoch_loss_sum").as_double();
  const Json& r = s.at("results");
  results.best_accuracy = number_or(r.at("best_accuracy"), -1.0);
  results.last_accuracy = number_or(r.at("last_accuracy"), -1.0);
  results.time_to_target_s = number_or(r.at("time_to_target_s"), -1.0);
  results.clock_s = r.at("clock_s").as_double();
  results.train_s = r.at("train_s").as_double();
  epochs = s.at("epochs");
  loss_scaler.restore(s.contains("loss_scale") ? s.at("loss_scale") : Json::object());
  const std::string trained_in = s.contains("precision") ? s.at("precision").as_string() : "fp32";
  precision_note = trained_in == precision
                       ? ""
                       : "precision: the checkpoint was trained in " + trained_in + ", this run goes on in " +
                             precision + " (the fp32 master weights carry over as they are)";
  mllog_bytes = s.contains("mllog_bytes") ? s.at("mllog_bytes").as_int() : -1;
  segments = Json::array();
  const Json& saved = s.at("segments");
  for (std::size_t i = 0; i < saved.size(); ++i) {
    Json segment = saved.at(i);
    if (segment.at("reason").as_string() == "running") segment.set("reason", "lost");
    segments.push_back(segment);
  }
}

}  // namespace scaletrain::train
