#!/usr/bin/env bash
# Learning check of alexnet-caffe at its input size 227x227 on 2 ranks (issue 24; run_learning_check.sh).
# Caffe's preprocessing (the model's default) and init (Gaussian 0.01, biases 0.1); no batch norm: Adam
# as for alexnet.
exec bash "$(dirname "$0")/run_learning_check.sh" alexnet-caffe 227 10 160 60 --batch-size 8 --epochs 20 --optimizer adam --base-lr 0.0005 --lr-schedule constant
