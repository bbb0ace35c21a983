"""Build DeepSpeed's CPU all-reduce op (``deepspeed_shm_comm``) before the test suite starts.

``deepspeed.init_distributed`` compiles this C++ op just in time on a CPU machine (torch's extension cache,
``~/.cache/torch_extensions``), the first time in a new virtual environment: a minute or more on 2 cores. Left
to the suite, the first test that starts DeepSpeed pays for the compile while the other pytest worker's
DeepSpeed runs wait on the build's lock; built here, before pytest, it has the cores to itself, and every test
finds it built. Where the op is not DeepSpeed's (a GPU accelerator) or is already built, this does nothing
beyond importing DeepSpeed. The same call as DeepSpeed's own ``deepspeed.comm.torch.build_shm_op``.

The cache is ninja's: a ninja of another version (the system's 1.11 against the virtual environment's 1.13, whose
command hashes differ) finds every command changed and compiles again, so run this and the tests with the
virtual environment's ``bin`` first on ``PATH``, as the Makefile does.
"""

from __future__ import annotations

import deepspeed.ops
from deepspeed.accelerator import get_accelerator


def build_shm_op() -> bool:
    """Build (or find built) the shared-memory all-reduce op of this accelerator; False where it has none."""
    builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
    if builder is None or not deepspeed.ops.__compatible_ops__.get(builder.NAME, False):
        return False
    builder.load(verbose=False)
    return True


if __name__ == "__main__":
    build_shm_op()
