// The task layer's batch of named tensors (train/task.hpp): micro-batches are views of the right
// rows of every tensor, slots stay put while others are added, and a missing name is a clear error.
// A task opened from a checkpoint alone reads its network's shape from the checkpoint's tensors.
#include <boost/test/unit_test.hpp>
#include <string>

#include "scaletrain/checkpoint/checkpoint.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/train/task.hpp"
#include "support/gradcheck.hpp"

using scaletrain::Shape;
using scaletrain::Tensor;
using scaletrain::checkpoint::CheckpointData;
using scaletrain::test::error_of;
using scaletrain::train::Batch;

namespace {

// A checkpoint of `model` in memory holding tensors of these shapes (zeros).
CheckpointData checkpoint_of(const std::string& model, const std::vector<std::pair<std::string, Shape>>& tensors) {
  CheckpointData data;
  data.path = "ck.h5";
  data.meta.model = model;
  for (const auto& [name, shape] : tensors) data.tensors[name] = Tensor::zeros(shape, scaletrain::DType::f32);
  return data;
}

std::string shape_of_checkpoint(const std::string& model, const CheckpointData& data) {
  scaletrain::train::TrainConfig config;
  config.model = model;
  return scaletrain::train::open_task_of_checkpoint(config, data)->describe_shape();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task)

BOOST_AUTO_TEST_CASE(micro_batches_are_row_views_of_every_tensor) {
  Batch batch;
  Tensor& images = batch.slot("images");
  images = Tensor::empty({5, 2, 3}, scaletrain::DType::f32);
  for (int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = static_cast<float>(i);
  // Adding a slot must not move the first one (a source fills both through references).
  Tensor& labels = batch.slot("labels");
  labels = Tensor::empty({5}, scaletrain::DType::i32);
  for (int i = 0; i < 5; ++i) labels.data<int32_t>()[i] = 10 + i;
  BOOST_TEST(&batch.slot("images") == &images);
  BOOST_TEST(batch.size() == 5);

  const Batch micro = batch.rows(2, 2);
  BOOST_TEST(micro.size() == 2);
  BOOST_TEST((micro.at("images").shape() == Shape{2, 2, 3}));
  BOOST_TEST(micro.at("images").data<float>()[0] == 12.0f);  // row 2 starts at 2 * 6
  BOOST_TEST(micro.at("images").data<float>()[11] == 23.0f);
  BOOST_TEST(micro.at("labels").data<int32_t>()[0] == 12);
  BOOST_TEST(micro.at("labels").data<int32_t>()[1] == 13);
  // A view: writing through it changes the batch.
  micro.at("labels").data<int32_t>()[1] = -1;
  BOOST_TEST(labels.data<int32_t>()[3] == -1);
  // The whole batch is the batch itself.
  BOOST_TEST(batch.rows(0, 5).at("labels").data<int32_t>() == labels.data<int32_t>());
}

BOOST_AUTO_TEST_CASE(missing_tensor_and_rows_out_of_range_are_clear_errors) {
  Batch batch;
  batch.slot("users") = Tensor::empty({4}, scaletrain::DType::i32);
  batch.slot("items") = Tensor::empty({4}, scaletrain::DType::i32);
  const std::string missing = error_of([&] { batch.at("labels"); });
  BOOST_TEST(missing.find("no tensor 'labels' (it has: users, items)") != std::string::npos, missing);
  const std::string range = error_of([&] { batch.rows(3, 2); });
  BOOST_TEST(range.find("rows [3, 5) of a batch of 4") != std::string::npos, range);
  BOOST_TEST(Batch().size() == 0);
}

BOOST_AUTO_TEST_CASE(a_task_opened_from_a_checkpoint_has_the_shape_of_its_tensors) {
  // Classes: fc's rows; channels: conv1's input channels; the image size is the model's default.
  const CheckpointData resnet =
      checkpoint_of("resnet20", {{"model/conv1.weight", {16, 1, 3, 3}}, {"model/fc.weight", {7, 64}}});
  BOOST_TEST(shape_of_checkpoint("resnet20", resnet) == "32x32x1 images, 7 classes");
  // Users and items: the GMF tables' rows.
  const CheckpointData ncf =
      checkpoint_of("ncf", {{"model/mf_user_embed.weight", {5, 64}}, {"model/mf_item_embed.weight", {9, 64}}});
  BOOST_TEST(shape_of_checkpoint("ncf", ncf) == "5 users x 9 items");
}

BOOST_AUTO_TEST_CASE(a_checkpoint_that_does_not_say_the_shape_is_a_clear_error) {
  const std::string other = error_of([] {
    shape_of_checkpoint("ncf", checkpoint_of("resnet20", {{"model/fc.weight", {7, 64}}}));
  });
  BOOST_TEST(other.find("checkpoint ck.h5 is for model resnet20, not ncf") != std::string::npos, other);
  const std::string missing = error_of([] {
    shape_of_checkpoint("ncf", checkpoint_of("ncf", {{"model/mf_user_embed.weight", {5, 64}}}));
  });
  BOOST_TEST(missing.find("checkpoint ck.h5 has no model/mf_item_embed.weight") != std::string::npos, missing);
  const std::string rank = error_of([] {
    shape_of_checkpoint("resnet20",
                        checkpoint_of("resnet20", {{"model/conv1.weight", {16, 3}}, {"model/fc.weight", {7, 64}}}));
  });
  BOOST_TEST(rank.find("checkpoint ck.h5: model/conv1.weight has shape [16, 3], expected [filters, channels, "
                       "height, width], each at least 1") != std::string::npos,
             rank);
  const std::string empty = error_of([] {
    shape_of_checkpoint("ncf", checkpoint_of("ncf", {{"model/mf_user_embed.weight", {0, 64}},
                                                     {"model/mf_item_embed.weight", {9, 64}}}));
  });
  BOOST_TEST(empty.find("model/mf_user_embed.weight has shape [0, 64], expected [users, factors]") != std::string::npos,
             empty);
}

BOOST_AUTO_TEST_SUITE_END()
