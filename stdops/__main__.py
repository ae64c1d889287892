"""python -m stdops: the same as the `stdops` console script."""

from .cli import main

raise SystemExit(main())
