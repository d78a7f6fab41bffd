#!/usr/bin/env bash
# Learning check of googlenet at its input size 224x224 on 2 ranks (issue 24; run_learning_check.sh).
# Batch norm and two auxiliary heads at the default weight 0.3; 4 images per rank so that the batch
# statistics mean something.
exec bash "$(dirname "$0")/run_learning_check.sh" googlenet 224 10 240 60 --batch-size 4 --epochs 20 --optimizer adam --base-lr 0.0005 --lr-schedule constant
