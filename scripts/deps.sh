#!/usr/bin/env bash
# Installs the Debian packages occl builds with, when any is missing. Sourced by run.sh/test.sh.
set -euo pipefail

OCCL_PACKAGES=(cmake g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev libpugixml-dev libabsl-dev
  libibverbs-dev clang libclang-rt-14-dev libucx-dev ucx-utils
  python3-dev python3-venv pybind11-dev python3-numpy python3-torch libtorch-dev python3-matplotlib)

occl_install_deps() {
  local missing=()
  for p in "${OCCL_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "occl: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
  fi
  # The CUDA toolkit is not a Debian package here: use it when it is installed.
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
}

# Configures and builds into $1 with the remaining arguments passed to cmake.
occl_build() {
  local dir="$1"
  shift
  cmake -S "$(dirname "${BASH_SOURCE[0]}")/.." -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$dir" -j "$(nproc)"
}

# A virtual environment at $1 made from Debian's interpreter, with a current torch from PyPI, and
# this tree pip-installed into it as users install it (pyproject.toml; CUDA off: the main build
# compiles that). Says how long each step took.
occl_pip_env() {
  local venv="$1" root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  SECONDS=0
  "$venv/bin/python" -m pip install --quiet torch numpy scikit-build-core pybind11
  echo "occl: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null) from PyPI in ${SECONDS} s"
  SECONDS=0
  "$venv/bin/python" -m pip install --quiet --force-reinstall --no-deps --no-build-isolation \
    --config-settings=cmake.define.OCCL_ENABLE_CUDA=OFF --config-settings=build-dir="$root/build-pip" "$root"
  echo "occl: pip install of this tree in ${SECONDS} s"
}
