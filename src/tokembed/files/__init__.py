"""Files written whole or not at all, inputs read with coded errors.

Every package that writes a file goes through :mod:`tokembed.files.atomic` (a
temporary sibling, fsync, rename; outputs that would destroy an input are refused
before anything is written), and every ``OSError`` a user can act on becomes a
coded :class:`~tokembed.errors.UsageError` through :mod:`tokembed.files.os_errors`.
Neither imports torch or NumPy.

Example::

    >>> from tokembed.files import write_bytes_atomic
    >>> write_bytes_atomic(Path("/tmp/x.json"), b"{}")  # doctest: +SKIP
"""

from tokembed.files import atomic, os_errors
from tokembed.files.atomic import *
from tokembed.files.os_errors import *

__all__: list[str] = []
__all__ += atomic.__all__
__all__ += os_errors.__all__
