#!/usr/bin/env bash
# gpu-bundle.sh [BUILD_DIR] [OUT_ARCHIVE]: packs a built tree for a GPU machine that has CUDA and
# PyTorch but none of our Debian libraries (issue 10, section 6; docs/gpu.md).
#
# What goes in, under one top folder scaletrain-gpu-bundle/:
#   bin/       BUILD_DIR/bin's programs and test binaries (fuzz_* skipped; symlinks into src/
#              dropped: the device machine has the repository's own copy of src/), stripped of
#              their symbol tables (strip --strip-unneeded: about 1 MB a program, and every
#              program carries the CUDA kernels' fatbins too; nothing here reads the symbols:
#              errors name their op, file and value, not a stack).
#   lib/       every shared library that ldd lists for those programs and for the Open MPI / PMIx
#              plugins below, except the CUDA family (libcuda, libcudart, libcublas*, libcudnn*,
#              libnccl*, libnvidia-*, ...: the GPU machine has its own, found by gpu-check.sh) and
#              glibc itself (libc, libm, libdl, libpthread, librt, libresolv, ld-linux: replacing
#              the loader's own libraries breaks every program; the GPU machine needs glibc >= the
#              version printed in MANIFEST).
#   lib/compat/ libstdc++, libgcc_s, libgomp. Kept apart because a machine's newer libstdc++ must
#              win (its CUDA/PyTorch libraries may need it); gpu-check.sh puts compat/ on the path
#              only where the machine's libstdc++ lacks the GLIBCXX version recorded here.
#   ompi/      an OPAL_PREFIX tree: mpirun/orterun/orted, the MCA plugins, help files, Debian's
#              openmpi-mca-params.conf (its sysconfdir stays /etc/openmpi under OPAL_PREFIX, so
#              gpu-check.sh names the file in OMPI_MCA_mca_base_param_files).
#   lib/hwloc/ hwloc's PCI plugin (HWLOC_PLUGINS_PATH).
#   tests.sh   the ctest commands labelled gpu, as a plain shell list (the GPU machine has no ctest),
#              with BUILD_DIR/bin and the source dir replaced by $BUNDLE/bin and $REPO.
#   benches.sh hook list of GPU benchmarks, one command a line, run by gpu-check.sh.
#   MANIFEST   versions, glibc, GLIBCXX, every file with its origin.
#   data/fashion-mnist/  only with GPU_BUNDLE_DATA=fashion-mnist: Debian's four Fashion-MNIST .gz
#              files (30 MB, already compressed: the archive grows by about as much), for the demo
#              test (tests/gpu/test_demo.sh), since the GPU machine has no package registry.
# Compressed with xz (.tar.xz, about 35 MiB, under a minute on 2 cores) or gzip (.tar.gz, about
# 55 MiB, faster; the ctest uses it); both decompressors are on any Linux with Python, zstd may not
# be.
# GPU_BUNDLE_LEVEL sets the compression level (xz default 6, gzip default 6).
# Fails if the archive is over 60 MiB (the device tool carries 64 MiB in all).
set -euo pipefail

build_dir=${1:-build}
out=${2:-$build_dir/gpu-bundle.tar.xz}
limit_mib=60
build_dir=$(cd "$build_dir" && pwd)
[ -d "$build_dir/bin" ] || { echo "gpu-bundle: no $build_dir/bin (build first)" >&2; exit 2; }
src_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
[ -n "$src_dir" ] || src_dir=$(cd "$(dirname "$0")/.." && pwd)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
b=$work/scaletrain-gpu-bundle
mkdir -p "$b/bin" "$b/lib/compat" "$b/ompi/bin" "$b/ompi/etc"
manifest=$b/MANIFEST

# Libraries the GPU machine brings itself, and glibc.
is_excluded() {
  case "$(basename "$1")" in
    libcuda.so*|libcudart*|libcublas*|libcudnn*|libnccl*|libnvidia-*|libcufft*|libcurand*|\
    libcusolver*|libcusparse*|libnvrtc*|libnvJitLink*|libnvToolsExt*|libcupti*) return 0 ;;
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|ld-linux*|libutil.so*|\
    libmvec.so*|linux-vdso*) return 0 ;;
  esac
  return 1
}
is_compat() {
  case "$(basename "$1")" in libstdc++.so*|libgcc_s.so*|libgomp.so*) return 0 ;; esac
  return 1
}

# 1. Programs.
for f in "$build_dir"/bin/*; do
  name=$(basename "$f")
  case "$name" in fuzz_*) continue ;; esac
  if [ -L "$f" ]; then
    echo "skip bin/$name (symlink to $(readlink "$f"); the repository copy has it)" >>"$manifest"
    continue
  fi
  cp -p "$f" "$b/bin/"
  if command -v strip >/dev/null && file -L "$b/bin/$name" | grep -q ELF; then
    strip --strip-unneeded "$b/bin/$name"
    echo "bin/$name: stripped" >>"$manifest"
  fi
done

# 2. Open MPI and PMIx run-time files.
ompi_pkglib=$(ompi_info --path pkglibdir | awk '{print $2}')
ompi_pkgdata=$(ompi_info --path pkgdatadir | awk '{print $2}')
ompi_prefix=$(ompi_info --path prefix | awk '{print $2}')
ompi_sysconf=$(ompi_info --path sysconfdir | awk '{print $2}')
# Debian: prefix /usr, plugins in /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3: keep the same
# path below OPAL_PREFIX so that Open MPI's relocation finds them.
rel_pkglib=${ompi_pkglib#"$ompi_prefix"/}
rel_pkgdata=${ompi_pkgdata#"$ompi_prefix"/}
mkdir -p "$b/ompi/$rel_pkglib" "$b/ompi/$rel_pkgdata"
cp -a "$ompi_pkglib"/. "$b/ompi/$rel_pkglib/"
cp -a "$ompi_pkgdata"/. "$b/ompi/$rel_pkgdata/"
# libmca_common_*.so live one level up (Libdir) and the plugins need them.
ompi_libdir=$(ompi_info --path libdir | awk '{print $2}')
for f in "$ompi_libdir"/libmca_common_*.so*; do [ -e "$f" ] && cp -a "$f" "$b/ompi/${ompi_libdir#"$ompi_prefix"/}/"; done
for t in mpirun mpiexec orterun orted ompi_info; do
  p=$(command -v $t || true); [ -n "$p" ] && cp -L "$p" "$b/ompi/bin/$t"
done
[ -f "$ompi_sysconf/openmpi-mca-params.conf" ] && cp "$ompi_sysconf/openmpi-mca-params.conf" "$b/ompi/etc/"
# PMIx's own plugins (pcompress_zlib, prm_default, prm_slurm) are not packed: PMIx 4 finds
# them only under its compiled-in prefix (PMIX_PREFIX/PMIX_INSTALL_PREFIX did not move it), and
# mpirun -np 2 runs without them (checked with the Debian tree hidden, docs/gpu.md).
# hwloc's PCI plugin (GPU and NIC locality; the XML one would pull in ICU, 30 MB): hwloc looks
# in HWLOC_PLUGINS_PATH, which gpu-check.sh sets.
hwloc_plugins=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libhwloc\.so\.15 /{print $NF}' | head -1 || true)")")/hwloc
mkdir -p "$b/lib/hwloc"
[ -f "$hwloc_plugins/hwloc_pci.so" ] && cp "$hwloc_plugins/hwloc_pci.so" "$b/lib/hwloc/"

# 3. Shared libraries: ldd of every ELF file packed, to a fixed point.
copy_lib() {
  local path=$1 dest
  is_excluded "$path" && return 0
  if is_compat "$path"; then dest=$b/lib/compat; else dest=$b/lib; fi
  [ -e "$dest/$(basename "$path")" ] && return 0
  cp -L "$path" "$dest/$(basename "$path")"
  echo "lib $(basename "$path") <- $path" >>"$manifest"
  echo "$dest/$(basename "$path")"
}
todo=$(find "$b/bin" "$b/ompi" "$b/lib/hwloc" -type f \( -perm -u+x -o -name '*.so*' \))
missing=""
# Each library path is looked at once: the hundreds of programs and plugins list the same few
# dozen libraries, and a subshell per ldd line made this step take a minute and a half.
declare -A seen_lib=()
while [ -n "$todo" ]; do
  next=""
  for f in $todo; do
    file -L "$f" 2>/dev/null | grep -q ELF || continue
    while read -r line; do
      case "$line" in
        *"=> not found"*) lib=${line%% =>*}; is_excluded "$lib" || missing="$missing $lib ($(basename "$f"))" ;;
        *"=> /"*)
          p=${line#*=> }
          p=${p%% (*}
          [ -n "${seen_lib[$p]:-}" ] && continue
          seen_lib[$p]=1
          new=$(copy_lib "$p")
          [ -n "$new" ] && next="$next $new" ;;
      esac
    done < <(ldd "$f" 2>/dev/null || true)
  done
  todo=$next
done
if [ -n "$missing" ]; then
  echo "gpu-bundle: warning: libraries not found here (the programs that need them will not load):$missing" >&2
  echo "missing:$missing" >>"$manifest"
fi

# 4. The ctest commands labelled gpu, with paths made relative to the bundle and the repository.
if command -v ctest >/dev/null && [ -f "$build_dir/CTestTestfile.cmake" ]; then
  (cd "$build_dir" && ctest -L gpu --show-only=json-v1) >"$work/ctest.json"
  python3 - "$work/ctest.json" "$build_dir" "$src_dir" >"$b/tests.sh" <<'PY'
import json, shlex, sys
data = json.load(open(sys.argv[1]))
build, src = sys.argv[2], sys.argv[3]
def rel(s):
    s = s.replace(build + "/bin", "$BUNDLE/bin").replace(build, "$BUNDLE/build").replace(src, "$REPO")
    return s
def q(s):  # quote, leaving $BUNDLE/$REPO expandable
    r = rel(s)
    return '"' + r.replace('\\', '\\\\').replace('"', '\\"').replace('`', '\\`') + '"'
print("# ctest -L gpu, one test a line: NAME<TAB>SKIP_RETURN_CODE<TAB>TIMEOUT_S<TAB>ENV<TAB>COMMAND; - marks an empty field")
print("# written by tools/gpu-bundle.sh; $BUNDLE and $REPO are set by tools/gpu-check.sh")
for t in data.get("tests", []):
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = " ".join(q(e) for e in props.get("ENVIRONMENT", []))
    command = list(t.get("command", []))
    # A script test runs as "bash SCRIPT": ctest records the absolute path of this machine's bash,
    # which the GPU machine may keep elsewhere; its PATH finds it.
    if command and command[0].rsplit("/", 1)[-1] in ("bash", "sh"):
        command[0] = command[0].rsplit("/", 1)[-1]
    cmd = " ".join(q(c) for c in command)
    if not cmd:
        continue
        # "-" for an empty field: read's tab splitting would fold two tabs into one.
    print("\t".join([t["name"], str(props.get("SKIP_RETURN_CODE", "-")),
                     str(int(float(props.get("TIMEOUT", 600)))), env or "-", cmd]))
PY
else
  echo "gpu-bundle: warning: no ctest here; tests.sh is empty" >&2
  : >"$b/tests.sh"
fi
# GPU benchmarks: NAME<TAB>COMMAND, run from the repository root. Add a line per new benchmark.
cat >"$b/benches.sh" <<'B'
# NAME<TAB>COMMAND (run in the repository root; $BUNDLE/bin holds our programs, $OUT_DIR the logs)
B
# Only what needs the GPU's time (a CPU benchmark runs on any machine, not in the GPU call).
# ResNet-50 fp32 training images/s at batch 64 and 128, scaletrain's and PyTorch's (TF32 off, on),
# In the one call, batch 64 only and 10 steps (the rate is the window of steps 6 to 10, after the
# first window's algorithm choices and first allocations; PyTorch's after 5 warm-up steps): both
# batch sizes took over 70 s on an H200, most of it our four start-ups and batch 128's fp32 steps.
# The full benchmark (batch 64 and 128, 40 steps) is the same script without the env settings.
# --conv-algo search, graph and graph-search run beside the default (the legacy API's heuristics).
[ -f "$src_dir/tools/bench_gpu_resnet50.sh" ] &&
  printf 'gpu_resnet50_train\tenv BENCH_BATCH_SIZES=64 BENCH_CONV_SEARCH=fp32 BENCH_CONV_GRAPH=fp32 BENCH_CONV_GRAPH_SEARCH=fp32 BENCH_STEPS=10 BENCH_LOG_EVERY=5 BENCH_WARMUP=5 bash tools/bench_gpu_resnet50.sh\n' >>"$b/benches.sh"
# ResNet-50 in the mixed precisions (issue 26, section 6): amp-fp16 and amp-bf16 at batch 256 and
# 64, ours and PyTorch's torch.autocast (channels_last, SGD momentum, GradScaler in fp16), 10 steps
# each as above, with peak memory and the fraction of the dense fp16 tensor peak; amp-fp16 also
# fused, with --conv-algo search, graph and graph-search (cuDNN's graph API), and with --op-times.
[ -f "$src_dir/tools/bench_gpu_resnet50.sh" ] &&
  printf 'gpu_resnet50_amp\tenv BENCH_BATCH_SIZES=256,64 BENCH_PRECISIONS=amp-fp16,amp-bf16 BENCH_FUSE=amp-fp16 BENCH_BN_RELU=amp-fp16 BENCH_CONV_SEARCH=amp-fp16 BENCH_CONV_GRAPH=amp-fp16 BENCH_BEST=amp-fp16 BENCH_OP_TIMES=amp-fp16 BENCH_STEPS=10 BENCH_LOG_EVERY=5 BENCH_WARMUP=5 bash tools/bench_gpu_resnet50.sh\n' >>"$b/benches.sh"
# --fuse conv-bias-relu against none (issue 26, section 3): AlexNet at batch 256 in fp32 and
# amp-fp16, 10 steps a run, two rounds interleaved; --fuse auto takes it only once it pays here.
[ -f "$src_dir/tools/bench_gpu_fusion.sh" ] &&
  printf 'gpu_fusion\tbash tools/bench_gpu_fusion.sh\n' >>"$b/benches.sh"
# transformer-base fp32 training tokens/s at 4096 batch tokens, scaletrain's and PyTorch's
# nn.Transformer (TF32 off) on the same GPU (issue 25): 15 steps each, the rate of steps 6 to 15.
[ -f "$src_dir/tools/bench_transformer.sh" ] &&
  printf 'gpu_transformer_train\tenv BENCH_DEVICE=cuda BENCH_MODELS=transformer-base BENCH_STEPS=15 BENCH_LOG_EVERY=5 bash tools/bench_transformer.sh\n' >>"$b/benches.sh"

# The GPU all-reduce's figures (issue 27, section 8): comm-bench tables of 1 to 4 ranks on device
# memory, and ResNet-50's all-reduce and exposed time per step with 2 and 4 emulated nodes for each
# algorithm one GPU can run (cost accounting: the ranks share the GPU).
[ -f "$src_dir/tools/bench_gpu_allreduce.sh" ] &&
  printf 'gpu_allreduce\tbash tools/bench_gpu_allreduce.sh\n' >>"$b/benches.sh"

# Data sets the GPU tests need and the GPU machine cannot fetch, on request only (30 MB more to
# carry): GPU_BUNDLE_DATA=fashion-mnist packs Debian's dataset-fashion-mnist files.
for set_name in ${GPU_BUNDLE_DATA:-}; do
  case "$set_name" in
    fashion-mnist)
      fm=${GPU_BUNDLE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
      mkdir -p "$b/data/fashion-mnist"
      for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
        [ -f "$fm/$f" ] || { echo "gpu-bundle: GPU_BUNDLE_DATA=fashion-mnist: no $fm/$f (apt-get install dataset-fashion-mnist)" >&2; exit 2; }
        cp "$fm/$f" "$b/data/fashion-mnist/"
        echo "data fashion-mnist/$f <- $fm/$f" >>"$manifest"
      done ;;
    *) echo "gpu-bundle: GPU_BUNDLE_DATA: unknown data set '$set_name' (known: fashion-mnist)" >&2; exit 2 ;;
  esac
done

# 5. Manifest header and archive.
{
  echo "built: $(date -u +%FT%TZ) on $(hostname) from $build_dir"
  echo "commit: $(git -C "$src_dir" rev-parse HEAD 2>/dev/null || echo unknown)"
  # Whether the CUDA backend was built (the generated config, whatever SCALETRAIN_CUDA's mode was).
  have_cuda=$(sed -n 's/^#define SCALETRAIN_HAVE_CUDA //p' "$build_dir/generated/scaletrain/config.hpp" 2>/dev/null)
  echo "scaletrain_cuda: $([ "$have_cuda" = 1 ] && echo ON || echo OFF) (SCALETRAIN_CUDA=$(sed -n 's/^SCALETRAIN_CUDA:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null))"
  echo "glibc: $(ldd --version | head -1 | awk '{print $NF}')"
  stdcxx=$(ls "$b"/lib/compat/libstdc++.so* 2>/dev/null | head -1)
  if [ -n "$stdcxx" ]; then
    echo "glibcxx_needed: $(for f in "$b"/bin/* "$b"/lib/*.so*; do objdump -T "$f" 2>/dev/null; done | grep -o 'GLIBCXX_3\.4\.[0-9]*' | sort -uV | tail -1)"
  fi
  echo "open_mpi: $(ompi_info --version 2>/dev/null | head -1)"
  echo "ompi_rel_pkglib: $rel_pkglib"
} >"$b/MANIFEST.head"
cat "$b/MANIFEST.head" "$manifest" >"$b/MANIFEST.new" && mv "$b/MANIFEST.new" "$manifest" && rm "$b/MANIFEST.head"

mkdir -p "$(dirname "$out")"
case "$out" in
  *.tar.xz) tar -C "$work" -cf - scaletrain-gpu-bundle | xz -T2 -"${GPU_BUNDLE_LEVEL:-6}" >"$out.tmp" ;;
  *.tar.gz) tar -C "$work" -cf - scaletrain-gpu-bundle | gzip -"${GPU_BUNDLE_LEVEL:-6}" >"$out.tmp" ;;
  *) echo "gpu-bundle: archive name must end in .tar.xz or .tar.gz" >&2; exit 2 ;;
esac
mv "$out.tmp" "$out"
bytes=$(stat -c %s "$out")
mib=$(( (bytes + 1048575) / 1048576 ))
grep -q '^scaletrain_cuda: ON' "$manifest" ||
  echo "gpu-bundle: note: $build_dir has no CUDA backend (configure with SCALETRAIN_CUDA=ON): its gpu tests will skip on a GPU too" >&2
echo "gpu-bundle: $out: $bytes bytes ($mib MiB; unpacked $(du -sh "$b" | cut -f1)), $(ls "$b/bin" | wc -l) programs, $(find "$b/lib" -name '*.so*' | wc -l) libraries, $(grep -vc '^#' "$b/tests.sh" || true) gpu tests${GPU_BUNDLE_DATA:+, data: $GPU_BUNDLE_DATA}"
if [ "$bytes" -gt $((limit_mib * 1048576)) ]; then
  echo "gpu-bundle: FAIL: archive is over $limit_mib MiB (the device tool carries 64 MiB in all)" >&2
  exit 1
fi
