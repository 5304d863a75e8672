"""Ctrl-C stops a long simulator run between device iterations."""

import signal
import subprocess
import sys
import time

PROGRAM = """
import sys, tpu_rewrite
lowered = tpu_rewrite.lower(tpu_rewrite.load(sys.argv[1]))
print("running", flush=True)
try:
    tpu_rewrite.run(lowered, steps=10**9)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""


def test_sigint_interrupts_a_run(root):
    child = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, str(root / "examples" / "mlp_train.opg")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "running"
        time.sleep(1.0)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 3, err
    assert "interrupted" in out
