#!/usr/bin/python3
"""Reads the ranks' own logs of examples/ddp_train.py and says what really ran.

Usage: check_ranks.py --steps N [--resume-step S] LOG...

Each LOG holds lines the ranks printed (a rank log of the local executor, a Slurm output file);
lines without t= and attempt= are skipped. For the job it prints each attempt's ranks, world
size, first and last line times and resume step, and checks:
  * no two attempts ran at once: every line of an attempt comes before every line of the next
    one (attempts ordered by their first line);
  * each attempt after the first resumed from the step the one before last checkpointed
    (or --resume-step, when given, for the last attempt);
  * the last attempt ended every rank at step --steps;
  * no attempt started the same rank twice (a relaunch must be a new attempt).
Exit 0 when all hold; otherwise 1, naming what failed.
"""
import argparse
import re
import sys
from collections import defaultdict

FIELD = re.compile(r"(\w+)=(\S+)")


def parse(paths):
    lines = []
    for path in paths:
        with open(path, errors="replace") as f:
            for raw in f:
                kind = raw.split(" ", 1)[0]
                fields = dict(FIELD.findall(raw))
                if "t" not in fields or "attempt" not in fields:
                    continue
                if kind.startswith("step="):
                    kind = "step"
                lines.append((float(fields["t"]), kind, fields))
    lines.sort(key=lambda x: x[0])
    return lines


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--resume-step", type=int, default=None)
    p.add_argument("logs", nargs="+")
    args = p.parse_args()
    lines = parse(args.logs)
    if not lines:
        print("FAIL no rank lines in", " ".join(args.logs))
        return 1
    attempts = defaultdict(lambda: {"first": None, "last": None, "starts": defaultdict(int),
                                    "ends": {}, "resume": set(), "world": set(),
                                    "checkpoints": []})
    for t, kind, f in lines:
        a = attempts[int(f["attempt"])]
        a["first"] = t if a["first"] is None else min(a["first"], t)
        a["last"] = t if a["last"] is None else max(a["last"], t)
        if kind == "start":
            a["starts"][int(f["rank"])] += 1
            a["resume"].add(int(f["resume_step"]))
            a["world"].add(int(f["world"]))
        elif kind == "end":
            a["ends"][int(f["rank"])] = int(f["step"])
        elif kind == "checkpoint":
            a["checkpoints"].append(int(f["step"]))
    failures = []
    order = sorted(attempts, key=lambda n: attempts[n]["first"])
    prev = None
    for n in order:
        a = attempts[n]
        print(f"attempt {n}: ranks {sorted(a['starts'])} world {sorted(a['world'])} "
              f"resume_step {sorted(a['resume'])} lines {a['first']:.3f}..{a['last']:.3f} "
              f"checkpoints {a['checkpoints'][-3:]} ends {sorted(set(a['ends'].values()))}")
        twice = [r for r, c in a["starts"].items() if c > 1]
        if twice:
            failures.append(f"attempt {n} started rank(s) {twice} more than once")
        if prev is not None:
            p_ = attempts[prev]
            if a["first"] <= p_["last"]:
                failures.append(f"attempt {n} started at {a['first']:.3f} while attempt {prev} "
                                f"still logged until {p_['last']:.3f}: two attempts at once")
            want = p_["checkpoints"][-1] if p_["checkpoints"] else None
            if want is not None and a["resume"] and a["resume"] != {want}:
                failures.append(f"attempt {n} resumed from {sorted(a['resume'])}, attempt {prev} "
                                f"last checkpointed step {want}")
        prev = n
    last = attempts[order[-1]]
    if args.resume_step is not None and len(order) > 1 and last["resume"] != {args.resume_step}:
        failures.append(f"the last attempt resumed from {sorted(last['resume'])}, baton recorded "
                        f"step {args.resume_step}")
    if not last["ends"] or set(last["ends"].values()) != {args.steps} or \
            set(last["ends"]) != set(last["starts"]):
        failures.append(f"the last attempt did not end every rank at step {args.steps}: "
                        f"{last['ends']}")
    for f in failures:
        print("FAIL", f)
    print(f"{len(order)} attempt(s), {'no' if not failures else len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
