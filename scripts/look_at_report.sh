#!/usr/bin/env bash
# Looks at a run's report.html as a person would, in headless Chromium (Debian's chromium,
# installed if missing): a screenshot of the page in a 1280-pixel window, and a check that
# nothing makes the page scroll sideways (the page's width against the window's, measured by
# the browser after layout, images loaded).
#   bash scripts/look_at_report.sh RUN_DIR [OUT.png]      (default RUN_DIR/report.png)
set -euo pipefail
run=$(cd "$1" && pwd) out=${2:-$1/report.png}
if ! command -v chromium > /dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
fi
browser=(chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,2400)
timeout 120 "${browser[@]}" --screenshot="$out" "file://$run/report.html" 2> /dev/null
# a copy of the page that writes its measured widths into its title once everything is laid out
probe=$(mktemp --suffix=.html -p "$run")
trap 'rm -f "$probe"' EXIT
sed 's|</body>|<script>addEventListener("load", () => { document.title = "width " + document.documentElement.scrollWidth + " of " + innerWidth; });</script></body>|' \
  "$run/report.html" > "$probe"
title=$(timeout 120 "${browser[@]}" --virtual-time-budget=5000 --dump-dom "file://$probe" 2> /dev/null |
  grep -o '<title>width [0-9]* of [0-9]*</title>')
read -r page window <<< "$(echo "$title" | grep -o '[0-9][0-9]*' | tr '\n' ' ')"
echo "report: $out; page width $page in a window of $window"
((page <= window)) || { echo "report: the page is wider than the window" >&2; exit 1; }
