#!/usr/bin/python3
"""The library's size and the learner's folders' budget, which CI enforces (CONTRIBUTING.md:
speed work lands in the fast room by construction). Prints every folder of tapegrad/ with its
lines and code lines (neither blank nor comment: a comment that teaches costs nothing, as in
tinygrad's sz.py), the budgeted folders against their limits, and fails on any function longer
than a screen (60 lines) anywhere in the library outside the fast room.

    python3 scripts/line_budget.py

Exits 1 when a budgeted folder's code lines pass its limit in scripts/line_budget.txt or a
function is longer than a screen. A limit only ever falls: each session moves it toward its
target as code leaves the folder, and never raises it to fit a change."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = "tapegrad/autograd/fast/"  # the fast room: not budgeted, its kernels as long as they need
TARGETS = {"tapegrad/autograd": 3000, "tapegrad/nn": 1500}  # code lines, issue 73
SCREEN = 60
COMMENT_OR_STRING = re.compile(
    r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def library_files():
    out = subprocess.run(["git", "ls-files", "tapegrad"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [f for f in out if f.endswith((".h", ".cpp")) and os.path.exists(os.path.join(ROOT, f))]


def read(path):
    return open(os.path.join(ROOT, path), encoding="utf-8").read()


def without_comments(src, strings_too=False):
    """Comments (and, if asked, string literals) as spaces, newlines kept."""
    def blank(m):
        if not strings_too and not m.group(0).startswith(("//", "/*")):
            return m.group(0)
        return re.sub(r"[^\n]", " ", m.group(0))
    return COMMENT_OR_STRING.sub(blank, src)


def code_lines(src):
    return sum(1 for line in without_comments(src).splitlines() if line.strip())


def functions(path):
    """(name, first line, lines) of each function body at namespace or class level."""
    src = without_comments(read(path), strings_too=True)
    found, depth, start, body, scopes = [], 0, 0, None, []
    for i, c in enumerate(src):
        if c == "{":
            head = re.sub(r"\s+", " ", src[start:i]).strip()
            opens_scope = re.match(r"^(.*\b)?(namespace|class|struct|union|enum)\b[^()]*$", head)
            if body is None and not opens_scope and re.search(r"\)[^()]*$", head) and \
                    depth == len(scopes) and not re.search(r"[=\[]|\b(if|for|while|switch)\b", head.split("(")[0]):
                name = re.findall(r"([~\w:]+)\s*$", head.split("(")[0]) or ["?"]
                body = (name[0], src.count("\n", 0, i) + 1, depth)
            elif body is None and opens_scope:
                scopes.append(depth)
            depth += 1
            start = i + 1
        elif c == "}":
            depth -= 1
            start = i + 1
            if scopes and scopes[-1] == depth:
                scopes.pop()
            elif body is not None and depth == body[2]:
                found.append((body[0], body[1], src.count("\n", 0, i) + 1 - body[1] + 1))
                body = None
        elif c == ";":
            start = i + 1
    return found


def main():
    limits = {m[0]: int(m[1]) for m in re.findall(r"^limit (\S+) (\d+)", read("scripts/line_budget.txt"), re.M)}
    files = library_files()
    sources = {f: read(f) for f in files}
    sizes = {f: (src.count("\n"), code_lines(src)) for f, src in sources.items()}
    print("library size (tapegrad/), lines and code lines per folder:")
    for folder in sorted({os.path.dirname(f) for f in files}):
        here = [sizes[f] for f in files if os.path.dirname(f) == folder]
        note = "  (the fast room: not budgeted)" if folder + "/" == FAST else ""
        print(f"  {folder:<28} {sum(n for n, _ in here):6d} lines {sum(c for _, c in here):6d} code{note}")
    print(f"  {'all':<28} {sum(n for n, _ in sizes.values()):6d} lines "
          f"{sum(c for _, c in sizes.values()):6d} code")
    ok = True
    print("code-line budget (the fast room not counted):")
    for folder, target in TARGETS.items():
        code = sum(c for f, (_, c) in sizes.items() if f.startswith(folder + "/") and not f.startswith(FAST))
        over = code > limits[folder]
        ok = ok and not over
        print(f"  {folder:<20} {code:6d} code lines  limit {limits[folder]:6d}  target {target:6d}"
              f"{'  OVER' if over else ''}")
    long = [(length, f, line, name) for f in files if not f.startswith(FAST)
            for name, line, length in functions(f) if length > SCREEN]
    for length, f, line, name in long:
        print(f"  {length:4d} lines  {f}:{line} {name}: longer than a screen ({SCREEN} lines)")
    ok = ok and not long
    if not ok:
        print("line budget: over (scripts/line_budget.txt, functions of at most 60 lines)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
