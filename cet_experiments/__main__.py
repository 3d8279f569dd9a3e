import signal
import sys

from .cli import experiments_parser, real_parser


def _run(main, argv=None) -> int:
    """``main``, with Ctrl-C as one line and exit status 130 instead of a traceback (the runs'
    worker processes leave Ctrl-C to this one, which stops them); ``kill`` (SIGTERM) and a hangup
    the same way, with status 143 and 129, where they are at their default (``nohup`` ignores a
    hangup): the command died at once and its workers ran on."""
    from flows.lib.infra import interrupts

    interrupts.reset()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, interrupts.on_interrupt)
    try:
        return main(argv) if argv is not None else main()
    except KeyboardInterrupt:
        word, status = interrupts.stopped_by()
        print(f"python -m cet_experiments: {word}", file=sys.stderr)
        return status


# the options parse before PyTorch and the data libraries load, so --help and a usage error answer at once
if sys.argv[1:2] == ["real"]:  # the real-data benchmark has its own options (cet_experiments.real)
    real_parser().parse_args(sys.argv[2:])
    from .real import main

    raise SystemExit(_run(main, sys.argv[2:]))

experiments_parser().parse_args(sys.argv[1:])
from .experiments import main  # noqa: E402

raise SystemExit(_run(main))
