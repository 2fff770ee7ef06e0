"""``python -m ansforge.cli``, as ``ansforge``."""

from . import main

raise SystemExit(main())
