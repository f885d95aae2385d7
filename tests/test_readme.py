"""The README's usage example runs as written (keeps the README true)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_usage_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOPOMODELX_ATTENTION_DATA", str(tmp_path))
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    exec(compile(blocks[0], "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "torch.Size([1, 2])" in printed and "torch.Size([32, 2])" in printed


def test_readme_starts_with_the_two_commands():
    text = README.read_text()
    first_block = re.findall(r"```bash\n(.*?)```", text, flags=re.S)[0]
    commands = [line for line in first_block.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert "topomodelx-attention train --dataset MUTAG --model cellular_transformer" in commands[0]
    assert "pytest" in commands[1]
    assert "pytest" in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
