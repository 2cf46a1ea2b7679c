"""Shared by the command-line tests (tests/cli/*.py, tests/passes/*.py): a check recorder, a way
to run ferry, and the house-style error assertion (exit code, exactly one `ferry: error:` line
naming what was wrong)."""
import subprocess

FAILURES = []
PASSED = [0]


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)
    else:
        PASSED[0] += 1
        print("ok:  ", what)


def ferry(args, *cmd):
    p = subprocess.run([args.ferry] + list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def expect_error(args, name, rc_want, needles, *cmd):
    rc, out, err = ferry(args, *cmd)
    lines = [l for l in err.splitlines() if l.strip()]
    check(rc == rc_want, "%s: exit %d (got %d; stderr %r)" % (name, rc_want, rc, err.strip()[:300]))
    check(len(lines) == 1 and lines[0].startswith("ferry: error: "),
          "%s: exactly one 'ferry: error:' line (got %r)" % (name, lines[:3]))
    for n in needles:
        check(n in err, "%s: message names %r (%r)" % (name, n, err.strip()[:300]))


def summary():
    """Prints the totals; returns the process exit code."""
    print("%d passed, %d failed" % (PASSED[0], len(FAILURES)))
    return 1 if FAILURES else 0
