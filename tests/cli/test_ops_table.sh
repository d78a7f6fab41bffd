#!/usr/bin/env bash
# docs/ops.md's op x device table is the program's (`scaletrain info --ops`, from the op registry):
# a kernel added or removed without regenerating the doc fails here, naming the rows that differ.
# And `scaletrain info --json` lists each model's ops with the devices that have them all.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/ops_table
rm -rf "$T" && mkdir -p "$T"
doc=${ST_SOURCE:?}/docs/ops.md
sed -n '/^<!-- table -->$/,$p' "$doc" | tail -n +2 >"$T/doc.md"
"$BIN/scaletrain" info --ops >"$T/program.md"
diff "$T/doc.md" "$T/program.md" >"$T/diff" ||
  fail "docs/ops.md's table differs from 'scaletrain info --ops' (doc <, program >; regenerate it as docs/ops.md says): $(cat "$T/diff")"
rows=$(grep -c '^| `' "$T/program.md")
[ "$rows" -ge 31 ] || fail "the table has $rows ops"
echo "ok: docs/ops.md has the registry's $rows ops"

"$BIN/scaletrain" info --json >"$T/models.json"
# info --names (what the study tool asks, at once) lists the same models in the same order.
"$BIN/scaletrain" info --names >"$T/names.txt"
$PY -c 'import json, sys; print("\n".join(m["model"] for m in json.load(open(sys.argv[1]))))' "$T/models.json" |
  diff - "$T/names.txt" || fail "info --names differs from the models of info --json (above)"
$PY - "$T/models.json" "$T/program.md" <<'PY' || fail "info --json's ops (above)"
import json, sys
models = {m["model"]: m for m in json.load(open(sys.argv[1]))}
table = {}
for line in open(sys.argv[2]):
    if line.startswith("| `"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        table[cells[0].strip("`")] = {"cpu": cells[2] != "no", "cuda": cells[3] != "no"}
for name, m in models.items():
    assert m["ops"], f"{name} lists no ops"
    for op in m["ops"]:
        assert op in table, f"{name}'s op {op} is not in the registry"
    for device in ("cpu", "cuda"):
        has_all = all(table[op][device] for op in m["ops"])
        assert (device in m["devices"]) == has_all, (name, device, m["devices"])
    assert set(m["devices_in_this_build"]) <= set(m["devices"]), (name, m)
assert "cpu" in models["ncf"]["devices"] and "embedding_forward" in models["ncf"]["ops"]
assert "conv2d_backward_filter" in models["resnet50"]["ops"]
print("ok: info --json lists every model's ops and the devices that have them all:",
      {n: m["devices"] for n, m in models.items()})
PY
echo "PASS"
