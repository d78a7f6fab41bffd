#!/usr/bin/env bash
# `scaletrain-data bleu` against tests/python/compute_bleu_port.py, a plain-Python port of MLPerf's
# Transformer BLEU (compute_bleu.py + metrics.compute_bleu), on the same files: real English and
# German text (GPL-3 from base-files; German from coreutils' and dpkg's catalogues where installed,
# and a built-in paragraph) perturbed deterministically into hypotheses; the tokeniser's edges;
# line breaks Python's splitlines knows; a short corpus (brevity penalty); corpora without 4-gram
# or without any n-gram match (smoothing); identical files (100); empty files (0 with a note).
# Scores agree to 1e-4 (the reference's float32), counts and lengths exactly. Errors (different
# line counts, a missing file, invalid UTF-8) exit non-zero naming the file, in both programs.
source "$(dirname "$0")/lib.sh"
SOURCE=${ST_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}
PORT=$SOURCE/tests/python/compute_bleu_port.py
T=$TMP_ROOT/bleu
BLEU=("$(readlink -f "$BIN/scaletrain-data")" bleu)
[ -x "${BLEU[0]}" ] || fail "no $BIN/scaletrain-data (build it first)"
rm -rf "$T" && mkdir -p "$T"
cd "$T"

echo "== writing the cases"
$PY - <<'PY'
import glob, gettext, random

rng = random.Random(20140527)


def write(name, hyp, ref, hyp_text=None, ref_text=None):
    with open(name + ".hyp", "w", encoding="utf-8", newline="") as f:
        f.write(hyp_text if hyp_text is not None else "\n".join(hyp) + "\n")
    with open(name + ".ref", "w", encoding="utf-8", newline="") as f:
        f.write(ref_text if ref_text is not None else "\n".join(ref) + "\n")


def clean(lines):
    """Whitespace-only lines emptied, none at either end (the texts are stripped)."""
    lines = [l if l.strip() else "" for l in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


EXTRA = ["ΟΔΟΣ", "ΣΑΣ", "Σ.", "İstanbul", "İ", "1.000,50", "2014.", "3,5%", "€12", "(siehe 4.2)", "«Ja»,",
         "„Nein“", "–", "...", "!", "?", ",", "e-mail", "ǅemal", "ß", "ẞ", "Ärger", "x²", "٣,٤"]


def perturb(line, vocabulary):
    if not line:
        return line
    words = line.split(" ")
    for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
        op = rng.randrange(9)
        i = rng.randrange(len(words))
        if op == 0 and len(words) > 1:
            del words[i]
        elif op == 1 and i + 1 < len(words):
            words[i], words[i + 1] = words[i + 1], words[i]
        elif op == 2:
            words[i] = words[i].upper()
        elif op == 3:
            words[i] = words[i].title()
        elif op == 4:
            words = [w.lower() for w in words]
        elif op == 5:
            words[i] = words[i] + rng.choice([",", ".", "!", ";", ":", "?", ")", "\"", "'s", "-"])
        elif op == 6:
            words.insert(i, rng.choice(EXTRA))
        elif op == 7:
            words[i] = rng.choice(vocabulary)
        else:
            words.insert(i, str(rng.randrange(100000)) + rng.choice(["", ".", ",5", "%", " €"]))
    out = " ".join(words)
    return out if out.strip() else line


def corpus(name, ref):
    vocabulary = " ".join(ref).split() or ["x"]
    write(name, [perturb(l, vocabulary) for l in ref], ref)
    return ref


english = clean(open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read().splitlines())
corpus("gpl_en", english)

german = """Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung aller staatlichen Gewalt.
Jeder hat das Recht auf die freie Entfaltung seiner Persönlichkeit, soweit er nicht die Rechte anderer verletzt.
Ärzte, Übersetzer und Straßenbahnfahrer trafen sich am 3. Oktober 1990 in Köln – um 14.30 Uhr.
„Wer A sagt, muss nicht B sagen“, sagte sie. »Er kann auch erkennen, dass A falsch war.«
Die Preise stiegen um 2,5 % auf 1.234,56 € (netto); das Ziel für 2024 lag bei 3 %.
ÜBER DIE GROSSE BRÜCKE FUHREN 12 LKW, 7 Busse und 1 Fahrrad.
Ein Beispiel: „Grüße aus Göttingen!“ – so stand es auf der Postkarte.
Die Straße heißt „Am Schloßgarten“, nicht Schlossgarten.""".splitlines()
for mo in ["coreutils", "dpkg", "bash", "apt"]:
    for path in glob.glob("/usr/share/locale/de/LC_MESSAGES/%s.mo" % mo):
        try:
            catalog = gettext.GNUTranslations(open(path, "rb"))._catalog
        except Exception:
            continue
        for key, text in sorted((str(k), v) for k, v in catalog.items() if k):
            german += text.splitlines()
german = clean(german[:1200])
corpus("german", german)

# The tokeniser's edges: hypotheses as written, references spaced naively around every
# non-alphanumeric character, so that the counts depend on where bleu_tokenize splits.
edges = ["Test0, 1 two, 3", "a,,b and x,,,y", "a.,1 1.,2 ,1 1, 2", "1,000.5 and 3.14 but 2014.", "10% of $5 is 3€",
         "a\\b c\\ \\d", "(a) [b] {c} <d>", "«Ja», sagte er. „Nein“ – »doch«!", "e-mail 1-2 x-1 1-x",
         "¿Qué? ¡Sí! ¿¡no!?", "ΟΔΟΣ ΣΑ ΟΔΟΣ. ΣΣ", "İSTANBUL İ i̇", "ǅemal ǈ ǋ", "a\u3000b\u00a0c\u2009d\x1fe\u205ff",
         "٣,٤ ٣.٤ x٣,", "x² ½ Ⅳ ①", "👍🏽 ok 👍", "a+b=c <=> d|e ~f^g `h`", "@user #tag & co. *bold*",
         "'quoted' \"double\" ‚low‘", "…ellipsis… and -- dashes —", "%d %s %%", "\t tab\tseparated \t"]
spaced = []
for e in edges:
    out = "".join(c if c.isalnum() or c.isspace() else " " + c + " " for c in e)
    spaced.append(" ".join(out.split()))
write("edges", edges, spaced)
write("edges_swapped", spaced, edges)

# Line breaks: \r\n, \r, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029 in the hypotheses, \n in the
# references; white space (U+3000, \x1f, tabs) around the text, which strip() removes.
breaks = ["\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\n"]
lines = german[:40]
hyp = [perturb(l, lines) for l in lines]
text = "\u3000\n\t \x1f" + "".join(l + breaks[i % len(breaks)] for i, l in enumerate(hyp[:-1])) + hyp[-1] + "\r\n\x1f \n"
write("linebreaks", None, lines, hyp_text=text)

# Brevity penalty: two words in five dropped.
short = []
for l in english:
    words = l.split()
    kept = [w for i, w in enumerate(words) if i % 5 not in (1, 3)] or words[:1]
    short.append(" ".join(kept))
write("brevity", short, english)

# No 4-gram matches: in text of letters only (one word, one token), a token foreign to the
# references after every third word (3-grams still match); and nothing beyond unigrams matching
# (every order smoothed, the factor doubling).
letters = clean([" ".join(w for w in l.split() if w.isalpha()) for l in english])
no4 = []
for l in letters:
    words = l.split()
    no4.append(" ".join(w + (" zzzq" if i % 3 == 2 else "") for i, w in enumerate(words)))
write("no_4grams", no4, letters)
write("unigrams_only", ["the a of", "or and to"], ["of a the", "to and or"])

# Identical files score 100; case matters only to the cased score.
write("identical", english, english)
# (ASCII letters only: "ß".upper() is "SS", which does not lower back.)
write("case_only", ["".join(c.upper() if c.isascii() else c for c in l) for l in german[:50]], german[:50])
PY
printf '' >empty.hyp
printf ' \n\n\t\n' >empty.ref
cases=(gpl_en german edges edges_swapped linebreaks brevity no_4grams unigrams_only identical case_only empty)
echo "ok: ${#cases[@]} cases"

echo "== scaletrain-data bleu on each"
start=$EPOCHREALTIME
for c in "${cases[@]}"; do
  "${BLEU[@]}" --hypotheses "$c.hyp" --references "$c.ref" --cased --json >"$c.cpp.json" 2>"$c.cpp.err" ||
    fail "$c: scaletrain-data bleu failed: $(cat "$c.cpp.err")"
done
echo "ok: ${#cases[@]} cases scored in $(awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $start }") s"

echo "== the port on the same files, compared"
$PY - "$SOURCE/tests/python" "${cases[@]}" <<'PY' || fail "scaletrain-data bleu and the Python port differ (above)"
import json, sys
sys.path.insert(0, sys.argv[1])
import compute_bleu_port as port

bad = []
worst = 0.0
identical_text = 0
for case in sys.argv[2:]:
    cpp = json.load(open(case + ".cpp.json"))
    with open(case + ".cpp.json") as f:
        cpp_text = f.read()
    out = {"hypotheses": case + ".hyp", "references": case + ".ref"}
    for variant, cased in (("uncased", False), ("cased", True)):
        p = port.bleu_wrapper(case + ".ref", case + ".hyp", cased)
        out["lines"] = p["lines"]
        out[variant] = port.score_json(p)
        c = cpp[variant]
        where = "%s (%s)" % (case, variant)
        worst = max(worst, abs(c["bleu"] - p["bleu"]))
        if abs(c["bleu"] - p["bleu"]) > 1e-4:
            bad.append("%s: BLEU %r here, %r in the port" % (where, c["bleu"], p["bleu"]))
        for key in ("hyp_len", "ref_len", "matches", "possible"):
            if c[key] != p[key]:
                bad.append("%s: %s %r here, %r in the port" % (where, key, c[key], p[key]))
        for key in ("precisions", "brevity_penalty", "geo_mean"):
            a = c[key] if isinstance(c[key], list) else [c[key]]
            b = p[key] if isinstance(p[key], list) else [p[key]]
            if any(abs(x - y) > 1e-12 * max(1.0, abs(y)) for x, y in zip(a, b)):
                bad.append("%s: %s %r here, %r in the port" % (where, key, c[key], p[key]))
        if (c["note"] is None) != (p["note"] is None):
            bad.append("%s: note %r here, %r in the port" % (where, c["note"], p["note"]))
    if cpp["lines"] != out["lines"]:
        bad.append("%s: %d lines here, %d in the port" % (case, cpp["lines"], out["lines"]))
    identical_text += port.dump_json(out) + "\n" == cpp_text
    print("  %-14s %5d lines  uncased %-20r cased %-20r  hyp/ref %d/%d  4-gram matches %d" % (
        case, cpp["lines"], cpp["uncased"]["bleu"], cpp["cased"]["bleu"], cpp["uncased"]["hyp_len"],
        cpp["uncased"]["ref_len"], cpp["uncased"]["matches"][3]))

# What each case is there for.
def u(case):
    return json.load(open(case + ".cpp.json"))["uncased"]
checks = [
    ("identical scores 100", u("identical")["bleu"] == 100.0),
    ("case_only: uncased 100", u("case_only")["bleu"] == 100.0),
    ("case_only: cased below 100", json.load(open("case_only.cpp.json"))["cased"]["bleu"] < 100.0),
    ("brevity: penalty below 1", u("brevity")["brevity_penalty"] < 1.0),
    ("no_4grams: 3-grams match, 4-grams do not",
     u("no_4grams")["matches"][2] > 0 and u("no_4grams")["matches"][3] == 0 and u("no_4grams")["possible"][3] > 0),
    ("unigrams_only: orders 2-4 smoothed", u("unigrams_only")["matches"][1:] == [0, 0, 0]
     and u("unigrams_only")["precisions"][1:] == [1 / (2 * 4), 1 / (4 * 2), 0.0]),
    ("empty: 0 with a note", u("empty")["bleu"] == 0.0 and u("empty")["note"] is not None),
    ("real text scores between 10 and 95", all(10 < u(c)["bleu"] < 95 for c in ("gpl_en", "german", "linebreaks"))),
]
for what, ok in checks:
    if not ok:
        bad.append("check failed: " + what)
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("ok: %d cases agree (largest BLEU difference %.3g); the JSON text is identical for %d of them"
      % (len(sys.argv) - 2, worst, identical_text))
PY
grep -qF "hypotheses hold no token" empty.cpp.err || fail "empty: no note on stderr: $(cat empty.cpp.err)"
echo "ok: empty files give BLEU 0 with a note ($(cat empty.cpp.err))"

echo "== the printed scores, as the reference prints them"
for c in german; do
  ours=$("${BLEU[@]}" --hypotheses "$c.hyp" --references "$c.ref" --cased 2>/dev/null) || fail "$c: text output failed"
  theirs=$($PY "$PORT" --hypotheses "$c.hyp" --references "$c.ref" --cased 2>/dev/null) || fail "$c: the port failed"
  $PY - "$ours" "$theirs" <<'PY' || fail "$c: printed scores differ: '$ours' here, '$theirs' in the port"
import re, sys
ours, theirs = (s.splitlines() for s in sys.argv[1:3])
assert [l.split(": ")[0] for l in ours] == ["Case-insensitive results", "Case-sensitive results"], ours
assert [l.split(": ")[0] for l in ours] == [l.split(": ")[0] for l in theirs], theirs
assert all(re.fullmatch(r"[0-9]+\.[0-9]+(e-[0-9]+)?", l.split(": ")[1]) for l in ours), ours
assert all(abs(float(a.split(": ")[1]) - float(b.split(": ")[1])) <= 1e-4 for a, b in zip(ours, theirs))
PY
  echo "ok: $c: $(tr '\n' ' ' <<<"$ours")"
done
[ "$("${BLEU[@]}" --hypotheses identical.hyp --references identical.ref)" = "Case-insensitive results: 100.0" ] ||
  fail "identical files without --cased: not exactly 'Case-insensitive results: 100.0'"
$PY "$PORT" --hypotheses edges.hyp --references edges.ref --cased --json >edges.port.json
$PY -c 'import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:]); assert a.keys() == b.keys() and a["uncased"].keys() == b["uncased"].keys()' \
  edges.cpp.json edges.port.json || fail "the port's --json has other keys than scaletrain-data bleu --json"
echo "ok: the port's --json has the same layout"

echo "== errors"
printf 'one\ntwo\nthree\n' >three.txt
printf 'one\ntwo\n' >two.txt
printf 'good line\nstill good\nbad \xff byte here\n' >latin.txt
printf 'a\nb\nc\n' >abc.txt
expect_failure "different line counts" "three.txt has 3 lines but two.txt has 2" \
  "${BLEU[@]}" --hypotheses three.txt --references two.txt
expect_failure "missing hypotheses" "nothere.txt: cannot open" "${BLEU[@]}" --hypotheses nothere.txt --references two.txt
expect_failure "invalid UTF-8" "latin.txt line 3" "${BLEU[@]}" --hypotheses latin.txt --references abc.txt
expect_failure "invalid UTF-8 in the references" "latin.txt line 3" "${BLEU[@]}" --hypotheses abc.txt --references latin.txt
expect_failure "a directory" "is a directory" "${BLEU[@]}" --hypotheses "$T" --references abc.txt
expect_failure "usage" "'--references' is required" "${BLEU[@]}" --hypotheses abc.txt
rc=0
"${BLEU[@]}" --hypotheses abc.txt >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "a usage error exited $rc, not 2"
expect_failure "port: different line counts" "three.txt has 3 lines but two.txt has 2" \
  $PY "$PORT" --hypotheses three.txt --references two.txt
expect_failure "port: missing file" "nothere.txt: cannot open" $PY "$PORT" --hypotheses nothere.txt --references two.txt
expect_failure "port: invalid UTF-8" "latin.txt line 3" $PY "$PORT" --hypotheses latin.txt --references abc.txt

echo "== under mpirun: rank 0 prints once"
out=$(timeout 60 mpirun --oversubscribe -np 2 "${BLEU[@]}" --hypotheses gpl_en.hyp --references gpl_en.ref)
[ "$(grep -c "Case-insensitive results" <<<"$out")" -eq 1 ] || fail "2 ranks: expected one score line: $out"
echo "ok: $out"
# A missing file under mpirun: rank 0's error, agreed by both ranks, printed once.
expect_agreed_failure "2 ranks, a missing file" "nothere.txt: cannot open" \
  mpirun --oversubscribe -np 2 "${BLEU[@]}" --hypotheses nothere.txt --references two.txt
echo "PASS: bleu"
