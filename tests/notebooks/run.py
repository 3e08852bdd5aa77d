#!/usr/bin/python3
"""Runs every notebook of notebooks/ headless, each from a fresh kernel (Debian's python3-nbclient
and python3-ipykernel), and fails on the first cell that raises, naming the notebook and the
cell. The kernel is Debian's /usr/bin/python3 with PYTHONPATH as given (ctest sets it to the
build's python/ folder), whatever python3 comes first on PATH. A notebook checks its own
numbers in its cells (against PyTorch where python3-torch is installed), so a wrong number is a
cell error too.

    PYTHONPATH=build/python /usr/bin/python3 tests/notebooks/run.py notebooks [--out DIR]

--out DIR writes each executed notebook there, outputs included (for jupyter nbconvert).
Exits 77 (ctest's skip) when nbclient or ipykernel is not installed."""
import argparse
import glob
import os
import sys
import tempfile
import time

try:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    import ipykernel  # noqa: F401
except ImportError as e:
    print(f"notebooks: skipped, {e.name} is not installed (scripts/install_deps.sh)")
    sys.exit(77)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--out")
    args = parser.parse_args()
    os.environ["PATH"] = "/usr/bin:" + os.environ.get("PATH", "")  # the kernel's python3
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel's debugger's note on stderr
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(map(os.path.abspath, paths))  # the kernel's cwd differs
    paths = sorted(glob.glob(os.path.join(args.folder, "*.ipynb")))
    if not paths:
        sys.exit(f"notebooks: no notebook in {args.folder}")
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        stale = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("outputs")]
        if stale:
            sys.exit(f"{path}: cell {stale[0]} holds outputs; notebooks are kept without them "
                     f"(jupyter nbconvert --clear-output --inplace {path})")
        start = time.monotonic()
        with tempfile.TemporaryDirectory() as work:
            client = NotebookClient(nb, timeout=900, kernel_name="python3",
                                    resources={"metadata": {"path": work}})
            try:
                client.execute()
            except CellExecutionError as e:
                sys.exit(f"{path}: a cell failed\n{e}")
        print(f"{path}: {len(nb.cells)} cells ran in {time.monotonic() - start:.1f} s")
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            nbformat.write(nb, os.path.join(args.out, os.path.basename(path)))


if __name__ == "__main__":
    main()
