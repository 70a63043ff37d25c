"""A hostile Python module for the host's tests: one component (a Python component is ~18 MB and
takes seconds to compile), its misbehaviour chosen per call by `spec.params["misbehave"]`:

  raise       an uncaught exception (the call traps)
  rule-error  returns Err(invalid-params)
  loop        `while True`
  alloc       grows memory without end
  print       prints 200 lines with a terminal escape in each, then megabytes, to stdout and to
              stderr, then decides as the classic rules
  clock       reads time.time() and time.monotonic() a million times (`params["reads"]` to
              change it); the status message gives the first and last readings of each
  random      reads os.urandom(32) and random.random() 10,000 times each (`params["reads"]`);
              the status message gives a sha256 of it all
  draw        draws from the `random` module only (random, randint, getrandbits, choice); the
              status message gives the numbers
  socket      tries a TCP socket to 127.0.0.1:80 (socket.socket + connect, then
              create_connection) and a name lookup; the status message gives what each raised
  sleep       time.sleep(3600); the status message gives time.time() and time.monotonic()
              before and after
  env         what the process was given: the status message gives os.environ, sys.argv,
              what sys.stdin reads, and what opening "/etc/passwd" and listing "/" raise
  exit        os._exit(params["code"]) (WASI's exit; 3 if not given)
  sys-exit    sys.exit(params["code"]) (Python's SystemExit exception)
  (else)      the classic rules

A status message is at most 256 bytes (the host's plan check refuses more): a longer one is cut
to fit and ends with " [cut]", so a test sees the cut.
"""

import hashlib
import os
import random
import socket
import sys
import time

from zundoko_kit import InvalidParams, StatusUpdate, module_info_from_pyproject
from zundoko_kit.component import export_rules
from zundoko_kit.song import RuleSet, Words

INFO = module_info_from_pyproject(__file__)
CLASSIC = RuleSet(INFO, Words("Zun", "Doko", "Ki-yo-shi!"), zuns=4, strict=False)


# The host's plan check: a status message of at most this many bytes (PlanLimits).
MAX_MESSAGE_BYTES = 256
CUT = " [cut]"


def _fit(message):
    """`message` within MAX_MESSAGE_BYTES of UTF-8, visibly cut if it was longer."""
    raw = message.encode()
    if len(raw) <= MAX_MESSAGE_BYTES:
        return message
    return raw[: MAX_MESSAGE_BYTES - len(CUT)].decode(errors="ignore") + CUT


def _with_message(observed, message):
    """The classic decision, its status message replaced (a status is added if it had none)."""
    plan = CLASSIC.reconcile(observed)
    status = plan.status()
    if status is None:
        status = StatusUpdate("Singing", len(observed.zundokos), False, "")
        plan.actions.insert(0, status)
    status.message = _fit(message)
    return plan


def _reads(observed, default):
    reads = observed.hikawa.param("reads")
    return int(reads) if reads is not None and reads.isdigit() else default


def _clock(observed):
    first_t = last_t = time.time()
    first_m = last_m = time.monotonic()
    for _ in range(_reads(observed, 1_000_000)):
        last_t = time.time()
        last_m = time.monotonic()
    return _with_message(observed, f"clock: time {first_t!r}..{last_t!r}, monotonic {first_m!r}..{last_m!r}")


def _random(observed):
    digest = hashlib.sha256()
    for _ in range(_reads(observed, 10_000)):
        digest.update(os.urandom(32))
        digest.update(repr(random.random()).encode())
    return _with_message(observed, f"random: sha256 {digest.hexdigest()}")


def _draw(observed):
    """Only the `random` module, none of os.urandom: a generator left unseeded says the same
    numbers whatever the entropy."""
    drawn = [random.random(), random.randint(0, 10**9), random.getrandbits(32), random.choice("abcdefgh")]
    return _with_message(observed, f"draw: {drawn!r}")


def _socket(observed):
    results = []
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.connect(("127.0.0.1", 80))
            results.append("socket: connected")
        finally:
            s.close()
    except Exception as e:  # noqa: BLE001
        results.append(f"socket: {type(e).__name__}: {e}")
    try:
        s = socket.create_connection(("127.0.0.1", 80), timeout=1)
        s.close()
        results.append("connect: connected")
    except Exception as e:  # noqa: BLE001
        results.append(f"connect: {type(e).__name__}: {e}")
    try:
        socket.getaddrinfo("example.com", 80)
        results.append("lookup: resolved")
    except Exception as e:  # noqa: BLE001
        results.append(f"lookup: {type(e).__name__}: {e}")
    return _with_message(observed, "socket: " + "; ".join(results))


def _sleep(observed):
    before_t, before_m = time.time(), time.monotonic()
    time.sleep(3600)
    after_t, after_m = time.time(), time.monotonic()
    return _with_message(observed, f"sleep: time {before_t!r}..{after_t!r}, monotonic {before_m!r}..{after_m!r}")


def _raised(what):
    try:
        what()
        return "ok"
    except Exception as e:  # noqa: BLE001
        return type(e).__name__


def _env(observed):
    stdin = "None" if sys.stdin is None else repr(sys.stdin.read())
    opened = _raised(lambda: open("/etc/passwd").close())
    listed = _raised(lambda: os.listdir("/"))
    return _with_message(observed, f"env: environ {dict(os.environ)!r}; argv {sys.argv!r}; stdin {stdin}; open {opened}; listdir {listed}")


def _code(observed):
    code = observed.hikawa.param("code")
    return int(code) if code is not None and code.isdigit() else 3


class Hostile:
    def info(self):
        return CLASSIC.info()

    def reconcile(self, observed):
        what = observed.hikawa.param("misbehave")
        if what == "raise":
            raise RuntimeError("hostile: raised on purpose")
        if what == "rule-error":
            raise InvalidParams("hostile: params.misbehave asked for a rule error")
        if what == "loop":
            while True:
                pass
        if what == "alloc":
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        if what == "print":
            # 200 short lines, each with a terminal escape (more lines than the log keeps),
            # then megabytes.
            for i in range(200):
                print(f"line {i} \x1b[31mred\x1b[0m")
            chunk = "x" * 65535 + "\n"
            for _ in range(64):  # 4 MiB to each
                sys.stdout.write(chunk)
                sys.stderr.write(chunk)
            sys.stdout.flush()
            sys.stderr.flush()
        if what == "clock":
            return _clock(observed)
        if what == "random":
            return _random(observed)
        if what == "draw":
            return _draw(observed)
        if what == "socket":
            return _socket(observed)
        if what == "sleep":
            return _sleep(observed)
        if what == "env":
            return _env(observed)
        if what == "exit":
            os._exit(_code(observed))
        if what == "sys-exit":
            sys.exit(_code(observed))
        return CLASSIC.reconcile(observed)


Rules = export_rules(Hostile())
