// The ImageNet CNNs of a DGX-1 centre's scaling study (LRZ; issue 24), beside ResNet-50:
//   alexnet, googlenet, inception_v3  as torchvision 0.14 defines them (names, shapes, graph and
//                                     initialisation scheme; auxiliary heads included);
//   alexnet-caffe, googlenet-caffe    BVLC Caffe's bvlc_alexnet and bvlc_googlenet, the graphs the
//                                     study ran with NVCaffe (LRN, grouped convolutions, biases,
//                                     no batch norm), named after the prototxt's layers with '/'
//                                     written '.'.
// They span 6.6 M (GoogLeNet without its auxiliary heads) to 61 M parameters (AlexNet): from
// compute-bound to communication-bound.
#pragma once

#include <memory>

#include "scaletrain/models/model.hpp"

namespace scaletrain::models {

std::unique_ptr<Model> make_alexnet(int num_classes, int in_channels);
std::unique_ptr<Model> make_googlenet(int num_classes, int in_channels);
std::unique_ptr<Model> make_inception_v3(int num_classes, int in_channels);
std::unique_ptr<Model> make_alexnet_caffe(int num_classes, int in_channels);
std::unique_ptr<Model> make_googlenet_caffe(int num_classes, int in_channels);

}  // namespace scaletrain::models
