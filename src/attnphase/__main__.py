import sys

from attnphase.cli import main

sys.exit(main())
