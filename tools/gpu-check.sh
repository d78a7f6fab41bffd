#!/usr/bin/env bash
# gpu-check.sh OUT_DIR [ARCHIVE]: on a lent GPU machine, in the repository root, runs the whole GPU
# verification from a bundle made by tools/gpu-bundle.sh in one device call (docs/gpu.md).
#
# Unpacks ARCHIVE (default build/gpu-bundle.tar.xz) into a temporary folder; puts the bundle's
# libraries first on LD_LIBRARY_PATH, then the machine's CUDA (/usr/local/cuda/lib64, the
# nvidia-* libraries inside PyTorch's site-packages); relocates Open MPI into the bundle
# (OPAL_PREFIX; PMIx runs without its optional plugins); prints the GPU, driver, runtime and
# versions; then runs the parts in the order and with the time limits of tools/gpu-check-plan.tsv:
# two smoke tests (a CPU unit suite, mpirun -np 2), the tests of tests.sh (the ctest -L gpu list)
# and, with a GPU, the benchmarks of benches.sh; a part the plan does not list runs last.
# The whole script keeps to GPU_CHECK_BUDGET_S seconds (default 445), unpacking included: each part
# gets its plan limit or the time left, whichever is shorter, and a part with under 5 s left is
# not started (CUT). Writes env.txt, one log per part (joined in logs.txt, and one file each in
# logs.tar.gz), and summary.txt ("PASS|FAIL|SKIP|CUT kind:name seconds rc limit" a line, then the
# totals) into OUT_DIR: the device tool returns at most 8 files, so OUT_DIR holds four (more only
# where a benchmark writes its own figures there, as $OUT_DIR). Exit status 0 when nothing failed
# and nothing was cut.
# Without a GPU it says "no GPU visible" and still runs the gpu tests, which then skip.
# GPU_CHECK_TESTS=REGEX runs only the gpu tests whose names match; GPU_CHECK_BENCH=0 no benchmark,
# GPU_CHECK_BENCHES=REGEX only the benchmarks whose names match;
# GPU_CHECK_PLAN=FILE another plan; GPU_CHECK_LIMIT_SCALE=F multiplies its limits (a slower GPU).
set -uo pipefail

started=$(date +%s)
# The whole script's time, unpacking included: the call's 8 minutes less the machine's start and
# the bundle's transfer (about 35 s), so that the call ends in time even when parts hang. The
# plan's limits (1318 s in all) guard each part; the parts took 269 s together on an H100.
budget=${GPU_CHECK_BUDGET_S:-445}
deadline=$((started + budget))
out_dir=${1:?usage: gpu-check.sh OUT_DIR [ARCHIVE]}
archive=${2:-build/gpu-bundle.tar.xz}
[ -f "$archive" ] || { echo "gpu-check: no archive $archive (make it with tools/gpu-bundle.sh)" >&2; exit 2; }
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
REPO=$(pwd)
export REPO

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case "$archive" in
  *.tar.xz) xz -dc "$archive" | tar -C "$tmp" -xf - ;;
  *.tar.gz) tar -C "$tmp" -xzf "$archive" ;;
  *) echo "gpu-check: unknown archive type $archive" >&2; exit 2 ;;
esac
BUNDLE=$tmp/scaletrain-gpu-bundle
export BUNDLE

# The machine's CUDA: toolkit, then PyTorch's nvidia-* wheels (cuDNN, cuBLAS, NCCL, runtime).
cuda_dirs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && cuda_dirs="$cuda_dirs:$d"
done
nv_dirs=$(python3 -c '
import glob, os, site, sys
roots = []
try:
    import nvidia
    roots += list(nvidia.__path__)
except Exception:
    pass
for sp in site.getsitepackages() + [site.getusersitepackages()]:
    roots.append(os.path.join(sp, "nvidia"))
seen = []
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "*", "lib"))):
        if d not in seen:
            seen.append(d)
print(":".join(seen))
' 2>/dev/null || true)
[ -n "$nv_dirs" ] && cuda_dirs="$cuda_dirs:$nv_dirs"

# libstdc++ from the bundle only where the machine's is older than what our programs need.
need=$(sed -n 's/^glibcxx_needed: //p' "$BUNDLE/MANIFEST")
sys_stdcxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/{print $NF}' | head -1)
compat=""
if [ -n "$need" ] && { [ -z "$sys_stdcxx" ] || ! grep -aq "$need" "$sys_stdcxx"; }; then
  compat=":$BUNDLE/lib/compat"
fi
ompi_rel=$(sed -n 's/^ompi_rel_pkglib: //p' "$BUNDLE/MANIFEST")
ompi_libdir=$BUNDLE/ompi/$(dirname "$ompi_rel")
export LD_LIBRARY_PATH="$BUNDLE/lib$compat:$ompi_libdir$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX=$BUNDLE/ompi
export HWLOC_PLUGINS_PATH=$BUNDLE/lib/hwloc
export OMPI_MCA_mca_base_param_files=$BUNDLE/ompi/etc/openmpi-mca-params.conf
# The GPU image has a PMIx of its own whose plugins do not load into the bundle's (an undefined
# symbol, seen on the H200 image on 2026-11-26): harmless, but 30 lines of noise per mpirun.
export PMIX_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_pcompress_base_silence_warning=1
# The device machine runs commands as root; a CI machine may not.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH="$BUNDLE/bin:$BUNDLE/ompi/bin:$PATH"
export OUT_DIR=$out_dir

# Environment and versions.
{
  echo "date: $(date -u +%FT%TZ)  host: $(hostname)  repo: $REPO"
  echo "--- bundle MANIFEST (head)"; sed -n '1,/^lib /p' "$BUNDLE/MANIFEST" | head -8
  echo "--- LD_LIBRARY_PATH"; echo "$LD_LIBRARY_PATH" | tr ':' '\n'
  echo "--- libstdc++: machine $sys_stdcxx; bundle needs ${need:-?}; compat ${compat:+used}${compat:-not used}"
  echo "--- glibc: machine $(ldd --version 2>/dev/null | head -1 | awk '{print $NF}'), bundle built on $(sed -n 's/^glibc: //p' "$BUNDLE/MANIFEST")"
  echo "--- nvidia-smi"
  if command -v nvidia-smi >/dev/null && nvidia-smi >"$tmp/smi" 2>&1; then
    cat "$tmp/smi"
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
    gpu=yes
  else
    echo "no GPU visible (nvidia-smi absent or failed)"
    gpu=no
  fi
  echo "--- CUDA"
  [ -x /usr/local/cuda/bin/nvcc ] && /usr/local/cuda/bin/nvcc --version | tail -2
  for l in libcudart.so libcudnn.so libnccl.so libcublas.so; do
    hit=$(for d in $(echo "$cuda_dirs" | tr ':' ' '); do ls "$d/$l"* 2>/dev/null; done | head -1)
    echo "$l: ${hit:-not found}"
  done
  echo "--- python / torch"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 | tail -1
  echo "--- mpirun"; mpirun --version 2>&1 | head -1
  echo "--- ldd: libraries not found"
  for f in "$BUNDLE"/bin/*; do ldd "$f" 2>/dev/null | grep 'not found' | sed "s|^|$(basename "$f"): |"; done
  echo "(end)"
} >"$out_dir/env.txt" 2>&1
cat "$out_dir/env.txt"
grep -q '^no GPU visible' "$out_dir/env.txt" && echo "gpu-check: no GPU visible: the gpu tests should skip"

summary=$out_dir/summary.txt
: >"$summary"
: >"$out_dir/logs.txt"
mkdir -p "$tmp/logs"
pass=0; fail=0; skip=0; cut=0
# The deadline: every part's limit is its plan limit or the time left, whichever is shorter; a
# part with under 5 s left is not started (CUT). The call then ends in time whatever hangs.
remaining() { echo $(( deadline - $(date +%s) )); }
run_one() {  # kind name skip_code limit env command
  local kind=$1 name=$2 skip_code=$3 limit=$4 envs=$5 cmd=$6 log rc start secs verdict left
  left=$(remaining)
  if [ "$left" -lt 5 ]; then
    cut=$((cut + 1))
    echo "CUT $kind:$name 0s rc=- (${left}s left of GPU_CHECK_BUDGET_S=$budget)" | tee -a "$summary"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  log=$tmp/logs/$kind-$(echo "$name" | tr -c 'A-Za-z0-9._\n-' '_').log
  start=$(date +%s)
  ( eval "export $envs"; eval "timeout -k 5 $limit $cmd" ) >"$log" 2>&1 </dev/null
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then verdict=PASS; pass=$((pass + 1))
  elif [ -n "$skip_code" ] && [ "$rc" = "$skip_code" ]; then verdict=SKIP; skip=$((skip + 1))
  else verdict=FAIL; fail=$((fail + 1)); fi
  local note=""
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && note=" (stopped at its limit of ${limit}s)"
  echo "$verdict $kind:$name ${secs}s rc=$rc limit=${limit}s$note" | tee -a "$summary"
  { echo "===== $verdict $kind:$name rc=$rc ${secs}s of ${limit}s: $cmd"; cat "$log"; } >>"$out_dir/logs.txt"
}

# The parts: smoke tests (here), gpu tests (the bundle's tests.sh: the ctest -L gpu list) and
# benchmarks (benches.sh), each a line "KIND:NAME<TAB>SKIP_CODE<TAB>CTEST_TIMEOUT<TAB>ENV<TAB>COMMAND".
parts=$tmp/parts.tsv
printf 'smoke:unit_core\t-\t300\t-\t%s\n' '"$BUNDLE/bin/scaletrain_unit_tests" --run_test=core' >"$parts"
printf 'smoke:mpi_np2_topology\t-\t300\t-\t%s\n' \
  'mpirun --oversubscribe -np 2 "$BUNDLE/bin/scaletrain_mpi_tests" --run_test=topology' >>"$parts"
# GPU_CHECK_TESTS=REGEX (grep -E on the names) runs only those gpu tests.
while IFS=$'\t' read -r name skip_code limit envs cmd; do
  case "$name" in ''|'#'*) continue ;; esac
  [ -z "${GPU_CHECK_TESTS:-}" ] || grep -Eq -- "$GPU_CHECK_TESTS" <<<"$name" || continue
  printf 'test:%s\t%s\t%s\t%s\t%s\n' "$name" "$skip_code" "$limit" "$envs" "$cmd" >>"$parts"
done <"$BUNDLE/tests.sh"
if [ "${GPU_CHECK_BENCH:-1}" = 1 ] && [ "$gpu" = yes ]; then
  while IFS=$'\t' read -r name cmd; do
    case "$name" in ''|'#'*) continue ;; esac
    [ -z "${GPU_CHECK_BENCHES:-}" ] || grep -Eq -- "$GPU_CHECK_BENCHES" <<<"$name" || continue
    printf 'bench:%s\t-\t600\t-\t%s\n' "$name" "$cmd" >>"$parts"
  done <"$BUNDLE/benches.sh"
else
  echo "benchmarks not run (no GPU, or GPU_CHECK_BENCH=0)" | tee -a "$summary"
fi

# The plan's order and limits (tools/gpu-check-plan.tsv), then any part it does not list.
plan=${GPU_CHECK_PLAN:-$REPO/tools/gpu-check-plan.tsv}
ordered=$tmp/ordered.tsv
: >"$ordered"
if [ -f "$plan" ]; then
  while IFS=$'\t' read -r part limit _; do
    case "$part" in ''|'#'*) continue ;; esac
    limit=$(awk -v l="$limit" -v f="${GPU_CHECK_LIMIT_SCALE:-1}" 'BEGIN{printf "%d", l * f + 0.5}')
    awk -F'\t' -v p="$part" -v l="$limit" 'BEGIN{OFS="\t"} $1 == p {$3 = l; print}' "$parts" >>"$ordered"
  done <"$plan"
fi
while IFS=$'\t' read -r part rest; do
  cut -f1 "$ordered" | grep -qxF -- "$part" && continue
  echo "WARNING: $part is not in the plan ($plan): it runs last, with its ctest timeout" | tee -a "$summary"
  printf '%s\t%s\n' "$part" "$rest" >>"$ordered"
done <"$parts"
echo "budget: ${budget}s for the parts (GPU_CHECK_BUDGET_S), $(remaining)s left after unpacking" | tee -a "$summary"
while IFS=$'\t' read -r part skip_code limit envs cmd; do
  [ "$skip_code" = - ] && skip_code=""
  [ "$envs" = - ] && envs=_gpu_check=1
  run_one "${part%%:*}" "${part#*:}" "$skip_code" "$limit" "$envs" "$cmd"
done <"$ordered"
if [ "$gpu" = yes ] && [ $skip -gt 0 ]; then
  echo "WARNING: $skip test(s) skipped on a machine with a GPU; bundle $(grep '^scaletrain_cuda:' "$BUNDLE/MANIFEST")" |
    tee -a "$summary"
fi
echo "gpu=$gpu pass=$pass fail=$fail skip=$skip cut=$cut seconds=$(( $(date +%s) - started ))" | tee -a "$summary"
# One archive of the per-test logs, not a file each: the device tool returns at most 8 files.
tar -C "$tmp" -czf "$out_dir/logs.tar.gz" logs
[ $fail -eq 0 ] && [ $cut -eq 0 ]
