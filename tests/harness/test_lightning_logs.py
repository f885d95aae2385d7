"""Lightning's console messages: quiet by default in the Python API, as in the CLI (one helper)."""

import logging
from pathlib import Path

from tests.harness.test_training import _cfg
from topomodelx_attention import cli
from topomodelx_attention.harness import lightning_logs as logs_module
from topomodelx_attention.harness.lightning_logs import LIGHTNING_LOGGERS, lightning_logs
from topomodelx_attention.harness.training import run_experiment

CHATTER = ("GPU available", "TPU available", "litlogger", "Restoring states", "Loaded model weights")


def _record(name: str, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, logging.INFO, __file__, 1, message, None, None)


def test_info_off_and_tip_filtered_inside_and_everything_restored_after():
    pytorch = logging.getLogger("lightning.pytorch")
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    before = {name: logging.getLogger(name).level for name in LIGHTNING_LOGGERS}
    filters = list(rank_zero.filters)
    tip = _record(rank_zero.name, "💡 Tip: For seamless cloud logging, try installing litlogger")
    with lightning_logs():
        assert not pytorch.isEnabledFor(logging.INFO)
        assert pytorch.isEnabledFor(logging.WARNING)
        assert not rank_zero.filter(tip)
        assert rank_zero.filter(_record(rank_zero.name, "GPU available: False, used: False"))
    with lightning_logs(verbose=True):
        assert pytorch.level == before["lightning.pytorch"]  # left as Lightning set it
        assert not rank_zero.filter(tip)  # the tip is never shown
    assert {name: logging.getLogger(name).level for name in LIGHTNING_LOGGERS} == before
    assert rank_zero.filters == filters


def test_the_cli_uses_the_harness_helper_and_keeps_no_copy():
    assert not hasattr(cli, "_lightning_logs") and not hasattr(cli, "_LIGHTNING_LOGGERS")
    assert "litlogger" in Path(logs_module.__file__).read_text(encoding="utf-8")


def test_run_experiment_prints_no_lightning_chatter_unless_asked(tmp_path, capfd, caplog):
    # Lightning logs to its own stderr handler, or, under pytest (the root logger has a
    # handler), to the root logger: read both
    cfg = _cfg(tmp_path, "gin", "trainer.max_epochs=1", "plot=false")
    run_experiment(cfg, tmp_path / "quiet", verbose=False)
    quiet = "".join(capfd.readouterr()) + caplog.text
    assert not [line for line in CHATTER if line in quiet], quiet
    caplog.clear()
    run_experiment(cfg, tmp_path / "loud", verbose=False, lightning_info=True)
    loud = "".join(capfd.readouterr()) + caplog.text
    assert "GPU available" in loud and "Restoring states" in loud, loud
    assert "litlogger" not in loud
