// The task layer's batch of named tensors (train/task.hpp): micro-batches are views of the right
// rows of every tensor, slots stay put while others are added, and a missing name is a clear error.
#include <boost/test/unit_test.hpp>
#include <string>

#include "scaletrain/core/error.hpp"
#include "scaletrain/train/task.hpp"
#include "support/gradcheck.hpp"

using scaletrain::Shape;
using scaletrain::Tensor;
using scaletrain::test::error_of;
using scaletrain::train::Batch;

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

BOOST_AUTO_TEST_SUITE_END()
