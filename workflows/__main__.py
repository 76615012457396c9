"""``python -m workflows`` is ``dpmmbench``."""
import sys

from .cli import main

sys.exit(main())
