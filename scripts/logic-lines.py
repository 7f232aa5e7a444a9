#!/usr/bin/env python3
"""Lines of logic per driver, as issue 16 counts them.

Usage: python3 scripts/logic-lines.py [REV]   (default HEAD; run in the repository)

A line of logic is a line of a driver package's non-test .go files (the
package's own folder, not its subfolders) that is not blank, not a comment,
and not an import; url.go, open.go and doc.go (URL parsing, opening and the
package doc) are left out. internal/driverkit, the kit the drivers share,
is counted on its own line, and so is redislock/internal, the packages that
the Redis drivers (redislock, redislock/redlock) share or that redislock's
Driver is built of, all its subfolders together.
"""
import subprocess
import sys

rev = sys.argv[1] if len(sys.argv) > 1 else "HEAD"
PACKAGES = ["redislock", "redislock/redlock", "etcdlock", "zklock", "mysqllock", "mongolock", "locallock", "internal/driverkit"]
TREES = ["redislock/internal"]  # counted with their subfolders
SKIP = {"url.go", "open.go", "doc.go"}


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def files(pkg, tree=False):
    names = git("ls-tree", "--name-only", *(["-r"] if tree else []), rev, pkg + "/").split()
    return [f for f in names if f.endswith(".go") and not f.endswith("_test.go")
            and f.rsplit("/", 1)[-1] not in SKIP]


def logic_lines(src):
    n, in_import, in_comment = 0, False, False
    for line in src.split("\n"):
        s = line.strip()
        if in_comment:
            in_comment = "*/" not in s
            continue
        if not s or s.startswith("//"):
            continue
        if s.startswith("/*"):
            in_comment = "*/" not in s
            continue
        if s.startswith("import ("):
            in_import = True
            continue
        if in_import:
            in_import = s != ")"
            continue
        if s.startswith("import "):
            continue
        n += 1
    return n


for pkg in PACKAGES + TREES:
    total = sum(logic_lines(git("show", f"{rev}:{f}")) for f in files(pkg, pkg in TREES))
    print(f"{pkg}\t{total}")
