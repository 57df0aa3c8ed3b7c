"""The one door to other libraries' internals (see :mod:`hpsearch.runtime.internals.registry`).

For the moment the whole door is its registry module, moved here whole so that its history
follows it; this package stands for it under its old import path.
"""

import sys

from hpsearch.runtime.internals import registry

sys.modules[__name__] = registry  # the package's name reaches the registry itself, private names included
