#!/usr/bin/env python3
"""Non-test lines per folder of a git revision (usage: count-lines.py [REV [REPO]]): code and comment lines apart, blanks left out.
Test code = files under tests/ or named tests.rs, and `#[cfg(test)]` items (to their closing brace)."""
import subprocess, sys, collections, re
rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
repo = sys.argv[2] if len(sys.argv) > 2 else "."
def git(*a): return subprocess.run(["git","-C",repo,*a],capture_output=True,text=True,check=True).stdout
files = [f for f in git("ls-tree","-r","--name-only",rev).split() if f.endswith((".rs",".S",".ld"))]
code = collections.Counter(); comm = collections.Counter()
for f in files:
    if "/tests/" in f or f.endswith("/tests.rs") or f.startswith("tests/") or "/benches/" in f or f.startswith("benches/"): continue
    text = git("show", f"{rev}:{f}").splitlines()
    parts = f.split("/")
    if parts[0] == "vmm" and parts[1] == "src":
        key = "vmm/" + (parts[2] if len(parts) > 3 else "(top files)")
    else:
        key = parts[0] + ("/" + parts[1] if len(parts) > 2 else "")
    skip_depth = None; depth = 0; pending = False
    for line in text:
        s = line.strip()
        if skip_depth is None and s.startswith("#[cfg(test)]"):
            pending = True; continue
        if pending and skip_depth is None:
            if s.startswith("#["): continue
            # item after cfg(test): skip to matching brace, or single line ending in ;
            if "{" not in s and s.endswith(";"):
                pending = False; continue
            skip_depth = depth; pending = False
            depth += s.count("{") - s.count("}")
            if depth <= skip_depth: skip_depth = None
            continue
        if skip_depth is not None:
            depth += s.count("{") - s.count("}")
            if depth <= skip_depth: skip_depth = None
            continue
        depth += s.count("{") - s.count("}")
        if not s: continue
        if s.startswith("//") or s.startswith("/*") or s.startswith("*") or s.startswith("#") and f.endswith(".S") and not s.startswith("#include") and not s.startswith("#define"):
            comm[key] += 1
        else:
            code[key] += 1
keys = sorted(set(code)|set(comm))
print(f"{'folder':22} {'code':>7} {'comment':>8} {'total':>7}")
for k in keys: print(f"{k:22} {code[k]:7} {comm[k]:8} {code[k]+comm[k]:7}")
print(f"{'TOTAL':22} {sum(code.values()):7} {sum(comm.values()):8} {sum(code.values())+sum(comm.values()):7}")
