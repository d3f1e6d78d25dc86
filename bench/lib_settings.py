"""The benchmarks' libtnbc.so settings: the --set option (bench/overlap.py, bench/never_slower.py),
a setting given to every run that preloads it, for experiments, and named on the page the run
writes; and CHOICES_OFF, the library with every choice off.  Standard library only."""

import argparse
import re

# Every choice of libtnbc.so off: MPI's blocking call with MPI's default algorithm, nothing
# learned.  What the library costs when it changes nothing (bench/startup.py,
# bench/never_slower.py; bench/apps/run.py's `nochoice` column).
CHOICES_OFF = {"TNBC_BLOCKING": "mpi", "TNBC_ALGORITHMS": "0", "TNBC_LEARN": "0"}


def _setting(text):
    if not re.fullmatch(r"TNBC_[A-Z0-9_]+=.*", text):
        raise argparse.ArgumentTypeError(f"TNBC_NAME=VALUE, not {text!r}")
    return text


def add_option(parser, example):
    """Adds --set TNBC_NAME=VALUE (repeatable) to `parser`; `example` is shown in its help."""
    parser.add_argument("--set", action="append", default=[], type=_setting, metavar="TNBC_NAME=VALUE",
                        help="a setting for every run with libtnbc.so (repeatable), for experiments: "
                             f"e.g. --set {example}")


def env(settings):
    """The settings as environment variables."""
    return dict(kv.split("=", 1) for kv in settings)


def sentence(settings):
    """The sentence a results page says them in ("" without any)."""
    return f"Every run with libtnbc.so sets {', '.join(f'`{kv}`' for kv in settings)}.  " if settings else ""
