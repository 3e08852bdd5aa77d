#!/usr/bin/env bash
# Installs the Debian 12 packages tapegrad builds with, skipping the ones already present,
# so a machine that has them all never touches the network.
set -euo pipefail
packages=(cmake make g++ pkg-config libopenblas-dev libfmt-dev catch2 nlohmann-json3-dev
          libsentencepiece-dev libopenmpi-dev openmpi-bin
          pybind11-dev python3-dev python3-numpy python3-pytest python3-nbclient python3-ipykernel)
# --notebooks: Jupyter too, to open the notebooks (jupyter notebook notebooks/), and matplotlib
if [[ "${1:-}" == "--notebooks" ]]; then packages+=(jupyter-notebook python3-matplotlib); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
