"""`python -m toolgym.trainers.methods.table [--write]`."""

from toolgym.trainers.methods.table import main

raise SystemExit(main())
