#!/bin/bash
# Scaling studies under Slurm: a thin wrapper around scaletrain-study (src/study/scaletrain_study.py).
#
#   jobscripts/study.sh submit STUDY_FILE [--dry-run] [options]   submit every run and the report job
#   jobscripts/study.sh status STUDY                               each run's state
#   jobscripts/study.sh resubmit STUDY --failed | RUN_ID...        rerun failed or missing runs alone
#   jobscripts/study.sh report STUDY [--prediction FILE]...        build STUDY_DIR/report/ now
#
# STUDY is the study directory (or its study file). `jobscripts/study.sh --help` explains the
# study file and every option; docs/scaling-studies.md walks through a study on a DGX-1 cluster.
# PYTHON picks the interpreter (default /usr/bin/python3; the tool needs only the standard library).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "${PYTHON:-/usr/bin/python3}" "$here/../src/study/scaletrain_study.py" "$@"
