#!/usr/bin/env bash
# Learning check of inception_v3 at its input size 299x299 on 2 ranks (issue 24; run_learning_check.sh).
# Batch norm, the auxiliary head at the default weight 0.4; the largest: about 4x googlenet's compute per
# image at 299x299, hence the smallest dataset.
# NOT YET PASSING (docs/performance.md, "Learning checks of the CNNs"): under load average 11 it
# reached 0.20 in 10 minutes (320 images trained, loss still falling); it needs an idle machine.
exec bash "$(dirname "$0")/run_learning_check.sh" inception_v3 299 10 80 40 --batch-size 4 --epochs 20 --optimizer adam --base-lr 0.0005 --lr-schedule constant
