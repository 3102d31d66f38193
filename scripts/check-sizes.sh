#!/usr/bin/env bash
# Size limit for handing code over: no non-test source file over 800 lines. A file's test part
# (from its first top-level `#[cfg(test)]`, or the whole of a tests.rs or tests/ file) does not
# count. The 100-line limit per function is clippy's `too_many_lines`, denied in the manifests.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=800
status=0
while IFS= read -r f; do
    case "$f" in */tests.rs|*/tests/*) continue ;; esac
    n=$(awk '/^#\[cfg\(test\)\]/ { exit } { n++ } END { print n + 0 }' "$f")
    if [ "$n" -gt "$limit" ]; then
        echo "$f: $n non-test lines, over the limit of $limit: split it by what its parts do" >&2
        status=1
    fi
done < <(git ls-files '*.rs')
[ "$status" -eq 0 ] && echo "sizes: every non-test source file is within $limit lines"
exit "$status"
