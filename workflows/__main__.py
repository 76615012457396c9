"""``python -m dpmmbench.workflows`` is ``dpmmbench``."""
import sys

from .cli import main

sys.exit(main())
