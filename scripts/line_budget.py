#!/usr/bin/python3
"""The learner's folders' line budget, which CI enforces (STYLE.md: speed work lands in the fast
room by construction). Prints the lines of each budgeted folder against its budget, and every
function of those folders longer than a screen (60 lines; the fast room is exempt).

    python3 scripts/line_budget.py

Exits 1 when a folder is over its budget, a long function is not listed in
scripts/line_budget.txt, or a listed one is no longer long. That file's `limit` lines give
each folder's budget for now and its `long` lines name the functions still over a screen:
each session moves the limits toward the targets and shortens the list, and nothing new may
join it."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = {"tapegrad/autograd": "tapegrad/autograd/fast/", "tapegrad/nn": None}
TARGETS = {"tapegrad/autograd": 3500, "tapegrad/nn": 2300}  # issue 33; nn + issue 36's LM
SCREEN = 60


def tracked(folder, exclude):
    out = subprocess.run(["git", "ls-files", folder], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    return [f for f in out if f.endswith((".h", ".cpp")) and not (exclude and f.startswith(exclude))
            and os.path.exists(os.path.join(ROOT, f))]


def blank(src):
    """Comments and string literals as spaces, newlines kept."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                         re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)


def functions(path):
    """(name, first line, lines) of each function body at namespace or class level."""
    src = blank(open(os.path.join(ROOT, path), encoding="utf-8").read())
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
    budget = open(os.path.join(ROOT, "scripts/line_budget.txt"), encoding="utf-8").read()
    limits = {m[0]: int(m[1]) for m in re.findall(r"^limit (\S+) (\d+)", budget, re.M)}
    allowed = set(re.findall(r"^long (\S+)", budget, re.M))
    ok = True
    seen = set()
    print("line budget (the fast room, tapegrad/autograd/fast/, is not counted):")
    for folder, exclude in FOLDERS.items():
        files = tracked(folder, exclude)
        lines = sum(len(open(os.path.join(ROOT, f), encoding="utf-8").readlines()) for f in files)
        over = lines > limits[folder]
        ok = ok and not over
        print(f"  {folder:<20} {lines:6d} lines  limit {limits[folder]:6d}  target "
              f"{TARGETS[folder]:6d}{'  OVER' if over else ''}")
        for f in files:
            for name, line, length in functions(f):
                if length <= SCREEN:
                    continue
                key = f"{f}:{name}"
                seen.add(key)
                known = key in allowed
                ok = ok and known
                print(f"    {length:4d} lines  {f}:{line} {name}"
                      f"{'' if known else '  NEW: longer than a screen'}")
    for key in sorted(allowed - seen):
        ok = False
        print(f"    {key}: listed as long, but fits on a screen: take it off the list")
    if not ok:
        print("line budget: over (scripts/line_budget.txt)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
