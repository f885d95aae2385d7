"""Lightning's console messages, kept quiet by default for the harness and the CLI.

Lightning logs at INFO level which accelerators exist (``GPU available: ...``, ``TPU
available: ...``), that it restores a checkpoint before testing (``Restoring states from the
checkpoint path ...``), and a tip advertising its ``litlogger`` package.
:func:`lightning_logs` shows the INFO messages only when asked for (``verbose=True``: the CLI's
``--verbose``, :func:`~topomodelx_attention.harness.run_experiment`'s ``lightning_info=True``)
and the tip never; warnings and errors are always shown. It imports nothing but :mod:`logging`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["LIGHTNING_LOGGERS", "lightning_logs"]

LIGHTNING_LOGGERS = ("lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric")
"""The loggers of Lightning's packages (both the unified and the standalone distributions)."""


def _no_tip(record: logging.LogRecord) -> bool:
    """Drop the "💡 Tip: ... litlogger" advertisement; keep every other record."""
    return "litlogger" not in record.getMessage()


@contextlib.contextmanager
def lightning_logs(verbose: bool = False) -> Iterator[None]:
    """Lightning's INFO messages (devices, checkpoint restores) only when ``verbose``.

    Warnings and errors are always shown; the ``litlogger`` tip never. The loggers' levels and
    filters are restored on exit, so a caller's own logging configuration is left as it was.

    Parameters
    ----------
    verbose : bool, default=False
        Show Lightning's INFO messages.

    Yields
    ------
    None
        Inside the block Lightning's loggers are quiet.

    Examples
    --------
    >>> import logging
    >>> from topomodelx_attention.harness.lightning_logs import lightning_logs
    >>> with lightning_logs():
    ...     logging.getLogger("lightning.pytorch").isEnabledFor(logging.INFO)
    False
    """
    saved = []
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        if not verbose:
            logger.setLevel(logging.WARNING)
    # the tip is logged by the rank_zero module's logger (filters act on the emitting logger)
    tip_loggers = [logging.getLogger(f"{name}.utilities.rank_zero") for name in LIGHTNING_LOGGERS]
    tip_loggers.append(logging.getLogger("lightning_utilities.core.rank_zero"))
    for logger in tip_loggers:
        logger.addFilter(_no_tip)
    try:
        yield
    finally:
        for logger in tip_loggers:
            logger.removeFilter(_no_tip)
        for logger, level in saved:
            logger.setLevel(level)
