import sys

if sys.argv[1:2] == ["real"]:  # the real-data benchmark has its own options (cet_experiments.real)
    from .real import main

    raise SystemExit(main(sys.argv[2:]))

from .experiments import main

raise SystemExit(main())
