"""python -m stdops.cli (the same as `stdops` and `python -m stdops`)."""

from . import main

raise SystemExit(main())
