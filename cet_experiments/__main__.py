import sys

from .cli import experiments_parser, real_parser


def _run(main, argv=None) -> int:
    """``main``, with Ctrl-C as one line and exit status 130 instead of a traceback (the runs'
    worker processes leave Ctrl-C to this one, which stops them)."""
    try:
        return main(argv) if argv is not None else main()
    except KeyboardInterrupt:
        print("python -m cet_experiments: interrupted", file=sys.stderr)
        return 130


# the options parse before PyTorch and the data libraries load, so --help and a usage error answer at once
if sys.argv[1:2] == ["real"]:  # the real-data benchmark has its own options (cet_experiments.real)
    real_parser().parse_args(sys.argv[2:])
    from .real import main

    raise SystemExit(_run(main, sys.argv[2:]))

experiments_parser().parse_args(sys.argv[1:])
from .experiments import main  # noqa: E402

raise SystemExit(_run(main))
