#!/usr/bin/env bash
# tools/translation_text.py (docs/translation-text.md) on this machine's real files: the Ding
# dictionary of trans-de-en and the German gettext catalogs. Checks the four text files are aligned,
# the test set has exactly --test-sentences pairs and shares no sentence with train, the same seed
# gives identical files and another seed another test set, no line carries a format string, tab or
# accelerator, a known Ding example pair comes through, summary.json adds up, and the user errors.
# Needs no build: runs from any directory (ST_TMP, set by ctest, picks the scratch folder).
source "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
TOOL=$SRC/tools/translation_text.py
DING=/usr/share/trans/de-en
W=$TMP_ROOT/translation_text
rm -rf "$W" && mkdir -p "$W"

dpkg-query -W -f='${Status}' trans-de-en 2>/dev/null | grep -q "install ok installed" && [ -f "$DING" ] ||
  fail "package trans-de-en (the Ding dictionary, $DING) is not installed: \`make deps\` installs it"

# A known example sentence of the dictionary, on the entry of "geöffnet; offen {adj}".
EN="The museum is not open on Monday."
DE="Das Museum ist montags nicht geöffnet."
grep -F -- "| $DE :: " "$DING" | grep -qF -- "| $EN" ||
  fail "the example pair '$DE' / '$EN' is not in $DING: pick another one for this test"

N=200
run() { # run OUT OPTIONS...: the tool into OUT, its output shown
  local out=$1
  shift
  $PY "$TOOL" --output "$out" "$@" || fail "translation_text.py --output $out $* exited $?"
}

echo "== extract (seed 1, twice) and seed 2"
run "$W/a" --test-sentences $N --seed 1
run "$W/b" --test-sentences $N --seed 1
run "$W/c" --test-sentences $N --seed 2 --catalogs # Ding only: the test set comes from it alone

for f in train.en train.de test.en test.de summary.json; do
  [ -s "$W/a/$f" ] || fail "$W/a/$f is missing or empty"
  cmp -s "$W/a/$f" "$W/b/$f" || fail "$f differs between two runs with --seed 1"
done
echo "ok: two runs with --seed 1 give identical files"
! cmp -s "$W/a/test.en" "$W/c/test.en" || fail "--seed 2 gives the same test.en as --seed 1"
echo "ok: --seed 2 gives another test set"

echo "== contents"
$PY - "$W/a" "$W/c" "$N" "$EN" "$DE" "$(dpkg-query -W -f='${Version}' trans-de-en)" <<'EOF'
import json, re, sys
a, c, n, en, de, version = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]

def fail(msg):
    sys.exit(f"FAIL: {msg}")

def lines(d, name):
    with open(f"{d}/{name}", "rb") as f:
        data = f.read()
    if data and not data.endswith(b"\n"):
        fail(f"{d}/{name} does not end with a newline")
    return data.decode("utf-8").split("\n")[:-1]  # strict UTF-8; "\n" is the only separator

def norm(s):
    return " ".join(s.split()).casefold()

train_en, train_de = lines(a, "train.en"), lines(a, "train.de")
test_en, test_de = lines(a, "test.en"), lines(a, "test.de")
if len(train_en) != len(train_de):
    fail(f"train.en has {len(train_en)} lines, train.de {len(train_de)}")
if len(test_en) != len(test_de):
    fail(f"test.en has {len(test_en)} lines, test.de {len(test_de)}")
if len(test_en) != n:
    fail(f"test has {len(test_en)} pairs, expected --test-sentences {n}")
if len(lines(c, "test.en")) != n:
    fail(f"--seed 2: test has {len(lines(c, 'test.en'))} pairs, expected {n}")
print(f"ok: train {len(train_en)} pairs, test {len(test_en)} pairs, aligned")

bad = re.compile(r"%s|\{0\}|\t|_[A-Za-z]|&[A-Za-z]|~[A-Za-z]")
for name, ls in (("train.en", train_en), ("train.de", train_de), ("test.en", test_en),
                 ("test.de", test_de)):
    for i, s in enumerate(ls, 1):
        if not s.strip() or s != s.strip() or s.splitlines() != [s]:
            fail(f"{name}:{i}: empty, padded or broken line {s!r}")
        if bad.search(s):
            fail(f"{name}:{i}: format string, tab or accelerator: {s!r}")
        if len(s.split()) < 3:
            fail(f"{name}:{i}: fewer than 3 words (default --min-words): {s!r}")
print("ok: no %s, {0}, tab, _X, &X or ~X; every line has >= 3 words")

train_en_set = {norm(s) for s in train_en}
train_de_set = {norm(s) for s in train_de}
for i, (e, d) in enumerate(zip(test_en, test_de), 1):
    if norm(e) in train_en_set:
        fail(f"test.en:{i} is also in train.en: {e!r}")
    if norm(d) in train_de_set:
        fail(f"test.de:{i} is also in train.de: {d!r}")
print("ok: no test sentence (English or German) occurs in train")

pairs = set(zip(train_en, train_de)) | set(zip(test_en, test_de))
if (en, de) not in pairs:
    fail(f"the Ding example pair {de!r} / {en!r} is in neither train nor test")
print(f"ok: found the Ding example {de!r} / {en!r}")

s = json.load(open(f"{a}/summary.json", encoding="utf-8"))
src = s["sources"]
if s["seed"] != 1 or s["test"] != n or s["train"] != len(train_en):
    fail(f"summary.json seed/test/train {s['seed']}/{s['test']}/{s['train']}, expected 1/{n}/{len(train_en)}")
if src["ding"]["test"] != n or any(v["test"] for k, v in src.items() if k != "ding"):
    fail("summary.json: test pairs from a source other than ding")
if sum(v["train"] for v in src.values()) != len(train_en):
    fail("summary.json: the sources' train counts do not add up to train.en's lines")
for k, v in src.items():
    if v["read"] != v["train"] + v["test"] + sum(v["dropped"].values()):
        fail(f"summary.json: {k}: read {v['read']} != train + test + dropped")
if src["ding"]["package"] != "trans-de-en" or src["ding"]["version"] != version:
    fail(f"summary.json: ding package {src['ding']['package']} {src['ding']['version']}, expected trans-de-en {version}")
ding = src["ding"]["train"] + src["ding"]["test"]
if not 15000 <= ding <= 25000:
    fail(f"{ding} Ding sentence pairs; the dictionary has about 19,000 example sentences")
print("ok: summary.json adds up; " + ", ".join(f"{k} {v['train'] + v['test']} pairs" for k, v in src.items()))
EOF

echo "== errors"
expect_failure "missing --ding file" "$W/no-such-dictionary" \
  $PY "$TOOL" --output "$W/err" --ding "$W/no-such-dictionary"
expect_failure "--test-sentences above the Ding sentences" "--test-sentences 1000000" \
  $PY "$TOOL" --output "$W/err" --test-sentences 1000000 --catalogs
[ ! -e "$W/err/test.en" ] || fail "a failed run wrote $W/err/test.en"

echo "PASS"
