#!/usr/bin/env python3
"""Re-measure the sample outputs the docs show and write them in place.

Every block between `<!-- output: ARGS -->` and `<!-- /output -->` is replaced by the whole
stdout of `irqbench ARGS --no-save` on this host, at COLUMNS=100, in a fenced block. Files:
the arguments, README.md by default (docs/FINDINGS.md holds dated tables: re-measure those only
when you mean to replace the findings). Run from the repository root after
`cargo build --release`; commit the file together with the change that moved the output.
vmm/tests/doc_examples.rs runs each marker's command, so none names a flag that is gone.
"""
import os
import re
import subprocess
import sys

# Where cargo put the release build: CARGO_TARGET_DIR, or target/.
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR") or "target", "release", "irqbench")
MARKER = re.compile(r"<!-- output: (.+?) -->\n.*?<!-- /output -->", re.S)


def run(args):
    env = dict(os.environ, COLUMNS="100")
    out = subprocess.run([BIN, *args.split(), "--no-save"], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"irqbench {args} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout.rstrip()


def update(path, cache):
    text = open(path).read()

    def replace(match):
        args = match.group(1).strip()
        if args not in cache:
            cache[args] = run(args)
        return f"<!-- output: {args} -->\n```\n{cache[args]}\n```\n<!-- /output -->"

    text, n = MARKER.subn(replace, text)
    open(path, "w").write(text)
    print(f"{path}: updated {n} output(s)")


def main():
    cache = {}
    for path in sys.argv[1:] or ["README.md"]:
        update(path, cache)


if __name__ == "__main__":
    main()
