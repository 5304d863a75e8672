"""The README's "From Python" example runs as printed, from the repository root."""

import os
import re


def test_readme_example_runs(root):
    readme = (root / "README.md").read_text()
    section = readme.split("## From Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the section has one Python example"
    cwd = os.getcwd()
    os.chdir(root)
    try:
        exec(compile(blocks[0], "README.md", "exec"), {})
    finally:
        os.chdir(cwd)


def test_docs_examples_run(root):
    blocks = re.findall(r"```python\n(.*?)```", (root / "docs" / "python.md").read_text(), re.S)
    assert len(blocks) >= 2
    cwd = os.getcwd()
    os.chdir(root)
    try:
        for block in blocks:
            exec(compile(block, "docs/python.md", "exec"), {})
    finally:
        os.chdir(cwd)
