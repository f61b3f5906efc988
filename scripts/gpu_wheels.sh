#!/usr/bin/env bash
# The wheels `fdabench bench gpu` needs on a lent GPU machine that its image lacks, into .whl/ (ignored by git;
# `run` carries it with carry [".whl"]). The machine has Python 3.12 with torch, torchvision, numpy, PyYAML,
# scikit-learn and pytest, and no network; of fdabench's own requirements the bench imports only jsonschema
# (params.yaml's validation) beyond those, with its three requirements (attrs is in the image). It never imports
# snakemake, dvc, POT or Flower. Run here, once, from any folder; the versions are this environment's.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(jsonschema jsonschema-specifications referencing rpds-py)
platforms=()
for platform in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$platform")
done
mkdir -p .whl
for package in "${packages[@]}"; do
    version=$(python3 -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$package")
    rm -f .whl/"${package//-/_}"-*.whl   # one version of each: two stop the install there
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${platforms[@]}" -d .whl "$package==$version"
done
ls -l .whl
size=$(du -sk .whl | cut -f1)
echo "wheels: ${size} KiB in .whl/"
if [ "$size" -gt $((50 * 1024)) ]; then
    echo "more than 50 MiB: the working tree that travels is limited to 64 MiB" >&2
    exit 1
fi
