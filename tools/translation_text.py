#!/usr/bin/env python3
"""English-German sentence pairs from Debian packages, for the Transformer (docs/translation-text.md).

Reads the Ding dictionary (package trans-de-en, /usr/share/trans/de-en) and German gettext catalogs
(.mo files: /usr/share/locale/de/LC_MESSAGES and, from libreoffice-l10n-de,
/usr/lib/libreoffice/program/resource/de/LC_MESSAGES), keeps sentence pairs, and writes in --output:

  train.en train.de   aligned, one sentence per line (line i of .en translates line i of .de)
  test.en  test.de    --test-sentences pairs drawn from the Ding example sentences only, chosen by
                      --seed; none of their English or German sentences occurs in train
  summary.json        counts per source (read, test, train, dropped by reason), package versions

For every source: read == train + test + sum(dropped). Standard library only.
"""

import argparse
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import time

DING_DEFAULT = "/usr/share/trans/de-en"
GETTEXT_DEFAULT = "/usr/share/locale/de/LC_MESSAGES"
LIBREOFFICE_DEFAULT = "/usr/lib/libreoffice/program/resource/de/LC_MESSAGES"
MAX_CHARS = 300  # a pair with a longer side is dropped (too_long)
MAX_RATIO = 3.0  # nor one whose longer side has over 3x the characters of the shorter (length_ratio)
RATIO_MIN_CHARS = 20  # ... when the longer side has at least this many characters


class Fail(Exception):
    pass


def norm_space(s):
    """Every run of whitespace (tabs, newlines, NBSP, U+2028, ...) becomes one space; trimmed."""
    return " ".join(s.split())


def key(s):
    """Comparison form: whitespace normalised, case folded."""
    return norm_space(s).casefold()


def words(s):
    return sum(1 for t in s.split() if any(c.isalnum() for c in t))


# ---------------------------------------------------------------------------------------------
# Checks every pair passes, whatever its source.

ACCEL_LEFT = re.compile(r"_[^\W_]|&[^\W\d_]|~[^\W_]")
# Control and invisible characters: C0/C1 controls, soft hyphen, zero-width and direction marks,
# line/paragraph separators, word joiners, BOM, private use, surrogates.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u206f"
                     "\ufeff\ue000-\uf8ff\ud800-\udfff]")


def common_checks(en, de):
    """(en, de) normalised, or (None, reason)."""
    if CONTROL.search(en) or CONTROL.search(de):
        return None, "control_chars"
    en, de = norm_space(en), norm_space(de)
    if not en or not de:
        return None, "empty"
    if ACCEL_LEFT.search(en) or ACCEL_LEFT.search(de):
        return None, "accelerator"
    if key(en) == key(de):
        return None, "untranslated"
    if len(en) > MAX_CHARS or len(de) > MAX_CHARS:
        return None, "too_long"
    lo, hi = sorted((len(en), len(de)))
    if hi >= RATIO_MIN_CHARS and hi > MAX_RATIO * lo:
        return None, "length_ratio"
    return (en, de), None


# ---------------------------------------------------------------------------------------------
# Ding: "German :: English"; both sides split by " | " into aligned entries, each a list of
# alternatives separated by ";"; annotations in {} [] ().

OPEN_QUOTES = "\"'„‚“‘»«¡¿"
CLOSE_QUOTES = "\"'“”‘’»«"
DING_PLACEHOLDER = re.compile(r"\b(?:jd|jdm|jdn|jds|etw|sb|sth)\.|\bsb['’]s\b")
SENTENCE_END = re.compile(r"[.!?][" + re.escape(CLOSE_QUOTES) + r")]*$")
# Fast reject of headwords: a sentence ends in . ! ? (then closing quotes, and maybe [labels] or
# (notes) that ding_sentence removes).
MAYBE_SENTENCE = re.compile(r"[.!?][" + re.escape(CLOSE_QUOTES) + r")]*"
                            r"(?:\s*(?:\[[^\[\]]*\]|\([^()]*\)))*\s*$")
ACRONYM = re.compile(r"(?:^|\s+)/[\w.]+/(?=\s|$)")  # chat acronyms and abbreviations: "/SCNR/", "/wzbw./"
PARENS = re.compile(r"\s*\([^()]*\)")
LABELS = re.compile(r"\s*\[[^\[\]]*\]")
GLUED_PARENS = re.compile(r"\w\(|\)\w")
SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,!?;:])")
SPACED_SLASH = re.compile(r"\s/|/\s")
WORD_SLASH = re.compile(r"([^\W\d_][\w’'-]*)(?:/[^\W\d_][\w’'-]*)+")
DIGIT_SLASHES_ONLY = re.compile(r"[^/]*(?:\d/\d[^/]*)*")


def strip_parens(s):
    """Removes (...) with its content, innermost first; None where one is unbalanced."""
    prev = None
    while prev != s:
        prev = s
        s = PARENS.sub("", s)
    if "(" in s or ")" in s:
        return None
    return s


def ding_sentence(alt, min_words):
    """One alternative of a Ding entry as a sentence, or (None, reason)."""
    s = alt.strip()
    if "/" in s:
        s = ACRONYM.sub("", s)
    if not MAYBE_SENTENCE.search(s):
        return None, "not_sentence"
    s = LABELS.sub("", s)  # usage labels: [ugs.] [Br.] [Am.] [techn.] ...
    # An optional part glued to a word ("(k)eine", "lass(t)", "criticism(s)"): taking either
    # reading can change the meaning, so the sentence goes.
    if GLUED_PARENS.search(s):
        return None, "optional_letters"
    s = strip_parens(s)  # optional words: "fast (gar) nicht" -> "fast nicht"
    if s is None:
        return None, "unbalanced_brackets"
    s = norm_space(s)
    s = SPACE_BEFORE_PUNCT.sub(r"\1", s)  # "verloren (für jdn.)." -> "verloren."
    body = s.lstrip(OPEN_QUOTES)
    if not body or not (body[0].isupper() or body[0].isdigit()) or not SENTENCE_END.search(s):
        return None, "not_sentence"
    if "{" in s or "}" in s:
        return None, "grammar_tag"
    if "…" in s or "..." in s:
        return None, "ellipsis"
    if DING_PLACEHOLDER.search(s):
        return None, "placeholder"
    if SPACED_SLASH.search(s):  # "grow out of this habit / outgrow this habit": scope unclear
        return None, "slash_alternatives"
    # word/word/word -> the first reading ("gleich/ergibt/macht zwei" -> "gleich zwei")
    s = WORD_SLASH.sub(r"\1", s)
    if "/" in s and not DIGIT_SLASHES_ONLY.fullmatch(s):
        return None, "slash_alternatives"
    if words(s) < min_words:
        return None, "too_few_words"
    return s, None


def read_ding(path, min_words, stats):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            stats["lines"] += 1
            parts = line.split(" :: ")
            if len(parts) != 2:
                stats["read"] += 1
                stats["dropped"]["malformed_line"] += 1
                continue
            de_entries, en_entries = parts[0].split(" | "), parts[1].split(" | ")
            if len(de_entries) != len(en_entries):
                n = max(len(de_entries), len(en_entries))
                stats["read"] += n
                stats["dropped"]["misaligned"] += n
                continue
            for de_entry, en_entry in zip(de_entries, en_entries):
                stats["read"] += 1
                sides = []
                reason = None
                for entry in (en_entry, de_entry):
                    first_reason = None
                    chosen = None
                    for alt in entry.split(";"):
                        s, why = ding_sentence(alt, min_words)
                        if s is not None:
                            chosen = s
                            break
                        first_reason = first_reason or why
                    if chosen is None:
                        reason = first_reason
                        break
                    sides.append(chosen)
                if reason is None:
                    pair, reason = common_checks(sides[0], sides[1])
                if reason is not None:
                    stats["dropped"][reason] += 1
                    continue
                pairs.append(pair)
    return pairs


# ---------------------------------------------------------------------------------------------
# gettext .mo catalogs: msgid English, msgstr German.


def read_mo(path):
    """[(msgid bytes, msgstr bytes)] of a GNU .mo file (either byte order)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 20:
        raise Fail(f"{path}: not a .mo file (too short)")
    magic = struct.unpack("<I", data[:4])[0]
    if magic == 0x950412DE:
        order = "<"
    elif magic == 0xDE120495:
        order = ">"
    else:
        raise Fail(f"{path}: not a .mo file (magic {magic:#x})")
    _rev, n, orig, trans = struct.unpack(order + "4I", data[4:20])
    out = []
    try:
        for i in range(n):
            ln, off = struct.unpack_from(order + "2I", data, orig + 8 * i)
            msgid = data[off:off + ln]
            ln, off = struct.unpack_from(order + "2I", data, trans + 8 * i)
            out.append((msgid, data[off:off + ln]))
    except struct.error:
        raise Fail(f"{path}: truncated .mo file")
    return out


def mo_charset(entries):
    for msgid, msgstr in entries:
        if msgid == b"":
            m = re.search(rb"charset=([A-Za-z0-9_.:-]+)", msgstr)
            if m:
                return m.group(1).decode("ascii")
    return "utf-8"


FORMAT = re.compile(
    r"%(?:\.[\d*]|[^\s.,;:!?)\]'\"»«“”’])"  # %s %d %1$s %(name)s %-10s %PRODUCTNAME %1 %%
    r"|\{[^{}]*\}|[{}]"                   # {0} {name} {}
    r"|\$[\w{(]"                          # $VAR ${var} $(ARG1)
)
MARKUP = re.compile(r"[<>]|&#?\w+;")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://|\bwww\.\w|\bmailto:|[\w.+-]+@[\w-]+\.[A-Za-z]{2,}", re.I)
PATH = re.compile(
    r"(?:^|[\s\"'(»«„“‘])(?:~|\.\.?)?/[\w.~-]"  # /etc/passwd ./configure ~/.config
    r"|\w/[\w.-]+/\w"                           # usr/share/doc
    r"|\\"                                      # C:\Windows, \n written out
    r"|\b[\w-]+\.(?:txt|conf|cfg|ini|json|xml|html?|po|mo|so|sh|py|c|h|cpp|deb|rpm|tar|gz|zip)\b",
    re.I)
OPTION = re.compile(r"(?:^|\s)--?[A-Za-z]")
CODE = re.compile(r"[=|`@#]|::|->|\(\)|\[\]")


ACCEL_TILDE_AMP = re.compile(r"~(?=[^\W_])|&(?=[^\W\d_])")  # LibreOffice ~Save, Qt/KDE &Open
ACCEL_UNDERSCORE = re.compile(r"_(?=[^\W_])")  # GTK: _File, Horizont_al
UNDERSCORED = re.compile(r"\S*_\S*")
NEWLINE_TAB = re.compile(r"[\n\r\t\v\f]")
TRAILING_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…)$")


def remove_accelerators(en, de):
    """(en, de) with ~X &X _X markers removed, or (None, 'code') where an underscore is part of an
    identifier (several of them, or the same underscored word on both sides)."""
    en, de = ACCEL_TILDE_AMP.sub("", en), ACCEL_TILDE_AMP.sub("", de)
    if "_" in en:
        if en.count("_") > 1 or any(t in de for t in UNDERSCORED.findall(en)):
            return None, "code"
    if de.count("_") > 1:
        return None, "code"
    en, de = ACCEL_UNDERSCORE.sub("", en), ACCEL_UNDERSCORE.sub("", de)
    if "_" in en or "_" in de:
        return None, "code"
    return (en, de), None


def gettext_sentence(s, min_words):
    """Reason a cleaned catalog string is not sentence-like, or None."""
    if not (s[0].isalnum() or s[0] in OPEN_QUOTES):
        return "not_sentence"
    if s[-1] in ":,;-–—/(+*":  # labels ("Name:") and fragments
        return "not_sentence"
    letters = sum(1 for c in s if c.isalpha())
    if letters < 0.6 * sum(1 for c in s if not c.isspace()):
        return "not_sentence"
    if words(s) < min_words:
        return "too_few_words"
    return None


def clean_catalog_entry(msgid, msgstr, min_words):
    """(en, de) or (None, reason) for one decoded catalog entry (context already removed)."""
    en, de = msgid.strip(), msgstr.strip()  # a trailing "\n" of command-line messages goes
    if not de:
        return None, "untranslated"
    if NEWLINE_TAB.search(en) or NEWLINE_TAB.search(de):
        return None, "newline_or_tab"
    if words(en) < min_words or words(de) < min_words:
        return None, "too_few_words"
    for pattern, reason in ((FORMAT, "format_string"), (MARKUP, "markup"), (URL, "url"),
                            (PATH, "path"), (OPTION, "command_option")):
        if pattern.search(en) or pattern.search(de):
            return None, reason
    pair, reason = remove_accelerators(en, de)
    if pair is None:
        return None, reason
    en, de = pair
    if CODE.search(en) or CODE.search(de):
        return None, "code"
    # A trailing ellipsis ("Save As...", "Bitte warten …") belongs to the menu, not the sentence.
    en = TRAILING_ELLIPSIS.sub("", norm_space(en))
    de = TRAILING_ELLIPSIS.sub("", norm_space(de))
    if not en or not de:
        return None, "too_few_words"
    for s in (en, de):
        reason = gettext_sentence(s, min_words)
        if reason:
            return None, reason
    return common_checks(en, de)


def read_catalogs(directory, min_words, stats):
    """Pairs of every *.mo file under directory (sorted by name), and [(file, pairs kept)]."""
    files = sorted(f for f in os.listdir(directory) if f.endswith(".mo"))
    pairs, per_file = [], []
    for name in files:
        path = os.path.join(directory, name)
        entries = read_mo(path)
        charset = mo_charset(entries)
        kept = 0
        for msgid_b, msgstr_b in entries:
            stats["read"] += 1
            if msgid_b == b"":
                stats["dropped"]["header"] += 1
                continue
            if b"\x00" in msgid_b:
                stats["dropped"]["plural"] += 1
                continue
            try:
                msgid, msgstr = msgid_b.decode(charset), msgstr_b.decode(charset)
            except (UnicodeDecodeError, LookupError):
                stats["dropped"]["decode_error"] += 1
                continue
            if "\x04" in msgid:  # msgctxt: keep the message, drop its context
                msgid = msgid.split("\x04", 1)[1]
                stats["context_removed"] += 1
            pair, reason = clean_catalog_entry(msgid, msgstr, min_words)
            if reason:
                stats["dropped"][reason] += 1
                continue
            pairs.append(pair)
            kept += 1
        per_file.append((path, kept))
    return pairs, per_file


# ---------------------------------------------------------------------------------------------
# Package versions (dpkg), for summary.json.


def owners(paths):
    """{path: package} from dpkg -S; {} where dpkg is missing."""
    out = {}
    paths = list(paths)
    for i in range(0, len(paths), 200):
        try:
            r = subprocess.run(["dpkg-query", "-S"] + paths[i:i + 200], capture_output=True,
                               text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return out
        for line in r.stdout.splitlines():
            if line.startswith("diversion ") or ": " not in line:
                continue
            pkgs, path = line.split(": ", 1)
            out[path] = pkgs.split(",")[0].split(":")[0].strip()
    return out


def versions(packages):
    out = {}
    packages = sorted(set(packages))
    if not packages:
        return out
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"] + packages,
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return out
    for line in r.stdout.splitlines():
        p, _, v = line.partition("\t")
        if v:
            out[p] = v
    return out


# ---------------------------------------------------------------------------------------------


def new_stats():
    from collections import Counter
    return {"read": 0, "dropped": Counter(), "context_removed": 0, "lines": 0}


def choose_test(ding_pairs, n, seed):
    """n pairs from ding_pairs, none sharing an English or German sentence (by key()). The order
    is a hash of (seed, pair), so the same dictionary and seed give the same test set anywhere."""
    def rank(p):
        return hashlib.sha256(f"{seed}\x00{p[0]}\x00{p[1]}".encode("utf-8")).digest()
    test, used_en, used_de = [], set(), set()
    for p in sorted(ding_pairs, key=lambda p: (rank(p), p)):
        if len(test) == n:
            break
        ke, kd = key(p[0]), key(p[1])
        if ke in used_en or kd in used_de:
            continue
        test.append(p)
        used_en.add(ke)
        used_de.add(kd)
    return test


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for s in lines:
            f.write(s + "\n")


def main(argv):
    ap = argparse.ArgumentParser(
        description="Extract English-German sentence pairs from the Ding dictionary (trans-de-en) "
                    "and German gettext catalogs. See docs/translation-text.md.")
    ap.add_argument("--output", required=True, metavar="DIR",
                    help="writes train.en train.de test.en test.de summary.json here (created)")
    ap.add_argument("--test-sentences", type=int, default=500, metavar="N",
                    help="test pairs, from the Ding example sentences only (default 500)")
    ap.add_argument("--seed", type=int, default=0, help="chooses the test pairs (default 0)")
    ap.add_argument("--ding", default=DING_DEFAULT, metavar="FILE",
                    help=f"Ding dictionary file (default {DING_DEFAULT}, package trans-de-en)")
    ap.add_argument("--catalogs", nargs="*", metavar="DIR", default=None,
                    help=f"directories of German .mo files (default {GETTEXT_DEFAULT} and "
                         f"{LIBREOFFICE_DEFAULT} where installed); --catalogs alone: none")
    ap.add_argument("--min-words", type=int, default=3, metavar="K",
                    help="fewest words on each side of a pair (default 3)")
    args = ap.parse_args(argv)
    if args.test_sentences < 0:
        raise Fail(f"--test-sentences must be >= 0, got {args.test_sentences}")
    if args.min_words < 1:
        raise Fail(f"--min-words must be >= 1, got {args.min_words}")
    if not os.path.isfile(args.ding):
        hint = (" (package trans-de-en: `make deps` or tools/install-deps.sh installs it)"
                if args.ding == DING_DEFAULT else "")
        raise Fail(f"--ding {args.ding}: no such file{hint}")
    notes = []
    if args.catalogs is None:
        catalog_dirs = [GETTEXT_DEFAULT]
        if os.path.isdir(LIBREOFFICE_DEFAULT):
            catalog_dirs.append(LIBREOFFICE_DEFAULT)
        else:
            notes.append(f"note: {LIBREOFFICE_DEFAULT} not found (package libreoffice-l10n-de, "
                         "`make deps` installs it): LibreOffice catalogs skipped")
    else:
        catalog_dirs = args.catalogs
    for d in catalog_dirs:
        if not os.path.isdir(d):
            raise Fail(f"--catalogs {d}: no such directory")

    t0 = time.time()
    sources = []  # (name, path, stats, pairs)
    ding_stats = new_stats()
    ding_pairs = read_ding(args.ding, args.min_words, ding_stats)
    # One copy of each pair (by key()) within the dictionary before the test set is chosen.
    seen, unique = set(), []
    for p in ding_pairs:
        k = (key(p[0]), key(p[1]))
        if k in seen:
            ding_stats["dropped"]["duplicate"] += 1
            continue
        seen.add(k)
        unique.append(p)
    ding_pairs = unique
    test = choose_test(ding_pairs, args.test_sentences, args.seed)
    if len(test) < args.test_sentences:
        raise Fail(f"--test-sentences {args.test_sentences}: only {len(test)} Ding example "
                   f"sentence pairs with distinct sentences are available in {args.ding}")
    test_set = set(test)
    ding_stats["test"] = len(test)
    sources.append(("ding", args.ding, ding_stats, [p for p in ding_pairs if p not in test_set]))

    names = set()
    catalog_files = {}
    for d in catalog_dirs:
        name = "libreoffice" if "libreoffice" in d else "gettext"
        base, i = name, 2
        while name in names:
            name, i = f"{base}{i}", i + 1
        names.add(name)
        stats = new_stats()
        stats["test"] = 0
        pairs, per_file = read_catalogs(d, args.min_words, stats)
        catalog_files[name] = per_file
        sources.append((name, d, stats, pairs))

    # Train: every source's pairs in order, one copy of each pair (by key()), none sharing an
    # English or German sentence with the test set.
    test_en = {key(p[0]) for p in test}
    test_de = {key(p[1]) for p in test}
    seen = {(key(p[0]), key(p[1])) for p in test}
    train = []
    for name, path, stats, pairs in sources:
        n = 0
        for p in pairs:
            ke, kd = key(p[0]), key(p[1])
            if (ke, kd) in seen:
                stats["dropped"]["duplicate"] += 1
                continue
            seen.add((ke, kd))
            if ke in test_en or kd in test_de:
                stats["dropped"]["test_overlap"] += 1
                continue
            train.append(p)
            n += 1
        stats["train"] = n
    elapsed = time.time() - t0

    # Package versions of the sources.
    files = [os.path.realpath(args.ding)]
    for per_file in catalog_files.values():
        files += [os.path.realpath(p) for p, _ in per_file]
    own = owners(files)
    vers = versions(own.values())

    os.makedirs(args.output, exist_ok=True)
    write_lines(os.path.join(args.output, "train.en"), [p[0] for p in train])
    write_lines(os.path.join(args.output, "train.de"), [p[1] for p in train])
    write_lines(os.path.join(args.output, "test.en"), [p[0] for p in test])
    write_lines(os.path.join(args.output, "test.de"), [p[1] for p in test])

    summary = {"seed": args.seed, "test_sentences": args.test_sentences,
               "min_words": args.min_words, "max_chars": MAX_CHARS, "max_length_ratio": MAX_RATIO,
               "dedup": "pair (whitespace-normalised, case-folded); a repeated English sentence "
                        "keeps each distinct German translation",
               "train": len(train), "test": len(test), "sources": {}}
    for name, path, stats, _ in sources:
        entry = {"path": path, "read": stats["read"], "test": stats["test"],
                 "train": stats["train"], "dropped": dict(sorted(stats["dropped"].items()))}
        assert entry["read"] == entry["test"] + entry["train"] + sum(entry["dropped"].values()), name
        if name == "ding":
            pkg = own.get(os.path.realpath(path))
            entry["lines"] = stats["lines"]
            entry["package"] = pkg
            entry["version"] = vers.get(pkg)
        else:
            entry["contexts_removed"] = stats["context_removed"]
            pkgs = {}
            entry["catalogs"] = []
            for f, kept in catalog_files[name]:
                pkg = own.get(os.path.realpath(f))
                entry["catalogs"].append({"file": os.path.basename(f), "package": pkg,
                                          "version": vers.get(pkg), "pairs": kept})
                if pkg:
                    pkgs[pkg] = vers.get(pkg)
            entry["packages"] = dict(sorted(pkgs.items()))
        summary["sources"][name] = entry
    with open(os.path.join(args.output, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, ensure_ascii=False)
        f.write("\n")

    for line in notes:
        print(line)
    for name, path, stats, _ in sources:
        e = summary["sources"][name]
        top = sorted(e["dropped"].items(), key=lambda kv: -kv[1])[:4]
        what = f"{e['package']} {e['version']}" if name == "ding" else \
            f"{len(e['catalogs'])} catalogs"
        print(f"{name:<12} {path} ({what}): {e['read']} read, {e['train']} train, {e['test']} test;"
              f" dropped {sum(e['dropped'].values())} ("
              + ", ".join(f"{k} {v}" for k, v in top) + ")")
    print(f"total        {len(train)} train pairs, {len(test)} test pairs (seed {args.seed}) in "
          f"{args.output} ({elapsed:.1f} s)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Fail as e:
        print(f"translation_text: error: {e}", file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        print(f"translation_text: error: {e}", file=sys.stderr)
        sys.exit(1)
