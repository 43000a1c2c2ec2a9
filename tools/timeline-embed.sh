#!/bin/sh
# timeline-embed.sh TRACE.json [OUT.html]: writes a copy of timeline.html
# (next to this script) with the trace inside its empty
# <script type="application/json" id="trace-data"> element, so the page
# opens the trace by itself. OUT defaults to TRACE with .json replaced by
# .html.
#
# The trace goes in as it is except for "<": inside a <script> element
# "</script" would end the element early and "<!--" can make the parser
# skip the real end tag, and "<" can only appear inside JSON strings, where
# the escape \u003c means the same character. sh, grep, head and sed only:
# a fresh Debian machine has no python or node.
set -eu

usage() { echo "usage: $0 TRACE.json [OUT.html]" >&2; exit 2; }
case $# in 1 | 2) ;; *) usage ;; esac

trace=$1
case $trace in
*.json) default_out=${trace%.json}.html ;;
*) default_out=$trace.html ;;
esac
out=${2:-$default_out}
template=$(dirname "$0")/timeline.html
marker='<script type="application/json" id="trace-data"></script>'

[ -r "$trace" ] || { echo "$0: cannot read $trace" >&2; exit 1; }
[ -r "$template" ] || { echo "$0: cannot read $template" >&2; exit 1; }
[ "$trace" != "$out" ] || { echo "$0: $out would overwrite the trace" >&2; exit 1; }

line=$(grep -n -x -F "$marker" "$template" | cut -d: -f1)
case $line in
'' | *[!0-9]*) echo "$0: $template has no single empty trace-data element" >&2; exit 1 ;;
esac

# The trace's file name, for the page's title bar, as an attribute value.
source=$(basename "$trace" | sed 's/&/\&amp;/g; s/"/\&quot;/g; s/</\&lt;/g')

# Written beside OUT and renamed, so a failure never leaves half a page.
tmp=$out.tmp.$$
trap 'rm -f "$tmp"' EXIT
{
    head -n "$((line - 1))" "$template"
    printf '<script type="application/json" id="trace-data" data-source="%s">\n' "$source"
    sed 's/</\\u003c/g' "$trace"
    echo '</script>'
    sed "1,${line}d" "$template"
} >"$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
