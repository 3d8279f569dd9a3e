from .experiments import main

raise SystemExit(main())
