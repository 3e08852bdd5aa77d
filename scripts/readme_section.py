#!/usr/bin/python3
"""Writes the text on standard input into FILE in place of the section between the markers
<!-- NAME: ... --> and <!-- /NAME --> (the text carries both); the scripts that make the
docs' generated sections (real_corpus.sh, real_text.sh) call it.

    ... | scripts/readme_section.py docs/own_data.md real-corpus"""
import re
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
path, name = sys.argv[1], sys.argv[2]
section = sys.stdin.read().rstrip("\n")
text = open(path, encoding="utf-8").read()
new, n = re.subn(r"<!-- %s.*?<!-- /%s -->" % (re.escape(name), re.escape(name)),
                 lambda m: section, text, flags=re.S)
if n != 1:
    sys.exit(f"{path}: no {name} markers")
open(path, "w", encoding="utf-8").write(new)
