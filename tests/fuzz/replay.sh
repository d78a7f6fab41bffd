#!/usr/bin/env bash
# replay.sh BIN CORPUS REGRESSIONS: replays every recipe of REGRESSIONS on the corpus that
# make_corpus.sh made in CORPUS, target by target; fails if any of them crashes, hangs, trips a
# sanitizer or ends in an error that does not name the file.
set -euo pipefail
BIN=${1:?}
CORPUS=${2:?}
REGRESSIONS=${3:?}
rc=0
for t in shard jpeg checkpoint ini; do
  n=$(grep -c "^fuzz_$t " "$REGRESSIONS" || true)
  echo "fuzz_$t: $n recipe(s)"
  [ "$n" -gt 0 ] || continue
  "$BIN/fuzz_$t" --corpus "$CORPUS/$t" --replay "$REGRESSIONS" --timeout 60 --reports "$CORPUS/../replay-$t" || rc=1
done
exit $rc
