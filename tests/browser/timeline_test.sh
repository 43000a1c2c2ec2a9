#!/bin/sh
# timeline_test.sh HTML_PAGE EXPECTED_WORKERS SCREENSHOT_PNG [SYSTEM_NAMES_FILE]
#
# Opens a timeline page (tools/timeline.html with a trace embedded by
# tools/timeline-embed.sh) in headless Chromium and checks, from the DOM
# that Chromium dumps after the page has run, what the page promises: the
# #status summary says loaded, with EXPECTED_WORKERS workers and no errors;
# there is one .lane element per worker; every system row drew at least
# one job box, and so did every name in SYSTEM_NAMES_FILE (one a line,
# "#" lines are comments); no "Uncaught" error reached the console. Then
# it takes a screenshot. The test runs no JavaScript of its own, so a page
# that breaks shows as a failed check.
#
# Exit 0: pass; 1: a check failed; 2: usage; 77: no Chromium (skip).
# Chromium: $CHROMIUM, else chromium or chromium-browser on PATH.
set -u

usage() { echo "usage: $0 HTML_PAGE EXPECTED_WORKERS SCREENSHOT_PNG [SYSTEM_NAMES_FILE]" >&2; exit 2; }
case $# in 3 | 4) ;; *) usage ;; esac
page=$1 expected=$2 png=$3 names=${4:-}
case $expected in '' | *[!0-9]*) usage ;; esac
[ -r "$page" ] || { echo "FAIL: cannot read $page"; exit 1; }
[ -z "$names" ] || [ -r "$names" ] || { echo "FAIL: cannot read $names"; exit 1; }

chromium=
for c in "${CHROMIUM:-}" chromium chromium-browser; do
    [ -n "$c" ] || continue
    if command -v "$c" >/dev/null 2>&1; then chromium=$(command -v "$c"); break; fi
done
if [ -z "$chromium" ]; then
    echo "SKIP: no Chromium found (set CHROMIUM, or install chromium)"
    exit 77
fi

case $page in /*) abs=$page ;; *) abs=$(pwd)/$page ;; esac
url=file://$(printf '%s' "$abs" | sed 's/%/%25/g; s/ /%20/g; s/#/%23/g; s/?/%3F/g')

tmp=$(mktemp -d "${TMPDIR:-/tmp}/timeline_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

failed=0
ok() { echo "ok:   $*"; }
fail() { echo "FAIL: $*"; failed=1; }

# Headless Chromium can take long to start on a small, busy machine. The
# virtual time budget lets the page's timers and frames run before the dump.
run_chromium() {
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --user-data-dir="$tmp/profile" --virtual-time-budget=10000 "$@"
}

echo "page: $page"
echo "chromium: $chromium"
run_chromium --enable-logging=stderr --v=0 --dump-dom "$url" >"$tmp/dom.html" 2>"$tmp/stderr"
rc=$?
if [ $rc -ne 0 ] || [ ! -s "$tmp/dom.html" ]; then
    fail "chromium --dump-dom exited with $rc and $(wc -c <"$tmp/dom.html") bytes of DOM"
    tail -n 20 "$tmp/stderr"
    exit 1
fi

# The DOM without the contents of <script> elements (the page's code and
# the embedded trace), one tag per line: what remains is what the page
# built, and a tag's attributes sit on its own line.
awk '{
    line = $0; out = ""
    while (line != "") {
        if (in_script) {
            i = index(line, "</script>")
            if (i == 0) { line = ""; break }
            line = substr(line, i + 9); in_script = 0
        } else {
            i = index(line, "<script")
            if (i == 0) { out = out line; break }
            out = out substr(line, 1, i - 1); line = substr(line, i + 7); in_script = 1
        }
    }
    print out
}' "$tmp/dom.html" | tr '<' '\n' >"$tmp/tags"

# Text and attribute values come back HTML-escaped.
unescape() { sed 's/&quot;/"/g; s/&lt;/</g; s/&gt;/>/g; s/&#39;/'"'"'/g; s/&amp;/\&/g'; }
attr() { sed -n "s/.* $1=\"\\([^\"]*\\)\".*/\\1/p" | unescape; }

status=$(sed -n 's/^pre id="status">//p' "$tmp/tags" | unescape)
echo "status: $status"
field() { printf '%s\n' "$status" | sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p"; }

if [ "$(field loaded)" = true ]; then ok "status: loaded"; else fail "status: not loaded"; fi
case $status in
*'"errors":[]'*) ok "status: no errors" ;;
*) fail "status: errors: $(printf '%s\n' "$status" | sed 's/.*"errors":\(.*\)}$/\1/')" ;;
esac
if [ "$(field workers)" = "$expected" ]; then ok "status: workers $expected"
else fail "status: workers '$(field workers)', expected $expected"; fi

lanes=$(grep -c '^div class="lane"' "$tmp/tags")
if [ "$lanes" -eq "$expected" ]; then ok "$lanes .lane elements"
else fail "$lanes .lane elements, expected $expected"; fi
if [ "$(field lanes)" = "$lanes" ]; then ok "status: lanes $lanes"
else fail "status: lanes '$(field lanes)', but $lanes .lane elements"; fi
grep '^div class="lane"' "$tmp/tags" | while IFS= read -r tag; do
    case $tag in
    *' data-tid="'[0-9]*'"'*' data-worker="'[0-9]*'"'*) ;;
    *) echo "FAIL: lane without data-tid and data-worker: <$tag"; exit 1 ;;
    esac
done || failed=1
if grep -q '^div class="frames-lane"' "$tmp/tags"; then ok "frames lane"; else fail "no .frames-lane element"; fi

grep '^tr class="system-row"' "$tmp/tags" >"$tmp/rows"
rows=$(wc -l <"$tmp/rows")
if [ "$rows" -ge 1 ] && [ "$(field systems)" = "$rows" ]; then ok "$rows system rows"
else fail "$rows system rows, status says '$(field systems)'"; fi
while IFS= read -r row; do
    name=$(printf '%s\n' "$row" | attr data-name)
    boxes=$(printf '%s\n' "$row" | attr data-boxes)
    case $boxes in
    '' | *[!0-9]*) fail "system '$name': no data-boxes" ;;
    0) fail "system '$name': no job box" ;;
    *) ok "system '$name': $boxes job boxes" ;;
    esac
done <"$tmp/rows"
if [ -n "$names" ]; then
    while IFS= read -r want || [ -n "$want" ]; do
        case $want in '' | '#'*) continue ;; esac
        found=$(while IFS= read -r row; do
            [ "$(printf '%s\n' "$row" | attr data-name)" = "$want" ] && printf '%s\n' "$row" | attr data-boxes
        done <"$tmp/rows" | head -n 1)
        case $found in
        '') fail "expected system '$want': no row" ;;
        0) fail "expected system '$want': no job box" ;;
        *) ok "expected system '$want' present" ;;
        esac
    done <"$names"
fi

if grep -q 'Uncaught' "$tmp/stderr"; then
    fail "uncaught errors in the console:"
    grep 'Uncaught' "$tmp/stderr" | head -n 10
else
    ok "no uncaught errors in the console"
fi

rm -f "$png"
run_chromium --screenshot="$png" --window-size=1600,1000 "$url" >"$tmp/shot.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -s "$png" ] && [ "$(head -c 4 "$png" | tail -c 3)" = PNG ]; then
    ok "screenshot $png ($(wc -c <"$png") bytes)"
else
    fail "screenshot: chromium exited with $rc, $png missing, empty or not a PNG"
    tail -n 20 "$tmp/shot.log"
fi

if [ $failed -eq 0 ]; then echo "PASS"; else echo "FAILED"; fi
exit $failed
