import sys

from .cli import experiments_parser, real_parser

# the options parse before PyTorch and the data libraries load, so --help and a usage error answer at once
if sys.argv[1:2] == ["real"]:  # the real-data benchmark has its own options (cet_experiments.real)
    real_parser().parse_args(sys.argv[2:])
    from .real import main

    raise SystemExit(main(sys.argv[2:]))

experiments_parser().parse_args(sys.argv[1:])
from .experiments import main  # noqa: E402

raise SystemExit(main())
