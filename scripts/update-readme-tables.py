#!/usr/bin/env python3
"""Re-measure the tables the README shows and write them in place.

Every block between `<!-- table:CONFIG:PART -->` and `<!-- /table -->` is replaced by the output
of `irqbench run CONFIG` on this host (PART = main: the host header and the first result table;
PART = scaling: the host header and the scaling section). Run from the repository root after
`cargo build --release`; commit the README together with the change that moved the numbers.
"""
import os
import re
import subprocess
import sys

# Where cargo put the release build: CARGO_TARGET_DIR, or target/.
BIN = os.path.join(os.environ.get("CARGO_TARGET_DIR") or "target", "release", "irqbench")


def run(config):
    out = subprocess.run([BIN, "run", config, "--no-save"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"irqbench run {config} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout


def main_part(text):
    lines = []
    for line in text.splitlines():
        if line.startswith("cycles/op:"):
            break
        lines.append(line)
    return "\n".join(lines).rstrip()


def scaling_part(text):
    head = "\n".join(text.splitlines()[:2])
    return head + "\n" + text[text.index("scaling:"):].rstrip()


def main():
    readme = open("README.md").read()
    cache = {}

    def replace(match):
        config, part = match.group(1), match.group(2)
        if config not in cache:
            cache[config] = run(config)
        body = main_part(cache[config]) if part == "main" else scaling_part(cache[config])
        return f"<!-- table:{config}:{part} -->\n```\n{body}\n```\n<!-- /table -->"

    pattern = re.compile(r"<!-- table:([a-z0-9-]+):(main|scaling) -->.*?<!-- /table -->", re.S)
    readme, n = pattern.subn(replace, readme)
    open("README.md", "w").write(readme)
    print(f"updated {n} tables")


if __name__ == "__main__":
    main()
