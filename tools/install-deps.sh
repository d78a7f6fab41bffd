#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages scaletrain builds, tests and demos with.
# Idempotent: packages already installed are skipped, and apt-get runs only when
# something is missing. On a cluster, load modules instead (see README.md).
# slurmctld/slurmd/slurm-client/munge are only for the single-host Slurm test fixture
# (tests/slurm/fixture.sh); its MPI launches also need libpmix-dev at run time.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  openmpi-bin libopenmpi-dev libpmix-dev
  libhdf5-openmpi-dev hdf5-tools zlib1g-dev
  libboost-program-options-dev libboost-test-dev
  libdnnl-dev libturbojpeg0-dev libjpeg-turbo-progs python3-pil
  libxxhash-dev xxhash python3-xxhash
  python3 python3-numpy python3-h5py python3-torch python3-torchvision python3-matplotlib
  dataset-fashion-mnist
  slurmctld slurmd slurm-client munge
  xz-utils  # tools/gpu-bundle.sh's archive for the GPU machine (docs/gpu.md)
  gdb  # a hung fuzz worker's thread stacks (tests/fuzz/driver.cpp, docs/sanitizers-and-fuzzing.md)
  # PyTorch's CPU matrix products for the baselines: Debian's python3-torch calls libblas.so.3,
  # the unoptimised reference BLAS unless OpenBLAS is installed (tools/torch_blas.py refuses it).
  libopenblas0-pthread
  # English-German text for the Transformer (tools/translation_text.py, docs/translation-text.md):
  trans-de-en  # the Ding dictionary, whose ~19,000 example sentences give train and all of test
  libreoffice-l10n-de  # LibreOffice's German .mo catalogs (~35 MB download, ~86 MB installed)
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
